package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	stdslices "slices"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// CheckpointFile is the checkpoint's name in the plugin directory, the kubelet's
// (kubeletDeviceManagerCheckpoint): the kubelet's own format (its checkpoint package, checksum
// included), so a node's allocations read the same to both.
const CheckpointFile = "kubelet_internal_checkpoint"

// maxCheckpointBytes bounds the checkpoint read at start: far above what 110 pods' allocations
// take (each entry holds a plugin's answer, a few KiB at most).
const maxCheckpointBytes = 16 << 20

// WriteCheckpoint writes allocs and the registered resources' healthy devices to path
// atomically, in the kubelet's checkpoint format.
func WriteCheckpoint(path string, allocs []Allocation, registered map[string][]string) error {
	entries := make([]checkpoint.PodDevicesEntry, 0, len(allocs))
	for _, a := range allocs {
		var resp []byte
		if a.Response != nil {
			b, err := proto.Marshal(a.Response)
			if err != nil {
				return fmt.Errorf("device checkpoint: allocation of %s to pod %s container %s: %w", a.Resource, a.PodUID, a.Container, err)
			}
			resp = b
		}
		entries = append(entries, checkpoint.PodDevicesEntry{PodUID: a.PodUID, ContainerName: a.Container, ResourceName: a.Resource,
			DeviceIDs: checkpoint.DevicesPerNUMA(a.DeviceIDs), AllocResp: resp})
	}
	if registered == nil {
		registered = map[string][]string{}
	}
	data, err := checkpoint.New(entries, registered).MarshalCheckpoint()
	if err != nil {
		return fmt.Errorf("device checkpoint: %w", err)
	}
	return atomicfile.WriteFile(path, data)
}

// ReadCheckpoint reads path: the allocations and the resources that were registered. A missing
// file is no allocation; a corrupt one (bad JSON, a wrong checksum) is an error naming the
// file.
func ReadCheckpoint(path string) ([]Allocation, []string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("device checkpoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("device checkpoint: %w", err)
	}
	if st.Size() > maxCheckpointBytes {
		return nil, nil, fmt.Errorf("device checkpoint %s: %d bytes, more than %d", path, st.Size(), maxCheckpointBytes)
	}
	blob := make([]byte, st.Size())
	if _, err := f.ReadAt(blob, 0); err != nil {
		return nil, nil, fmt.Errorf("device checkpoint %s: %w", path, err)
	}
	cp := checkpoint.New(nil, nil)
	if err := cp.UnmarshalCheckpoint(blob); err != nil {
		return nil, nil, fmt.Errorf("device checkpoint %s: %w", path, err)
	}
	if err := cp.VerifyChecksum(); err != nil {
		return nil, nil, fmt.Errorf("device checkpoint %s: %w", path, err)
	}
	entries, registered := cp.GetData()
	var out []Allocation
	for _, e := range entries {
		a := Allocation{PodUID: e.PodUID, Container: e.ContainerName, Resource: e.ResourceName, DeviceIDs: map[int64][]string(e.DeviceIDs)}
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			return nil, nil, fmt.Errorf("device checkpoint %s: allocation of %s to pod %s container %s: %w", path, e.ResourceName, e.PodUID, e.ContainerName, err)
		}
		a.Response = resp
		out = append(out, a)
	}
	var names []string
	for name := range registered {
		names = append(names, name)
	}
	stdslices.Sort(names)
	return out, names, nil
}

// checkpointPath is the checkpoint in dir.
func checkpointPath(dir string) string { return filepath.Join(dir, CheckpointFile) }
