package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// psiFile is one armed trigger.
type psiFile struct {
	path string
	f    *os.File
}

// Run implements Notifier: it arms a trigger on every file it can, then waits for POLLPRI on
// them and calls wake on each event. Files that cannot be armed are logged once and retried
// every RearmInterval and on every call of the Rearm method (a kubepods cgroup re-created by
// systemd gets a fresh trigger). It returns an error wrapping ErrUnavailable when no file can
// be armed at the start (a kernel without PSI, or psi=0): a state the manager logs once.
func (p *PSINotifier) Run(ctx context.Context, wake func()) error {
	rearm := p.RearmInterval
	if rearm <= 0 {
		rearm = DefaultThresholdRearm
	}
	// The kick is live before the first arm, so a Rearm from now on is never lost.
	kick, err := p.kick.start()
	if err != nil {
		return fmt.Errorf("psi: %w", err)
	}
	defer p.kick.stop()
	armed := make([]*psiFile, len(p.Files))
	failed := map[int]string{}
	arm := func() {
		for i, spec := range p.Files {
			if armed[i] != nil {
				continue
			}
			f, path, err := p.arm(spec)
			if err != nil {
				if failed[i] != err.Error() {
					failed[i] = err.Error()
					p.Log.Info("psi trigger not armed", "file", spec, "error", err)
				}
				continue
			}
			p.Log.Info("psi trigger armed", "file", path, "stall", p.Stall, "window", p.Window)
			delete(failed, i)
			armed[i] = &psiFile{path: path, f: f}
		}
	}
	arm()
	defer func() {
		for _, a := range armed {
			if a != nil {
				a.f.Close()
			}
		}
	}()
	if len(failed) == len(p.Files) {
		return fmt.Errorf("psi: no memory.pressure trigger could be armed (%v): %w", p.Files, ErrUnavailable)
	}
	stop, err := stopFD(ctx)
	if err != nil {
		return err
	}
	defer unix.Close(stop)
	lastArm := time.Now()
	for {
		fds := []unix.PollFd{{Fd: int32(stop), Events: unix.POLLIN}, {Fd: int32(kick), Events: unix.POLLIN}}
		idx := []int{-1, -1}
		for i, a := range armed {
			if a != nil {
				fds = append(fds, unix.PollFd{Fd: int32(a.f.Fd()), Events: unix.POLLPRI})
				idx = append(idx, i)
			}
		}
		timeout := -1
		if len(failed) > 0 {
			timeout = int(rearm / time.Millisecond)
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("psi: poll: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		event := false
		kicked := fds[1].Revents&unix.POLLIN != 0
		if kicked {
			drainEventfd(kick)
		}
		for k := 2; n > 0 && k < len(fds); k++ {
			re := fds[k].Revents
			switch {
			case re&(unix.POLLERR|unix.POLLNVAL) != 0:
				// The cgroup was removed: the trigger is dead; re-arm later.
				i := idx[k]
				p.Log.Info("psi trigger lost, re-arming later", "file", armed[i].path)
				armed[i].f.Close()
				armed[i] = nil
				failed[i] = "lost"
			case re&unix.POLLPRI != 0:
				event = true
			}
		}
		if event {
			wake()
		}
		if len(failed) > 0 && (kicked || time.Since(lastArm) >= rearm) {
			lastArm = time.Now()
			arm()
		}
	}
}

// arm opens a memory.pressure file (the first of "a|b" that exists) and writes the trigger.
func (p *PSINotifier) arm(spec string) (*os.File, string, error) {
	var lastErr error
	for _, path := range strings.Split(spec, "|") {
		f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				lastErr = fmt.Errorf("%s: %w", path, ErrUnavailable)
				continue
			}
			return nil, "", err
		}
		trigger := fmt.Sprintf("some %d %d", p.Stall.Microseconds(), p.Window.Microseconds())
		if _, err := f.Write(append([]byte(trigger), 0)); err != nil {
			f.Close()
			// EINVAL: a window the kernel refuses (not a multiple of 2 s without
			// CAP_SYS_RESOURCE) or PSI disabled; EOPNOTSUPP: a file without triggers.
			return nil, "", fmt.Errorf("%s: trigger %q: %w (%w)", path, trigger, err, ErrUnavailable)
		}
		return f, path, nil
	}
	return nil, "", lastErr
}

// stopFD returns an eventfd that becomes readable when ctx ends, so a blocking poll returns.
func stopFD(ctx context.Context) (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	context.AfterFunc(ctx, func() {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(fd, one[:])
	})
	return fd, nil
}
