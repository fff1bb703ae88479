package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timings of the stop sequence and the readiness poll.
const (
	stopGrace      = 10 * time.Second
	killGrace      = 5 * time.Second
	rmdirRetry     = 5 * time.Second
	pollInterval   = 20 * time.Millisecond
	statusDeadline = 30 * time.Second
)

// Instance is one running sandbox.
type Instance struct {
	cfg      instanceConfig
	pids     instancePIDs
	log      io.Writer
	bootTime time.Duration
	// launchTime is the part of bootTime until the launcher reported the init PID.
	launchTime time.Duration

	// launcherDone is closed when the launcher started by this process has exited; nil for an
	// attached instance.
	launcherDone chan struct{}

	// forceKill makes Stop skip the clean poweroff (boot failed).
	forceKill bool

	stopOnce sync.Once
	stopErr  error
}

func randomName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "sb-" + hex.EncodeToString(b)
}

// Start boots an instance and returns once systemd reports running (or degraded). On any
// failure everything it created is removed again.
func Start(ctx context.Context, o Options) (*Instance, error) {
	if err := Prerequisites(); err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = randomName()
	}
	if o.StateRoot == "" {
		o.StateRoot = DefaultStateRoot
	}
	if o.BootTimeout <= 0 {
		o.BootTimeout = DefaultBootTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := validateName(o.Name); err != nil {
		return nil, err
	}
	if err := validateStateRoot(o.StateRoot); err != nil {
		return nil, err
	}
	if o.OverlayRoot {
		if err := validateOverlayStateRoot(o.StateRoot); err != nil {
			return nil, err
		}
	}
	mounts, err := planMounts(o, os.Stat)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.StateRoot, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox state root: %w", err)
	}
	unlock, err := lockRoot(o.StateRoot)
	if err != nil {
		return nil, err
	}
	inst, err := launch(o, mounts)
	unlock()
	if err != nil {
		return nil, err
	}
	if err := inst.waitReady(ctx, o.BootTimeout); err != nil {
		// A systemd that has not set up its signal handlers yet ignores SIGRTMIN+4 (PID 1 of a
		// namespace gets only signals it handles), and there is nothing to shut down cleanly.
		inst.forceKill = true
		if serr := inst.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	fmt.Fprintf(o.Log, "sandbox %s: booted in %s (launch %s, systemd to running %s; init pid %d)\n", inst.cfg.Name,
		inst.bootTime.Round(time.Millisecond), inst.launchTime.Round(time.Millisecond),
		(inst.bootTime - inst.launchTime).Round(time.Millisecond), inst.pids.InitPID)
	return inst, nil
}

// adjustConfig lets tests break an instance's configuration on purpose; nil otherwise.
var adjustConfig func(*instanceConfig)

// launch runs with the state root locked: sweep, cgroups, config, launcher, init PID.
func launch(o Options, mounts mountPlan) (*Instance, error) {
	sweep(o.StateRoot, o.Log)
	stateDir := filepath.Join(o.StateRoot, o.Name)
	if _, err := os.Stat(stateDir); err == nil {
		return nil, fmt.Errorf("sandbox %s: already running (state dir %s)", o.Name, stateDir)
	}
	cfg, err := planInstance(o.Name, stateDir)
	if err != nil {
		return nil, err
	}
	cfg.OverlayRoot, cfg.NetSysctls = o.OverlayRoot, o.NetSysctls
	cfg.Binds, cfg.FileBinds, cfg.Symlinks = mounts.binds, mounts.files, mounts.links
	if adjustConfig != nil {
		adjustConfig(cfg)
	}
	inst := &Instance{cfg: *cfg, log: o.Log}
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	cleanup := func(err error) error {
		if cerr := removeCgroups(cfg.Cgroups, rmdirRetry); cerr != nil {
			return errors.Join(err, cerr)
		}
		return errors.Join(err, os.RemoveAll(stateDir))
	}
	if err := createCgroups(cfg.Cgroups); err != nil {
		return nil, cleanup(err)
	}
	if err := writeJSONAtomic(filepath.Join(stateDir, configFile), cfg); err != nil {
		return nil, cleanup(err)
	}
	logFile, err := os.OpenFile(filepath.Join(stateDir, launcherLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, cleanup(fmt.Errorf("sandbox launcher log: %w", err))
	}
	defer logFile.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, cleanup(fmt.Errorf("sandbox status pipe: %w", err))
	}
	defer statusR.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"slicelet-sandbox-launcher"},
		Env:        []string{stageEnv + "=" + stageLauncher, stateDirEnv + "=" + stateDir, "PATH=" + os.Getenv("PATH")},
		Stdout:     logFile,
		Stderr:     logFile,
		ExtraFiles: []*os.File{statusW},
		SysProcAttr: &syscall.SysProcAttr{
			// A killed test takes the launcher with it, and the launcher's death kills init and with
			// it the whole PID namespace.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	began := time.Now()
	if o.Detached {
		// Its own session and no parent-death signal: the instance outlives this process. The
		// launcher is not waited for here; whoever stops the instance watches it by pidfd.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
	} else {
		inst.launcherDone = make(chan struct{})
		startErr := make(chan error, 1)
		go func() {
			// Pdeathsig fires when the forking *thread* exits, so keep this goroutine on its
			// thread until the launcher is gone (golang.org/issue/27505).
			runtime.LockOSThread()
			err := cmd.Start()
			startErr <- err
			if err == nil {
				_ = cmd.Wait()
			}
			close(inst.launcherDone)
		}()
		err = <-startErr
	}
	statusW.Close()
	if err != nil {
		return nil, cleanup(fmt.Errorf("sandbox launcher: %w", err))
	}
	// abort kills the launcher (and so, by its parent-death signal, init) and cleans up.
	abort := func(err error) error {
		_ = cmd.Process.Kill()
		if inst.launcherDone != nil {
			<-inst.launcherDone
		} else {
			_ = cmd.Wait()
		}
		return cleanup(fmt.Errorf("sandbox %s launcher: %w%s", o.Name, err, tail(filepath.Join(stateDir, launcherLog))))
	}
	if err := readStatus(statusR); err != nil {
		return nil, abort(err)
	}
	pids, err := readPIDs(stateDir)
	if err != nil {
		return nil, abort(err)
	}
	if o.Detached {
		_ = cmd.Process.Release()
	}
	inst.pids = *pids
	inst.launchTime = time.Since(began)
	inst.bootTime = inst.launchTime // completed by waitReady
	return inst, nil
}

// readStatus reads the launcher's one status line ("ok <pid>" or "error <text>").
func readStatus(r *os.File) error {
	_ = r.SetReadDeadline(time.Now().Add(statusDeadline))
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil && line == "" {
		return fmt.Errorf("no status from launcher: %w", err)
	}
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return errors.New(rest)
	}
	if !strings.HasPrefix(line, "ok ") {
		return fmt.Errorf("launcher status %q: unexpected", line)
	}
	return nil
}

// Name returns the instance name.
func (i *Instance) Name() string { return i.cfg.Name }

// InitPID returns the host PID of the instance's systemd.
func (i *Instance) InitPID() int { return i.pids.InitPID }

// StateDir returns the instance's host state directory; it is visible and writable inside at the
// same path.
func (i *Instance) StateDir() string { return i.cfg.StateDir }

// BootDuration is the time from launching to systemd reporting running.
func (i *Instance) BootDuration() time.Duration { return i.bootTime }

// CgroupDirs returns the instance's own cgroup directory in every host hierarchy: the root of
// every cgroup the instance's systemd creates.
func (i *Instance) CgroupDirs() []string {
	out := make([]string, 0, len(i.cfg.Cgroups))
	for _, h := range i.cfg.Cgroups {
		out = append(out, h.Dir)
	}
	return out
}

// Command returns a command that runs name inside the instance, through
// `nsenter --target <init> --all --root`, in / with the caller's environment. The process joins every
// namespace of the instance and its root cgroup in every hierarchy (so /proc/self/cgroup reads
// "/" and everything it starts is charged to the instance); it dies with the instance.
func (i *Instance) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return i.CommandIn(ctx, "/", name, args...)
}

// HiddenPath reports whether the host path p is out of sight inside the instance, and why: p
// exists on the host, nothing exists at p inside, and p lies below dir, a host directory whose
// contents the instance never sees (it has its own /tmp, /run, /var/tmp, /var/lib/systemd,
// /var/log/journal, /dev, /proc and cgroupfs). A bind of p, or of a directory above it below dir,
// brings it in. ok is false for a relative p and whenever the instance sees something at p.
func (i *Instance) HiddenPath(p string) (dir string, ok bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	p = filepath.Clean(p)
	for _, d := range privateInside() {
		if under(p, d) {
			dir = d
			break
		}
	}
	if dir == "" {
		return "", false
	}
	if _, err := os.Lstat(p); err != nil {
		return "", false
	}
	// The instance's file system tree, seen from the host through its init's root.
	inside := filepath.Join("/proc", strconv.Itoa(i.pids.InitPID), "root", p)
	if _, err := os.Lstat(inside); !errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	return dir, true
}

// joinRootCgroups is run by /bin/sh inside the instance before exec'ing the command. nsenter
// joins the cgroup namespace but leaves the process in the caller's cgroups, which lie outside
// the namespace ("/../.."); writing its PID into the private cgroupfs mounts moves it to the
// namespace root, which is the instance's own directory on the host. The decoy mounts hold no
// cgroup.procs, so the glob skips them.
const joinRootCgroups = `for f in /sys/fs/cgroup/*/cgroup.procs; do echo $$ > "$f" || { echo "sandbox: cannot join $f" >&2; exit 125; }; done; exec "$@"`

// CommandIn is [Instance.Command] with working directory dir (a path inside the instance).
func (i *Instance) CommandIn(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	// The shell changes to dir inside: see nsenter for why nsenter's --wd=dir must not be used.
	script := `cd -- "$1" || exit 125; shift; ` + joinRootCgroups
	return i.nsenter(ctx, append([]string{"/bin/sh", "-c", script, "sh", dir, name}, args...))
}

// nsenter returns `nsenter --target <init> --all --root --wd -- argv...`, without joining the
// instance's cgroups (the readiness poll needs no more, and runs every 20 ms).
//
// --root and --wd without a directory take the root and working directory of the instance's
// PID 1. Never --wd=<dir>: util-linux opens that directory in the *caller's* mount namespace,
// before entering the instance's, so the command would start with its working directory on the
// host's own root mount (writable, outside every read-only bind and the overlay root), and a
// relative path would write to the machine.
func (i *Instance) nsenter(ctx context.Context, argv []string) *exec.Cmd {
	args := append([]string{"--target", strconv.Itoa(i.pids.InitPID), "--all", "--root", "--wd", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	// Processes left inside could hold the output pipes open; do not wait for them forever.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// waitReady polls `systemctl is-system-running` until running or degraded.
func (i *Instance) waitReady(ctx context.Context, timeout time.Duration) error {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var state string
	commFile := "/proc/" + strconv.Itoa(i.pids.InitPID) + "/comm"
	err := poll(ctx, pollInterval, func() (bool, error) {
		// Enter only once init has exec'd systemd: while the setup step still builds the mount
		// tree, a process joining the namespace could hold a mount busy.
		state = ""
		if comm, _ := os.ReadFile(commFile); strings.TrimSpace(string(comm)) == "systemd" {
			out, _ := i.nsenter(ctx, []string{"systemctl", "is-system-running"}).Output()
			state = strings.TrimSpace(string(out))
		}
		switch state {
		case "running":
			return true, nil
		case "degraded":
			failed, _ := i.Command(ctx, "systemctl", "--failed", "--no-legend", "--plain").Output()
			fmt.Fprintf(i.log, "sandbox %s: degraded, failed units: %s\n", i.cfg.Name, strings.TrimSpace(string(failed)))
			return true, nil
		}
		if !alive(i.pids.InitPID, i.pids.InitStart) {
			return false, fmt.Errorf("sandbox %s: systemd exited during boot%s", i.cfg.Name, tail(filepath.Join(i.cfg.StateDir, launcherLog)))
		}
		return false, nil
	})
	if err != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("sandbox %s: not running after %s (last state %q): %w%s", i.cfg.Name, time.Since(began).Round(time.Millisecond), state, err, tail(filepath.Join(i.cfg.StateDir, launcherLog)))
	}
	if err == nil {
		i.bootTime += time.Since(began)
	}
	return err
}

// tail returns the last lines of a log file, formatted to follow an error message.
func tail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n--- " + file + " ---\n" + strings.Join(lines, "\n")
}

// Stop powers the instance off (SIGRTMIN+4), kills it after 10 s, waits for every process, then
// removes its cgroup directories and state. It is idempotent; later calls return the first result.
func (i *Instance) Stop() error {
	i.stopOnce.Do(func() { i.stopErr = i.stop() })
	return i.stopErr
}

func (i *Instance) stop() error {
	var errs []error
	kill := i.forceKill
	if !kill {
		if err := signalAndWait(i.pids.InitPID, i.pids.InitStart, sigPoweroff, stopGrace); err != nil {
			fmt.Fprintf(i.log, "sandbox %s: %v; killing\n", i.cfg.Name, err)
			kill = true
		}
	}
	if kill {
		if err := signalAndWait(i.pids.InitPID, i.pids.InitStart, syscall.SIGKILL, killGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if i.launcherDone != nil {
		select {
		case <-i.launcherDone:
		case <-time.After(killGrace):
			errs = append(errs, fmt.Errorf("sandbox %s: launcher %d did not exit", i.cfg.Name, i.pids.LauncherPID))
		}
	} else if err := signalAndWait(i.pids.LauncherPID, i.pids.LauncherStart, 0, killGrace); err != nil {
		if err := signalAndWait(i.pids.LauncherPID, i.pids.LauncherStart, syscall.SIGKILL, killGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeCgroups(i.cfg.Cgroups, rmdirRetry); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(i.cfg.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("sandbox state: %w", err))
	}
	return errors.Join(errs...)
}
