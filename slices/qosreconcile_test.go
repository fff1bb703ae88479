package slices

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// jPods are a Guaranteed pod (1 CPU, 128Mi) and two Burstable ones (1 CPU/128Mi with limits,
// 2 CPU/256Mi without): the active pods of the QoS reconcile cases.
func jPods() (g, b1, b2 *v1.Pod) {
	return podOf(c("g", "1/128Mi", "1/128Mi")), podOf(c("b1", "1/128Mi", "2/256Mi")), podOf(c("b2", "2/256Mi", "—"))
}

func TestQOSConfigs(t *testing.T) {
	g, b1, b2 := jPods()
	all := []*v1.Pod{g, b1, b2}
	be := podOf(c("be", "—", "—"))
	tiered := QOSOptions{EnforceMemoryQoS: true, MemoryReservationPolicy: MemoryReservationTiered}
	none := QOSOptions{EnforceMemoryQoS: true, MemoryReservationPolicy: MemoryReservationNone}
	fifty := int64(50)
	reserve := QOSOptions{QOSReservedMemoryPercent: &fifty, NodeAllocatableMemory: 4 * gi}
	reserveNoAlloc := QOSOptions{QOSReservedMemoryPercent: &fifty}
	huge := QOSOptions{HugePageSizes: []int64{2 * mi, gi}}

	tests := []struct {
		name                            string
		pods                            []*v1.Pod
		opts                            QOSOptions
		kubepods, burstable, besteffort expect
	}{
		{"Burstable shares are the sum of the Burstable CPU requests", all, QOSOptions{}, expect{}, expect{S: u64(3072)}, expect{S: u64(2)}},
		{"Guaranteed pods leave Burstable at the minimum shares", []*v1.Pod{g}, QOSOptions{}, expect{}, expect{S: u64(2)}, expect{S: u64(2)}},
		{"memory QoS tiered: kubepods memory.min of all requests, Burstable memory.low of its own", all, tiered,
			expect{U: map[string]string{"memory.min": "536870912"}},
			expect{S: u64(3072), U: map[string]string{"memory.low": "402653184"}},
			expect{S: u64(2)}},
		{"memory QoS with policy None: explicit zero protections", all, none,
			expect{U: map[string]string{"memory.min": "0"}},
			expect{S: u64(3072), U: map[string]string{"memory.low": "0"}},
			expect{S: u64(2)}},
		{"memory QoS tiered without pods: zero protections", nil, tiered,
			expect{U: map[string]string{"memory.min": "0"}},
			expect{S: u64(2), U: map[string]string{"memory.low": "0"}},
			expect{S: u64(2)}},
		{"no pods", nil, QOSOptions{}, expect{}, expect{S: u64(2)}, expect{S: u64(2)}},
		{"besteffort pods do not count", []*v1.Pod{be, g}, tiered,
			expect{U: map[string]string{"memory.min": "134217728"}},
			expect{S: u64(2), U: map[string]string{"memory.low": "0"}},
			expect{S: u64(2)}},
		// qos_reserved memory=50%: burstable = 4Gi − 128Mi·50/100; besteffort = that − 384Mi·50/100.
		{"qos reserve 50%", all, reserve, expect{},
			expect{S: u64(3072), M: i64(4*gi - 64*mi)},
			expect{S: u64(2), M: i64(4*gi - 64*mi - 192*mi)}},
		{"qos reserve without allocatable is skipped", all, reserveNoAlloc, expect{}, expect{S: u64(3072)}, expect{S: u64(2)}},
		{"hugepages unbounded on all three", []*v1.Pod{g}, huge,
			expect{Hugetlb: map[int64]int64{2 * mi: 1 << 62, gi: 1 << 62}},
			expect{S: u64(2), Hugetlb: map[int64]int64{2 * mi: 1 << 62, gi: 1 << 62}},
			expect{S: u64(2), Hugetlb: map[int64]int64{2 * mi: 1 << 62, gi: 1 << 62}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := QOSConfigs(tt.pods, tt.opts)
			t.Run("kubepods", func(t *testing.T) { checkConfig(t, cfg.Kubepods, tt.kubepods) })
			t.Run("burstable", func(t *testing.T) { checkConfig(t, cfg.Burstable, tt.burstable) })
			t.Run("besteffort", func(t *testing.T) { checkConfig(t, cfg.BestEffort, tt.besteffort) })
			if tt.name == "Burstable shares are the sum of the Burstable CPU requests" && CPUSharesToWeight(*cfg.Burstable.CPUShares) != 118 {
				t.Errorf("burstable weight = %d, want 118", CPUSharesToWeight(*cfg.Burstable.CPUShares))
			}
		})
	}
}

func TestQOSMemoryRequests(t *testing.T) {
	g, b1, b2 := jPods()
	gs, bs := QOSMemoryRequests([]*v1.Pod{g, b1, b2, podOf(c("be", "—", "—"))}, false)
	if gs != 128*mi || bs != 384*mi {
		t.Errorf("QOSMemoryRequests = %d, %d; want %d, %d", gs, bs, 128*mi, 384*mi)
	}
}

func TestCapMemoryToUsage(t *testing.T) {
	g, b1, b2 := jPods()
	fifty := int64(50)
	cfg := QOSConfigs([]*v1.Pod{g, b1, b2}, QOSOptions{QOSReservedMemoryPercent: &fifty, NodeAllocatableMemory: 4 * gi})
	burstable, besteffort := *cfg.Burstable.Memory, *cfg.BestEffort.Memory
	cfg.CapMemoryToUsage(map[v1.PodQOSClass]int64{
		v1.PodQOSBurstable:  burstable - 1,     // below the limit: unchanged
		v1.PodQOSBestEffort: besteffort + 4096, // above: capped at usage
		v1.PodQOSGuaranteed: 100 * gi,          // no limit on kubepods here: unchanged
	})
	if *cfg.Burstable.Memory != burstable {
		t.Errorf("burstable = %d, want unchanged %d", *cfg.Burstable.Memory, burstable)
	}
	if *cfg.BestEffort.Memory != besteffort+4096 {
		t.Errorf("besteffort = %d, want %d", *cfg.BestEffort.Memory, besteffort+4096)
	}
	if cfg.Kubepods.Memory != nil {
		t.Errorf("kubepods memory = %d, want unset", *cfg.Kubepods.Memory)
	}
}

func TestMergeConfig(t *testing.T) {
	base := ResourceConfig{CPUShares: u64(3891), Memory: i64(100), Unified: map[string]string{"memory.min": "0", "memory.low": "0"}, HugePageLimit: map[int64]int64{2 * mi: 0}}
	overlay := ResourceConfig{Unified: map[string]string{"memory.min": "5"}, HugePageLimit: map[int64]int64{2 * mi: 1 << 62}}
	got := MergeConfig(base, overlay)
	if *got.CPUShares != 3891 || *got.Memory != 100 {
		t.Errorf("merge lost base values: %s", got)
	}
	if !maps.Equal(got.Unified, map[string]string{"memory.min": "5", "memory.low": "0"}) {
		t.Errorf("unified = %v", got.Unified)
	}
	if got.HugePageLimit[2*mi] != 1<<62 {
		t.Errorf("hugepages = %v", got.HugePageLimit)
	}
	if base.Unified["memory.min"] != "0" {
		t.Error("MergeConfig modified base")
	}
}
