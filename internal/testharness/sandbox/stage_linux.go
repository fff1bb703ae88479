package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The binary that calls Start re-executes itself (/proc/self/exe) twice:
//
//	caller ── launcher (host namespaces; joins the instance cgroups, holds the console pty)
//	            └── init (PID 1 of the new namespaces; private mounts, then exec systemd)
//
// The stage is chosen by an environment variable and runs from this package's init function, so
// it works for test binaries and commands alike, before any test or main code runs.
const (
	stageEnv    = "SLICELET_SANDBOX_STAGE"
	stateDirEnv = "SLICELET_SANDBOX_STATE_DIR"
	ptsEnv      = "SLICELET_SANDBOX_PTS"

	stageLauncher = "launcher"
	stageInit     = "init"

	// statusFD is the launcher's end of the pipe on which it reports the init PID to Start.
	statusFD = 3
)

// sigPoweroff is SIGRTMIN+4, which systemd in container mode takes as "power off". glibc reserves
// the first two real-time signals, so SIGRTMIN is 34 in C programs such as systemd.
const sigPoweroff = syscall.Signal(34 + 4)

// namespaceFlags are the namespaces of an instance. The network namespace has only a loopback
// device; the user namespace stays the host's (systemd needs real root for cgroupfs).
const namespaceFlags = unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET

func init() {
	stage := os.Getenv(stageEnv)
	if stage == "" {
		return
	}
	var err error
	switch stage {
	case stageLauncher:
		err = runLauncher(os.Getenv(stateDirEnv))
	case stageInit:
		err = runInit(os.Getenv(stateDirEnv), os.Getenv(ptsEnv))
	default:
		err = fmt.Errorf("sandbox stage %q: unknown", stage)
	}
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "sandbox %s: %v\n", stage, err)
	os.Exit(1)
}

func readConfig(stateDir string) (*instanceConfig, error) {
	if stateDir == "" {
		return nil, errors.New("sandbox state dir: not set")
	}
	b, err := os.ReadFile(filepath.Join(stateDir, configFile))
	if err != nil {
		return nil, fmt.Errorf("sandbox config: %w", err)
	}
	var cfg instanceConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("sandbox config %s: %w", filepath.Join(stateDir, configFile), err)
	}
	return &cfg, nil
}

// runLauncher is the launcher stage. It returns when init has exited (nil) or on failure.
func runLauncher(stateDir string) error {
	// The parent-death signal of the init child is tied to the thread that forks it, so that
	// thread must live as long as the launcher: lock the main goroutine to it for good.
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	fail := func(err error) error {
		if status != nil {
			fmt.Fprintf(status, "error %v\n", err)
		}
		return err
	}
	cfg, err := readConfig(stateDir)
	if err != nil {
		return fail(err)
	}
	master, slave, ptsPath, err := openPTY()
	if err != nil {
		return fail(err)
	}
	console, err := os.OpenFile(filepath.Join(stateDir, consoleLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(fmt.Errorf("console log: %w", err))
	}
	// Drain the console so that systemd never blocks on it; cap the log, tests are short.
	go func() { _, _ = io.Copy(console, io.LimitReader(master, 4<<20)); _, _ = io.Copy(io.Discard, master) }()

	// Join the instance cgroups before creating the cgroup namespace: the namespace root is the
	// cgroup its creator sits in, and it must be exactly the instance's own directory, or systemd
	// would create init.scope and system.slice at the caller's (possibly the host's) roots.
	for _, h := range cfg.Cgroups {
		if err := writeCgroupProcs(h.Dir, os.Getpid()); err != nil {
			return fail(err)
		}
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{"slicelet-sandbox-init"},
		Env:    []string{stageEnv + "=" + stageInit, stateDirEnv + "=" + stateDir, ptsEnv + "=" + ptsPath, "PATH=" + os.Getenv("PATH")},
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: namespaceFlags,
			Pdeathsig:  syscall.SIGKILL,
			Setsid:     true,
		},
	}
	startErr := cmd.Start()
	// Leave the instance cgroups again, whatever happened: only the instance's processes belong
	// there, and Stop removes the directories.
	for _, h := range cfg.Cgroups {
		if err := writeCgroupProcs(h.Parent, os.Getpid()); err != nil && startErr == nil {
			startErr = err
		}
	}
	if startErr != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return fail(fmt.Errorf("sandbox init: %w", startErr))
	}
	initPID := cmd.Process.Pid
	pids := instancePIDs{InitPID: initPID, LauncherPID: os.Getpid()}
	var errInit, errSelf error
	pids.InitStart, errInit = procStartTime(initPID)
	pids.LauncherStart, errSelf = procStartTime(os.Getpid())
	if err := errors.Join(errInit, errSelf); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("sandbox start times: %w", err))
	}
	if err := writeJSONAtomic(filepath.Join(stateDir, pidsFile), pids); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(err)
	}
	fmt.Fprintf(status, "ok %d\n", initPID)
	_ = status.Close()
	status = nil

	// SIGTERM/SIGINT/SIGHUP to the launcher power the instance off cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-sigs
		_ = cmd.Process.Signal(sigPoweroff)
		time.Sleep(10 * time.Second)
		_ = cmd.Process.Kill()
	}()
	werr := cmd.Wait()
	_ = slave.Close()
	fmt.Fprintf(os.Stderr, "sandbox launcher: init %d exited: %v\n", initPID, werr)
	return nil
}

// openPTY opens a new pseudo-terminal pair on the host's visible devpts instance. The slave becomes
// /dev/console inside: systemd needs its console to be a tty.
func openPTY() (master, slave *os.File, slavePath string, err error) {
	ptmx := "/dev/pts/ptmx"
	m, err := os.OpenFile(ptmx, os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		ptmx = "/dev/ptmx"
		if m, err = os.OpenFile(ptmx, os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
			return nil, nil, "", fmt.Errorf("pty: %w", err)
		}
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, "", fmt.Errorf("pty unlock: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, "", fmt.Errorf("pty number: %w", err)
	}
	slavePath = "/dev/pts/" + strconv.Itoa(n)
	s, err := os.OpenFile(slavePath, os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		return nil, nil, "", fmt.Errorf("pty slave: %w", err)
	}
	return m, s, slavePath, nil
}

// writeCgroupProcs moves process pid into the cgroup directory dir.
func writeCgroupProcs(dir string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	defer f.Close()
	if _, err := f.WriteString(strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("cgroup %s: move pid %d: %w", dir, pid, err)
	}
	return nil
}

func writeJSONAtomic(file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", file, err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
