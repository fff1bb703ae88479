package lifecycle

import (
	"errors"
	"fmt"
	stdslices "slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	volumehelpers "k8s.io/component-helpers/storage/volume"
)

// pvcProtectionFinalizer keeps a claim in use from going away (the kubelet's
// util.PVCProtectionFinalizer).
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// ClaimName is the persistent volume claim behind a pod's volume: a persistentVolumeClaim
// volume's claim, or a generic ephemeral volume's (<pod>-<volume>, the ephemeral volume
// controller's); false for other volumes.
func ClaimName(pod *v1.Pod, v *v1.Volume) (string, bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, true
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v), true
	}
	return "", false
}

// claimError is the kubelet's wording of a claim that cannot be used yet (the volume manager's
// desired state populator): "error processing PVC default/data: PVC is not bound".
func claimError(pod *v1.Pod, claim string, err error) error {
	return fmt.Errorf("error processing PVC %s/%s: %v", pod.Namespace, claim, err)
}

// BoundVolume is the persistent volume the claim of pod's volume v is bound to (the kubelet's
// getPVCExtractPV, and for a generic ephemeral volume VolumeIsForPod): pvc and err are what the
// API server answered for the claim. A claim being deleted (without its protection finalizer),
// not bound, or of another pod (an ephemeral volume) is an error the pod waits on.
func BoundVolume(pod *v1.Pod, v *v1.Volume, claim string, pvc *v1.PersistentVolumeClaim, err error) (string, error) {
	if err != nil || pvc == nil {
		return "", claimError(pod, claim, fmt.Errorf("failed to fetch PVC from API server: %v", err))
	}
	if pvc.DeletionTimestamp != nil && !stdslices.Contains(pvc.Finalizers, pvcProtectionFinalizer) {
		return "", claimError(pod, claim, errors.New("PVC is being deleted"))
	}
	if pvc.Status.Phase != v1.ClaimBound {
		return "", claimError(pod, claim, errors.New("PVC is not bound"))
	}
	if pvc.Spec.VolumeName == "" {
		return "", claimError(pod, claim, errors.New("PVC has empty pvc.Spec.VolumeName"))
	}
	if v.Ephemeral != nil {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return "", err
		}
	}
	return pvc.Spec.VolumeName, nil
}

// ClaimedVolume is where the persistent volume pv (bound to the claim pvc of pod's volume v)
// is on the node, and whether it is mounted read-only: the kubelet's getPVSpec checks (the
// volume bound to this claim), then the volume's mode (a block volume is not mounted as a
// directory), then its source: hostPath and local volumes are directories (or files) of the
// node; a CSI volume's path is where its driver publishes it (internal/pods/csi), "" here;
// slicelet has no plugin for the other kinds.
func ClaimedVolume(pod *v1.Pod, v *v1.Volume, claim string, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, err error) (path string, readOnly bool, _ error) {
	name := pvc.Spec.VolumeName
	if err != nil || pv == nil {
		return "", false, claimError(pod, claim, fmt.Errorf("failed to fetch PV %s from API server: %v", name, err))
	}
	if pv.Spec.ClaimRef == nil {
		return "", false, claimError(pod, claim, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", name))
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return "", false, claimError(pod, claim, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", name, pv.Spec.ClaimRef.UID, pvc.UID))
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode != v1.PersistentVolumeFilesystem {
		return "", false, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", v.Name, *pv.Spec.VolumeMode)
	}
	readOnly = v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
	switch src := pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		return src.HostPath.Path, readOnly, nil
	case src.Local != nil:
		return src.Local.Path, readOnly, nil
	case src.CSI != nil:
		return "", readOnly, nil
	}
	return "", false, fmt.Errorf("persistent volume %s: slicelet mounts hostPath, local and CSI persistent volumes only: it has no in-tree volume plugin for this one", name)
}

// PersistentVolumePlugin is the name of the kubelet's volume plugin of a persistent volume
// slicelet mounts (its volume_plugin metric label, and what decides how its stats are
// measured): kubernetes.io/host-path, local-volume or csi; "" for another source.
func PersistentVolumePlugin(pv *v1.PersistentVolume) string {
	switch src := pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		return "kubernetes.io/host-path"
	case src.Local != nil:
		return "kubernetes.io/local-volume"
	case src.CSI != nil:
		return "kubernetes.io/csi"
	}
	return ""
}

// VolumeNodeAffinity refuses to mount a persistent volume whose node affinity the node's labels
// do not match, in the kubelet's words: the kubelet checks it when it mounts the volume, not
// at admission (pkg/volume/util/operationexecutor: checkNodeAffinity before NewMounter, with
// the scheduler's helper), so such a pod waits in ContainerCreating with FailedMount.
func VolumeNodeAffinity(pv *v1.PersistentVolume, nodeLabels map[string]string) error {
	if err := volumehelpers.CheckNodeAffinity(pv, nodeLabels); err != nil {
		return fmt.Errorf("MountVolume.NodeAffinity check failed for volume %q : %w", pv.Name, err)
	}
	return nil
}
