package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// psiFile is one armed trigger.
type psiFile struct {
	path string
	f    *os.File
}

// pollFd waits for POLLPRI, the kernel's signal that the trigger fired.
func (a *psiFile) pollFd() unix.PollFd {
	return unix.PollFd{Fd: int32(a.f.Fd()), Events: unix.POLLPRI}
}

// consume does nothing: poll(2) itself takes a trigger's event (kernel/sched/psi.c, psi_trigger_poll).
func (a *psiFile) consume() {}

func (a *psiFile) close() { a.f.Close() }

// Run implements Notifier: it arms a trigger on every file it can, then waits for POLLPRI on
// them and calls wake on each event. Files that cannot be armed are logged once and retried
// every RearmInterval and on every call of the Rearm method (a kubepods cgroup re-created by
// systemd gets a fresh trigger). It returns an error wrapping ErrUnavailable when no file can
// be armed at the start (a kernel without PSI, or psi=0): a state the manager logs once.
func (p *PSINotifier) Run(ctx context.Context, wake func()) error {
	return armLoop[*psiFile]{what: "psi", none: fmt.Errorf("psi: no memory.pressure trigger could be armed (%v): %w", p.Files, ErrUnavailable),
		targets: len(p.Files), kick: &p.kick, interval: p.RearmInterval,
		arm: func(i int, _ *psiFile, _ bool) (*psiFile, bool, error) {
			f, path, err := p.arm(p.Files[i])
			if err != nil {
				return nil, false, err
			}
			p.Log.Info("psi trigger armed", "file", path, "stall", p.Stall, "window", p.Window)
			return &psiFile{path: path, f: f}, false, nil
		},
		notArmed: func(i int, err error) { p.Log.Info("psi trigger not armed", "file", p.Files[i], "error", err) },
		// The cgroup was removed: the trigger is dead; re-arm later.
		lost: func(_ int, a *psiFile) { p.Log.Info("psi trigger lost, re-arming later", "file", a.path) },
	}.run(ctx, wake)
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
