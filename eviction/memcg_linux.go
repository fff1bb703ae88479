package eviction

import (
	"context"
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

func (e *memcgEvent) pollFd() unix.PollFd {
	return unix.PollFd{Fd: int32(e.efd), Events: unix.POLLIN}
}

// consume reads the eventfd's counter.
func (e *memcgEvent) consume() {
	var buf [8]byte
	_, _ = unix.Read(e.efd, buf[:])
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
	return armLoop[*memcgEvent]{what: "memory thresholds", none: fmt.Errorf("memory thresholds: none armed: %w", ErrUnavailable),
		targets: len(n.Targets), kick: &n.kick, interval: n.RearmInterval, rearmArmed: true,
		arm: func(i int, cur *memcgEvent, hasCur bool) (*memcgEvent, bool, error) {
			t := n.Targets[i]
			v, ok, err := n.UsageThreshold(t, time.Now())
			if err == nil && !ok {
				err = fmt.Errorf("threshold %s of %s is not a usage: %w", t.Threshold.Signal, t.CgroupPath, ErrUnavailable)
			}
			if err != nil {
				return nil, false, err
			}
			if hasCur && cur.threshold == v {
				return cur, true, nil
			}
			e, err := armMemcg(n.Sources.CgroupRoot, t.CgroupPath, v)
			if err != nil {
				return nil, false, err
			}
			if hasCur {
				n.Log.Debug("memory threshold re-armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "usage_bytes", v)
			} else {
				n.Log.Info("memory threshold armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "usage_bytes", v)
			}
			return e, false, nil
		},
		notArmed: func(i int, err error) {
			t := n.Targets[i]
			n.Log.Info("memory threshold not armed", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal), "error", err)
		},
		lost: func(i int, _ *memcgEvent) {
			t := n.Targets[i]
			n.Log.Info("memory threshold lost, re-arming later", "cgroup", t.CgroupPath, "signal", string(t.Threshold.Signal))
		},
	}.run(ctx, wake)
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
