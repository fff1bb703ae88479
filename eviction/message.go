package eviction

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The kubelet's eviction message fragments (pkg/kubelet/eviction/helpers.go), verbatim: each
// ends with ". " — the trailing space is part of the message the kubelet writes.
const (
	nodeLowMessageFmt                   = "The node was low on resource: %v. "
	thresholdMetMessageFmt              = "Threshold quantity: %v, available: %v. "
	containerMessageFmt                 = "Container %s was using %s, request is %s, has larger consumption of %v. "
	podMessageFmt                       = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
)

// Annotation keys of the eviction event, and the pod status reason.
const (
	// AnnotationOffendingContainers lists the containers using more than their request.
	AnnotationOffendingContainers = "offending_containers"
	// AnnotationOffendingContainersUsage lists their usage, in the same order.
	AnnotationOffendingContainersUsage = "offending_containers_usage"
	// AnnotationOffendingPod names the pod when its pod-level request is exceeded.
	AnnotationOffendingPod = "offending_pod"
	// AnnotationOffendingPodUsage is that pod's usage.
	AnnotationOffendingPodUsage = "offending_pod_usage"
	// AnnotationStarvedResource is the resource the node was low on.
	AnnotationStarvedResource = "starved_resource"
	// Reason is the evicted pod's status reason.
	Reason = "Evicted"
)

// signalFormat is how the kubelet's summary formats a signal's numbers: bytes in binary SI,
// counts (inodes, PIDs) in decimal SI.
func signalFormat(s Signal) resource.Format {
	switch signalToResource[s] {
	case ResourceInodes, ResourcePIDs:
		return resource.DecimalSI
	}
	return resource.BinarySI
}

// normalized re-creates q the way the kubelet builds usage quantities from raw numbers, so
// "157286400" and "150Mi" both print as 150Mi.
func normalized(q resource.Quantity, f resource.Format) *resource.Quantity {
	return resource.NewQuantity(q.Value(), f)
}

// thresholdMetInfo is getThresholdMetInfo: the quantity of the first threshold of thresholds
// whose signal starves res, and that signal's available amount.
func thresholdMetInfo(res v1.ResourceName, thresholds []Threshold, obs Observations) (quantity, available *resource.Quantity, ok bool) {
	for _, t := range thresholds {
		if signalToResource[t.Signal] != res {
			continue
		}
		o, found := obs[t.Signal]
		if !found {
			continue
		}
		return GetThresholdQuantity(t.Value, &o.Capacity), normalized(o.Available, signalFormat(t.Signal)), true
	}
	return nil, nil, false
}

// evictionMessage is the kubelet's evictionMessage: "The node was low on resource: <res>. ",
// the threshold met, then (for memory with a pod-level request) the pod and (for memory and
// ephemeral-storage) each regular or init container using more than its request. The
// annotations name the offenders and the starved resource; a pod without stats gets none.
func evictionMessage(res v1.ResourceName, pod *v1.Pod, usage *PodUsage, thresholds []Threshold, obs Observations) (string, map[string]string) {
	ann := map[string]string{}
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	if q, a, ok := thresholdMetInfo(res, thresholds, obs); ok {
		msg += fmt.Sprintf(thresholdMetMessageFmt, q, a)
	}
	if usage == nil {
		return msg, ann
	}
	if res == v1.ResourceMemory && resourcehelper.IsPodLevelRequestsSet(pod) {
		if req, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]; ok {
			used := normalized(usage.Memory, resource.BinarySI)
			if used.Cmp(req) > 0 {
				msg += fmt.Sprintf(podMessageFmt, pod.Name, used.String(), req.String(), res)
				ann[AnnotationOffendingPod] = pod.Name
				ann[AnnotationOffendingPodUsage] = used.String()
			}
		}
	}
	var names, usages []string
	for _, cs := range usage.Containers {
		c := findContainer(pod, cs.Name)
		if c == nil {
			continue
		}
		var used *resource.Quantity
		switch res {
		case v1.ResourceMemory:
			if cs.Memory != nil {
				used = normalized(*cs.Memory, resource.BinarySI)
			}
		case v1.ResourceEphemeralStorage:
			if cs.EphemeralStorage != nil {
				used = normalized(*cs.EphemeralStorage, resource.BinarySI)
			}
		}
		req := c.Resources.Requests[res]
		if used != nil && used.Cmp(req) > 0 {
			msg += fmt.Sprintf(containerMessageFmt, c.Name, used.String(), req.String(), res)
			names = append(names, c.Name)
			usages = append(usages, used.String())
		}
	}
	ann[AnnotationOffendingContainers] = strings.Join(names, ",")
	ann[AnnotationOffendingContainersUsage] = strings.Join(usages, ",")
	ann[AnnotationStarvedResource] = string(res)
	return msg, ann
}

// findContainer returns the regular or init container called name.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
