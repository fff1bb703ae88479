package slices

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// expect is a pod slice's expected ResourceConfig (the kubelet's TestResourceConfigForPod,
// pkg/kubelet/cm/helpers_linux_test.go): unset fields must be nil.
type expect struct {
	S       *uint64
	Q       *int64
	P       *uint64
	M       *int64
	Pids    *int64
	U       map[string]string
	Hugetlb map[int64]int64
}

func checkConfig(t *testing.T, got ResourceConfig, want expect) {
	t.Helper()
	eqU := func(a, b *uint64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	eqI := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	if !eqU(got.CPUShares, want.S) || !eqI(got.CPUQuota, want.Q) || !eqU(got.CPUPeriod, want.P) ||
		!eqI(got.Memory, want.M) || !eqI(got.PidsLimit, want.Pids) || !maps.Equal(got.Unified, want.U) {
		w := ResourceConfig{CPUShares: want.S, CPUQuota: want.Q, CPUPeriod: want.P, Memory: want.M, PidsLimit: want.Pids, Unified: want.U}
		t.Errorf("got  %s\nwant %s", got, w)
	}
	if want.Hugetlb == nil {
		want.Hugetlb = map[int64]int64{}
	}
	if !maps.Equal(got.HugePageLimit, want.Hugetlb) {
		t.Errorf("hugepages = %v, want %v", got.HugePageLimit, want.Hugetlb)
	}
}

func TestPodResources(t *testing.T) {
	def := DefaultOptions()
	noCPULimits := def
	noCPULimits.EnforceCPULimits = false
	period5000 := def
	period5000.CPUPeriod = 5000
	tiered := def
	tiered.EnforceMemoryQoS = true
	tiered.MemoryReservationPolicy = MemoryReservationTiered
	memQoSNone := def
	memQoSNone.EnforceMemoryQoS = true
	pids := def
	pids.PodPidsLimit = 1024
	zeroOpts := Options{} // zero value: quota disabled, default period

	b3 := func() *v1.Pod { return podOf(c("a", "100m/100Mi", "200m/200Mi")) }
	b5 := func() *v1.Pod { return podOf(c("a", "100m/100Mi", "200m/200Mi"), c("b", "100m/100Mi", "—")) }
	b6 := func() *v1.Pod { return podOf(c("a", "100m/100Mi", "100m/100Mi")) }
	b8 := func() *v1.Pod {
		return withInit(podOf(c("a", "100m/100m", "100m/100Mi"), c("b", "100m/100m", "—")),
			c("ia", "100m/100m", "100m/100Mi"), c("ib", "100m/100m", "—"))
	}
	b17 := func() *v1.Pod {
		p := podOf(c("a", "1/200Mi", "3/500Mi"))
		two := resource.MustParse("2")
		p.Status.NodeAllocatableResourceClaimStatuses = []v1.NodeAllocatableResourceClaimStatus{{
			ResourceClaimName: "cpus",
			Containers:        []string{"a"},
			Mapping:           []v1.NodeAllocatableMappedResources{{Name: v1.ResourceCPU, Quantity: &two}},
		}}
		return p
	}
	dra := def
	dra.DRANodeAllocatableResources = true

	tests := []struct {
		name string
		pod  *v1.Pod
		opts Options
		want expect
	}{
		{"BestEffort: minimum shares only", podOf(c("a", "—", "—")), def, expect{S: u64(2)}},
		{"Burstable with requests only: shares, no quota, no memory limit", podOf(c("a", "100m/100Mi", "—")), def, expect{S: u64(102)}},
		{"Burstable with limits: quota and memory limit from the limits", b3(), def, expect{S: u64(102), Q: i64(20000), P: u64(100000), M: i64(209715200)}},
		{"CPU limits not enforced: quota -1", b3(), noCPULimits, expect{S: u64(102), Q: i64(-1), P: u64(100000), M: i64(209715200)}},
		{"Burstable with a container without limits: no quota, no memory limit", b5(), def, expect{S: u64(204)}},
		{"Guaranteed: shares, quota and memory from the limits", b6(), def, expect{S: u64(102), Q: i64(10000), P: u64(100000), M: i64(104857600)}},
		{"a 5000µs period scales the quota", b6(), period5000, expect{S: u64(102), Q: i64(1000), P: u64(5000), M: i64(104857600)}},
		{"init containers: the larger of the sum and the init maximum; a container without limits means no quota", b8(), period5000, expect{S: u64(204)}},
		{"pod-level resources replace the containers' ones", withPodLevel(podOf(c("a", "—", "—")), "100m/100Mi", "200m/200Mi"), def,
			expect{S: u64(102), Q: i64(20000), P: u64(100000), M: i64(209715200)}},
		{"pod-level requests without limits: no quota", withPodLevel(podOf(c("a", "10m/50Mi", "—")), "100m/100Mi", "—"), def, expect{S: u64(102)}},
		{"pod-level requests with container limits: quota and memory from the containers", withPodLevel(podOf(c("a", "200m/200Mi", "200m/200Mi")), "200m/300Mi", "—"), def,
			expect{S: u64(204), Q: i64(20000), P: u64(100000), M: i64(209715200)}},
		{"pod-level limits win over container limits", withPodLevel(podOf(c("a", "10m/50Mi", "50m/100Mi")), "100m/100Mi", "100m/100Mi"), def,
			expect{S: u64(102), Q: i64(10000), P: u64(100000), M: i64(104857600)}},
		{"memory QoS tiered: Guaranteed gets memory.min", b6(), tiered, expect{S: u64(102), Q: i64(10000), P: u64(100000), M: i64(104857600), U: map[string]string{"memory.min": "104857600"}}},
		{"memory QoS tiered: Burstable gets memory.low of its requests", b3(), tiered, expect{S: u64(102), Q: i64(20000), P: u64(100000), M: i64(209715200), U: map[string]string{"memory.low": "104857600"}}},
		{"memory QoS tiered: memory.low sums the requests", b5(), tiered, expect{S: u64(204), U: map[string]string{"memory.low": "209715200"}}},
		{"memory QoS tiered: BestEffort gets no protection", podOf(c("a", "—", "—")), tiered, expect{S: u64(2)}},
		// Pod-level cpu "0" makes the pod BestEffort while its container requests memory: the
		// kubelet still protects the request with memory.low.
		{"memory QoS tiered: BestEffort with a memory request gets memory.low", withPodLevel(podOf(c("a", "—/3Mi", "—/3Mi")), "0/—", "0/—"), tiered, expect{S: u64(2), U: map[string]string{"memory.low": "3145728"}}},
		{"DRA node-allocatable claims add CPU to requests and limits", b17(), dra, expect{S: u64(3072), Q: i64(500000), P: u64(100000), M: i64(524288000)}},
		// Own cases.
		{"without the DRA option a claim adds nothing", b17(), def, expect{S: u64(1024), Q: i64(300000), P: u64(100000), M: i64(524288000)}},
		{"memory QoS with policy None sets nothing", b6(), memQoSNone, expect{S: u64(102), Q: i64(10000), P: u64(100000), M: i64(104857600)}},
		{"pod pids limit", b1(), pids, expect{S: u64(2), Pids: i64(1024)}},
		{"zero options: quota -1, default period", b6(), zeroOpts, expect{S: u64(102), Q: i64(-1), P: u64(100000), M: i64(104857600)}},
		{"burstable memory-only limits", podOf(c("a", "100m/100Mi", "—/200Mi")), def, expect{S: u64(102), M: i64(200 * mi)}},
		{"init container without cpu limit blocks quota",
			withInit(podOf(c("a", "100m/100Mi", "200m/200Mi")), c("init", "100m/100Mi", "—/200Mi")), def,
			expect{S: u64(102), M: i64(200 * mi)}},
		{"sidecar adds to requests and limits",
			withInit(podOf(c("a", "100m/100Mi", "200m/200Mi")), sidecar("s", "50m/50Mi", "100m/100Mi")), def,
			expect{S: u64(153), Q: i64(30000), P: u64(100000), M: i64(300 * mi)}},
		{"overhead counts", withOverhead(b6(), "10m/10Mi"), def, expect{S: u64(112), Q: i64(11000), P: u64(100000), M: i64(110 * mi)}},
		{"hugepages from requests", podOf(c("a", "1/1Gi,hugepages-2Mi=4Mi", "1/1Gi,hugepages-2Mi=4Mi")), def,
			expect{S: u64(1024), Q: i64(100000), P: u64(100000), M: i64(gi), Hugetlb: map[int64]int64{2 * mi: 4 * mi}}},
		{"pod-level cpu limit only", withPodLevel(podOf(c("a", "—", "—")), "—", "500m/—"), def,
			expect{S: u64(2), Q: i64(50000), P: u64(100000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkConfig(t, PodResources(tt.pod, tt.opts), tt.want)
		})
	}
}

func b1() *v1.Pod { return podOf(c("a", "—", "—")) }

func withOverhead(p *v1.Pod, spec string) *v1.Pod {
	p.Spec.Overhead = rl(spec)
	return p
}

func TestConfigReaders(t *testing.T) {
	rc := PodResources(podOf(c("a", "100m/100Mi", "200m/200Mi")), DefaultOptions())
	if m, ok := CPURequestFromConfig(rc); !ok || m != 100 {
		t.Errorf("CPURequestFromConfig = %d, %v; want 100", m, ok)
	}
	if m, ok := CPULimitFromConfig(rc); !ok || m != 200 {
		t.Errorf("CPULimitFromConfig = %d, %v; want 200", m, ok)
	}
	if m, ok := MemoryLimitFromConfig(rc); !ok || m != 200*mi {
		t.Errorf("MemoryLimitFromConfig = %d, %v", m, ok)
	}
	noLimit := PodResources(podOf(c("a", "100m/100Mi", "200m/200Mi")), Options{})
	if _, ok := CPULimitFromConfig(noLimit); ok {
		t.Error("CPULimitFromConfig of quota -1 should be absent")
	}
	if _, ok := CPURequestFromConfig(ResourceConfig{}); ok {
		t.Error("CPURequestFromConfig of empty config should be absent")
	}
	if _, ok := MemoryLimitFromConfig(ResourceConfig{Memory: i64(0)}); ok {
		t.Error("MemoryLimitFromConfig of 0 should be absent")
	}
	red := ReducedCPUConfig()
	if red.CPUShares == nil || *red.CPUShares != 2 || CPUSharesToWeight(*red.CPUShares) != 1 {
		t.Errorf("ReducedCPUConfig = %s", red)
	}
}
