package eviction

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/units"
)

// Defaults of the pressure notifiers.
const (
	// DefaultPSIStall and DefaultPSIWindow make a PSI trigger fire when tasks stalled on
	// memory for 150 ms within 2 s. Without CAP_SYS_RESOURCE the kernel only accepts windows
	// that are multiples of 2 s (kernel/sched/psi.c, psi_trigger_create), so 2 s is the
	// shortest that works everywhere; the trigger still fires as soon as the stall is reached.
	DefaultPSIStall  = 150 * time.Millisecond
	DefaultPSIWindow = 2 * time.Second
	// DefaultThresholdRearm is how often cgroup v1 memory thresholds are recomputed and
	// re-armed (inactive_file moves; pods come and go), as the kubelet's memory threshold
	// notifier does on every housekeeping pass.
	DefaultThresholdRearm = 10 * time.Second
	// DefaultUsagePoll is how often the usage poller reads memory usage on cgroup v2, which has
	// no usage threshold notification: two small file reads per watched cgroup.
	DefaultUsagePoll = 100 * time.Millisecond
)

// PressureNotifiers returns the notifiers that can wake the eviction loop on this layout, for
// the memory thresholds among thresholds (none when there are none):
//
//   - cgroup v2: PSI triggers on memory.pressure of the kubepods cgroup and of the root
//     (the root cgroup's file, else procRoot/pressure/memory, which is the same data), plus a
//     usage poller every DefaultUsagePoll: PSI reports stalls, not usage, and v2 has no
//     usage threshold notification, so a crossing without a stall is caught by the poller;
//   - hybrid: PSI triggers on the same files of the unified hierarchy
//     (<cgroupRoot>/unified/...): it has no controllers, but PSI is accounted per cgroup of the
//     default hierarchy whatever its controllers, so the files exist and work; plus cgroup v1
//     memory threshold notifications;
//   - legacy v1: memory threshold notifications, and the system-wide PSI file.
//
// A notifier whose feature is missing says so when it runs (logged once); the tick remains.
func PressureNotifiers(src Sources, thresholds []Threshold, log *slog.Logger) []Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var memory []Threshold
	for _, t := range thresholds {
		if t.Signal == SignalMemoryAvailable || t.Signal == SignalAllocatableMemoryAvailable {
			memory = append(memory, t)
		}
	}
	if len(memory) == 0 {
		return nil
	}
	procPSI := filepath.Join(src.ProcRoot, "pressure", "memory")
	var psiFiles []string
	switch src.Mode {
	case units.ModeUnified, units.ModeHybrid:
		base := src.CgroupRoot
		if src.Mode == units.ModeHybrid {
			base = filepath.Join(src.CgroupRoot, "unified")
		}
		if src.KubepodsCgroup != "" {
			psiFiles = append(psiFiles, filepath.Join(base, src.KubepodsCgroup, "memory.pressure"))
		}
		psiFiles = append(psiFiles, filepath.Join(base, "memory.pressure")+"|"+procPSI)
	default:
		psiFiles = append(psiFiles, procPSI)
	}
	out := []Notifier{&PSINotifier{Files: psiFiles, Stall: DefaultPSIStall, Window: DefaultPSIWindow, Log: log.With("notifier", "psi")}}
	var targets []ThresholdTarget
	for _, t := range memory {
		cg := "/"
		if t.Signal == SignalAllocatableMemoryAvailable {
			if src.KubepodsCgroup == "" {
				continue
			}
			cg = src.KubepodsCgroup
		}
		targets = append(targets, ThresholdTarget{Threshold: t, CgroupPath: cg})
	}
	if src.Mode == units.ModeHybrid || src.Mode == units.ModeLegacy {
		out = append(out, &MemcgThresholdNotifier{Sources: src, Targets: targets, RearmInterval: DefaultThresholdRearm,
			Log: log.With("notifier", "memcg_threshold")})
	} else {
		out = append(out, &UsagePoller{Sources: src, Targets: targets, Interval: DefaultUsagePoll,
			Log: log.With("notifier", "usage_poll")})
	}
	return out
}

// PSINotifier wakes the loop on PSI triggers ("some <stall> <window>") written to
// memory.pressure files (Documentation/accounting/psi.rst, "Monitoring for pressure
// thresholds"): the kernel signals POLLPRI on the file once tasks stalled on memory for Stall
// within Window.
type PSINotifier struct {
	// Files are the memory.pressure files; "a|b" means a, or b when a does not exist.
	Files []string
	// Stall and Window are the trigger (Window a multiple of 2 s without CAP_SYS_RESOURCE).
	Stall, Window time.Duration
	// RearmInterval is how often files that could not be armed (a cgroup not there yet, or
	// removed) are tried again; 0 means DefaultThresholdRearm. The Rearm method does it at
	// once.
	RearmInterval time.Duration
	// Log receives state changes.
	Log *slog.Logger

	kick rearmKick
}

// rearmKick lets Rearm wake a notifier blocked in poll(2): an eventfd while Run runs (a
// channel cannot be polled together with the kernel's file descriptors).
type rearmKick struct {
	mu      sync.Mutex
	fd      int
	running bool
}

// Name implements Notifier.
func (p *PSINotifier) Name() string { return "psi" }

// ThresholdTarget is one cgroup v1 memory threshold to watch: the threshold of
// memory.available on the root cgroup ("/"), or of allocatableMemory.available on the kubepods
// cgroup.
type ThresholdTarget struct {
	// Threshold is the eviction threshold.
	Threshold Threshold
	// CgroupPath is the memory cgroup whose usage is watched.
	CgroupPath string
}

// MemcgThresholdNotifier wakes the loop when a memory cgroup's usage crosses the usage at which
// an eviction threshold is met (cgroup v1 only: cgroup.event_control with an eventfd on
// memory.usage_in_bytes; Documentation/admin-guide/cgroup-v1/memory.rst §9). The usage threshold
// is the kubelet's: capacity − threshold quantity + inactive_file, recomputed and re-armed
// every RearmInterval and on Rearm.
type MemcgThresholdNotifier struct {
	// Sources give the cgroup and proc roots, the mode and the kubepods cgroup.
	Sources Sources
	// Targets are the thresholds to watch.
	Targets []ThresholdTarget
	// RearmInterval is the recompute interval; 0 means DefaultThresholdRearm. The Rearm method
	// recomputes at once.
	RearmInterval time.Duration
	// Log receives state changes.
	Log *slog.Logger

	kick rearmKick
}

// Name implements Notifier.
func (n *MemcgThresholdNotifier) Name() string { return "memcg_threshold" }

// UsageThreshold is the memory usage at which target's threshold is met: capacity − threshold
// quantity + inactive_file (the kubelet's memory threshold notifier,
// pkg/kubelet/eviction/memory_threshold_notifier.go), from the cgroup's current numbers. ok is false
// when the threshold cannot be expressed (no observation, or a threshold above capacity).
func (n *MemcgThresholdNotifier) UsageThreshold(target ThresholdTarget, now time.Time) (int64, bool, error) {
	s := n.Sources
	var obs Observation
	var err error
	if target.CgroupPath == "/" {
		obs, err = ReadMemory(s.CgroupRoot, s.ProcRoot, s.Mode, now)
	} else {
		obs, err = ReadAllocatableMemory(s.CgroupRoot, s.Mode, target.CgroupPath, now)
	}
	if err != nil {
		return 0, false, err
	}
	m, err := ReadCgroupMemory(s.CgroupRoot, s.Mode, target.CgroupPath)
	if err != nil {
		return 0, false, err
	}
	return usageThreshold(obs.Capacity.Value(), GetThresholdQuantity(target.Threshold.Value, &obs.Capacity).Value(), m.InactiveFile)
}

// usageThreshold is capacity − quantity + inactiveFile, or false when that is not a usage
// (at most 0, or a threshold that is never met).
func usageThreshold(capacity, quantity, inactiveFile int64) (int64, bool, error) {
	if quantity <= 0 || quantity > capacity {
		return 0, false, nil
	}
	v := capacity - quantity + inactiveFile
	return v, v > 0, nil
}

// UsagePoller wakes the loop when a watched memory threshold becomes met, by reading the
// memory signals every Interval (on cgroup v2, where the kernel offers no usage threshold
// notification). It wakes once per crossing, not on every read while the threshold stays met:
// the loop itself keeps acting while it is.
type UsagePoller struct {
	// Sources give the cgroup and proc roots and the mode.
	Sources Sources
	// Targets are the thresholds to watch.
	Targets []ThresholdTarget
	// Interval is the read interval; 0 means DefaultUsagePoll.
	Interval time.Duration
	// Log receives state changes.
	Log *slog.Logger
	// Clock runs the read interval; clock.RealClock when nil.
	Clock clock.WithTicker

	rearmOnce sync.Once
	rearm     chan struct{}
}

// Rearm implements Rearmer: the signals are read at once instead of at the next interval
// (the capacity and usage are read fresh every time; there is nothing else to re-arm).
func (u *UsagePoller) Rearm() {
	select {
	case u.rearmCh() <- struct{}{}:
	default:
	}
}

func (u *UsagePoller) rearmCh() chan struct{} {
	u.rearmOnce.Do(func() { u.rearm = make(chan struct{}, 1) })
	return u.rearm
}

// Name implements Notifier.
func (u *UsagePoller) Name() string { return "usage_poll" }

// Run implements Notifier. It returns an error wrapping ErrUnavailable when no target can be
// read at the start.
func (u *UsagePoller) Run(ctx context.Context, wake func()) error {
	interval := u.Interval
	if interval <= 0 {
		interval = DefaultUsagePoll
	}
	met := make([]bool, len(u.Targets))
	check := func() (observed int) {
		crossed := false
		for i, tg := range u.Targets {
			o, err := u.read(tg)
			if err != nil {
				continue
			}
			observed++
			now := o.Available.Cmp(*GetThresholdQuantity(tg.Threshold.Value, &o.Capacity)) < 0
			crossed = crossed || (now && !met[i])
			met[i] = now
		}
		if crossed {
			wake()
		}
		return observed
	}
	if check() == 0 {
		return fmt.Errorf("usage poller: no memory signal readable: %w", ErrUnavailable)
	}
	u.Log.Info("memory usage poller started", "interval", interval, "targets", len(u.Targets))
	clk := u.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			check()
		case <-u.rearmCh():
			check()
		}
	}
}

func (u *UsagePoller) read(tg ThresholdTarget) (Observation, error) {
	s := u.Sources
	if tg.CgroupPath == "/" {
		return ReadMemory(s.CgroupRoot, s.ProcRoot, s.Mode, time.Time{})
	}
	return ReadAllocatableMemory(s.CgroupRoot, s.Mode, tg.CgroupPath, time.Time{})
}
