package eviction

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultPressureTransitionPeriod is the kubelet's evictionPressureTransitionPeriod default,
// also used for 0.
const DefaultPressureTransitionPeriod = 5 * time.Minute

// Config is what a decision needs from the configuration.
type Config struct {
	// Thresholds are the parsed thresholds (config.Config.EvictionThresholds).
	Thresholds []Threshold
	// PressureTransitionPeriod keeps a node condition true this long after its thresholds
	// stop being met; 0 means DefaultPressureTransitionPeriod.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod is the grace period of soft-threshold evictions (the kubelet's
	// evictionMaxPodGracePeriod; 0 by default).
	MaxPodGracePeriod time.Duration
	// PriorityClasses resolves priorityClassName for pods without spec.priority, besides the
	// built-in classes.
	PriorityClasses map[string]int32
	// LocalStorageCapacityIsolation enables local-storage limit eviction (the kubelet's
	// default is on).
	LocalStorageCapacityIsolation bool
}

// State is what one decision hands to the next (the eviction manager's fields). The zero
// value is the state before the first decision. Decide never modifies the State it is given.
type State struct {
	// ThresholdsMet are the thresholds acted on last time (past their grace period); they
	// stay met until available >= threshold + minimum reclaim (the hysteresis).
	ThresholdsMet []Threshold
	// FirstObservedAt is when each currently met threshold was first met.
	FirstObservedAt []ObservedThreshold
	// ConditionsLastObservedAt is when each node condition was last observed.
	ConditionsLastObservedAt map[v1.NodeConditionType]time.Time
	// LastObservations are the observations of the previous decision.
	LastObservations Observations
	// NodeConditions are the node conditions true now, in the order MemoryPressure,
	// DiskPressure, PIDPressure. Feed them to admission (internal/pods/admission.NodeState).
	NodeConditions []v1.NodeConditionType
}

// ReclaimStep is a node-level reclaim function to run before evicting pods.
type ReclaimStep string

// The node-level reclaim functions (pkg/kubelet/eviction/helpers.go,
// buildSignalToNodeReclaimFuncs).
const (
	// ReclaimContainers is container GC removing every unused container, including those of
	// pods not yet deleted (DeleteAllUnusedContainers).
	ReclaimContainers ReclaimStep = "DeleteAllUnusedContainers"
	// ReclaimImages is image GC deleting every unused image older than its minimum age,
	// ignoring the low threshold (DeleteUnusedImages).
	ReclaimImages ReclaimStep = "DeleteUnusedImages"
)

// nodeReclaimSteps is buildSignalToNodeReclaimFuncs for the single-filesystem layout (no
// dedicated image filesystem): every filesystem signal first removes unused containers, then
// unused images. Memory and PID signals have none.
func nodeReclaimSteps(s Signal) []ReclaimStep {
	switch s {
	case SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable, SignalImageFsInodesFree,
		SignalContainerFsAvailable, SignalContainerFsInodesFree:
		return []ReclaimStep{ReclaimContainers, ReclaimImages}
	}
	return nil
}

// ThresholdReport is a threshold met this round, with the numbers that met it.
type ThresholdReport struct {
	// Threshold is the threshold.
	Threshold Threshold `json:"-"`
	// Signal is its signal.
	Signal Signal `json:"signal"`
	// Hard is true for a threshold without grace period.
	Hard bool `json:"hard"`
	// GracePeriod is the soft threshold's grace period.
	GracePeriod time.Duration `json:"gracePeriod,omitempty"`
	// Quantity is the threshold as an amount (GetThresholdQuantity of the capacity).
	Quantity resource.Quantity `json:"quantity"`
	// MinReclaim is the minimum reclaim as an amount, when set: a threshold acted on stays
	// met until available >= Quantity + MinReclaim.
	MinReclaim *resource.Quantity `json:"minReclaim,omitempty"`
	// Available and Capacity are the observation.
	Available resource.Quantity `json:"available"`
	Capacity  resource.Quantity `json:"capacity"`
	// FirstObservedAt is when the threshold was first met.
	FirstObservedAt time.Time `json:"firstObservedAt"`
	// Actionable is true once the grace period has passed (always, for a hard threshold).
	Actionable bool `json:"actionable"`
}

// Decision is the outcome of one synchronize step.
type Decision struct {
	// ThresholdsMet are the thresholds met now (with the hysteresis), before the grace
	// period filter: they set the node conditions.
	ThresholdsMet []ThresholdReport
	// Unobserved are the signals with thresholds but no observation (skipped).
	Unobserved []Signal
	// NodeConditions are the node conditions true now (with the transition period).
	NodeConditions []v1.NodeConditionType
	// LocalStorage are local-storage limit evictions; when there are any, the threshold path
	// is skipped this round (the kubelet returns them at once).
	LocalStorage []Eviction
	// Signal is the signal of the threshold acted on ("" when none is actionable).
	Signal Signal
	// Threshold is that threshold.
	Threshold *Threshold
	// Reclaim is the starved resource ("" when nothing is to be reclaimed).
	Reclaim v1.ResourceName
	// NodeReclaim are the node-level reclaim functions to run first, in order. After running
	// them the caller observes again; if ReclaimedEnough says so, no pod is evicted this
	// round. Evict is what happens otherwise.
	NodeReclaim []ReclaimStep
	// Ranking is every active pod in eviction order for Reclaim.
	Ranking []Candidate
	// Evict is the pod to evict (the first non-critical pod of Ranking), or nil.
	Evict *Eviction
}

// Decide is one step of the kubelet's synchronize (pkg/kubelet/eviction/eviction_manager.go)
// without I/O, at now:
//
//  1. thresholds met by obs, plus — the hysteresis — last round's thresholds still met with
//     their minimum reclaim added;
//  2. when each was first met; node conditions from them (before the grace period, so a
//     soft threshold sets its condition at once), kept for the pressure transition period;
//  3. the thresholds past their grace period, kept for the next round, minus those whose
//     observation is not newer than the last round's;
//  4. local-storage limit evictions, which win when there are any;
//  5. the threshold to act on (memory first), its resource, the node-level reclaim to try
//     first, the ranking and the pod to evict: the first that is not critical, with a 1 s
//     grace period for a hard threshold or MaxPodGracePeriod for a soft one, and the
//     kubelet's message and annotations.
//
// With no thresholds and local-storage isolation off there is nothing to decide: the state is
// returned unchanged.
func Decide(state State, cfg Config, obs Observations, pods []PodStats, now time.Time) (Decision, State) {
	if len(cfg.Thresholds) == 0 && !cfg.LocalStorageCapacityIsolation {
		return Decision{NodeConditions: slices.Clone(state.NodeConditions)}, state
	}
	period := cfg.PressureTransitionPeriod
	if period == 0 {
		period = DefaultPressureTransitionPeriod
	}

	met, unobserved := ThresholdsMet(cfg.Thresholds, obs, false)
	if len(state.ThresholdsMet) > 0 {
		met = mergeThresholds(met, thresholdsMet(state.ThresholdsMet, obs, true))
	}
	firstObservedAt := thresholdsFirstObservedAt(met, state.FirstObservedAt, now)
	condsLastObservedAt := nodeConditionsLastObservedAt(nodeConditions(met), state.ConditionsLastObservedAt, now)
	conds := nodeConditionsObservedSince(condsLastObservedAt, period, now)
	actionable := thresholdsMetGracePeriod(firstObservedAt, now)

	next := State{
		ThresholdsMet:            actionable,
		FirstObservedAt:          firstObservedAt,
		ConditionsLastObservedAt: condsLastObservedAt,
		LastObservations:         maps.Clone(obs),
		NodeConditions:           conds,
	}
	d := Decision{Unobserved: unobserved, NodeConditions: slices.Clone(conds)}
	for _, o := range firstObservedAt {
		t := o.Threshold
		ob := obs[t.Signal]
		d.ThresholdsMet = append(d.ThresholdsMet, ThresholdReport{
			Threshold:       t,
			Signal:          t.Signal,
			Hard:            t.IsHard(),
			GracePeriod:     t.GracePeriod,
			Quantity:        *GetThresholdQuantity(t.Value, &ob.Capacity),
			Available:       ob.Available.DeepCopy(),
			Capacity:        ob.Capacity.DeepCopy(),
			FirstObservedAt: o.At,
			Actionable:      now.Sub(o.At) >= t.GracePeriod,
		})
		if t.MinReclaim != nil {
			d.ThresholdsMet[len(d.ThresholdsMet)-1].MinReclaim = GetThresholdQuantity(*t.MinReclaim, &ob.Capacity)
		}
	}

	fresh := thresholdsUpdatedStats(actionable, obs, state.LastObservations)

	if cfg.LocalStorageCapacityIsolation {
		if ev := LocalStorageEvictions(pods, cfg.PriorityClasses); len(ev) > 0 {
			d.LocalStorage = ev
			return d, next
		}
	}
	if len(fresh) == 0 {
		return d, next
	}
	sorted := sortByEvictionPriority(fresh)
	t, res, ok := getReclaimableThreshold(sorted)
	if !ok {
		return d, next
	}
	d.Signal, d.Threshold, d.Reclaim = t.Signal, &t, res
	d.NodeReclaim = nodeReclaimSteps(t.Signal)
	if len(pods) == 0 {
		return d, next
	}
	ranking, ok := Rank(t.Signal, pods, cfg.PriorityClasses)
	if !ok {
		return d, next
	}
	d.Ranking = ranking
	usage := make(map[*v1.Pod]*PodUsage, len(pods))
	for _, p := range pods {
		usage[p.Pod] = p.Usage
	}
	grace := ImmediateGracePeriod
	if !t.IsHard() {
		grace = cfg.MaxPodGracePeriod
	}
	for _, c := range ranking {
		if c.Critical {
			continue // evictPod refuses critical pods; the kubelet tries the next one
		}
		msg, ann := evictionMessage(res, c.Pod, usage[c.Pod], sorted, obs)
		d.Evict = &Eviction{Pod: c.Pod, Name: c.Name, Signal: t.Signal, GracePeriod: grace, Message: msg, Annotations: ann}
		break
	}
	return d, next
}

// ReclaimedEnough reports whether, after node-level reclaim, observations show no threshold
// of cfg met even with the minimum reclaim added: then no pod is evicted this round.
func ReclaimedEnough(cfg Config, obs Observations) bool {
	return len(thresholdsMet(cfg.Thresholds, obs, true)) == 0
}

// HasCondition reports whether conds contains c.
func HasCondition(conds []v1.NodeConditionType, c v1.NodeConditionType) bool {
	return slices.Contains(conds, c)
}
