package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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

// requiredFiles are executables the recipe needs at fixed paths.
var requiredFiles = []string{systemdBinary, "/lib/systemd/systemd-journald", "/usr/bin/dbus-daemon"}

// requiredTools are looked up on PATH.
var requiredTools = []string{"nsenter", "setpriv", "systemctl"}

// Prerequisites returns nil when this machine can run a sandbox: root, systemd, dbus, util-linux,
// cgroup namespaces and a v1/hybrid cgroup layout. Otherwise the error lists everything missing.
func Prerequisites() error {
	return checkPrerequisites(realHost)
}

// hostProbe is what checkPrerequisites looks at; tests replace it.
type hostProbe struct {
	euid     func() int
	stat     func(string) (os.FileInfo, error)
	lookPath func(string) (string, error)
	// fsType returns the statfs magic of a path.
	fsType func(string) (int64, error)
}

var realHost = hostProbe{
	euid:     os.Geteuid,
	stat:     os.Stat,
	lookPath: exec.LookPath,
	fsType: func(p string) (int64, error) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		return st.Type, err
	},
}

func checkPrerequisites(h hostProbe) error {
	var errs []error
	if id := h.euid(); id != 0 {
		errs = append(errs, fmt.Errorf("user: euid %d, want root", id))
	}
	for _, f := range requiredFiles {
		if st, err := h.stat(f); err != nil {
			errs = append(errs, fmt.Errorf("file %s: %w", f, err))
		} else if st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("file %s: not executable", f))
		}
	}
	for _, t := range requiredTools {
		if _, err := h.lookPath(t); err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", t, err))
		}
	}
	if _, err := h.stat("/proc/self/ns/cgroup"); err != nil {
		errs = append(errs, fmt.Errorf("kernel: no cgroup namespaces: %w", err))
	}
	if t, err := h.fsType(cgroupRoot); err != nil {
		errs = append(errs, fmt.Errorf("cgroup layout: %w", err))
	} else if t != unix.TMPFS_MAGIC {
		// The recipe re-creates a hybrid tree (tmpfs with v1 hierarchies and cgroup2 at unified);
		// a pure cgroup v2 host is tested in a VM instead (internal/vmtest).
		errs = append(errs, fmt.Errorf("cgroup layout: %s is not the v1/hybrid tmpfs layout", cgroupRoot))
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox prerequisites missing: %w", errors.Join(errs...))
	}
	return nil
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
	for _, p := range o.ExtraBinds {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return nil, fmt.Errorf("sandbox extra bind %q: want a clean absolute path other than /", p)
		}
		for _, api := range []string{"/proc", "/sys", "/dev"} {
			if p == api || strings.HasPrefix(p, api+"/") {
				return nil, fmt.Errorf("sandbox extra bind %q: under %s, which the instance replaces", p, api)
			}
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox extra bind: %w", err)
		}
	}
	o.ExtraBinds = outermost(o.ExtraBinds)
	if err := os.MkdirAll(o.StateRoot, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox state root: %w", err)
	}
	unlock, err := lockRoot(o.StateRoot)
	if err != nil {
		return nil, err
	}
	inst, err := launch(o)
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

// outermost returns the sorted paths that are not below another path of the list: binding the
// outer path read-write already covers the inner one.
func outermost(paths []string) []string {
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	var out []string
	for _, p := range sorted {
		if n := len(out); n > 0 && (out[n-1] == p || strings.HasPrefix(p, out[n-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// lockRoot serialises starts and sweeps across processes with flock on <root>/.lock.
func lockRoot(root string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(root, lockFileName), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sandbox lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// adjustConfig lets tests break an instance's configuration on purpose; nil otherwise.
var adjustConfig func(*instanceConfig)

// launch runs with the state root locked: sweep, cgroups, config, launcher, init PID.
func launch(o Options) (*Instance, error) {
	sweep(o.StateRoot, o.Log)
	stateDir := filepath.Join(o.StateRoot, o.Name)
	if _, err := os.Stat(stateDir); err == nil {
		return nil, fmt.Errorf("sandbox %s: already running (state dir %s)", o.Name, stateDir)
	}
	cfg, err := planInstance(o.Name, stateDir, o.ExtraBinds)
	if err != nil {
		return nil, err
	}
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

// Sweep removes, under the state root lock, the state and cgroups of instances whose systemd is
// gone (crashed tests, killed launchers). Start does this on its own; hack/sandbox stop uses it
// for an instance that already died. An empty stateRoot means [DefaultStateRoot].
func Sweep(stateRoot string, log io.Writer) error {
	if stateRoot == "" {
		stateRoot = DefaultStateRoot
	}
	if log == nil {
		log = io.Discard
	}
	if _, err := os.Stat(stateRoot); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := lockRoot(stateRoot)
	if err != nil {
		return err
	}
	defer unlock()
	sweep(stateRoot, log)
	return nil
}

// planInstance reads the host's cgroup mounts and unit directories and returns the instance's
// configuration.
func planInstance(name, stateDir string, extra []string) (*instanceConfig, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	mounts, err := parseMountinfo(bytes.NewReader(mi))
	if err != nil {
		return nil, err
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("own cgroups: %w", err)
	}
	own, err := parseProcCgroup(bytes.NewReader(cg))
	if err != nil {
		return nil, err
	}
	hs, err := planHierarchies(mounts, own, name)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if h.Rel == "" {
			return nil, fmt.Errorf("cgroup layout: cgroup2 mounted at %s; the sandbox needs the v1/hybrid layout", cgroupRoot)
		}
	}
	pc, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("proc cgroups: %w", err)
	}
	enabled, err := enabledControllers(bytes.NewReader(pc))
	if err != nil {
		return nil, err
	}
	var links []symlink
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup root: %w", err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			t, err := os.Readlink(filepath.Join(cgroupRoot, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("cgroup symlink: %w", err)
			}
			links = append(links, symlink{Name: e.Name(), Target: t})
		}
	}
	taken := map[string]bool{}
	for _, l := range links {
		taken[l.Name] = true
	}
	var decoys []string
	for _, d := range decoyDirs(enabled, hs) {
		if !taken[d] {
			decoys = append(decoys, d)
		}
	}
	masks, err := MaskList(os.DirFS("/"), DefaultUnitDirs)
	if err != nil {
		return nil, err
	}
	return &instanceConfig{
		Name:       name,
		StateDir:   stateDir,
		Cgroups:    hs,
		Decoys:     decoys,
		Symlinks:   links,
		Masks:      masks,
		ExtraBinds: extra,
	}, nil
}

// createCgroups makes the instance's directory in every hierarchy. cpuset starts empty in v1;
// a task cannot join it until cpus and mems are copied from the parent.
func createCgroups(hs []hierarchy) error {
	for _, h := range hs {
		if err := os.Mkdir(h.Dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", h.Dir, err)
		}
		if slices.Contains(h.Controllers, "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h.Parent, f))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", h.Parent, err)
				}
				if err := os.WriteFile(filepath.Join(h.Dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", h.Dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes the instance's cgroup directories depth-first, retrying for up to wait:
// systemd's transient units and exiting tasks are collected asynchronously.
func removeCgroups(hs []hierarchy, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var errs []error
		for _, h := range hs {
			if err := removeTree(h.Dir); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox cgroups: %w", errors.Join(errs...))
		}
		time.Sleep(pollInterval)
	}
}

// removeTree rmdirs dir and every cgroup below it, deepest first. A missing dir is fine.
func removeTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var errs []error
	for _, d := range slices.Backward(dirs) {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// sweep removes the state and the cgroup trees of instances whose systemd is gone. Called with
// the state root locked, so an instance without a pids file never finished starting.
func sweep(root string, log io.Writer) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || validateName(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if pids, err := readPIDs(dir); err == nil && (alive(pids.InitPID, pids.InitStart) || alive(pids.LauncherPID, pids.LauncherStart)) {
			continue
		}
		cfg, err := readConfig(dir)
		if err == nil {
			if err := removeCgroups(cfg.Cgroups, 0); err != nil {
				fmt.Fprintf(log, "sandbox sweep %s: keeping state: %v\n", e.Name(), err)
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(log, "sandbox sweep %s: %v\n", e.Name(), err)
			continue
		}
		fmt.Fprintf(log, "sandbox sweep: removed stale instance %s\n", e.Name())
	}
}

func readPIDs(stateDir string) (*instancePIDs, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, pidsFile))
	if err != nil {
		return nil, fmt.Errorf("sandbox pids: %w", err)
	}
	var p instancePIDs
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("sandbox pids %s: %w", filepath.Join(stateDir, pidsFile), err)
	}
	return &p, nil
}

// procStartTime returns the start time of pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat).
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// comm (field 2) may contain spaces and parentheses; the fields after the last ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat of %d: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("proc stat of %d: malformed", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive reports whether pid runs and is the same process that was recorded (same start time).
// Zombies count as gone.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := procStartTime(pid)
	if err != nil || st != start {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// Attach returns a handle to a running instance started by another process (hack/sandbox start).
// An empty stateRoot means [DefaultStateRoot].
func Attach(stateRoot, name string) (*Instance, error) {
	if stateRoot == "" {
		stateRoot = DefaultStateRoot
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(stateRoot, name)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: no such instance in %s", name, stateRoot)
	}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	pids, err := readPIDs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	if !alive(pids.InitPID, pids.InitStart) {
		return nil, fmt.Errorf("sandbox %s: init %d is not running", name, pids.InitPID)
	}
	return &Instance{cfg: *cfg, pids: *pids, log: io.Discard}, nil
}

// List returns the instances found in stateRoot (empty means [DefaultStateRoot]), running or
// stale, sorted by name.
func List(stateRoot string) ([]Status, error) {
	if stateRoot == "" {
		stateRoot = DefaultStateRoot
	}
	entries, err := os.ReadDir(stateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox state root: %w", err)
	}
	var out []Status
	for _, e := range entries {
		if !e.IsDir() || validateName(e.Name()) != nil {
			continue
		}
		s := Status{Name: e.Name(), StateDir: filepath.Join(stateRoot, e.Name())}
		if p, err := readPIDs(s.StateDir); err == nil {
			s.InitPID = p.InitPID
			s.Running = alive(p.InitPID, p.InitStart)
		}
		out = append(out, s)
	}
	return out, nil
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
// `nsenter --target <init> --all`, in / with the caller's environment. The process joins every
// namespace of the instance and its root cgroup in every hierarchy (so /proc/self/cgroup reads
// "/" and everything it starts is charged to the instance); it dies with the instance.
func (i *Instance) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return i.CommandIn(ctx, "/", name, args...)
}

// joinRootCgroups is run by /bin/sh inside the instance before exec'ing the command. nsenter
// joins the cgroup namespace but leaves the process in the caller's cgroups, which lie outside
// the namespace ("/../.."); writing its PID into the private cgroupfs mounts moves it to the
// namespace root, which is the instance's own directory on the host. The decoy mounts hold no
// cgroup.procs, so the glob skips them.
const joinRootCgroups = `for f in /sys/fs/cgroup/*/cgroup.procs; do echo $$ > "$f" || { echo "sandbox: cannot join $f" >&2; exit 125; }; done; exec "$@"`

// CommandIn is [Instance.Command] with working directory dir (a path inside the instance).
func (i *Instance) CommandIn(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	return i.nsenter(ctx, dir, append([]string{"/bin/sh", "-c", joinRootCgroups, "sh", name}, args...))
}

// nsenter returns `nsenter --target <init> --all --wd=<dir> -- argv...`, without joining the
// instance's cgroups (the readiness poll needs no more, and runs every 20 ms).
func (i *Instance) nsenter(ctx context.Context, dir string, argv []string) *exec.Cmd {
	args := append([]string{"--target", strconv.Itoa(i.pids.InitPID), "--all", "--wd=" + dir, "--"}, argv...)
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
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var state string
	for {
		out, _ := i.nsenter(ctx, "/", []string{"systemctl", "is-system-running"}).Output()
		state = strings.TrimSpace(string(out))
		switch state {
		case "running":
			i.bootTime += time.Since(began)
			return nil
		case "degraded":
			i.bootTime += time.Since(began)
			failed, _ := i.Command(ctx, "systemctl", "--failed", "--no-legend", "--plain").Output()
			fmt.Fprintf(i.log, "sandbox %s: degraded, failed units: %s\n", i.cfg.Name, strings.TrimSpace(string(failed)))
			return nil
		}
		if !alive(i.pids.InitPID, i.pids.InitStart) {
			return fmt.Errorf("sandbox %s: systemd exited during boot%s", i.cfg.Name, tail(filepath.Join(i.cfg.StateDir, launcherLog)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s: not running after %s (last state %q): %w%s", i.cfg.Name, time.Since(began).Round(time.Millisecond), state, ctx.Err(), tail(filepath.Join(i.cfg.StateDir, launcherLog)))
		case <-tick.C:
		}
	}
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

// signalAndWait sends sig (none if 0) to pid, if it is still the recorded process, and waits up to
// wait for it to exit. A pidfd makes both race-free against PID reuse once opened.
func signalAndWait(pid int, start uint64, sig syscall.Signal, wait time.Duration) error {
	if !alive(pid, start) {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// The PID could have been reused between alive and PidfdOpen; check again with the fd held.
	if !alive(pid, start) {
		return nil
	}
	if sig != 0 {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("signal %d to %d: %w", sig, pid, err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("process %d: still running after %s", pid, wait)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}
