package lifecycle

import (
	"encoding/json"
	"fmt"
	stdslices "slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The node's part of a volume expansion (pkg/volume/util/operationexecutor: node_expander.go,
// operation_generator.go's expandVolumeDuringMount and nodeExpandVolume; the claim's status
// changes are pkg/volume/util/resize_util.go's). The resize controller (or the external
// resizer) grows the volume and its PersistentVolume's capacity, then leaves the claim's
// status.allocatedResourceStatuses[storage] at NodeResizePending: the node that has the volume
// set up grows what is on it (CSI NodeExpandVolume; nothing for a local directory), then
// writes the claim's new status.capacity, which the Node authorizer and NodeRestriction let it
// do.

// NodeExpansionNotRequired is the claim annotation by which the resizer says a volume needs no
// node expansion (volumetypes.NodeExpansionNotRequired).
const NodeExpansionNotRequired = "volume.kubernetes.io/node-expansion-not-required"

// VolumeExpansion is how far the claim's volume is grown: Old is the claim's
// status.capacity, New the persistent volume's spec.capacity; Needed when New is larger (the
// kubelet's volumeRequiresFSResize and the check of expandVolumeDuringMount).
type VolumeExpansion struct {
	Old, New resource.Quantity
	Needed   bool
}

// ExpansionOf compares the claim's status capacity with its volume's capacity.
func ExpansionOf(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) VolumeExpansion {
	old := pvc.Status.Capacity[v1.ResourceStorage]
	want := pv.Spec.Capacity[v1.ResourceStorage]
	return VolumeExpansion{Old: old, New: want, Needed: !old.IsZero() && !want.IsZero() && want.Cmp(old) > 0}
}

// ExpansionRecovery reports whether the claim is expanded as a resizer that records its
// progress asks (checkForRecoveryFromExpansion with RecoverVolumeExpansionFailure, GA): when
// the claim has an allocatedResourceStatuses[storage] or allocatedResources, the node expands to
// the allocated size and follows the status; otherwise (an old resizer) to the volume's
// capacity, and only status.capacity is written after.
func ExpansionRecovery(pvc *v1.PersistentVolumeClaim) bool {
	return pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] != "" || pvc.Status.AllocatedResources != nil
}

// ExpansionCheck is what the node may do with a claim's expansion before calling its volume
// plugin (NodeExpander.runPreCheck).
type ExpansionCheck struct {
	// Allowed: the plugin is called (the status is NodeResizePending or NodeResizeInProgress,
	// or a ReadWriteMany volume another node already grew).
	Allowed bool
	// AlreadyUpdated: the claim's status capacity already has the new size and no resize status
	// (another node grew a ReadWriteMany volume): the status is not written again.
	AlreadyUpdated bool
	// InfeasibleOnFailure: the user changed the request since the last final failure, so a
	// failure now marks the expansion infeasible for the controller to reconcile.
	InfeasibleOnFailure bool
}

// CheckExpansion is the pre-check of expanding the claim to newSize on the node; failedBefore
// says an earlier expansion of the volume on this node failed with a final error.
func CheckExpansion(pvc *v1.PersistentVolumeClaim, newSize resource.Quantity, failedBefore bool) ExpansionCheck {
	var out ExpansionCheck
	statusCap := pvc.Status.Capacity[v1.ResourceStorage]
	resizeStatus := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	specCap := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if specCap.Cmp(newSize) != 0 && failedBefore {
		out.InfeasibleOnFailure = true
	}
	if statusCap.Cmp(newSize) >= 0 && resizeStatus == "" {
		out.AlreadyUpdated = true
	}
	if out.AlreadyUpdated && stdslices.Contains(pvc.Spec.AccessModes, v1.ReadWriteMany) && !metav1.HasAnnotation(pvc.ObjectMeta, NodeExpansionNotRequired) {
		out.Allowed = true
		return out
	}
	out.Allowed = resizeStatus == v1.PersistentVolumeClaimNodeResizePending || resizeStatus == v1.PersistentVolumeClaimNodeResizeInProgress
	return out
}

// knownResizeConditions are the claim conditions of a resize (resize_util.go).
var knownResizeConditions = []v1.PersistentVolumeClaimConditionType{
	v1.PersistentVolumeClaimFileSystemResizePending,
	v1.PersistentVolumeClaimResizing,
	v1.PersistentVolumeClaimControllerResizeError,
	v1.PersistentVolumeClaimNodeResizeError,
}

// mergeResizeConditions sets the claim's resize conditions to add (a condition of a type it
// has keeps its time when its status is unchanged), keeping its other conditions, and its
// other resize conditions when keepOld (MergeResizeConditionOnPVC).
func mergeResizeConditions(pvc *v1.PersistentVolumeClaim, add []v1.PersistentVolumeClaimCondition, keepOld bool) {
	processed := make([]bool, len(add))
	var out []v1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if !stdslices.Contains(knownResizeConditions, c.Type) {
			out = append(out, c)
			continue
		}
		i := stdslices.IndexFunc(add, func(n v1.PersistentVolumeClaimCondition) bool { return n.Type == c.Type })
		switch {
		case i >= 0:
			if add[i].Status != c.Status {
				out = append(out, add[i])
			} else {
				out = append(out, c)
			}
			processed[i] = true
		case keepOld:
			out = append(out, c)
		}
	}
	for i, c := range add {
		if !processed[i] {
			out = append(out, c)
		}
	}
	if out == nil {
		out = []v1.PersistentVolumeClaimCondition{}
	}
	pvc.Status.Conditions = out
}

// setResizeStatus sets the claim's allocatedResourceStatuses[storage].
func setResizeStatus(pvc *v1.PersistentVolumeClaim, s v1.ClaimResourceStatus) {
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] = s
}

// ExpansionInProgress is the claim marked NodeResizeInProgress (MarkNodeExpansionInProgress).
func ExpansionInProgress(pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	setResizeStatus(out, v1.PersistentVolumeClaimNodeResizeInProgress)
	return out
}

// ExpansionFinished is the claim with status.capacity size, its resize status and resize
// conditions removed (MarkNodeExpansionFinishedWithRecovery, and MarkFSResizeFinished with
// RecoverVolumeExpansionFailure on).
func ExpansionFinished(pvc *v1.PersistentVolumeClaim, size resource.Quantity) *v1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	if out.Status.Capacity == nil {
		out.Status.Capacity = v1.ResourceList{}
	}
	out.Status.Capacity[v1.ResourceStorage] = size
	delete(out.Status.AllocatedResourceStatuses, v1.ResourceStorage)
	if len(out.Status.AllocatedResourceStatuses) == 0 {
		out.Status.AllocatedResourceStatuses = nil
	}
	mergeResizeConditions(out, nil, false)
	return out
}

// ExpansionFailed is the claim with a NodeResizeError condition saying why (at now), and when
// infeasible its resize status NodeResizeInfeasible (MarkNodeExpansionFailedCondition,
// MarkNodeExpansionInfeasible).
func ExpansionFailed(pvc *v1.PersistentVolumeClaim, err error, infeasible bool, now metav1.Time) *v1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	if infeasible {
		setResizeStatus(out, v1.PersistentVolumeClaimNodeResizeInfeasible)
	}
	mergeResizeConditions(out, []v1.PersistentVolumeClaimCondition{{
		Type:               v1.PersistentVolumeClaimNodeResizeError,
		Status:             v1.ConditionTrue,
		LastTransitionTime: now,
		Message:            fmt.Sprintf("failed to expand pvc with %v", err),
	}}, true)
	return out
}

// ClaimStatusPatch is the strategic merge patch from the claim old to updated, for its status
// subresource; withVersion adds old's resourceVersion, so the API server refuses it when the
// claim changed meanwhile (PatchPVCStatus; the failure marks are sent without).
func ClaimStatusPatch(old, updated *v1.PersistentVolumeClaim, withVersion bool) ([]byte, error) {
	a, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(updated)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(a, b, &v1.PersistentVolumeClaim{})
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: status patch: %w", old.Namespace, old.Name, err)
	}
	if !withVersion {
		return patch, nil
	}
	m := map[string]any{}
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["resourceVersion"] = old.ResourceVersion
	m["metadata"] = meta
	return json.Marshal(m)
}
