// Package csi is the kubelet's CSI volume plugin on a slicelet node (pkg/volume/csi and
// pkg/kubelet/pluginmanager): CSI node plugins register through the plugin-registration
// directory (the pluginregistration v1 Registration service their node-driver-registrar
// serves), their NodeGetInfo goes to the node's CSINode object, and the volumes of a pod —
// a persistent volume with spec.csi behind a claim, or an inline csi volume — are staged
// (NodeStageVolume, when the driver has STAGE_UNSTAGE_VOLUME) and published
// (NodePublishVolume) at the kubelet's paths, then unpublished and unstaged when the pod is
// done. The decisions (paths, requests) are pure functions; the gRPC calls and the files are
// the Manager's.
package csi

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// The kubelet's names (pkg/volume/csi/csi_plugin.go, csi_util.go).
const (
	// PluginName is the CSI volume plugin's name; escaped (kubernetes.io~csi) it names the
	// directory of a pod's CSI volumes.
	PluginName = "kubernetes.io/csi"
	// pluginDirName is PluginName escaped for a path (utilstrings.EscapeQualifiedName).
	pluginDirName = "kubernetes.io~csi"
	// globalMount is the staging directory of a volume (globalMountInGlobalPath).
	globalMount = "globalmount"
	// volDataFile keeps what a teardown needs beside a mount (volDataFileName).
	volDataFile = "vol_data.json"
	// mountDir is a pod's published volume under its volume directory.
	mountDir = "mount"
)

// The keys of vol_data.json (volDataKey in pkg/volume/csi/csi_plugin.go).
const (
	keySpecVolID    = "specVolID"
	keyVolHandle    = "volumeHandle"
	keyDriverName   = "driverName"
	keyNodeName     = "nodeName"
	keyAttachmentID = "attachmentID"
	keyLifecycle    = "volumeLifecycleMode"
)

// The volume context keys the kubelet adds for a driver with podInfoOnMount
// (getPodInfoAttrs in pkg/volume/csi/csi_mounter.go).
const (
	attrPodName        = "csi.storage.k8s.io/pod.name"
	attrPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	attrPodUID         = "csi.storage.k8s.io/pod.uid"
	attrServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	attrEphemeral      = "csi.storage.k8s.io/ephemeral"
)

// sha256Hex is the lower-case hex SHA-256 of s.
func sha256Hex(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
}

// DeviceMountPath is where a persistent volume is staged: <pluginsDir>/kubernetes.io/csi/
// <driver>/<sha256(volumeHandle)>/globalmount (makeDeviceMountPath). pluginsDir is the
// kubelet's /var/lib/kubelet/plugins.
func DeviceMountPath(pluginsDir, driver, handle string) string {
	return filepath.Join(pluginsDir, PluginName, driver, sha256Hex(handle), globalMount)
}

// PublishPath is where a pod's CSI volume is published: <podsDir>/<uid>/volumes/
// kubernetes.io~csi/<specName>/mount, specName being the persistent volume's name or, inline,
// the pod's volume name (the kubelet's GetPodVolumeDir and csiMountMgr.GetPath).
func PublishPath(podsDir, uid, specName string) string {
	return filepath.Join(podVolumesDir(podsDir, uid), specName, mountDir)
}

// podVolumesDir is the directory of the pod's CSI volumes.
func podVolumesDir(podsDir, uid string) string {
	return filepath.Join(podsDir, uid, "volumes", pluginDirName)
}

// AttachmentName is the VolumeAttachment of a volume on a node: "csi-" and the SHA-256 of
// handle, driver and node (getAttachmentName).
func AttachmentName(handle, driver, node string) string {
	return "csi-" + sha256Hex(handle+driver+node)
}

// EphemeralHandle is the volume handle of a pod's inline csi volume: "csi-" and the SHA-256
// of the pod's UID and the volume's name (makeVolumeHandle).
func EphemeralHandle(podUID, volume string) string {
	return "csi-" + sha256Hex(podUID+volume)
}

// PodInfo is the volume context a driver with podInfoOnMount gets about the pod.
func PodInfo(pod *v1.Pod, mode storagev1.VolumeLifecycleMode) map[string]string {
	return map[string]string{
		attrPodName:        pod.Name,
		attrPodNamespace:   pod.Namespace,
		attrPodUID:         string(pod.UID),
		attrServiceAccount: pod.Spec.ServiceAccountName,
		attrEphemeral:      strconv.FormatBool(mode == storagev1.VolumeLifecycleEphemeral),
	}
}

// maxVolData bounds a vol_data.json read back: the kubelet's holds six short values.
const maxVolData = 64 << 10

// saveVolData writes data as dir/vol_data.json (saveVolumeData), atomically.
func saveVolData(dir string, data map[string]string) error {
	if err := atomicfile.WriteJSON(filepath.Join(dir, volDataFile), data); err != nil {
		return fmt.Errorf("volume data: %w", err)
	}
	return nil
}

// loadVolData reads dir/vol_data.json (loadVolumeData).
func loadVolData(dir string) (map[string]string, error) {
	p := filepath.Join(dir, volDataFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxVolData {
		return nil, fmt.Errorf("volume data %s: %d bytes, more than %d", p, st.Size(), maxVolData)
	}
	data := map[string]string{}
	if err := json.NewDecoder(f).Decode(&data); err != nil {
		return nil, fmt.Errorf("volume data %s: %w", p, err)
	}
	if data[keyVolHandle] == "" || data[keyDriverName] == "" {
		return nil, fmt.Errorf("volume data %s: no %s or %s", p, keyVolHandle, keyDriverName)
	}
	return data, nil
}

// removeEmpty removes dir if it exists and is empty (a mount left on it keeps it: the
// volume's data is never removed).
func removeEmpty(dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
