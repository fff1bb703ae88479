package slices

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// OOM score adjustments of pkg/kubelet/qos/policy.go.
const (
	// KubeletOOMScoreAdj is the kubelet's own oom_score_adj; slicelet uses it for itself.
	KubeletOOMScoreAdj = -999
	// GuaranteedOOMScoreAdj is given to Guaranteed and node-critical containers.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is given to BestEffort containers.
	BestEffortOOMScoreAdj = 1000
	// PodInfraOOMScoreAdj is given to the sandbox (pause) container.
	PodInfraOOMScoreAdj = -998
	// SystemNodeCritical is the priority class of node-critical pods.
	SystemNodeCritical = "system-node-critical"
)

// ContainerOOMScoreAdj is the kubelet's GetContainerOOMScoreAdjust: the oom_score_adj of a
// container's processes, given the node's memory capacity in bytes.
//
//   - Node-critical pods (priorityClassName system-node-critical; every slicelet pod is a local,
//     i.e. static, pod and therefore "critical" in the kubelet's sense) and Guaranteed pods get
//     -997; BestEffort pods get 1000.
//   - Burstable: 1000 − 1000·request/capacity (int64), where the request is the container's
//     memory request plus, with pod-level memory requests, an equal share of the pod request not
//     claimed by the containers ((pod − aggregated container requests) / (regular + init
//     containers)). A sidecar (restartable init container) is capped at the score of the regular
//     container with the smallest request, so it dies no earlier than any regular container. The
//     result is clamped to [3, 999]: above every Guaranteed score, below BestEffort.
//
// A non-positive memoryCapacity is treated as "unknown" and gives 999 for Burstable.
func ContainerOOMScoreAdj(pod *v1.Pod, container *v1.Container, memoryCapacity int64) int {
	if pod.Spec.PriorityClassName == SystemNodeCritical {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	score := func(req int64) int64 { return 1000 - 1000*req/memoryCapacity }

	var share int64
	if resourcehelper.IsPodLevelRequestsSet(pod) {
		share = remainingPodMemoryPerContainer(pod)
	}
	adj := score(container.Resources.Requests.Memory().Value() + share)

	if isSidecar(pod, container) && len(pod.Spec.Containers) > 0 {
		minReq := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for i := range pod.Spec.Containers[1:] {
			minReq = min(minReq, pod.Spec.Containers[i+1].Resources.Requests.Memory().Value())
		}
		adj = min(adj, score(minReq+share))
	}

	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj == BestEffortOOMScoreAdj {
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

// remainingPodMemoryPerContainer is the pod-level memory request not claimed by the containers
// (never negative), divided equally among regular and init containers (KEP-2837 OOM score
// adjustment, pkg/kubelet/qos/helpers.go).
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	podReq := pod.Spec.Resources.Requests.Memory()
	n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers)
	if podReq.IsZero() || n == 0 {
		return 0
	}
	aggregated := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	return max(podReq.Value()-aggregated.Memory().Value(), 0) / int64(n)
}

// isSidecar reports whether container is one of the pod's init containers with restartPolicy
// Always.
func isSidecar(pod *v1.Pod, container *v1.Container) bool {
	if container.RestartPolicy == nil || *container.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container.Name {
			return true
		}
	}
	return false
}
