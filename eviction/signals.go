package eviction

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The resources the eviction manager reclaims besides the core ones: the kubelet uses these
// names internally for inode and PID pressure (pkg/kubelet/eviction/api).
const (
	// ResourceInodes is local-disk inodes.
	ResourceInodes v1.ResourceName = "inodes"
	// ResourcePIDs is process IDs.
	ResourcePIDs v1.ResourceName = "pids"
)

// signalToResource is the kubelet's signalToResource: the resource a signal starves, which
// picks the ranking and names it in the eviction message.
var signalToResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:            v1.ResourceMemory,
	SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:           ResourceInodes,
	SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	SignalImageFsInodesFree:          ResourceInodes,
	SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	SignalContainerFsInodesFree:      ResourceInodes,
	SignalPIDAvailable:               ResourcePIDs,
}

// signalToNodeCondition is the kubelet's signalToNodeCondition.
var signalToNodeCondition = map[Signal]v1.NodeConditionType{
	SignalMemoryAvailable:            v1.NodeMemoryPressure,
	SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	SignalNodeFsAvailable:            v1.NodeDiskPressure,
	SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	SignalImageFsAvailable:           v1.NodeDiskPressure,
	SignalImageFsInodesFree:          v1.NodeDiskPressure,
	SignalContainerFsAvailable:       v1.NodeDiskPressure,
	SignalContainerFsInodesFree:      v1.NodeDiskPressure,
	SignalPIDAvailable:               v1.NodePIDPressure,
}

// conditionOrder is the order node conditions are reported in (the kubelet keeps them in a
// map; a fixed order makes output and admission messages stable).
var conditionOrder = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// ResourceForSignal returns the resource a signal starves and whether the signal has one.
func ResourceForSignal(s Signal) (v1.ResourceName, bool) {
	r, ok := signalToResource[s]
	return r, ok
}

// ConditionForSignal returns the node condition a met threshold of s sets.
func ConditionForSignal(s Signal) (v1.NodeConditionType, bool) {
	c, ok := signalToNodeCondition[s]
	return c, ok
}

// Observation is one measurement of a signal: how much is available out of what capacity,
// and when it was measured. A zero Time means "always fresh" (thresholdsUpdatedStats keeps it).
type Observation struct {
	// Available is what is left (bytes, inodes or PIDs).
	Available resource.Quantity `json:"available"`
	// Capacity is the total the percentages of thresholds apply to.
	Capacity resource.Quantity `json:"capacity"`
	// Time is when the numbers were read.
	Time time.Time `json:"time,omitzero"`
}

// Observations are the signals observed in one round. A signal without an entry was not
// observed; thresholds on it are skipped, never met.
type Observations map[Signal]Observation

// ErrUnavailable is wrapped by every reader error that means "this machine does not offer
// the signal" (a missing file, a cgroup without the controller, no memory limit): a state to
// log once, not a failure.
var ErrUnavailable = errors.New("signal unavailable")

// Unavailable records why a signal or a pod's usage could not be observed.
type Unavailable struct {
	// Signal is the signal, or "" for a pod's usage.
	Signal Signal
	// Pod names the pod's cgroup for pod usage.
	Pod string
	// Err says why; errors.Is(Err, ErrUnavailable) separates a missing feature from a
	// malformed file.
	Err error
}

// String is "signal: reason" or "pod <cgroup>: reason", for a log line.
func (u Unavailable) String() string {
	if u.Signal != "" {
		return fmt.Sprintf("%s: %v", u.Signal, u.Err)
	}
	return fmt.Sprintf("pod %s: %v", u.Pod, u.Err)
}

// newObservation builds an observation from byte/count values; available is clamped to
// [0, capacity] so a racy read never produces a negative signal.
func newObservation(available, capacity int64, format resource.Format, now time.Time) Observation {
	available = max(available, 0)
	return Observation{
		Available: *resource.NewQuantity(available, format),
		Capacity:  *resource.NewQuantity(capacity, format),
		Time:      now,
	}
}
