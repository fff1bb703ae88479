package csi

import (
	"context"
	"errors"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ExpandFailure is how a node expansion failed, which decides what the node does next (the
// kubelet's volumetypes errors of pkg/volume/csi/expander.go).
type ExpandFailure int

const (
	// ExpandFinal: the expansion failed (any other answer of the driver): the claim gets a
	// NodeResizeError condition, and it is tried again.
	ExpandFinal ExpandFailure = iota
	// ExpandNotSupported: the driver has no EXPAND_VOLUME node capability
	// (OperationNotSupportedError): there is nothing to do on the node.
	ExpandNotSupported
	// ExpandInUse: the driver cannot expand the volume while it is published
	// (FailedPrecondition): not tried again while the volume stays set up.
	ExpandInUse
	// ExpandInfeasible: the driver says the expansion can never succeed (InvalidArgument,
	// OutOfRange, NotFound): the claim is marked NodeResizeInfeasible.
	ExpandInfeasible
	// ExpandTransient: the driver is not registered (TransientOperationFailure): tried again,
	// nothing marked.
	ExpandTransient
)

// ExpandError is a failed NodeExpand, with how it failed.
type ExpandError struct {
	Failure ExpandFailure
	Err     error
}

func (e *ExpandError) Error() string { return e.Err.Error() }
func (e *ExpandError) Unwrap() error { return e.Err }

// FailureOf is how err, from NodeExpand, failed: ExpandFinal for an error that says nothing
// more.
func FailureOf(err error) ExpandFailure {
	var e *ExpandError
	if errors.As(err, &e) {
		return e.Failure
	}
	return ExpandFinal
}

// expandFailureOf classifies the driver's answer to NodeExpandVolume as the kubelet does
// (inUseError, isInfeasibleError). A call whose outcome is uncertain (a timeout, the driver
// gone) is a final failure too: the kubelet's expander wraps its UncertainProgressError, which
// its IsOperationFinishedError then does not see.
func expandFailureOf(err error) ExpandFailure {
	st, ok := status.FromError(err)
	if !ok {
		return ExpandFinal
	}
	switch st.Code() {
	case codes.FailedPrecondition:
		return ExpandInUse
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound:
		return ExpandInfeasible
	}
	return ExpandFinal
}

// NodeExpand grows what is on the persistent CSI volume vol, set up for pod, to newSize: the
// kubelet's csiPlugin.NodeExpand, NodeExpandVolume with the volume's path (a filesystem
// volume's publish path and its staging path, which the kubelet sends whether or not the
// driver stages; a block volume's published device and block staging path), the capacity
// wanted, the volume's capability (access mode, fsType and mount options; a block volume's
// block capability) and the data of its nodeExpandSecretRef. A driver without EXPAND_VOLUME
// gives ExpandNotSupported; failures are *ExpandError.
func (m *Manager) NodeExpand(ctx context.Context, pod *v1.Pod, vol Volume, block bool, newSize resource.Quantity) error {
	for _, name := range []string{vol.Driver, vol.SpecName, string(pod.UID)} {
		if err := pathElement(name); err != nil {
			return err
		}
	}
	if vol.Mode != storagev1.VolumeLifecyclePersistent {
		return &ExpandError{ExpandNotSupported, fmt.Errorf("volume %s: an inline volume is not expanded", vol.SpecName)}
	}
	node, err := m.nodeClient(vol.Driver)
	if err != nil {
		return &ExpandError{ExpandTransient, err}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	caps, err := nodeCapabilities(ctx, node)
	if err != nil {
		return fmt.Errorf("Expander.NodeExpand failed to check if node supports expansion : %w", err)
	}
	if !caps.expand {
		return &ExpandError{ExpandNotSupported, fmt.Errorf("NodeExpand is not supported by the CSI driver %s", vol.Driver)}
	}
	secrets, err := m.secret(vol.ExpandSecret)
	if err != nil {
		return fmt.Errorf("expander.NodeExpand failed to get NodeExpandSecretRef %s/%s: %w", vol.ExpandSecret.Namespace, vol.ExpandSecret.Name, err)
	}
	req := ExpandRequest(m.opts.PluginsDir, m.opts.PodsDir, string(pod.UID), vol, block, newSize)
	req.Secrets = secrets
	defer m.lockVolume(vol.Driver, vol.Handle)()
	if _, err := node.NodeExpandVolume(ctx, req); err != nil {
		f := expandFailureOf(err)
		if f == ExpandInfeasible {
			return &ExpandError{f, fmt.Errorf("Expander.NodeExpand failed to expand the volume %w", err)}
		}
		return &ExpandError{f, fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w", err)}
	}
	m.log.Info("csi volume expanded", "pod_uid", string(pod.UID), "volume", vol.SpecName, "driver", vol.Driver, "volume_handle", vol.Handle, "size", newSize.String())
	return nil
}

// ExpandRequest is the NodeExpandVolumeRequest of vol, set up for the pod uid, grown to newSize
// (its secrets left to the caller): csiDriverClient.NodeExpandVolume's request.
func ExpandRequest(pluginsDir, podsDir, uid string, vol Volume, block bool, newSize resource.Quantity) *csipb.NodeExpandVolumeRequest {
	req := &csipb.NodeExpandVolumeRequest{
		VolumeId:      vol.Handle,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: newSize.Value()},
	}
	mode := accessMode(vol.AccessModes)
	if block {
		req.VolumePath = BlockPublishPath(pluginsDir, vol.SpecName, uid)
		req.StagingTargetPath = BlockStagingPath(pluginsDir, vol.SpecName)
		req.VolumeCapability = blockCapability(mode)
		return req
	}
	req.VolumePath = PublishPath(podsDir, uid, vol.SpecName)
	req.StagingTargetPath = DeviceMountPath(pluginsDir, vol.Driver, vol.Handle)
	req.VolumeCapability = &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: vol.FSType, MountFlags: vol.MountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
	return req
}
