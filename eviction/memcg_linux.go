package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slicelet/slicelet/units"
)

// memcgEvent is one armed cgroup v1 memory threshold.
type memcgEvent struct {
	efd       int      // eventfd the kernel signals
	usage     *os.File // memory.usage_in_bytes, kept open while armed
	threshold int64
}

func (e *memcgEvent) close() {
	// Closing the eventfd unregisters the threshold (the kernel's memcg_event_wake on
	// EPOLLHUP).
	unix.Close(e.efd)
	e.usage.Close()
}

// Run implements Notifier: it arms one threshold per target, re-arms every RearmInterval and
// on every call of the Rearm method with the recomputed usage threshold, and calls wake
// whenever the kernel signals one. It returns an error wrapping ErrUnavailable at once on
// cgroup v2 (no cgroup.event_control) or when no target can be armed.
func (n *MemcgThresholdNotifier) Run(ctx context.Context, wake func()) error {
	if n.Sources.Mode != units.ModeHybrid && n.Sources.Mode != units.ModeLegacy {
		return fmt.Errorf("memory threshold notifications need cgroup v1: %w", ErrUnavailable)
	}
	rearm := n.RearmInterval
	if rearm <= 0 {
		rearm = DefaultThresholdRearm
	}
	// The kick is live before the first arm, so a Rearm from now on is never lost.
	kick, err := n.kick.start()
	if err != nil {
		return fmt.Errorf("memory thresholds: %w", err)
	}
	defer n.kick.stop()
	events := make([]*memcgEvent, len(n.Targets))
	failed := map[int]string{}
	defer func() {
		for _, e := range events {
			if e != nil {
				e.close()
			}
		}
	}()
	arm := func() {
		for i, t := range n.Targets {
			v, ok, err := n.UsageThreshold(t, time.Now())
			if err == nil && !ok {
				err = fmt.Errorf("threshold %s of %s is not a usage: %w", t.Threshold.Signal, t.CgroupPath, ErrUnavailable)
			}
			if err == nil && events[i] != nil && events[i].threshold == v {
				continue
			}
			var e *memcgEvent
			if err == nil {
				e, err = armMemcg(n.Sources.CgroupRoot, t.CgroupPath, v)
			}
			if err != nil {
				if failed[i] != err.Error() {
					failed[i] = err.Error()
					n.Log.Info("memory threshold not armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "error", err)
				}
				continue
			}
			if events[i] != nil {
				events[i].close()
				n.Log.Debug("memory threshold re-armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "usage_bytes", v)
			} else {
				n.Log.Info("memory threshold armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "usage_bytes", v)
			}
			delete(failed, i)
			events[i] = e
		}
	}
	arm()
	if len(failed) == len(n.Targets) {
		return fmt.Errorf("memory thresholds: none armed: %w", ErrUnavailable)
	}
	stop, err := stopFD(ctx)
	if err != nil {
		return err
	}
	defer unix.Close(stop)
	next := time.Now().Add(rearm)
	for {
		fds := []unix.PollFd{{Fd: int32(stop), Events: unix.POLLIN}, {Fd: int32(kick), Events: unix.POLLIN}}
		for _, e := range events {
			if e != nil {
				fds = append(fds, unix.PollFd{Fd: int32(e.efd), Events: unix.POLLIN})
			}
		}
		timeout := max(time.Until(next), 0)
		k, err := unix.Poll(fds, int(timeout/time.Millisecond)+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("memory thresholds: poll: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		event := false
		kicked := fds[1].Revents&unix.POLLIN != 0
		if kicked {
			drainEventfd(kick)
		}
		var buf [8]byte
		for j := 2; k > 0 && j < len(fds); j++ {
			if fds[j].Revents&unix.POLLIN != 0 {
				_, _ = unix.Read(int(fds[j].Fd), buf[:])
				event = true
			}
		}
		if event {
			wake()
		}
		if kicked || !time.Now().Before(next) {
			next = time.Now().Add(rearm)
			arm()
		}
	}
}

// armMemcg registers an eventfd that fires when cgroupPath's memory usage crosses threshold
// bytes (in either direction).
func armMemcg(cgroupRoot, cgroupPath string, threshold int64) (*memcgEvent, error) {
	dir := filepath.Join(cgroupRoot, "memory", cgroupPath)
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return nil, fmt.Errorf("memory threshold: %w (%w)", err, ErrUnavailable)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		usage.Close()
		return nil, fmt.Errorf("memory threshold: eventfd: %w", err)
	}
	ctl := filepath.Join(dir, "cgroup.event_control")
	if err := os.WriteFile(ctl, fmt.Appendf(nil, "%d %d %d", efd, usage.Fd(), threshold), 0); err != nil {
		unix.Close(efd)
		usage.Close()
		return nil, fmt.Errorf("memory threshold: %s: %w (%w)", ctl, err, ErrUnavailable)
	}
	return &memcgEvent{efd: efd, usage: usage, threshold: threshold}, nil
}
