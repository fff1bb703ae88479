package cluster

import (
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// This file is how an eviction by slicelet's eviction manager reaches the API server in the
// kubelet's shape: the pod's status Failed, reason Evicted, the eviction manager's message, a
// DisruptionTarget condition with reason TerminationByKubelet (pkg/kubelet/eviction/
// eviction_manager.go, evictPod), sent once the pod's containers are stopped (pkg/kubelet/
// status/status_manager.go, mergePodStatus), and a Warning event "Evicted" carrying the
// eviction's annotations (offending_containers, offending_containers_usage, starved_resource)
// as the kubelet's recorder.AnnotatedEventf does.

// sharedConditions are the pod conditions the node shares with other components
// (pkg/kubelet/types/pod_status.go, PodConditionSharedByKubelet).
var sharedConditions = map[v1.PodConditionType]bool{v1.DisruptionTarget: true}

// TerminalStatus finishes want (APIPodStatus's result for the node's status local) with the
// status manager's rules for a pod turning terminal (mergePodStatus):
//   - while its containers could still be running (couldRun: an evicted pod whose containers
//     are being stopped), a terminal phase is not sent: the API's phase, reason and message
//     stay;
//   - once they are stopped, the shared conditions of local (DisruptionTarget) are sent with
//     the terminal phase, replacing the API's of the same type (or first in the list), their
//     transition time kept from the API's while the status is unchanged (now otherwise).
//
// A pod already terminal in the API, or not turning terminal, is left as want has it.
func TerminalStatus(api *v1.Pod, local, want v1.PodStatus, couldRun bool, now time.Time) v1.PodStatus {
	if isTerminal(api.Status.Phase) || !isTerminal(want.Phase) {
		return want
	}
	if couldRun {
		want.Phase, want.Reason, want.Message = api.Status.Phase, api.Status.Reason, api.Status.Message
		return want
	}
	for _, c := range local.Conditions {
		if !sharedConditions[c.Type] {
			continue
		}
		c.LastTransitionTime = metav1.NewTime(now)
		for _, prev := range api.Status.Conditions {
			if prev.Type == c.Type && prev.Status == c.Status {
				c.LastTransitionTime = prev.LastTransitionTime
			}
		}
		c.ObservedGeneration = api.Generation
		i := slices.IndexFunc(want.Conditions, func(w v1.PodCondition) bool { return w.Type == c.Type })
		if i >= 0 {
			want.Conditions[i] = c
		} else {
			// First, where a kubelet node's evicted pods show it in the API (the status
			// manager's cached status carried it ahead of the conditions it generates).
			want.Conditions = append([]v1.PodCondition{c}, want.Conditions...)
		}
	}
	return want
}

// EvictionAnnotations are the annotations of the kubelet's Evicted event, taken from the pod
// the controller records the event about: its eviction annotations (pods.
// AnnotationEvictionPrefix + offending_containers, offending_containers_usage,
// starved_resource, ...) without the prefix. nil when the pod carries none.
func EvictionAnnotations(pod *v1.Pod) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(pod.Annotations)) {
		if name, ok := strings.CutPrefix(k, pods.AnnotationEvictionPrefix); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = pod.Annotations[k]
		}
	}
	return out
}

// containersStopped is what the agent asks of the controller to tell whether an evicted pod's
// containers are stopped (*pods.Controller's PodCleanedUp: its slice is destroyed once they
// are). A controller without it is taken at its status.
type containersStopped interface {
	PodCleanedUp(uid string) bool
}

// couldHaveRunningContainers reports whether the containers of a pod the node reports terminal
// may still run: an evicted pod's, or one past its active deadline, are stopped after its
// status turned Failed, until its slice is destroyed; any other pod turns terminal once its
// containers exited.
func (a *Member) couldHaveRunningContainers(uid string, local v1.PodStatus) bool {
	if (local.Reason != pods.ReasonEvicted && local.Reason != pods.ReasonDeadlineExceeded) || !isTerminal(local.Phase) {
		return false
	}
	c, ok := a.o.Controller.(containersStopped)
	return ok && !c.PodCleanedUp(uid)
}
