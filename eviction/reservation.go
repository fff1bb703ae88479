package eviction

import v1 "k8s.io/api/core/v1"

// HardEvictionReservation is the kubelet's hardEvictionReservation
// (pkg/kubelet/cm/helpers.go). thresholds must be those of evictionHard alone, as the kubelet
// parses them for its container manager: soft thresholds never reserve, even with a 0s grace
// period. Only hard LessThan thresholds of
// memory.available (→ memory) and nodefs.available (→ ephemeral-storage) count, resolved
// against capacity with GetThresholdQuantity (float32 percentages). The scheduler's view of
// allocatable subtracts it; kubepods.slice's limits do not.
func HardEvictionReservation(thresholds []Threshold, capacity v1.ResourceList) v1.ResourceList {
	rl := v1.ResourceList{}
	for _, t := range thresholds {
		if !t.IsHard() || t.Operator != OpLessThan {
			continue
		}
		var name v1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = v1.ResourceMemory
		case SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := capacity[name]
		if !ok {
			continue
		}
		q := GetThresholdQuantity(t.Value, &c)
		if q != nil && !q.IsZero() {
			rl[name] = *q
		}
	}
	return rl
}
