package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// This file is the kubelet's CSI block volume mapper (pkg/volume/csi/csi_block.go): a
// persistent volume of volumeMode Block is staged and published as a device, not a
// filesystem, at the kubelet's paths under <pluginsDir>/kubernetes.io/csi/volumeDevices, and
// the pod gets a symbolic link to the published device that the runtime resolves into the
// container's device (CRI Device host_path).

// volumeDevicesDir is the kubelet's directory name of block volumes (volumeDevices).
const volumeDevicesDir = "volumeDevices"

// blockPluginDir is the CSI plugin's block volume directory (GetVolumeDevicePluginDir).
func blockPluginDir(pluginsDir string) string {
	return filepath.Join(pluginsDir, PluginName, volumeDevicesDir)
}

// BlockStagingPath is where a block volume is staged: <pluginsDir>/kubernetes.io/csi/
// volumeDevices/staging/<pv> (csiBlockMapper.GetStagingPath).
func BlockStagingPath(pluginsDir, specName string) string {
	return filepath.Join(blockPluginDir(pluginsDir), "staging", specName)
}

// BlockPublishPath is where a block volume is published for the pod uid (the device file
// the driver makes): <pluginsDir>/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>
// (getPublishPath).
func BlockPublishPath(pluginsDir, specName, uid string) string {
	return filepath.Join(blockPluginDir(pluginsDir), "publish", specName, uid)
}

// blockDataDir holds a block volume's vol_data.json: <pluginsDir>/kubernetes.io/csi/
// volumeDevices/<pv>/data (getVolumeDeviceDataDir).
func blockDataDir(pluginsDir, specName string) string {
	return filepath.Join(blockPluginDir(pluginsDir), specName, "data")
}

// PodDeviceMapPath is the pod's link to its published block volume, the host path of the
// containers' device: <podsDir>/<uid>/volumeDevices/kubernetes.io~csi/<pv>
// (GetPodDeviceMapPath).
func PodDeviceMapPath(podsDir, uid, specName string) string {
	return filepath.Join(podsDir, uid, volumeDevicesDir, pluginDirName, specName)
}

// blockCapability is a block volume's capability in CSI terms (fsTypeBlockName).
func blockCapability(accessMode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode},
	}
}

// SetUpBlock maps the persistent block volume vol for pod and returns the host path of its
// device for the containers (PodDeviceMapPath, a link to the published device): the
// kubelet's SetUpDevice (NodeStageVolume at BlockStagingPath, when the driver has
// STAGE_UNSTAGE_VOLUME) and MapPodDevice (NodePublishVolume at BlockPublishPath), with the
// block capability and vol_data.json in the volume's data directory. As SetUp, calls are
// idempotent. What the kubelet adds to pin the device while it is used (a bind mount under
// the global map path and a loop device over it) is not done: the driver's published
// device is what the container gets.
func (m *Manager) SetUpBlock(ctx context.Context, pod *v1.Pod, vol Volume) (string, error) {
	for _, name := range []string{vol.Driver, vol.SpecName, string(pod.UID)} {
		if err := pathElement(name); err != nil {
			return "", err
		}
	}
	if vol.Mode != storagev1.VolumeLifecyclePersistent {
		return "", fmt.Errorf("volume %s: only a persistent volume can be a block device", vol.SpecName)
	}
	node, err := m.nodeClient(vol.Driver)
	if err != nil {
		return "", err
	}
	pol, err := m.policy(vol.Driver)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	caps, err := nodeCapabilities(ctx, node)
	if err != nil {
		return "", fmt.Errorf("driver %s: NodeGetCapabilities: %w", vol.Driver, err)
	}
	capability := blockCapability(accessMode(vol.AccessModes))
	defer m.lockVolume(vol.Driver, vol.Handle)()

	publishContext, err := m.publishContext(vol, pol)
	if err != nil {
		return "", err
	}
	dataDir := blockDataDir(m.opts.PluginsDir, vol.SpecName)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", fmt.Errorf("failed to create data dir %s: %w", dataDir, err)
	}
	if err := saveVolData(dataDir, map[string]string{
		keySpecVolID:    vol.SpecName,
		keyVolHandle:    vol.Handle,
		keyDriverName:   vol.Driver,
		keyNodeName:     m.opts.NodeName,
		keyAttachmentID: AttachmentName(vol.Handle, vol.Driver, m.opts.NodeName),
	}); err != nil {
		return "", err
	}
	staging := ""
	if caps.stageUnstage {
		staging = BlockStagingPath(m.opts.PluginsDir, vol.SpecName)
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return "", fmt.Errorf("blockMapper.stageVolumeForBlock failed to create dir %s: %w", staging, err)
		}
		secrets, err := m.secret(vol.StageSecret)
		if err != nil {
			return "", fmt.Errorf("failed to get NodeStageSecretRef %s/%s: %w", vol.StageSecret.Namespace, vol.StageSecret.Name, err)
		}
		if _, err := node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.Handle, PublishContext: publishContext,
			StagingTargetPath: staging, VolumeCapability: capability, Secrets: secrets, VolumeContext: vol.Attributes}); err != nil {
			return "", fmt.Errorf("rpc error: NodeStageVolume of volume %s: %w", vol.Handle, err)
		}
	}
	publish := BlockPublishPath(m.opts.PluginsDir, vol.SpecName, string(pod.UID))
	if err := os.MkdirAll(filepath.Dir(publish), 0o750); err != nil {
		return "", fmt.Errorf("blockMapper.publishVolumeForBlock failed to create dir %s: %w", filepath.Dir(publish), err)
	}
	attrs, secrets, err := m.publishInputs(pod, vol, pol)
	if err != nil {
		return "", err
	}
	if _, err := node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: vol.Handle, PublishContext: publishContext,
		StagingTargetPath: staging, TargetPath: publish, VolumeCapability: capability, Readonly: vol.ReadOnly,
		Secrets: secrets, VolumeContext: attrs}); err != nil {
		return "", fmt.Errorf("rpc error: NodePublishVolume of volume %s: %w", vol.Handle, err)
	}
	link := PodDeviceMapPath(m.opts.PodsDir, string(pod.UID), vol.SpecName)
	if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
		return "", fmt.Errorf("volume %s: %w", vol.SpecName, err)
	}
	if err := replaceLink(publish, link); err != nil {
		return "", fmt.Errorf("volume %s: %w", vol.SpecName, err)
	}
	m.log.Info("csi block volume published", "pod_uid", string(pod.UID), "volume", vol.SpecName, "driver", vol.Driver, "volume_handle", vol.Handle, "staged", staging != "", "path", publish)
	return link, nil
}

// replaceLink makes link a symbolic link to target, replacing what link was.
func replaceLink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// tearDownBlock unmaps every block volume of the pod uid: the kubelet's UnmapPodDevice
// (NodeUnpublishVolume, the published device and the pod's link removed) then, when no other
// pod publishes the volume, TearDownDevice (NodeUnstageVolume, the staging and data
// directories removed).
func (m *Manager) tearDownBlock(ctx context.Context, uid string) error {
	dir := filepath.Dir(PodDeviceMapPath(m.opts.PodsDir, uid, "x"))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("csi block volumes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if err := m.unmapBlock(ctx, uid, e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("block volume %s: %w", e.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := removeEmpty(dir); err != nil {
		return err
	}
	return removeEmpty(filepath.Dir(dir))
}

// unmapBlock tears down the block volume spec of the pod uid.
func (m *Manager) unmapBlock(ctx context.Context, uid, spec string) error {
	link := PodDeviceMapPath(m.opts.PodsDir, uid, spec)
	data, err := loadVolData(blockDataDir(m.opts.PluginsDir, spec))
	if errors.Is(err, fs.ErrNotExist) {
		return os.Remove(link) // nothing was published behind it
	}
	if err != nil {
		return err
	}
	name, handle, node, err := m.dataNode(data)
	if err != nil {
		return err
	}
	defer m.lockVolume(name, handle)()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	publish := BlockPublishPath(m.opts.PluginsDir, spec, uid)
	if err := nodeUnpublish(ctx, node, handle, publish, "published device"); err != nil {
		return err
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	m.log.Info("csi block volume unpublished", "pod_uid", uid, "volume", spec, "driver", name, "volume_handle", handle)
	left, err := os.ReadDir(filepath.Dir(publish))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(left) > 0 {
		return nil // another pod publishes it
	}
	if err := removeEmpty(filepath.Dir(publish)); err != nil {
		return err
	}
	staging := BlockStagingPath(m.opts.PluginsDir, spec)
	if _, err := os.Stat(staging); err == nil {
		if err := nodeUnstage(ctx, node, handle, staging); err != nil {
			return err
		}
		m.log.Info("csi block volume unstaged", "driver", name, "volume_handle", handle)
	}
	dataDir := blockDataDir(m.opts.PluginsDir, spec)
	if err := os.Remove(filepath.Join(dataDir, volDataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := removeEmpty(dataDir); err != nil {
		return err
	}
	return removeEmpty(filepath.Dir(dataDir))
}
