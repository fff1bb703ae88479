package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// ErrStatsNotSupported is a driver without the GET_VOLUME_STATS node capability: its volumes
// have no stats, and that is not a failure (the kubelet's volume.NewNotSupportedError, which
// its volume stat calculator does not log).
var ErrStatsNotSupported = errors.New("volume stats not supported by the driver")

// Usage is what a driver says a published volume holds, in the kubelet's volume.Metrics
// terms: bytes and inodes, each total (capacity), available and used. A unit the driver does
// not report stays 0, as the kubelet's csiDriverClient.NodeGetVolumeStats leaves it.
type Usage struct {
	Capacity, Available, Used      int64
	Inodes, InodesFree, InodesUsed int64
}

// usageOf is the answer of NodeGetVolumeStats as the kubelet reads it
// (pkg/volume/csi/csi_client.go NodeGetVolumeStats): a BYTES entry gives the bytes, an INODES
// entry the inodes, other units are ignored, and an answer without usage is an error.
func usageOf(resp *csipb.NodeGetVolumeStatsResponse) (Usage, error) {
	if resp.GetUsage() == nil {
		return Usage{}, errors.New("failed to get usage from response. usage is nil")
	}
	var u Usage
	for _, e := range resp.GetUsage() {
		switch e.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			u.Capacity, u.Available, u.Used = e.GetTotal(), e.GetAvailable(), e.GetUsed()
		case csipb.VolumeUsage_INODES:
			u.Inodes, u.InodesFree, u.InodesUsed = e.GetTotal(), e.GetAvailable(), e.GetUsed()
		}
	}
	return u, nil
}

// VolumeStats asks the driver of the CSI volume published at target (a path SetUp returned;
// its vol_data.json names the driver and the volume handle) what the volume holds: the
// kubelet's metricsCsi.GetMetrics, NodeGetVolumeStats with the volume handle and the publish
// path. It names the driver asked. A driver without GET_VOLUME_STATS gives
// ErrStatsNotSupported.
func (m *Manager) VolumeStats(ctx context.Context, target string) (_ Usage, driver string, _ error) {
	data, err := loadVolData(filepath.Dir(target))
	if err != nil {
		return Usage{}, "", err
	}
	name, handle := data[keyDriverName], data[keyVolHandle]
	u, err := m.volumeStats(ctx, name, handle, target)
	return u, name, err
}

// volumeStats is NodeGetVolumeStats of the volume handle of driver name published at target.
func (m *Manager) volumeStats(ctx context.Context, name, handle, target string) (Usage, error) {
	node, err := m.nodeClient(name)
	if err != nil {
		return Usage{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	caps, err := nodeCapabilities(ctx, node)
	if err != nil {
		return Usage{}, fmt.Errorf("driver %s: NodeGetCapabilities: %w", name, err)
	}
	if !caps.volumeStats {
		return Usage{}, fmt.Errorf("driver %s: %w", name, ErrStatsNotSupported)
	}
	resp, err := node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: handle, VolumePath: target})
	if err != nil {
		return Usage{}, fmt.Errorf("rpc error: NodeGetVolumeStats of volume %s: %w", handle, err)
	}
	u, err := usageOf(resp)
	if err != nil {
		return Usage{}, fmt.Errorf("NodeGetVolumeStats of volume %s: %w", handle, err)
	}
	return u, nil
}
