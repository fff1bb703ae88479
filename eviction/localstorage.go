package eviction

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The signal names the kubelet's eviction counter uses for local-storage limit evictions.
const (
	// SignalEmptyDirLimit is an emptyDir volume above its sizeLimit.
	SignalEmptyDirLimit Signal = "emptydirfs.limit"
	// SignalPodEphemeralLimit is a pod above the sum of its containers' ephemeral-storage limits.
	SignalPodEphemeralLimit Signal = "ephemeralpodfs.limit"
	// SignalContainerEphemeralLimit is a container above its ephemeral-storage limit.
	SignalContainerEphemeralLimit Signal = "ephemeralcontainerfs.limit"
)

// ImmediateGracePeriod is the grace period of hard-threshold and local-storage evictions
// (the kubelet's immediateEvictionGracePeriodSeconds).
const ImmediateGracePeriod = time.Second

// Eviction is one pod to evict: stop it with GracePeriod, then mark it Failed with reason
// "Evicted" and Message, and record an event with Annotations.
type Eviction struct {
	// Pod is the pod.
	Pod *v1.Pod `json:"-"`
	// Name is namespace/name.
	Name string `json:"pod"`
	// Signal is the threshold's signal, or one of the local-storage limit signals.
	Signal Signal `json:"signal"`
	// GracePeriod overrides the pod's termination grace period.
	GracePeriod time.Duration `json:"gracePeriod"`
	// Message is the kubelet's message, trailing space included.
	Message string `json:"message"`
	// Annotations are the eviction event's annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LocalStorageEvictions is the kubelet's localStorageEviction
// (pkg/kubelet/eviction/eviction_manager.go): for each pod
// with stats, in order, the first rule that fires evicts it with a 1 s grace period:
//  1. an emptyDir volume with sizeLimit > 0 using more than it;
//  2. the pod's ephemeral storage above PodLimits' ephemeral-storage (the sum of the
//     containers that declare a limit);
//  3. a container whose writable layer plus logs exceed its ephemeral-storage limit (the
//     single-filesystem layout; with a dedicated image filesystem the kubelet counts logs
//     only, a layout slicelet does not have).
//
// Several pods can be evicted in one round. Critical pods and pods whose storage was not
// measured (PodUsage.NoStorageStats) are never returned.
func LocalStorageEvictions(pods []PodStats, classes map[string]int32) []Eviction {
	var out []Eviction
	for _, p := range pods {
		if p.Usage == nil || p.Usage.NoStorageStats || IsCritical(p.Pod, classes) {
			continue
		}
		sig, msg, ok := localStorageViolation(p.Pod, p.Usage)
		if !ok {
			continue
		}
		out = append(out, Eviction{
			Pod:         p.Pod,
			Name:        podName(p.Pod),
			Signal:      sig,
			GracePeriod: ImmediateGracePeriod,
			Message:     msg,
		})
	}
	return out
}

func localStorageViolation(pod *v1.Pod, u *PodUsage) (Signal, string, bool) {
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Sign() != 1 {
			continue
		}
		used, ok := u.Volumes[vol.Name]
		if ok && used.Cmp(*vol.EmptyDir.SizeLimit) > 0 {
			return SignalEmptyDirLimit, fmt.Sprintf(emptyDirMessageFmt, vol.Name, vol.EmptyDir.SizeLimit.String()), true
		}
	}
	if !declaresEphemeralLimit(pod) {
		return "", "", false // PodLimits would be empty; skip its cost for most pods
	}
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	if limit, ok := limits[v1.ResourceEphemeralStorage]; ok && u.EphemeralStorage.Cmp(limit) > 0 {
		return SignalPodEphemeralLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), true
	}
	for _, cs := range u.Containers {
		c := findContainer(pod, cs.Name)
		if c == nil || cs.EphemeralStorage == nil {
			continue
		}
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok || limit.IsZero() {
			continue
		}
		if limit.Cmp(*cs.EphemeralStorage) < 0 {
			return SignalContainerEphemeralLimit, fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, limit.String()), true
		}
	}
	return "", "", false
}

// declaresEphemeralLimit reports whether any container of pod has an ephemeral-storage limit.
func declaresEphemeralLimit(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}
