package eviction

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// This file is the kubelet's core predicates (pkg/kubelet/eviction/helpers.go: thresholdsMet,
// thresholdsUpdatedStats, thresholdsMetGracePeriod, nodeConditions...), as pure functions on
// values.

// ThresholdsMet returns the thresholds whose signal is observed and whose quantity (plus the
// minimum reclaim when enforceMinReclaim) is strictly greater than what is available — equal
// is not met. Thresholds without an observation are skipped (the kubelet logs them); the
// second result lists their signals, each once, in threshold order.
func ThresholdsMet(thresholds []Threshold, obs Observations, enforceMinReclaim bool) (met []Threshold, unobserved []Signal) {
	met = []Threshold{}
	for _, t := range thresholds {
		if t.Operator == "" {
			// UpdateContainerFsThresholds' copy of an absent threshold: never met, and not
			// worth reporting as unobserved.
			continue
		}
		o, ok := obs[t.Signal]
		if !ok {
			if !slices.Contains(unobserved, t.Signal) {
				unobserved = append(unobserved, t.Signal)
			}
			continue
		}
		q := GetThresholdQuantity(t.Value, &o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(*GetThresholdQuantity(*t.MinReclaim, &o.Capacity))
		}
		if q.Cmp(o.Available) > 0 {
			met = append(met, t)
		}
	}
	return met, unobserved
}

// thresholdsMet is ThresholdsMet without the unobserved list, under the kubelet's name.
func thresholdsMet(thresholds []Threshold, obs Observations, enforceMinReclaim bool) []Threshold {
	met, _ := ThresholdsMet(thresholds, obs, enforceMinReclaim)
	return met
}

// ObservedThreshold is a threshold with a time: when it was first met (State.FirstObservedAt).
type ObservedThreshold struct {
	// Threshold is the threshold.
	Threshold Threshold
	// At is when it was first observed met.
	At time.Time
}

// sameThreshold is the identity of a threshold for the first-observed bookkeeping. The
// kubelet keys a map by the whole Threshold struct, pointers included, which works because
// its thresholds are parsed once; comparing values (signal, operator, grace, value and
// minimum reclaim) gives the same answer for thresholds from one configuration and also for
// a configuration re-parsed between calls.
func sameThreshold(a, b Threshold) bool {
	if a.Signal != b.Signal || a.Operator != b.Operator || a.GracePeriod != b.GracePeriod || !compareThresholdValue(a.Value, b.Value) {
		return false
	}
	if (a.MinReclaim == nil) != (b.MinReclaim == nil) {
		return false
	}
	return a.MinReclaim == nil || compareThresholdValue(*a.MinReclaim, *b.MinReclaim)
}

// compareThresholdValue reports whether two values are logically equal: both quantities
// equal by Cmp, or both percentages equal.
func compareThresholdValue(a, b ThresholdValue) bool {
	if a.Quantity != nil {
		return b.Quantity != nil && a.Quantity.Cmp(*b.Quantity) == 0
	}
	return b.Quantity == nil && a.Percentage == b.Percentage
}

// thresholdsFirstObservedAt keeps the old time of each threshold still met and stamps new
// ones with now; thresholds no longer met are dropped.
func thresholdsFirstObservedAt(met []Threshold, last []ObservedThreshold, now time.Time) []ObservedThreshold {
	out := make([]ObservedThreshold, 0, len(met))
	for _, t := range met {
		at := now
		for _, l := range last {
			if sameThreshold(l.Threshold, t) {
				at = l.At
				break
			}
		}
		out = append(out, ObservedThreshold{Threshold: t, At: at})
	}
	return out
}

// thresholdsMetGracePeriod keeps the thresholds met for at least their grace period
// (now − firstObservedAt >= GracePeriod; a hard threshold's is 0).
func thresholdsMetGracePeriod(observedAt []ObservedThreshold, now time.Time) []Threshold {
	out := []Threshold{}
	for _, o := range observedAt {
		if now.Sub(o.At) < o.Threshold.GracePeriod {
			continue
		}
		out = append(out, o.Threshold)
	}
	return out
}

// nodeConditions returns the distinct node conditions of the thresholds, in the order
// MemoryPressure, DiskPressure, PIDPressure.
func nodeConditions(thresholds []Threshold) []v1.NodeConditionType {
	seen := map[v1.NodeConditionType]bool{}
	for _, t := range thresholds {
		if c, ok := signalToNodeCondition[t.Signal]; ok {
			seen[c] = true
		}
	}
	out := []v1.NodeConditionType{}
	for _, c := range conditionOrder {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out
}

// nodeConditionsLastObservedAt stamps the conditions seen now with now; the others keep
// their old time.
func nodeConditionsLastObservedAt(conds []v1.NodeConditionType, last map[v1.NodeConditionType]time.Time, now time.Time) map[v1.NodeConditionType]time.Time {
	out := make(map[v1.NodeConditionType]time.Time, len(last)+len(conds))
	for c, at := range last {
		out[c] = at
	}
	for _, c := range conds {
		out[c] = now
	}
	return out
}

// nodeConditionsObservedSince keeps the conditions last observed less than period ago: the
// pressure transition period, the hysteresis that keeps a condition true for a while after
// its thresholds stop being met. The result is in the fixed condition order.
func nodeConditionsObservedSince(observedAt map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	out := []v1.NodeConditionType{}
	for _, c := range conditionOrder {
		if at, ok := observedAt[c]; ok && now.Sub(at) < period {
			out = append(out, c)
		}
	}
	return out
}

// thresholdsUpdatedStats keeps a threshold when its signal had no previous observation, the
// observation has no time, or it is newer than the previous one: never act twice on the same
// stale sample.
func thresholdsUpdatedStats(thresholds []Threshold, obs, last Observations) []Threshold {
	out := []Threshold{}
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, found := last[t.Signal]
		if !found || o.Time.IsZero() || o.Time.After(l.Time) {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds returns a ∪ b without duplicates (hasThreshold: signal, operator, grace
// period and value; the minimum reclaim is ignored, as in the kubelet).
func mergeThresholds(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !hasThreshold(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func hasThreshold(list []Threshold, t Threshold) bool {
	for _, l := range list {
		if l.GracePeriod == t.GracePeriod && l.Operator == t.Operator && l.Signal == t.Signal && compareThresholdValue(l.Value, t.Value) {
			return true
		}
	}
	return false
}

// sortByEvictionPriority orders thresholds the way the kubelet's byEvictionPriority means
// to: memory signals (memory.available, allocatableMemory.available) first, signals without
// a resource last, everything else in between.
//
// Ties: the kubelet's Less ("i is memory, or j has no resource") is not a strict weak
// ordering and it sorts with the unstable sort.Sort, so the order among non-memory signals
// is undefined there. Here the sort is stable with three ranks (memory, other, no
// resource): ties keep their input order (hard thresholds before soft, as parsed), which is
// one of the orders the kubelet can produce.
func sortByEvictionPriority(thresholds []Threshold) []Threshold {
	out := slices.Clone(thresholds)
	rank := func(t Threshold) int {
		switch {
		case t.Signal == SignalMemoryAvailable || t.Signal == SignalAllocatableMemoryAvailable:
			return 0
		case signalToResource[t.Signal] == "":
			return 2
		default:
			return 1
		}
	}
	slices.SortStableFunc(out, func(a, b Threshold) int { return rank(a) - rank(b) })
	return out
}

// getReclaimableThreshold returns the first threshold whose signal maps to a resource, with
// that resource.
func getReclaimableThreshold(thresholds []Threshold) (Threshold, v1.ResourceName, bool) {
	for _, t := range thresholds {
		if r, ok := signalToResource[t.Signal]; ok {
			return t, r, true
		}
	}
	return Threshold{}, "", false
}
