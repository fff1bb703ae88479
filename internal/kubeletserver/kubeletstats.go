package kubeletserver

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/podstats"
)

// Summary is the kubelet's stats summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1, what
// metrics-server reads from /stats/summary) made of the samples the pod stats sampler already
// keeps: CPU as usageCoreNanoSeconds (cumulative) and usageNanoCores (between the last two
// samples), memory as workingSetBytes, usageBytes and rssBytes, swap as swapUsageBytes (and
// swapAvailableBytes under a swap limit), the pressure stall information of CPU, memory and
// I/O (psi), for the node, each pod and each container. pods give the start times (status.startTime, each container's running
// startedAt). volumes, if set, gives a pod's measured volumes (the pod's volume stats, as
// the kubelet's volume stat calculators: the local ephemeral ones first). What slicelet does
// not sample (the node's filesystems, network, page faults) is left out rather than invented.
func Summary(nodeName string, bootTime time.Time, node podstats.Latest[podstats.Usage], nodeOK bool, samples []podstats.PodLatest, pods []v1.Pod, volumes func(types.UID) []podstats.VolumeStat) statsv1alpha1.Summary {
	out := statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: nodeName, StartTime: metav1.NewTime(bootTime)}, Pods: []statsv1alpha1.PodStats{}}
	if nodeOK {
		out.Node.CPU = cpuStats(node.At, node.Usage, node.NanoCores)
		out.Node.Memory = memoryStats(node.At, node.Usage)
		out.Node.Swap = swapStats(node.At, node.Usage)
		out.Node.IO = ioStats(node.At, node.Usage)
	}
	byUID := make(map[types.UID]*v1.Pod, len(pods))
	for i := range pods {
		byUID[pods[i].UID] = &pods[i]
	}
	for _, s := range samples {
		ps := statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: s.Name, Namespace: s.Namespace, UID: string(s.UID)},
			CPU: cpuStats(s.At, s.Usage.Usage, s.NanoCores), Memory: memoryStats(s.At, s.Usage.Usage), Swap: swapStats(s.At, s.Usage.Usage),
			IO:         ioStats(s.At, s.Usage.Usage),
			Containers: []statsv1alpha1.ContainerStats{}}
		started := map[string]metav1.Time{}
		if p := byUID[s.UID]; p != nil {
			if p.Status.StartTime != nil {
				ps.StartTime = *p.Status.StartTime
			}
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if cs.State.Running != nil {
					started[cs.Name] = cs.State.Running.StartedAt
				}
			}
		}
		if volumes != nil {
			ps.VolumeStats = volumeStats(volumes(s.UID), s.Namespace)
		}
		for _, c := range s.Usage.Containers {
			var nano *uint64
			if n, ok := s.ContainerNanoCores[c.Name]; ok {
				nano = &n
			}
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: c.Name, StartTime: started[c.Name],
				CPU: cpuStats(s.At, c.Usage, nano), Memory: memoryStats(s.At, c.Usage), Swap: swapStats(s.At, c.Usage), IO: ioStats(s.At, c.Usage)})
		}
		out.Pods = append(out.Pods, ps)
	}
	return out
}

// cpuStats, memoryStats and ioStats carry the cgroup's pressure stall information (psi) as
// the kubelet's cAdvisor stats do with KubeletPSI (GA; pkg/kubelet/stats/helper.go
// cadvisorPSIToStatsPSI): always, zero where the kernel has no pressure files (cgroup v1, a
// kernel with PSI off), as cAdvisor's are.
func cpuStats(at time.Time, u podstats.Usage, nano *uint64) *statsv1alpha1.CPUStats {
	total := uint64(max(u.CPU, 0))
	return &statsv1alpha1.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: &total, UsageNanoCores: nano,
		PSI: psiStats(u.Stats.CPUPressure)}
}

func memoryStats(at time.Time, u podstats.Usage) *statsv1alpha1.MemoryStats {
	count := func(n int64) *uint64 { v := uint64(max(n, 0)); return &v }
	return &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: count(u.MemoryWorkingSet),
		UsageBytes: count(u.MemoryUsage), RSSBytes: count(u.MemoryRSS), PSI: psiStats(u.Stats.MemoryPressure)}
}

// ioStats is a cgroup's I/O stats as the summary reports them (cadvisorInfoToIOStats): its
// io.pressure.
func ioStats(at time.Time, u podstats.Usage) *statsv1alpha1.IOStats {
	return &statsv1alpha1.IOStats{Time: metav1.NewTime(at), PSI: psiStats(u.Stats.IOPressure)}
}

// psiStats is a pressure file's figures as the summary's (total in microseconds, averages
// in percent).
func psiStats(p eviction.PSIStats) *statsv1alpha1.PSIStats {
	d := func(d eviction.PSIData) statsv1alpha1.PSIData {
		return statsv1alpha1.PSIData{Total: d.Total, Avg10: d.Avg10, Avg60: d.Avg60, Avg300: d.Avg300}
	}
	return &statsv1alpha1.PSIStats{Full: d(p.Full), Some: d(p.Some)}
}

// swapStats is a cgroup's swap as cAdvisor's summary reports it (pkg/kubelet/stats
// cadvisorInfoToSwapStats): the swap used and, under a swap limit, what is left of it.
func swapStats(at time.Time, u podstats.Usage) *statsv1alpha1.SwapStats {
	used := uint64(max(u.Stats.Swap, 0))
	out := &statsv1alpha1.SwapStats{Time: metav1.NewTime(at), SwapUsageBytes: &used}
	if u.Stats.SwapLimit > 0 {
		left := uint64(max(u.Stats.SwapLimit-u.Stats.Swap, 0))
		out.SwapAvailableBytes = &left
	}
	return out
}

// volumeStats are a pod's volume stats as the kubelet's summary gives them
// (volumeStatCalculator.parsePodVolumeStats): each volume's name, its claim when a claim is
// behind it, and its bytes and inodes at the time it was measured; nil without any.
func volumeStats(vols []podstats.VolumeStat, namespace string) []statsv1alpha1.VolumeStats {
	if len(vols) == 0 {
		return nil
	}
	count := func(n int64) *uint64 { v := uint64(max(n, 0)); return &v }
	out := make([]statsv1alpha1.VolumeStats, 0, len(vols))
	for _, v := range vols {
		vs := statsv1alpha1.VolumeStats{Name: v.Name, FsStats: statsv1alpha1.FsStats{Time: metav1.NewTime(v.At),
			AvailableBytes: count(v.Available), CapacityBytes: count(v.Capacity), UsedBytes: count(v.Used),
			Inodes: count(v.Inodes), InodesFree: count(v.InodesFree), InodesUsed: count(v.InodesUsed)}}
		if v.Claim != "" {
			vs.PVCRef = &statsv1alpha1.PVCReference{Name: v.Claim, Namespace: namespace}
		}
		out = append(out, vs)
	}
	return out
}
