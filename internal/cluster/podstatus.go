package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// kubeletConditions are the pod conditions the node owns (pkg/kubelet/types/pod_status.go,
// PodConditionsByKubelet); any other condition on the API's pod (a readiness gate's,
// DisruptionTarget) belongs to someone else and is kept as it is.
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled:              true,
	v1.PodReady:                  true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReadyToStartContainers: true,
	v1.PodResizePending:          true,
	v1.PodResizeInProgress:       true,
}

// isTerminal reports whether a phase is final.
func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// APIPodStatus is the status to write on the API's pod given what slicelet knows of it
// (local, the controller's status: phase, conditions, container statuses, or the admission
// rejection), in the shape of the kubelet's status manager (pkg/kubelet/status/status_manager.go,
// updateStatusInternal and mergePodStatus):
//   - the conditions others own (readiness gates', DisruptionTarget) are kept, first; the
//     conditions the kubelet owns come from local after them, with lastTransitionTime kept
//     from the API's pod while the condition's status is unchanged (now otherwise);
//   - a terminal phase on the API is never regressed;
//   - startTime and qosClass, once set, are kept;
//   - hostIP(s) are the node's addresses, and podIP(s) too for a pod on the host network
//     (hostNetwork, or every pod of a runtime without pod networks);
//   - observedGeneration (the status's and its conditions') is the generation of the pod
//     local was made for (the pod the kubelet's worker synced), the API pod's when local has
//     none (a static pod's mirror); a newer generation shows only with the status of a sync
//     of it.
func APIPodStatus(api *v1.Pod, local v1.PodStatus, nodeIPs []string, hostNetwork bool, now time.Time) v1.PodStatus {
	old := api.Status
	st := *local.DeepCopy()
	gen := api.Generation
	if local.ObservedGeneration > 0 && local.ObservedGeneration < gen {
		gen = local.ObservedGeneration
	}
	if isTerminal(old.Phase) && !isTerminal(st.Phase) {
		return *old.DeepCopy()
	}
	oldConds := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range old.Conditions {
		oldConds[c.Type] = c
	}
	// The conditions others own first, as they are, then the node's (the status manager's
	// mergePodStatus builds the list in this order).
	var conds []v1.PodCondition
	for _, c := range old.Conditions {
		if !kubeletConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	for _, c := range st.Conditions {
		if !kubeletConditions[c.Type] {
			continue
		}
		if prev, ok := oldConds[c.Type]; ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.ObservedGeneration = gen
		conds = append(conds, c)
	}
	st.Conditions = conds
	if old.StartTime != nil {
		st.StartTime = old.StartTime.DeepCopy()
	} else if st.StartTime == nil && st.Phase != v1.PodPending {
		t := metav1.NewTime(now)
		st.StartTime = &t
	}
	if old.QOSClass != "" {
		st.QOSClass = old.QOSClass
	}
	st.HostIP, st.HostIPs, st.PodIP, st.PodIPs = "", nil, local.PodIP, local.PodIPs
	for i, ip := range nodeIPs {
		if i == 0 {
			st.HostIP = ip
		}
		st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
	}
	if hostNetwork {
		st.PodIP, st.PodIPs = st.HostIP, nil
		for _, ip := range nodeIPs {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	// Fields other components write.
	st.NominatedNodeName, st.ResourceClaimStatuses, st.Resize = old.NominatedNodeName, old.ResourceClaimStatuses, old.Resize
	st.ObservedGeneration = gen
	return st
}

// PodStatusEqual reports whether two statuses are the same to the API (semantic equality:
// quantities and times compared by value).
func PodStatusEqual(a, b v1.PodStatus) bool { return apiequality.Semantic.DeepEqual(a, b) }

// PodStatusPatch is the strategic merge patch from old to new with the pod's UID in it as a
// precondition (pkg/util/pod/pod.go, preparePatchBytesForPodStatus): a pod replaced under the
// same name refuses it. unchanged is true when the patch carries nothing but the UID.
func PodStatusPatch(uid types.UID, old, new v1.PodStatus) (patch []byte, unchanged bool, err error) {
	oldData, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, false, fmt.Errorf("pod status: %w", err)
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new})
	if err != nil {
		return nil, false, fmt.Errorf("pod status: %w", err)
	}
	patch, err = strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, false, fmt.Errorf("pod status patch: %w", err)
	}
	return patch, bytes.Equal(patch, fmt.Appendf(nil, `{"metadata":{"uid":%q}}`, uid)), nil
}

// NodeStatusPatch is the strategic merge patch of a node's status from old to new (the
// kubelet's nodeutil.PatchNodeStatus, k8s.io/component-helpers/node/util/status.go), with
// the node's UID as a precondition.
func NodeStatusPatch(uid types.UID, old, new v1.NodeStatus) ([]byte, error) {
	oldData, err := json.Marshal(v1.Node{Status: old})
	if err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	newData, err := json.Marshal(v1.Node{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new})
	if err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node status patch: %w", err)
	}
	return patch, nil
}
