package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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

// procStat returns the start time of pid in clock ticks since boot (field 22 of /proc/<pid>/stat)
// and its state letter (field 3).
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// comm (field 2) may contain spaces and parentheses; the fields after the last ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("proc stat of %d: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("proc stat of %d: malformed", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("proc stat of %d: %w", pid, err)
	}
	return start, f[0][0], nil
}

// procStartTime returns the start time of pid, which tells a process from a later one that
// reuses its PID.
func procStartTime(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

// alive reports whether pid runs and is the same process that was recorded (same start time).
// Zombies count as gone.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, state, err := procStat(pid)
	return err == nil && st == start && state != 'Z'
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
