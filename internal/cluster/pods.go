package cluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// IsMirrorPod reports whether an API pod is the mirror of a static pod (the
// kubernetes.io/config.mirror annotation, pkg/kubelet/pod/mirror_client.go): a node never runs
// one, it only shows the static pod's status there.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[v1.MirrorPodAnnotationKey]
	return ok
}

// PodPlan is what the API's pods bound to the node ask of it.
type PodPlan struct {
	// Run are the pods to run, the cluster source's snapshot.
	Run []pods.Desired
	// Refused are pods slicelet cannot run, by UID: the field paths and why, for their status.
	Refused map[types.UID]string
	// Deleting are pods with a deletionTimestamp: to stop within their grace period, then to
	// delete for good.
	Deleting []*v1.Pod
	// Mirrors are the mirror pods, by namespace/name.
	Mirrors map[string]*v1.Pod
}

// PlanPods sorts the API's pods bound to this node: mirror pods apart, pods being deleted
// apart, pods in a terminal phase that the node does not have (known: the UIDs the controller
// has) left alone (they ran; a restarted slicelet must not run them again, as the kubelet's
// filterOutInactivePods), and the rest validated by validate (the manifest path's checks,
// internal/manifest.Validate: the API server defaulted them already). A terminal pod the node
// still has stays with it until the pod is deleted: its exited containers and their logs are
// kept, as a kubelet keeps them until the API pod is gone (kubectl logs of a completed pod).
// A pod that does not validate is refused with its field paths, never run.
func PlanPods(apiPods []*v1.Pod, known map[types.UID]bool, validate func(*v1.Pod) field.ErrorList) PodPlan {
	plan := PodPlan{Refused: map[types.UID]string{}, Mirrors: map[string]*v1.Pod{}}
	for _, p := range apiPods {
		switch {
		case IsMirrorPod(p):
			plan.Mirrors[p.Namespace+"/"+p.Name] = p
		case p.DeletionTimestamp != nil:
			plan.Deleting = append(plan.Deleting, p)
		case isTerminal(p.Status.Phase) && !known[p.UID]:
		default:
			if errs := validate(p); len(errs) > 0 {
				plan.Refused[p.UID] = fmt.Sprintf("slicelet cannot run this pod: %s", errs.ToAggregate())
				continue
			}
			plan.Run = append(plan.Run, pods.Desired{Pod: withSource(p), Source: pods.SourceCluster, Origin: pods.SourceCluster})
		}
	}
	slices.SortFunc(plan.Run, func(a, b pods.Desired) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name))
	})
	return plan
}

// PodsDifferSemantically reports whether b is another pod to run than a, as the kubelet's pod
// config decides it (pkg/kubelet/config/config.go, podsDifferSemantically and
// checkAndUpdatePod): its spec, labels, annotations, deletion timestamp or deletion grace
// period changed. A new version that changed only its status (the node's own status patches)
// or other metadata is the same pod to run.
func PodsDifferSemantically(a, b *v1.Pod) bool {
	return !apiequality.Semantic.DeepEqual(a.Spec, b.Spec) ||
		!maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) ||
		!apiequality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds)
}

// ValidateAPIPod is internal/manifest's validation (given as validate) of a pod from the API
// server, with the refusals of cluster mode in place of the static pods' (podfields: a field's
// handling and reason for origin APIServer). What only an API server gives and cluster mode
// serves is no refusal: spec.serviceAccountName, which the API server's admission sets on every
// pod, its projected serviceAccountToken sources (tokens.go), metadata.generateName (a
// ReplicaSet's pods keep it), the node selector and affinity (admission against the Node), the
// runtime class, the ephemeral containers. What the node cannot do is refused with the reason
// that holds on a cluster node: a persistent volume claim because the node cannot mount its
// volume, not because static pods may not reference one.
func ValidateAPIPod(validate func(*v1.Pod) field.ErrorList) func(*v1.Pod) field.ErrorList {
	return func(p *v1.Pod) field.ErrorList {
		return podfields.ForOrigin(validate(p), p, podfields.APIServer)
	}
}

// RefusedStatus is the status of a pod slicelet will not run: Failed, with the reason and
// message, as the kubelet writes an admission rejection (pkg/kubelet/kubelet.go, rejectPod).
func RefusedStatus(reason, message string) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: message}
}

// FinalDeletes are the pods being deleted whose containers are gone: no pod of their UID is
// left in the controller (running lists the UIDs it still has). They are deleted for good
// (grace 0, the UID as a precondition), as the kubelet's status manager does once a pod
// terminated. Before the controller adopted the pods that kept running (adopted false) none is
// deleted: containers of a pod slicelet has not seen yet may still run.
func FinalDeletes(deleting []*v1.Pod, running map[types.UID]bool, adopted bool) []*v1.Pod {
	if !adopted {
		return nil
	}
	var out []*v1.Pod
	for _, p := range deleting {
		if !running[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// TerminatedPodStatus is the final status of pod, whose containers were stopped for its
// deletion, from its last status (the kubelet's status manager, TerminatePod): once the pod
// initialized, every container not terminated is terminated (ContainerStatusUnknown, exit
// 137: it could not be located when the pod was terminated), and so is every init container
// up to the last one that tried to start; a Pending or Running pod is Failed.
func TerminatedPodStatus(pod *v1.Pod, last v1.PodStatus) v1.PodStatus {
	st := *last.DeepCopy()
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: lifecycle.ReasonUnknown,
		Message: "The container could not be located when the pod was terminated", ExitCode: 137}}
	if podInitialized(pod, &st) {
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Terminated == nil {
				st.ContainerStatuses[i].State = unknown
			}
		}
	}
	// The kubelet's initializedContainers: all but the suffix still waiting (the first one
	// when all are).
	n := min(len(st.InitContainerStatuses), 1)
	for i := len(st.InitContainerStatuses) - 1; i >= 0; i-- {
		if c := st.InitContainerStatuses[i]; c.State.Waiting == nil || c.LastTerminationState.Terminated != nil {
			n = i + 1
			break
		}
	}
	for i := range n {
		if st.InitContainerStatuses[i].State.Terminated == nil {
			st.InitContainerStatuses[i].State = unknown
		}
	}
	if !isTerminal(st.Phase) {
		st.Phase = v1.PodFailed
	}
	return st
}

// podInitialized is the kubelet's hasPodInitialized (pkg/kubelet/status/status_manager.go):
// no init containers; a container that ran; or a last init container that is a sidecar which
// started, or exited 0 (now or before).
func podInitialized(pod *v1.Pod, st *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, c := range st.ContainerStatuses {
		if c.LastTerminationState.Terminated != nil || c.State.Waiting == nil {
			return true
		}
	}
	l := len(st.InitContainerStatuses)
	if l == 0 || l > len(pod.Spec.InitContainers) {
		return false
	}
	spec, c := &pod.Spec.InitContainers[l-1], st.InitContainerStatuses[l-1]
	if spec.Name != c.Name || !lifecycle.IsSidecar(spec) {
		return false
	}
	return (c.State.Running != nil && c.Started != nil && *c.Started) ||
		(c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.ExitCode == 0) ||
		(c.State.Terminated != nil && c.State.Terminated.ExitCode == 0)
}

// DeletionGrace is the grace period the API gave a pod being deleted
// (metadata.deletionGracePeriodSeconds), else its terminationGracePeriodSeconds.
func DeletionGrace(p *v1.Pod) time.Duration {
	switch {
	case p.DeletionGracePeriodSeconds != nil:
		return time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	case p.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return v1.DefaultTerminationGracePeriodSeconds * time.Second
}

// MirrorPod is the mirror of static pod in the API (pkg/kubelet/pod/mirror_client.go,
// CreateMirrorPod): its metadata and spec, the kubernetes.io/config.mirror annotation holding
// the static pod's UID (the kubelet's hash of the pod, the node's name and the file's path), bound to the node and owned
// by it (NodeRestriction requires the owner reference).
func MirrorPod(static *v1.Pod, node string, nodeUID types.UID) *v1.Pod {
	controller := true
	m := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: static.Name, Namespace: static.Namespace,
			Labels:      maps.Clone(static.Labels),
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID, Controller: &controller,
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		m.Annotations[k] = v
	}
	m.Annotations[v1.MirrorPodAnnotationKey] = string(static.UID)
	m.Spec.NodeName = node
	return m
}

// MirrorActions are the mirror pods to create and to delete.
type MirrorActions struct {
	Create []*v1.Pod
	Delete []*v1.Pod
}

// PlanMirrors compares the static pods (the manifest directory's, as the controller shows
// them) with the mirror pods in the API (the kubelet's syncPod for static pods and
// HandlePodCleanups): a static pod without a mirror gets one; a mirror of an older version of
// the static pod (another config.mirror hash) is deleted, and created again once it is gone; a
// mirror without a static pod is deleted. A name an API pod (not a mirror) holds gets no
// mirror: the API refuses it and that pod is the API's.
func PlanMirrors(static []v1.Pod, mirrors map[string]*v1.Pod, taken map[string]bool, node string, nodeUID types.UID) MirrorActions {
	var act MirrorActions
	want := map[string]bool{}
	for i := range static {
		s := &static[i]
		if s.DeletionTimestamp != nil {
			continue
		}
		k := s.Namespace + "/" + s.Name
		want[k] = true
		m, ok := mirrors[k]
		switch {
		case !ok && !taken[k]:
			act.Create = append(act.Create, MirrorPod(s, node, nodeUID))
		case !ok:
		case m.DeletionTimestamp != nil:
			// Going; created again at a later round.
		case m.Annotations[v1.MirrorPodAnnotationKey] != string(s.UID):
			act.Delete = append(act.Delete, m)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mirrors)) {
		if m := mirrors[k]; !want[k] && m.DeletionTimestamp == nil {
			act.Delete = append(act.Delete, m)
		}
	}
	return act
}

// jsonMarshal is encoding/json's Marshal.
var jsonMarshal = json.Marshal
