package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

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
//
// A block volume's target is the pod's link to its device (what SetUpBlock returned): the
// driver is asked about the published device (BlockPublishPath, the path the driver itself
// made, as the CSI spec's volume_path wants; the kubelet's csiBlockMapper asks about its bind
// mount of that device under the global map path, which slicelet does not make).
func (m *Manager) VolumeStats(ctx context.Context, target string) (_ Usage, driver string, _ error) {
	if uid, spec, ok := m.blockLink(target); ok {
		data, err := loadVolData(blockDataDir(m.opts.PluginsDir, spec))
		if err != nil {
			return Usage{}, "", err
		}
		name := data[keyDriverName]
		u, err := m.volumeStats(ctx, name, data[keyVolHandle], BlockPublishPath(m.opts.PluginsDir, spec, uid))
		return u, name, err
	}
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

// blockLink reports whether path is a pod's link to a CSI block volume
// (<podsDir>/<uid>/volumeDevices/kubernetes.io~csi/<pv>, PodDeviceMapPath), and names the pod
// and the volume.
func (m *Manager) blockLink(path string) (uid, spec string, ok bool) {
	rel, err := filepath.Rel(m.opts.PodsDir, path)
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != 4 || parts[1] != volumeDevicesDir || parts[2] != pluginDirName || pathElement(parts[0]) != nil || pathElement(parts[3]) != nil {
		return "", "", false
	}
	return parts[0], parts[3], true
}
