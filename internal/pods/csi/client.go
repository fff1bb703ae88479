package csi

import (
	"context"
	"fmt"
	"net"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// maxDriverMessage bounds a message from a driver (gRPC's default receive limit, stated).
const maxDriverMessage = 4 << 20

// dial connects to a driver's or a registrar's unix socket, lazily (a call to a socket
// nothing serves fails with the call).
func dial(socket string) (*grpc.ClientConn, error) {
	socket = strings.TrimPrefix(socket, "unix://")
	return grpc.NewClient("passthrough:///"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxDriverMessage)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}))
}

// nodeCaps are the node service capabilities that change what the kubelet sends.
type nodeCaps struct {
	stageUnstage bool // STAGE_UNSTAGE_VOLUME: NodeStageVolume before NodePublishVolume
	mountGroup   bool // VOLUME_MOUNT_GROUP: the pod's fsGroup goes to the driver
	volumeStats  bool // GET_VOLUME_STATS: NodeGetVolumeStats answers
	expand       bool // EXPAND_VOLUME: NodeExpandVolume grows what is on a volume
}

// nodeCapabilities asks the driver's node service for its capabilities
// (NodeSupportsStageUnstage, NodeSupportsVolumeMountGroup, NodeSupportsNodeExpand).
func nodeCapabilities(ctx context.Context, c csipb.NodeClient) (nodeCaps, error) {
	resp, err := c.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nodeCaps{}, err
	}
	var out nodeCaps
	for _, cp := range resp.GetCapabilities() {
		switch cp.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			out.stageUnstage = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			out.mountGroup = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			out.volumeStats = true
		case csipb.NodeServiceCapability_RPC_EXPAND_VOLUME:
			out.expand = true
		}
	}
	return out, nil
}

// nodeInfo is a driver's NodeGetInfo answer.
type nodeInfo struct {
	NodeID     string
	MaxVolumes int64
	Topology   map[string]string
}

// getNodeInfo asks the driver who the node is to it (csiDriverClient.NodeGetInfo); an empty
// node ID is an error, as the kubelet's.
func getNodeInfo(ctx context.Context, c csipb.NodeClient) (nodeInfo, error) {
	resp, err := c.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return nodeInfo{}, err
	}
	if resp.GetNodeId() == "" {
		return nodeInfo{}, fmt.Errorf("node ID is empty")
	}
	out := nodeInfo{NodeID: resp.GetNodeId(), MaxVolumes: resp.GetMaxVolumesPerNode()}
	if t := resp.GetAccessibleTopology(); t != nil {
		out.Topology = t.GetSegments()
	}
	return out, nil
}

// volumeCapability is a mounted volume's capability in CSI terms: a mount of fsType with
// the mount options and the access mode (asCSIAccessModeV1, the single-node modes for the
// ReadWriteOnce family).
func volumeCapability(fsType string, mountOptions []string, accessMode csipb.VolumeCapability_AccessMode_Mode, mountGroup string) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: fsType, MountFlags: mountOptions, VolumeMountGroup: mountGroup,
		}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode},
	}
}
