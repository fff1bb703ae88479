package csi

import (
	"fmt"
	stdslices "slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Volume is one CSI volume of a pod, as the kubelet's volume.Spec gives it to the CSI
// plugin: a persistent volume with spec.csi, or an inline csi volume.
type Volume struct {
	// SpecName names the pod's volume directory: the persistent volume's name, or the pod's
	// volume name for an inline volume.
	SpecName string
	Driver   string
	Handle   string
	ReadOnly bool
	FSType   string
	// Attributes is the volume context (volumeAttributes).
	Attributes   map[string]string
	MountOptions []string
	// AccessModes are the persistent volume's; none for an inline volume.
	AccessModes []v1.PersistentVolumeAccessMode
	// Mode is Persistent (a persistent volume) or Ephemeral (inline).
	Mode storagev1.VolumeLifecycleMode
	// StageSecret and PublishSecret are the secrets NodeStageVolume and NodePublishVolume
	// carry (an inline volume's in the pod's namespace); ExpandSecret NodeExpandVolume's.
	StageSecret, PublishSecret, ExpandSecret *v1.SecretReference
}

// FromPod is the CSI volume behind pod's volume v: v's inline csi source, or the CSI source of
// pv, the persistent volume bound to v's claim (nil for a volume without one). False for a
// volume that is not CSI. readOnly is the claim's readOnly (a persistentVolumeClaim
// volume's).
func FromPod(pod *v1.Pod, v *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (Volume, bool) {
	switch {
	case v.CSI != nil:
		src := v.CSI
		out := Volume{
			SpecName:   v.Name,
			Driver:     src.Driver,
			Handle:     EphemeralHandle(string(pod.UID), v.Name),
			ReadOnly:   src.ReadOnly != nil && *src.ReadOnly,
			Attributes: src.VolumeAttributes,
			Mode:       storagev1.VolumeLifecycleEphemeral,
		}
		if src.FSType != nil {
			out.FSType = *src.FSType
		}
		if src.NodePublishSecretRef != nil {
			out.PublishSecret = &v1.SecretReference{Namespace: pod.Namespace, Name: src.NodePublishSecretRef.Name}
		}
		return out, true
	case pv != nil && pv.Spec.CSI != nil:
		src := pv.Spec.CSI
		return Volume{
			SpecName:      pv.Name,
			Driver:        src.Driver,
			Handle:        src.VolumeHandle,
			ReadOnly:      readOnly || src.ReadOnly,
			FSType:        src.FSType,
			Attributes:    src.VolumeAttributes,
			MountOptions:  pv.Spec.MountOptions,
			AccessModes:   pv.Spec.AccessModes,
			Mode:          storagev1.VolumeLifecyclePersistent,
			StageSecret:   src.NodeStageSecretRef,
			PublishSecret: src.NodePublishSecretRef,
			ExpandSecret:  src.NodeExpandSecretRef,
		}, true
	}
	return Volume{}, false
}

// Policy is what the driver's CSIDriver object asks of the node, defaulted as the kubelet
// defaults it for a driver without one (pkg/volume/csi: attach required, no pod info,
// persistent volumes only, fsGroup applied to ReadWriteOnce volumes with an fsType).
type Policy struct {
	AttachRequired bool
	PodInfoOnMount bool
	Modes          []storagev1.VolumeLifecycleMode
	FSGroupPolicy  storagev1.FSGroupPolicy
	// TokenRequests are the service account tokens the driver asks for (tokenRequests: an
	// audience, the API server's when empty, and a lifetime).
	TokenRequests []storagev1.TokenRequest
	// TokensInSecrets: the tokens go to NodePublishVolume's secrets, not its volume context
	// (serviceAccountTokenInSecrets).
	TokensInSecrets bool
	// RequiresRepublish: the driver wants NodePublishVolume again periodically
	// (requiresRepublish), to refresh what it was given (tokens).
	RequiresRepublish bool
	// NoObject is set when the driver has no CSIDriver object.
	NoObject bool
}

// PolicyOf is the policy of a driver's CSIDriver object; nil (none exists) gives the
// kubelet's defaults.
func PolicyOf(d *storagev1.CSIDriver) Policy {
	p := Policy{AttachRequired: true, FSGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
	if d == nil {
		p.Modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
		p.NoObject = true
		return p
	}
	if d.Spec.AttachRequired != nil {
		p.AttachRequired = *d.Spec.AttachRequired
	}
	if d.Spec.PodInfoOnMount != nil {
		p.PodInfoOnMount = *d.Spec.PodInfoOnMount
	}
	p.Modes = d.Spec.VolumeLifecycleModes
	if len(p.Modes) == 0 {
		p.Modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if d.Spec.FSGroupPolicy != nil {
		p.FSGroupPolicy = *d.Spec.FSGroupPolicy
	}
	p.TokenRequests = d.Spec.TokenRequests
	p.TokensInSecrets = d.Spec.ServiceAccountTokenInSecrets != nil && *d.Spec.ServiceAccountTokenInSecrets
	p.RequiresRepublish = d.Spec.RequiresRepublish != nil && *d.Spec.RequiresRepublish
	return p
}

// CheckMode refuses a volume of a lifecycle mode the driver does not declare, in the kubelet's
// words (csiMountMgr.supportsVolumeLifecycleMode).
func (p Policy) CheckMode(driver string, mode storagev1.VolumeLifecycleMode) error {
	if stdslices.Contains(p.Modes, mode) {
		return nil
	}
	if p.NoObject {
		return fmt.Errorf("volume mode %q not supported by driver %s (no CSIDriver object)", mode, driver)
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, p.Modes)
}

// AppliesFSGroup reports whether the kubelet changes the volume's ownership to the pod's
// fsGroup after publishing it (csiMountMgr.supportsFSGroup): never for a read-only volume or
// with policy None, always with File, and with ReadWriteOnceWithFSType when the volume has an
// fsType and is an inline volume or a persistent volume with ReadWriteOnce among its modes.
func (p Policy) AppliesFSGroup(vol Volume) bool {
	switch {
	case vol.ReadOnly, p.FSGroupPolicy == storagev1.NoneFSGroupPolicy:
		return false
	case p.FSGroupPolicy == storagev1.FileFSGroupPolicy:
		return true
	}
	if vol.FSType == "" {
		return false
	}
	if vol.Mode == storagev1.VolumeLifecycleEphemeral {
		return true
	}
	return stdslices.Contains(vol.AccessModes, v1.ReadWriteOnce)
}

// accessMode is the CSI access mode of a volume's first access mode (asCSIAccessModeV1):
// ReadWriteOnce when it has none.
func accessMode(modes []v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	m := v1.ReadWriteOnce
	if len(modes) > 0 {
		m = modes[0]
	}
	switch m {
	case v1.ReadWriteOnce:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// PublishContext is what NodeStageVolume and NodePublishVolume carry from the volume's
// attachment: its attachment metadata once attached (getPublishContext); an error the pod
// waits on before (the external attacher has not attached it yet, or it failed).
func PublishContext(name string, va *storagev1.VolumeAttachment, err error) (map[string]string, error) {
	if err != nil {
		return nil, fmt.Errorf("volume attachment %s: %w", name, err)
	}
	if !va.Status.Attached {
		if e := va.Status.AttachError; e != nil {
			return nil, fmt.Errorf("volume attachment %s is not attached: %s", name, e.Message)
		}
		return nil, fmt.Errorf("volume attachment %s is not attached yet", name)
	}
	return va.Status.AttachmentMetadata, nil
}

// mergeMap is a with b's keys added (b winning), a new map.
func mergeMap(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
