package eviction

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

// PodUsage is what a pod uses, the inputs of ranking, the eviction message and local-storage
// limit eviction.
type PodUsage struct {
	// Memory is the pod cgroup's working set (usage − inactive_file).
	Memory resource.Quantity `json:"memory"`
	// Processes is the number of tasks in the pod cgroup.
	Processes int64 `json:"processes"`
	// EphemeralStorage is the pod's local storage: container writable layers, logs and local
	// volumes (measured by the caller; the cgroup does not know it).
	EphemeralStorage resource.Quantity `json:"ephemeralStorage"`
	// Inodes is the inodes the pod's local storage uses (0 when not measured).
	Inodes int64 `json:"inodes,omitempty"`
	// Containers is per-container usage where known; it feeds the offending-container lines
	// of the eviction message and the container ephemeral-storage limits.
	Containers []ContainerUsage `json:"containers,omitempty"`
	// Volumes is the bytes used by each volume, by name, where known (emptyDir sizeLimit).
	Volumes map[string]resource.Quantity `json:"volumes,omitempty"`
	// NoStorageStats is true when the pod's local storage was not measured (no PodStorage, or
	// its measurement failed): EphemeralStorage, Inodes and Volumes mean nothing then. Under
	// disk pressure the pod ranks as a pod without stats (first, as the kubelet ranks them),
	// and its local-storage limits are not checked. Memory and processes are unaffected.
	NoStorageStats bool `json:"noStorageStats,omitempty"`
}

// ContainerUsage is one container's usage; nil means not measured.
type ContainerUsage struct {
	// Name is the container's name in the pod spec.
	Name string `json:"name"`
	// Memory is the container's working set.
	Memory *resource.Quantity `json:"memory,omitempty"`
	// EphemeralStorage is the container's writable layer plus its logs.
	EphemeralStorage *resource.Quantity `json:"ephemeralStorage,omitempty"`
}

// PodStats is an active pod with what it uses. Usage nil means no stats were found for it:
// the kubelet ranks such pods first.
type PodStats struct {
	// Pod is the pod.
	Pod *v1.Pod
	// Usage is its usage, or nil.
	Usage *PodUsage
}

// ReadPodUsage reads a pod cgroup's memory working set and process count
// (podCgroupPath as slices.PodCgroupPath gives it). Local storage is not in the cgroup: it is
// measured by walking the pod's directories (PodStorage, FSStorage), which the manager adds.
// The error wraps ErrUnavailable when the cgroup or a controller file is missing (a pod
// starting or gone).
func ReadPodUsage(cgroupRoot string, mode units.Mode, podCgroupPath string) (PodUsage, error) {
	m, err := ReadCgroupMemory(cgroupRoot, mode, podCgroupPath)
	if err != nil {
		return PodUsage{}, err
	}
	procs, err := ReadPodProcesses(cgroupRoot, mode, podCgroupPath)
	if err != nil {
		return PodUsage{}, err
	}
	return PodUsage{Memory: *resource.NewQuantity(m.WorkingSet, resource.BinarySI), Processes: procs}, nil
}

// Sources says where the node-level signals come from. Every path is injected.
type Sources struct {
	// CgroupRoot is the cgroup filesystem (normally /sys/fs/cgroup).
	CgroupRoot string
	// ProcRoot is procfs (normally /proc).
	ProcRoot string
	// Mode is the cgroup layout (units.DetectMode).
	Mode units.Mode
	// KubepodsCgroup is the kubepods cgroup ("/kubepods.slice"); empty means no
	// allocatableMemory.available observation.
	KubepodsCgroup string
	// NodeFsPath is a directory on nodefs (the state directory); empty means no nodefs
	// observation.
	NodeFsPath string
	// ImageFsPath is a directory on the image filesystem; empty means the same as nodefs
	// (the systemd runtime; a single-filesystem layout).
	ImageFsPath string
	// ImageFsPathOf, when set, gives the image filesystem's directory at each observation
	// instead of ImageFsPath: the CRI runtime reports its image store's mountpoint, which is
	// only known once the runtime answered. An error (runtime unreachable) leaves imagefs.*
	// and containerfs.* unobserved, with that reason.
	ImageFsPathOf func() (string, error)
}

// Observe reads every node-level signal at now. A signal that cannot be read is left out of
// the observations and reported in the second result (each with the reason), so the caller
// can log a state change once instead of failing.
//
// In the single-filesystem layout (ImageFsPath empty or equal to NodeFsPath) imagefs.* and
// containerfs.* are the nodefs observations, as the kubelet's summary reports them when the
// runtime's filesystems are the node's.
func (s Sources) Observe(now time.Time) (Observations, []Unavailable) {
	obs := Observations{}
	var missing []Unavailable
	note := func(sig Signal, err error) { missing = append(missing, Unavailable{Signal: sig, Err: err}) }

	if o, err := ReadMemory(s.CgroupRoot, s.ProcRoot, s.Mode, now); err != nil {
		note(SignalMemoryAvailable, err)
	} else {
		obs[SignalMemoryAvailable] = o
	}
	if s.KubepodsCgroup != "" {
		if o, err := ReadAllocatableMemory(s.CgroupRoot, s.Mode, s.KubepodsCgroup, now); err != nil {
			note(SignalAllocatableMemoryAvailable, err)
		} else {
			obs[SignalAllocatableMemoryAvailable] = o
		}
	}
	if o, err := ReadPIDs(s.ProcRoot, now); err != nil {
		note(SignalPIDAvailable, err)
	} else {
		obs[SignalPIDAvailable] = o
	}
	fsSignals := func(path string, avail, inodes Signal) (Observation, *Observation, bool) {
		b, in, err := ReadFs(path, now)
		if err != nil {
			note(avail, err)
			note(inodes, err)
			return Observation{}, nil, false
		}
		obs[avail] = b
		if in != nil {
			obs[inodes] = *in
		} else {
			note(inodes, fmt.Errorf("statfs %s reports no inodes: %w", path, ErrUnavailable))
		}
		return b, in, true
	}
	if s.NodeFsPath == "" {
		return obs, missing
	}
	b, in, ok := fsSignals(s.NodeFsPath, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	imagePath := s.ImageFsPath
	if s.ImageFsPathOf != nil {
		p, err := s.ImageFsPathOf()
		if err != nil {
			for _, sig := range []Signal{SignalImageFsAvailable, SignalImageFsInodesFree, SignalContainerFsAvailable, SignalContainerFsInodesFree} {
				note(sig, fmt.Errorf("image filesystem: %w", err))
			}
			return obs, missing
		}
		imagePath = p
	}
	if imagePath == "" || imagePath == s.NodeFsPath {
		if ok {
			obs[SignalImageFsAvailable] = b
			obs[SignalContainerFsAvailable] = b
			if in != nil {
				obs[SignalImageFsInodesFree] = *in
				obs[SignalContainerFsInodesFree] = *in
			}
		}
		return obs, missing
	}
	// A dedicated image filesystem holds the runtime's writable layers too (containerd's root):
	// containerfs.* is imagefs.*, as the kubelet's summary reports it without a split.
	ib, iin, iok := fsSignals(imagePath, SignalImageFsAvailable, SignalImageFsInodesFree)
	if iok {
		obs[SignalContainerFsAvailable] = ib
		if iin != nil {
			obs[SignalContainerFsInodesFree] = *iin
		}
	}
	return obs, missing
}
