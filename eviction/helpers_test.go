package eviction

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Builders in the shape of the kubelet's eviction tests (helpers_test.go), so ported cases
// read like their originals.

const (
	lowPriority     = int32(-1)
	defaultPriority = int32(0)
	highPriority    = int32(1)
)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func newResourceList(cpu, memory, disk string) v1.ResourceList {
	rl := v1.ResourceList{}
	if cpu != "" {
		rl[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		rl[v1.ResourceMemory] = resource.MustParse(memory)
	}
	if disk != "" {
		rl[v1.ResourceEphemeralStorage] = resource.MustParse(disk)
	}
	return rl
}

func newContainer(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

// newPod uses the name as the UID; names must be unique within a test.
func newPod(name string, priority int32, containers []v1.Container, volumes []v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       v1.PodSpec{Containers: containers, Volumes: volumes, Priority: &priority},
	}
}

func emptyDirVolume(name string) []v1.Volume {
	return []v1.Volume{{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
}

func memStats(pod *v1.Pod, workingSet string) PodStats {
	return PodStats{Pod: pod, Usage: &PodUsage{Memory: resource.MustParse(workingSet)}}
}

// diskStats is the kubelet's newPodDiskStats for a one-container pod with one local volume:
// usage = rootfs + logs + volume.
func diskStats(pod *v1.Pod, rootfs, logs, volume string) PodStats {
	total := resource.MustParse(rootfs)
	total.Add(resource.MustParse(logs))
	total.Add(resource.MustParse(volume))
	return PodStats{Pod: pod, Usage: &PodUsage{EphemeralStorage: total}}
}

// inodeStats is newPodInodeStats for a one-container pod with one local volume.
func inodeStats(pod *v1.Pod, rootfs, logs, volume int64) PodStats {
	return PodStats{Pod: pod, Usage: &PodUsage{Inodes: rootfs + logs + volume}}
}

func procStats(pod *v1.Pod, n int64) PodStats {
	return PodStats{Pod: pod, Usage: &PodUsage{Processes: n}}
}

func obsOf(available, capacity string) Observation {
	o := Observation{Available: resource.MustParse(available)}
	if capacity != "" {
		o.Capacity = resource.MustParse(capacity)
	}
	return o
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
