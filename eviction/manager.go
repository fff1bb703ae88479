package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/health"
)

// Timing of the eviction manager (pkg/kubelet/eviction/eviction_manager.go).
const (
	// DefaultMonitoringInterval is the kubelet's housekeeping interval for eviction (10 s).
	DefaultMonitoringInterval = 10 * time.Second
	// PodCleanupTimeout bounds the wait for an evicted pod's cleanup (the kubelet's
	// podCleanupTimeout).
	PodCleanupTimeout = 30 * time.Second
	// PodCleanupPoll is how often that wait asks whether the pod is cleaned up (the kubelet's
	// podCleanupPollFreq).
	PodCleanupPoll = time.Second
	// PodsChangedSpacing is the least time from one cycle's start to a cycle that a pod change
	// (PodsChanged) starts: the notifiers are re-armed at once, but a burst of pods starting
	// one after the other runs a cycle, which reads every active pod's usage, at most this
	// often rather than back to back (100 pods at once ran about a hundred cycles).
	PodsChangedSpacing = time.Second
)

// ActivePod is a pod the manager may rank and evict: admitted, not terminal, not being
// deleted, with its pod cgroup (slices.PodCgroupPath; "" when it has no slice yet, which
// makes it a pod without stats).
type ActivePod struct {
	// Pod is the pod; the manager never modifies it.
	Pod *v1.Pod
	// CgroupPath is the pod slice's cgroup, e.g.
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice.
	CgroupPath string
}

// PodLister lists the active pods (internal/pods.Controller.ActivePods).
type PodLister interface {
	ActivePods() []ActivePod
}

// Evictor evicts pods (internal/pods.Controller).
type Evictor interface {
	// EvictPod stops the pod's containers within grace, marks it Failed with reason
	// "Evicted", message and annotations, and never restarts it.
	EvictPod(ctx context.Context, pod *v1.Pod, grace time.Duration, message string, annotations map[string]string) error
	// PodCleanedUp reports whether an evicted pod's resources are released (its containers
	// gone and its slice destroyed).
	PodCleanedUp(uid string) bool
}

// Reclaimer runs node-level reclaim steps in order (container GC, then image GC) and
// returns what failed; the manager observes again afterwards. For the systemd runtime
// ReclaimContainers removes dead container instances and ReclaimImages has nothing to do.
type Reclaimer func(ctx context.Context, steps []ReclaimStep) error

// Notifier wakes the loop at once when the kernel reports pressure (PSI triggers, cgroup v1
// memory thresholds). Run blocks until ctx ends; it calls wake on every event. It returns an
// error wrapping ErrUnavailable at once when the feature is missing: the manager logs that once
// and relies on the tick.
type Notifier interface {
	// Name names the notifier in logs ("psi", "memcg_threshold").
	Name() string
	// Run delivers events until ctx ends.
	Run(ctx context.Context, wake func()) error
}

// Rearmer is a Notifier whose kernel registrations follow the pods: cgroups that appear and
// go, thresholds computed from the current capacity and usage. Rearm asks it to re-arm at once
// instead of at its next periodic re-arm; it never blocks, and a Rearm while it is not running
// does nothing (Run arms everything when it starts).
type Rearmer interface {
	Rearm()
}

// ManagerOptions configure a Manager. Pods and Evictor are required.
type ManagerOptions struct {
	// Config is the decision configuration.
	Config Config
	// Sources are where node-level signals are read; pod usage is read from the same
	// cgroup root and mode.
	Sources Sources
	// Pods lists the active pods.
	Pods PodLister
	// Evictor evicts them.
	Evictor Evictor
	// Reclaim is node-level reclaim; nil means none (the step is skipped).
	Reclaim Reclaimer
	// Notifiers wake the loop on pressure events; none means polling only.
	Notifiers []Notifier
	// MonitoringInterval is the tick; 0 means DefaultMonitoringInterval.
	MonitoringInterval time.Duration
	// Logger receives state changes; nil discards.
	Logger *slog.Logger
	// BeforeCycle, if set, runs at the start of every Synchronize, in the loop's goroutine (a
	// test seam: the watchdog test blocks in it to hang the loop). The storage measurement
	// goroutine does not run it.
	BeforeCycle func()
	// Clock tells the time and runs the loop's timers; clock.RealClock when nil (tests run the
	// loop under testing/synctest or with a fake clock).
	Clock clock.WithTicker
	// Health receives the loop's liveness (a lease of HealthBound renewed every cycle: the
	// watchdog's view), the freshness of the signals and the node's pressure conditions. Nil
	// means a tracker of the manager's own (Health returns it).
	Health *health.Tracker
	// Observe overrides Sources.Observe (tests, replays).
	Observe func(now time.Time) (Observations, []Unavailable)
	// PodUsage overrides reading a pod's usage from its cgroup (tests); it returns nil for a
	// pod without stats.
	PodUsage func(p ActivePod) *PodUsage
	// ContainerMemory, when set, reads the working set of each container of a pod, Name and
	// Memory set (podstats.Reader over the containers' cgroups), in the order the message is to
	// name them: it names the containers using more than their request in the eviction message
	// and annotations. nil, or an error for a pod, leaves the pod's containers unmeasured (the
	// message names none).
	ContainerMemory func(ctx context.Context, p ActivePod) ([]ContainerUsage, error)
	// Sampled, when set, gives the pods' cgroup usage from the samples another reader of the
	// same cgroups takes every monitoring interval (the stats sampler), so that a cycle that
	// acts on nothing reads no pod cgroup: the pods' usage matters to a decision only when it
	// evicts (ranking, message). A cycle whose decision on the samples would evict or reclaim
	// reads every pod now (PodUsage, ContainerMemory) and decides again on that, so what is
	// acted on is always read at the cycle, as without samples. A pod without a sample taken
	// within SampledMaxAge is read at the cycle.
	Sampled SampledUsage
	// Storage measures each active pod's local storage (emptyDir volumes, container writable
	// layers and logs; NewFSStorage) for local-storage limit eviction and the ranking under
	// disk pressure. Run measures every active pod once per monitoring interval in a goroutine
	// of its own, so a cycle woken by memory pressure never waits for a directory walk; a
	// cycle measures at once only pods not measured yet (new pods, the first cycle). nil means
	// pods read from their cgroup have no storage stats (PodUsage.NoStorageStats).
	Storage PodStorage
	// Metrics, if set, counts evictions by signal and shows the node conditions.
	Metrics Metrics
}

// SampledMaxAge is the oldest sample (in monitoring intervals) a cycle takes from
// ManagerOptions.Sampled: a sampler that samples once per interval always has one that fresh,
// whatever the phase of its ticker against the manager's.
const SampledMaxAge = 1.5

// SampledUsage gives pods' usage from samples of their cgroups taken by another reader
// (internal/podstats.Sampler).
type SampledUsage interface {
	// SampledPodUsage returns the pod's memory working set, process count and containers'
	// working sets (Name and Memory, in ContainerMemory's order) from its last sample of
	// p.CgroupPath, if that was taken at or after since; ok is false otherwise (no sample, an
	// older one, another cgroup, a sample without the process count).
	SampledPodUsage(p ActivePod, since time.Time) (u PodUsage, ok bool)
}

// Metrics is what the manager reports to the metrics registry (*metrics.Metrics). The node
// conditions reach the metrics through the health tracker.
type Metrics interface {
	Evicted(signal string)
}

// EvictionRecord is one eviction the manager carried out.
type EvictionRecord struct {
	// At is when the stop was issued.
	At time.Time `json:"at"`
	// Pod is namespace/name, UID its UID.
	Pod string `json:"pod"`
	UID string `json:"uid"`
	// Signal is the signal acted on.
	Signal Signal `json:"signal"`
	// Message is the pod's status message.
	Message string `json:"message"`
	// Err is the eviction's error, if it failed.
	Err string `json:"error,omitempty"`
}

// Manager is the eviction manager's actuation loop: it observes, calls Decide, reclaims,
// evicts one pod per cycle and keeps the node conditions.
type Manager struct {
	o        ManagerOptions
	log      *slog.Logger
	clock    clock.WithTicker
	health   *health.Tracker
	interval time.Duration
	wakeCh   chan struct{}
	podsCh   chan struct{}

	mu          sync.Mutex
	state       State
	last        *EvictionRecord
	evictions   int
	unavailable map[string]string // signal or pod → reason last logged
	lastDec     Decision
	lastDecAt   time.Time // when lastDec was made; zero before the first cycle

	storageMu    sync.Mutex
	storage      map[string]storageResult // pod UID → its last storage measurement
	storageState map[string]string        // pod UID → storage problem last logged
}

// NewManager returns a manager; Run starts it.
func NewManager(o ManagerOptions) (*Manager, error) {
	if o.Pods == nil || o.Evictor == nil {
		return nil, errors.New("eviction manager: pods and evictor are required")
	}
	if o.MonitoringInterval < 0 {
		return nil, fmt.Errorf("eviction manager: monitoring interval %v is negative", o.MonitoringInterval)
	}
	if o.MonitoringInterval == 0 {
		o.MonitoringInterval = DefaultMonitoringInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Health == nil {
		o.Health = health.New(health.Options{Logger: o.Logger})
	}
	if o.Observe == nil {
		o.Observe = o.Sources.Observe
	}
	m := &Manager{
		o: o, log: o.Logger, clock: o.Clock, health: o.Health, interval: o.MonitoringInterval,
		wakeCh:      make(chan struct{}, 1),
		podsCh:      make(chan struct{}, 1),
		unavailable: map[string]string{},

		storage:      map[string]storageResult{},
		storageState: map[string]string{},
	}
	if o.PodUsage == nil {
		m.o.PodUsage = m.readPodUsage
	}
	m.health.Register(LoopWarnable, SignalsWarnable)
	// The kubelet's pressure conditions exist, false, before the first cycle.
	for _, c := range conditionOrder {
		m.health.SetHealthy(PressureWarnables[c])
	}
	return m, nil
}

// Health returns the tracker the manager reports to.
func (m *Manager) Health() *health.Tracker { return m.health }

// Wake makes the loop run a cycle at once (a pressure event). It never blocks.
func (m *Manager) Wake() {
	select {
	case m.wakeCh <- struct{}{}:
	default:
	}
}

// PodsChanged tells the manager that pods came, went or changed (the pods controller's change
// hook calls it). It never blocks, and calls made before the loop gets to them coalesce into
// one: the loop re-arms the notifiers that implement Rearmer (a new kubepods cgroup gets its
// PSI trigger, cgroup v1 memory thresholds are recomputed from the current capacity and
// usage) at once and runs a cycle at once, or PodsChangedSpacing after the last cycle started
// if that is later, instead of at the notifiers' periodic re-arm (about 10 s) and the next
// tick.
func (m *Manager) PodsChanged() {
	select {
	case m.podsCh <- struct{}{}:
	default:
	}
}

// Run runs the loop until ctx ends, as the kubelet's eviction manager does
// (pkg/kubelet/eviction/eviction_manager.go, Start): a cycle every monitoring interval, at
// once on every pressure event, and at once after PodsChanged (re-arming the notifiers first);
// after an eviction, no sleep: wait for the pod's cleanup (≤ PodCleanupTimeout, polled every
// PodCleanupPoll), then the next cycle.
func (m *Manager) Run(ctx context.Context) {
	m.health.Renew(LoopWarnable, m.HealthBound())
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.o.Storage != nil {
		wg.Go(func() { m.storageLoop(ctx) })
	}
	for _, n := range m.o.Notifiers {
		wg.Go(func() {
			if err := n.Run(ctx, m.Wake); err != nil && ctx.Err() == nil {
				// A missing kernel feature is a state: logged once, the tick goes on.
				m.log.Warn("pressure notifier unavailable, relying on the monitoring interval",
					"notifier", n.Name(), "interval", m.interval, "error", err)
			}
		})
	}
	t := m.clock.NewTimer(m.interval)
	defer t.Stop()
	for {
		// A pod change noticed while the last cycle ran or while an evicted pod was cleaned
		// up (the eviction itself is one) is handled by this cycle: no extra cycle for it.
		select {
		case <-m.podsCh:
			m.rearm()
		default:
		}
		started := m.clock.Now()
		evicted := m.Synchronize(ctx)
		if len(evicted) > 0 {
			m.waitForCleanup(ctx, evicted)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if !m.waitForCycle(ctx, t, started) {
			return
		}
	}
}

// waitForCycle waits until the next cycle is due: the monitoring interval after the last
// cycle, a pressure event, or a pod change (re-arming the notifiers at once; the cycle comes
// PodsChangedSpacing after the last one started at the earliest). It returns false when ctx
// ended.
func (m *Manager) waitForCycle(ctx context.Context, t clock.Timer, lastStarted time.Time) bool {
	t.Reset(m.interval)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-m.wakeCh:
			m.log.Debug("eviction loop woken by a pressure event")
			return true
		case <-m.podsCh:
			m.log.Debug("eviction loop woken by a pod change")
			m.rearm()
			if wait := PodsChangedSpacing - m.clock.Since(lastStarted); wait > 0 {
				t.Reset(wait)
				continue
			}
			return true
		}
	}
}

// rearm asks every notifier that can to re-arm now.
func (m *Manager) rearm() {
	n := 0
	for _, nt := range m.o.Notifiers {
		if r, ok := nt.(Rearmer); ok {
			r.Rearm()
			n++
		}
	}
	if n > 0 {
		m.log.Debug("pods changed, re-arming pressure notifiers", "notifiers", n)
	}
}

// waitForCleanup is the kubelet's waitForPodsCleanup: poll until every evicted pod is
// cleaned up or the timeout passes.
func (m *Manager) waitForCleanup(ctx context.Context, uids []string) {
	deadline := m.clock.NewTimer(PodCleanupTimeout)
	defer deadline.Stop()
	poll := m.clock.NewTicker(PodCleanupPoll)
	defer poll.Stop()
	for {
		done := true
		for _, uid := range uids {
			done = done && m.o.Evictor.PodCleanedUp(uid)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C():
			m.log.Warn("evicted pods not cleaned up in time, continuing", "pod_uids", uids, "timeout", PodCleanupTimeout)
			return
		case <-poll.C():
		}
	}
}

// Synchronize runs one cycle and returns the UIDs of the pods it evicted. Run calls it; it is
// exported for tests and replays.
func (m *Manager) Synchronize(ctx context.Context) []string {
	if m.o.BeforeCycle != nil {
		m.o.BeforeCycle()
	}
	now := m.clock.Now()
	obs, missing := m.o.Observe(now)
	m.noteUnavailable(missing)
	active := m.o.Pods.ActivePods()
	sampled := m.o.Sampled != nil
	stats := m.podStats(ctx, active, now, sampled)
	m.forgetStorage(active)

	// Only Synchronize changes the state, from the loop's goroutine.
	m.mu.Lock()
	state := m.state
	m.mu.Unlock()
	d, next := Decide(state, m.o.Config, obs, stats, now)
	if sampled && (d.Reclaim != "" || len(d.LocalStorage) > 0) {
		// Acting: decide again on every pod read now (Decide is pure: the same state in).
		stats = m.podStats(ctx, active, now, false)
		d, next = Decide(state, m.o.Config, obs, stats, now)
	}
	m.mu.Lock()
	m.state = next
	m.lastDec = d
	m.lastDecAt = now
	m.mu.Unlock()
	m.setConditions(d.NodeConditions)
	defer m.cycleDone()

	if len(d.LocalStorage) > 0 {
		var uids []string
		for _, ev := range d.LocalStorage {
			if m.evict(ctx, ev) {
				uids = append(uids, string(ev.Pod.UID))
			}
		}
		return uids
	}
	if d.Reclaim == "" {
		return nil
	}
	if len(d.NodeReclaim) > 0 && m.o.Reclaim != nil {
		err := m.o.Reclaim(ctx, d.NodeReclaim)
		if err != nil {
			m.log.Warn("node-level reclaim failed", "signal", string(d.Signal), "steps", d.NodeReclaim, "error", err)
		}
		after, _ := m.o.Observe(m.clock.Now())
		if ReclaimedEnough(m.o.Config, after) {
			m.log.Info("node-level reclaim relieved the pressure, no pod evicted", "signal", string(d.Signal), "steps", d.NodeReclaim)
			return nil
		}
	}
	if d.Evict == nil {
		if len(d.Ranking) > 0 {
			m.log.Warn("pressure but every pod is critical, none evicted", "signal", string(d.Signal), "resource", string(d.Reclaim), "pods", len(d.Ranking))
		}
		return nil
	}
	if m.evict(ctx, *d.Evict) {
		return []string{string(d.Evict.Pod.UID)}
	}
	return nil
}

// evict evicts one pod; it refuses a critical pod whatever the decision says.
func (m *Manager) evict(ctx context.Context, ev Eviction) bool {
	pod := ev.Pod
	if IsCritical(pod, m.o.Config.PriorityClasses) {
		m.log.Error("refusing to evict a critical pod", "pod", ev.Name, "pod_uid", string(pod.UID), "signal", string(ev.Signal))
		return false
	}
	rec := EvictionRecord{At: m.clock.Now(), Pod: ev.Name, UID: string(pod.UID), Signal: ev.Signal, Message: ev.Message}
	m.log.Warn("evicting pod", "pod", ev.Name, "pod_uid", string(pod.UID), "signal", string(ev.Signal),
		"grace_period", ev.GracePeriod, "message", ev.Message, "annotations", ev.Annotations)
	// Recorded when the stop is issued, so STATUS= and the API show it while the pod stops.
	m.mu.Lock()
	m.last = &rec
	m.evictions++
	m.mu.Unlock()
	err := m.o.Evictor.EvictPod(ctx, pod, ev.GracePeriod, ev.Message, ev.Annotations)
	if err != nil {
		m.log.Error("pod eviction failed", "pod", ev.Name, "pod_uid", string(pod.UID), "signal", string(ev.Signal), "error", err)
		m.mu.Lock()
		failed := rec
		failed.Err = err.Error()
		m.last = &failed
		m.evictions--
		m.mu.Unlock()
		return false
	}
	m.log.Info("pod evicted", "pod", ev.Name, "pod_uid", string(pod.UID), "signal", string(ev.Signal),
		"duration", m.clock.Since(rec.At))
	if m.o.Metrics != nil {
		m.o.Metrics.Evicted(string(ev.Signal))
	}
	return true
}

// cycleDone renews the loop's lease: the watchdog pings systemd only while it is valid.
func (m *Manager) cycleDone() { m.health.Renew(LoopWarnable, m.HealthBound()) }

// setConditions reports the node conditions of a decision to the health tracker, which keeps
// their transitions and logs each change.
func (m *Manager) setConditions(now []v1.NodeConditionType) {
	for _, c := range conditionOrder {
		w := PressureWarnables[c]
		if slices.Contains(now, c) {
			m.health.SetUnhealthy(w, w.Condition.TrueMessage)
		} else {
			m.health.SetHealthy(w)
		}
	}
}

// noteUnavailable logs a signal or pod usage that became unavailable, or available again, once
// per change, and reports the signals' freshness: SignalsWarnable is renewed for HealthBound
// while every signal reads (a signal the node does not have, ErrUnavailable, is a state, not
// a failure) and unhealthy, naming the signals, while one cannot be read.
func (m *Manager) noteUnavailable(missing []Unavailable) {
	var unreadable []string
	for _, u := range missing {
		if u.Signal != "" && !errors.Is(u.Err, ErrUnavailable) {
			unreadable = append(unreadable, fmt.Sprintf("%s: %v", u.Signal, u.Err))
		}
	}
	if len(unreadable) > 0 {
		m.health.SetUnhealthy(SignalsWarnable, strings.Join(unreadable, "; "))
	} else {
		m.health.Renew(SignalsWarnable, m.HealthBound())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, u := range missing {
		k := string(u.Signal)
		if k == "" {
			k = "pod " + u.Pod
		}
		seen[k] = true
		reason := u.Err.Error()
		if m.unavailable[k] != reason {
			m.unavailable[k] = reason
			if errors.Is(u.Err, ErrUnavailable) {
				m.log.Info("eviction signal not observed", "signal", string(u.Signal), "pod_cgroup", u.Pod, "reason", reason)
			} else {
				m.log.Warn("eviction signal unreadable", "signal", string(u.Signal), "pod_cgroup", u.Pod, "error", reason)
			}
		}
	}
	for k := range m.unavailable {
		if !seen[k] && !strings.HasPrefix(k, "pod ") {
			delete(m.unavailable, k)
			m.log.Info("eviction signal observed again", "signal", k)
		}
	}
}

// readPodUsage reads a pod's memory working set and process count from its cgroup; a pod
// without a cgroup or whose cgroup is incomplete has no stats. Without a PodStorage its
// local storage is not measured.
func (m *Manager) readPodUsage(p ActivePod) *PodUsage {
	if p.CgroupPath == "" {
		return nil
	}
	u, err := ReadPodUsage(m.o.Sources.CgroupRoot, m.o.Sources.Mode, p.CgroupPath)
	if err != nil {
		m.log.Debug("pod usage unavailable", "pod_uid", string(p.Pod.UID), "pod_cgroup", p.CgroupPath, "error", err)
		return nil
	}
	u.NoStorageStats = m.o.Storage == nil
	return &u
}

// Conditions returns the node conditions true now (MemoryPressure, DiskPressure, PIDPressure
// order), as the health tracker has them.
func (m *Manager) Conditions() []v1.NodeConditionType { return PressureConditions(m.health.State()) }

// LastEviction returns the last eviction attempted, if any.
func (m *Manager) LastEviction() (EvictionRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return EvictionRecord{}, false
	}
	return *m.last, true
}

// LastDecision returns the decision of the last cycle (for `slicectl explain eviction`).
func (m *Manager) LastDecision() Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastDec
}

// LastDecisionAt returns the decision of the last cycle and when it was made (zero before the
// first cycle).
func (m *Manager) LastDecisionAt() (Decision, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastDec, m.lastDecAt
}

// Summary is a short line for STATUS=: the node conditions and the last eviction, e.g.
// "no node pressure; 2 evictions, last default/hog (memory.available) at 07:41:03".
func (m *Manager) Summary() string {
	conds := m.Conditions()
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	if len(conds) == 0 {
		b.WriteString("no node pressure")
	} else {
		names := make([]string, len(conds))
		for i, c := range conds {
			names[i] = string(c)
		}
		b.WriteString(strings.Join(names, ", "))
	}
	switch {
	case m.last == nil:
		b.WriteString("; no evictions")
	default:
		fmt.Fprintf(&b, "; %d evictions, last %s (%s) at %s", m.evictions, m.last.Pod, m.last.Signal, m.last.At.UTC().Format(time.TimeOnly))
		if m.last.Err != "" {
			b.WriteString(" failed")
		}
	}
	return b.String()
}

// HealthBound is the lease of LoopWarnable each cycle renews: three monitoring intervals,
// plus the longest stop of an evicted pod (the eviction grace period: 1 s, or
// MaxPodGracePeriod for soft thresholds), plus the cleanup wait after it. A loop that
// completes no cycle within it is unhealthy, and the watchdog stops pinging systemd.
func (m *Manager) HealthBound() time.Duration {
	return 3*m.interval + max(m.o.Config.MaxPodGracePeriod, ImmediateGracePeriod) + PodCleanupTimeout
}

// Thresholds returns the configured thresholds (for the notifiers' re-arming).
func (m *Manager) Thresholds() []Threshold { return slices.Clone(m.o.Config.Thresholds) }
