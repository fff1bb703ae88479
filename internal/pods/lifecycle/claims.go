package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// volume bound to this claim), then the volume's mode against its use (a block volume is not
// in volumeMounts, a filesystem volume not in volumeDevices), then its source: hostPath and local volumes are directories (or files) of the
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
	mode := VolumeMode(pv)
	mounts, devices := volumeUses(pod, v.Name)
	if mounts && mode != v1.PersistentVolumeFilesystem {
		return "", false, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", v.Name, mode)
	}
	if devices && mode != v1.PersistentVolumeBlock {
		return "", false, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", v.Name, mode)
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

// BlockDevice checks that the block persistent volume pv (volumeMode Block, not CSI) can be
// given to containers from path: a local volume's path must be a block device (the kubelet's
// local plugin maps the device); hostPath has no block mapper in the kubelet.
func BlockDevice(pv *v1.PersistentVolume, path string) error {
	if pv.Spec.Local == nil {
		return fmt.Errorf("persistent volume %s: only local and CSI volumes can be block devices (volumeMode Block)", pv.Name)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeDevice == 0 || st.Mode()&fs.ModeCharDevice != 0 {
		return fmt.Errorf("local volume %s: %s is not a block device", pv.Name, path)
	}
	return nil
}

// VolumeMode is the persistent volume's volumeMode, Filesystem when unset (the API's default).
func VolumeMode(pv *v1.PersistentVolume) v1.PersistentVolumeMode {
	if pv.Spec.VolumeMode != nil {
		return *pv.Spec.VolumeMode
	}
	return v1.PersistentVolumeFilesystem
}

// volumeUses reports whether any container of pod (init and ephemeral ones included) mounts
// the volume name (volumeMounts) and whether any maps it as a device (volumeDevices): the
// kubelet's GetPodVolumeNames.
func volumeUses(pod *v1.Pod, name string) (mounts, devices bool) {
	check := func(c *v1.Container) {
		for _, m := range c.VolumeMounts {
			mounts = mounts || m.Name == name
		}
		for _, d := range c.VolumeDevices {
			devices = devices || d.Name == name
		}
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		check((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return mounts, devices
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

// LocalDevice is how a local persistent volume in Filesystem mode whose path is a block device
// is mounted (the kubelet's local plugin, pkg/volume/local/local.go mountLocalBlockDevice): the
// device formatted when it has no file system yet and mounted once for every pod on the node
// at Dir, the plugin's device mount path <plugins>/kubernetes.io/local-volume/mounts/<volume>,
// with FSType (the volume's fsType, ext4 when unset) and Options (ro for a read-only claim,
// then the volume's mountOptions).
type LocalDevice struct {
	Device, Dir, FSType string
	Options             []string
}

// localDefaultFSType is the kubelet's local plugin's file system when a local volume's fsType
// is unset (pkg/volume/local/local.go defaultFSType).
const localDefaultFSType = "ext4"

// LocalDeviceMountsDir is where a node's local volumes on block devices are mounted, under
// its plugins directory (the kubelet's <root>/plugins).
func LocalDeviceMountsDir(pluginsDir string) string {
	return filepath.Join(pluginsDir, "kubernetes.io", "local-volume", "mounts")
}

// LocalDeviceMount is how the local persistent volume pv, mounted by a pod (readOnly: its
// claim is read-only), is mounted when its path, of the file type isBlock says, is a block
// device used as a file system: ok false for any other volume (a directory is given to the
// containers as it is). mountsDir is LocalDeviceMountsDir's.
func LocalDeviceMount(pv *v1.PersistentVolume, isBlock, readOnly bool, mountsDir string) (LocalDevice, bool) {
	if pv.Spec.Local == nil || !isBlock || VolumeMode(pv) != v1.PersistentVolumeFilesystem {
		return LocalDevice{}, false
	}
	d := LocalDevice{Device: pv.Spec.Local.Path, Dir: filepath.Join(mountsDir, pv.Name), FSType: localDefaultFSType}
	if fs := pv.Spec.Local.FSType; fs != nil && *fs != "" {
		d.FSType = *fs
	}
	if readOnly {
		d.Options = append(d.Options, "ro")
	}
	d.Options = append(d.Options, pv.Spec.MountOptions...)
	return d, true
}
