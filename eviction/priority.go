package eviction

import (
	v1 "k8s.io/api/core/v1"
)

// Priorities of the built-in priority classes and the critical bound
// (k8s.io/api/scheduling: SystemCriticalPriority).
const (
	// SystemCriticalPriority is the priority at and above which a pod is critical: the
	// eviction manager never evicts it.
	SystemCriticalPriority int32 = 2_000_000_000
	// SystemNodeCriticalPriority is the priority of the built-in class system-node-critical.
	SystemNodeCriticalPriority int32 = 2_000_001_000
	// SystemClusterCriticalPriority is the priority of the built-in class
	// system-cluster-critical.
	SystemClusterCriticalPriority int32 = 2_000_000_000
)

// PodPriority is a pod's priority: spec.priority when set; otherwise, since there is no API
// server whose priority admission plugin would fill it in, the value of
// spec.priorityClassName — the built-ins system-node-critical and system-cluster-critical
// first, then classes (the configured [eviction.priority_classes]); otherwise 0.
func PodPriority(pod *v1.Pod, classes map[string]int32) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	switch pod.Spec.PriorityClassName {
	case "":
		return 0
	case "system-node-critical":
		return SystemNodeCriticalPriority
	case "system-cluster-critical":
		return SystemClusterCriticalPriority
	}
	return classes[pod.Spec.PriorityClassName]
}

// IsCritical reports whether the eviction manager must never evict the pod: its priority is
// at least SystemCriticalPriority.
//
// Difference from the kubelet: its IsCriticalPod also treats every static pod (any config
// source but the API server) and every mirror pod as critical. In slicelet the manifest
// directory is the normal way to run pods, so its pods are evictable unless their priority
// makes them critical.
func IsCritical(pod *v1.Pod, classes map[string]int32) bool {
	return PodPriority(pod, classes) >= SystemCriticalPriority
}
