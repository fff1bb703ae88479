package kubeletserver

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/podstats"
)

func TestKubeletSummary(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	boot := at.Add(-time.Hour)
	nano := uint64(250e6)
	node := podstats.Latest[podstats.Usage]{At: at, Usage: podstats.Usage{MemoryWorkingSet: 1 << 30, CPU: 90 * time.Second}, NanoCores: &nano}
	samples := []podstats.PodLatest{{Namespace: "default", Name: "web", UID: "u1", Latest: podstats.Latest[podstats.PodUsage]{At: at,
		Usage: podstats.PodUsage{Usage: podstats.Usage{MemoryWorkingSet: 64 << 20, CPU: 3 * time.Second},
			Containers: []podstats.ContainerUsage{{Name: "app", Usage: podstats.Usage{MemoryWorkingSet: 60 << 20, MemoryUsage: 70 << 20, MemoryRSS: 50 << 20, CPU: 2 * time.Second,
				Stats: eviction.CgroupStats{Swap: 1 << 20, SwapLimit: 5 << 20,
					CPUPressure:    eviction.PSIStats{Some: eviction.PSIData{Avg10: 1.5, Avg60: 0.5, Avg300: 0.25, Total: 2500000}, Full: eviction.PSIData{Total: 1000}},
					MemoryPressure: eviction.PSIStats{Some: eviction.PSIData{Total: 300}, Full: eviction.PSIData{Total: 200}},
					IOPressure:     eviction.PSIStats{Some: eviction.PSIData{Total: 60}, Full: eviction.PSIData{Total: 50}}}}}}},
		ContainerNanoCores: map[string]uint64{"app": 1e8}}}}
	started := metav1.NewTime(at.Add(-time.Minute))
	pods := []v1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: v1.PodStatus{StartTime: &started,
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}}}}}

	vols := map[types.UID][]podstats.VolumeStat{"u1": {
		{Volume: podstats.Volume{Name: "scratch", Plugin: "kubernetes.io/empty-dir", LocalEphemeral: true}, At: at,
			VolumeUsage: podstats.VolumeUsage{Capacity: 100, Available: 60, Used: 8, Inodes: 10, InodesFree: 6, InodesUsed: 2}},
		{Volume: podstats.Volume{Name: "data", Plugin: "kubernetes.io/csi", Claim: "data-web-0"}, At: at, VolumeUsage: podstats.VolumeUsage{Capacity: 5 << 30}},
	}}
	s := Summary("node-1", boot, node, true, samples, pods, func(uid types.UID) []podstats.VolumeStat { return vols[uid] })
	tests := []struct {
		name string
		ok   bool
	}{
		{name: "node name and boot time", ok: s.Node.NodeName == "node-1" && s.Node.StartTime.Time.Equal(boot)},
		{name: "node cpu cumulative and rate", ok: *s.Node.CPU.UsageCoreNanoSeconds == 90e9 && *s.Node.CPU.UsageNanoCores == 250e6},
		{name: "node working set", ok: *s.Node.Memory.WorkingSetBytes == 1<<30 && s.Node.Memory.Time.Time.Equal(at)},
		{name: "pod reference", ok: len(s.Pods) == 1 && s.Pods[0].PodRef.Name == "web" && s.Pods[0].PodRef.UID == "u1"},
		{name: "pod start time from its status", ok: s.Pods[0].StartTime.Equal(&started)},
		{name: "pod without a rate yet has none", ok: s.Pods[0].CPU.UsageNanoCores == nil && *s.Pods[0].CPU.UsageCoreNanoSeconds == 3e9},
		{name: "container stats", ok: len(s.Pods[0].Containers) == 1 && *s.Pods[0].Containers[0].CPU.UsageNanoCores == 1e8 &&
			*s.Pods[0].Containers[0].Memory.WorkingSetBytes == 60<<20 && s.Pods[0].Containers[0].StartTime.Equal(&started)},
		{name: "container memory usage and rss", ok: *s.Pods[0].Containers[0].Memory.UsageBytes == 70<<20 && *s.Pods[0].Containers[0].Memory.RSSBytes == 50<<20},
		{name: "container swap used and left under its limit", ok: *s.Pods[0].Containers[0].Swap.SwapUsageBytes == 1<<20 && *s.Pods[0].Containers[0].Swap.SwapAvailableBytes == 4<<20},
		{name: "pod swap without a limit: nothing available reported", ok: *s.Pods[0].Swap.SwapUsageBytes == 0 && s.Pods[0].Swap.SwapAvailableBytes == nil},
		{name: "node swap", ok: s.Node.Swap != nil && *s.Node.Swap.SwapUsageBytes == 0 && s.Node.Swap.Time.Time.Equal(at)},
		{name: "volume stats in order, a claim's with its reference", ok: len(s.Pods[0].VolumeStats) == 2 &&
			s.Pods[0].VolumeStats[0].Name == "scratch" && s.Pods[0].VolumeStats[0].PVCRef == nil && *s.Pods[0].VolumeStats[0].UsedBytes == 8 &&
			*s.Pods[0].VolumeStats[0].InodesFree == 6 && *s.Pods[0].VolumeStats[0].AvailableBytes == 60 && s.Pods[0].VolumeStats[0].Time.Time.Equal(at) &&
			s.Pods[0].VolumeStats[1].Name == "data" && *s.Pods[0].VolumeStats[1].PVCRef == statsv1alpha1.PVCReference{Name: "data-web-0", Namespace: "default"} &&
			*s.Pods[0].VolumeStats[1].CapacityBytes == 5<<30 && *s.Pods[0].VolumeStats[1].UsedBytes == 0},
		{name: "container pressure stall information of cpu, memory and io", ok: *s.Pods[0].Containers[0].CPU.PSI == statsv1alpha1.PSIStats{
			Some: statsv1alpha1.PSIData{Avg10: 1.5, Avg60: 0.5, Avg300: 0.25, Total: 2500000}, Full: statsv1alpha1.PSIData{Total: 1000}} &&
			s.Pods[0].Containers[0].Memory.PSI.Some.Total == 300 && s.Pods[0].Containers[0].Memory.PSI.Full.Total == 200 &&
			s.Pods[0].Containers[0].IO.PSI.Some.Total == 60 && s.Pods[0].Containers[0].IO.PSI.Full.Total == 50 && s.Pods[0].Containers[0].IO.Time.Time.Equal(at)},
		// As the kubelet's cAdvisor stats: psi is always there, zero without pressure files.
		{name: "pod and node pressure, zero where not read", ok: s.Pods[0].CPU.PSI != nil && *s.Pods[0].CPU.PSI == statsv1alpha1.PSIStats{} &&
			s.Pods[0].IO != nil && s.Node.CPU.PSI != nil && s.Node.Memory.PSI != nil && s.Node.IO != nil && s.Node.IO.PSI != nil},
		{name: "what is not sampled is left out", ok: s.Pods[0].Memory.PageFaults == nil && s.Pods[0].Network == nil && s.Node.Fs == nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("summary %+v", s)
			}
		})
	}
	if empty := Summary("node-1", boot, podstats.Latest[podstats.Usage]{}, false, nil, nil, nil); empty.Node.CPU != nil || empty.Pods == nil {
		t.Errorf("no samples: %+v, want no node CPU and an empty pod list", empty)
	}
}
