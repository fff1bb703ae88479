package kubeletserver

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
				Stats: eviction.CgroupStats{Swap: 1 << 20, SwapLimit: 5 << 20}}}}},
		ContainerNanoCores: map[string]uint64{"app": 1e8}}}}
	started := metav1.NewTime(at.Add(-time.Minute))
	pods := []v1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: v1.PodStatus{StartTime: &started,
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}}}}}

	s := Summary("node-1", boot, node, true, samples, pods)
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
		{name: "what is not sampled is left out", ok: s.Pods[0].Memory.PageFaults == nil && s.Pods[0].Network == nil && s.Node.Fs == nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("summary %+v", s)
			}
		})
	}
	if empty := Summary("node-1", boot, podstats.Latest[podstats.Usage]{}, false, nil, nil); empty.Node.CPU != nil || empty.Pods == nil {
		t.Errorf("no samples: %+v, want no node CPU and an empty pod list", empty)
	}
}
