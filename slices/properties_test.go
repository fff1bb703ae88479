package slices

import (
	"maps"
	"math"
	"reflect"
	"testing"

	"github.com/slicelet/slicelet/units"
)

type props = []units.Property

func p(name string, v any) units.Property { return units.Property{Name: name, Value: v} }

func TestSliceProperties(t *testing.T) {
	def := DefaultOptions()
	tiered := def
	tiered.EnforceMemoryQoS = true
	tiered.MemoryReservationPolicy = MemoryReservationTiered
	burstable := PodResources(podOf(c("a", "100m/100Mi", "200m/200Mi")), def)
	noQuota := PodResources(podOf(c("a", "100m/100Mi", "200m/200Mi")), Options{})
	bestEffort := PodResources(podOf(c("a", "—", "—")), def)
	tieredGuaranteed := PodResources(podOf(c("a", "100m/100Mi", "100m/100Mi")), tiered)
	period5000 := PodResources(podOf(c("a", "100m/100Mi", "100m/100Mi")), Options{EnforceCPULimits: true, CPUPeriod: 5000})
	odd := PodResources(podOf(c("a", "15m/100Mi", "15m/100Mi")), def)
	const inf = uint64(math.MaxUint64)

	tests := []struct {
		name string
		rc   ResourceConfig
		mode units.Mode
		want props
	}{
		{"cgroup v1 names: MemoryLimit, CPUShares", burstable, units.ModeHybrid, props{p("MemoryLimit", uint64(209715200)), p("CPUShares", uint64(102)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(200000))}},
		{"legacy v1 names as hybrid", burstable, units.ModeLegacy, props{p("MemoryLimit", uint64(209715200)), p("CPUShares", uint64(102)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(200000))}},
		{"cgroup v2 names: MemoryMax, CPUWeight", burstable, units.ModeUnified, props{p("MemoryMax", uint64(209715200)), p("CPUWeight", uint64(4)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(200000))}},
		{"quota -1 is infinity", noQuota, units.ModeUnified, props{p("MemoryMax", uint64(209715200)), p("CPUWeight", uint64(4)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", inf)}},
		{"BestEffort on v1: minimum shares", bestEffort, units.ModeHybrid, props{p("CPUShares", uint64(2))}},
		{"BestEffort on v2: weight 1", bestEffort, units.ModeUnified, props{p("CPUWeight", uint64(1))}},
		{"a 5000µs period keeps the per-second quota", period5000, units.ModeUnified, props{p("MemoryMax", uint64(104857600)), p("CPUWeight", uint64(4)),
			p("CPUQuotaPeriodUSec", uint64(5000)), p("CPUQuotaPerSecUSec", uint64(200000))}},
		{"memory.min becomes MemoryMin on v2", tieredGuaranteed, units.ModeUnified, props{p("MemoryMax", uint64(104857600)), p("CPUWeight", uint64(4)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(100000)), p("MemoryMin", uint64(104857600))}},
		{"v1 has no unified keys", tieredGuaranteed, units.ModeHybrid, props{p("MemoryLimit", uint64(104857600)), p("CPUShares", uint64(102)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(100000))}},
		{"15m rounds up to 2%", odd, units.ModeHybrid, props{p("MemoryLimit", uint64(104857600)), p("CPUShares", uint64(15)),
			p("CPUQuotaPeriodUSec", uint64(100000)), p("CPUQuotaPerSecUSec", uint64(20000))}},
		{"empty config", ResourceConfig{}, units.ModeUnified, nil},
		{"memory 0 is unset, -1 infinity", ResourceConfig{Memory: i64(0)}, units.ModeUnified, nil},
		{"memory -1", ResourceConfig{Memory: i64(-1)}, units.ModeHybrid, props{p("MemoryLimit", inf)}},
		{"pids -1", ResourceConfig{PidsLimit: i64(-1)}, units.ModeUnified, props{p("TasksMax", inf)}},
		{"pids 0", ResourceConfig{PidsLimit: i64(0)}, units.ModeHybrid, props{p("TasksMax", uint64(1))}},
		{"pids 1024", ResourceConfig{PidsLimit: i64(1024)}, units.ModeUnified, props{p("TasksMax", uint64(1024))}},
		{"shares 0 unset", ResourceConfig{CPUShares: u64(0)}, units.ModeHybrid, nil},
		{"quota without period uses default", ResourceConfig{CPUQuota: i64(50000)}, units.ModeUnified, props{p("CPUQuotaPerSecUSec", uint64(500000))}},
		{"unified keys", ResourceConfig{Unified: map[string]string{
			"memory.high": "max", "memory.low": " 42 ", "pids.max": "0", "memory.oom.group": "1", "memory.swap.max": "bogus",
		}}, units.ModeUnified, props{p("MemoryHigh", inf), p("MemoryLow", uint64(42)), p("TasksMax", uint64(1))}},
		{"hugepages are not properties", ResourceConfig{HugePageLimit: map[int64]int64{2 * mi: 1 << 62}}, units.ModeUnified, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SliceProperties(tt.rc, tt.mode)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestCPUQuotaPerSec(t *testing.T) {
	tests := []struct {
		name        string
		quota       int64
		period      uint64
		perSec      uint64
		appliedQuot int64
	}{
		{"20%", 20000, 100000, 200000, 20000},
		{"1.5% rounds to 2%", 1500, 100000, 20000, 2000},
		{"33.3% rounds to 34%", 33300, 100000, 340000, 34000},
		{"1 ms of 5 ms", 1000, 5000, 200000, 1000},
		{"unlimited", -1, 100000, math.MaxUint64, -1},
		{"zero quota", 0, 100000, math.MaxUint64, 0},
		{"default period", 10000, 0, 100000, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perSec, applied := CPUQuotaPerSec(tt.quota, tt.period)
			if perSec != tt.perSec || applied != tt.appliedQuot {
				t.Errorf("CPUQuotaPerSec(%d, %d) = %d, %d; want %d, %d", tt.quota, tt.period, perSec, applied, tt.perSec, tt.appliedQuot)
			}
		})
	}
}

func TestBaseSliceProperties(t *testing.T) {
	v2 := BaseSliceProperties("pod default/p (Burstable)", BurstableSlice, units.ModeUnified)
	want := props{
		p("Description", "pod default/p (Burstable)"), p("Wants", []string{BurstableSlice}),
		p("MemoryAccounting", true), p("CPUAccounting", true), p("IOAccounting", true),
		p("TasksAccounting", true), p("DefaultDependencies", false),
	}
	if !reflect.DeepEqual(v2, want) {
		t.Errorf("v2 got %v", v2)
	}
	v1 := BaseSliceProperties("d", RootSlice, units.ModeHybrid)
	if v1[4] != p("BlockIOAccounting", true) || !reflect.DeepEqual(v1[1], p("Wants", []string{"-.slice"})) {
		t.Errorf("v1 got %v", v1)
	}
}

func TestHugetlbFiles(t *testing.T) {
	host := []int64{2 * mi, gi}
	tests := []struct {
		name string
		rc   ResourceConfig
		mode units.Mode
		host []int64
		want map[string]string
	}{
		{"pod with 2Mi pages v1", ResourceConfig{HugePageLimit: map[int64]int64{2 * mi: 4 * mi}}, units.ModeHybrid, host,
			map[string]string{"hugetlb.2MB.limit_in_bytes": "4194304", "hugetlb.1GB.limit_in_bytes": "0"}},
		{"pod without hugepages v2", ResourceConfig{HugePageLimit: map[int64]int64{}}, units.ModeUnified, host,
			map[string]string{"hugetlb.2MB.max": "0", "hugetlb.1GB.max": "0"}},
		{"nil limits still zero every host size", ResourceConfig{}, units.ModeUnified, host,
			map[string]string{"hugetlb.2MB.max": "0", "hugetlb.1GB.max": "0"}},
		{"qos unbounded", ResourceConfig{HugePageLimit: UnboundedHugePages(host)}, units.ModeUnified, host,
			map[string]string{"hugetlb.2MB.max": "4611686018427387904", "hugetlb.1GB.max": "4611686018427387904"}},
		{"no host hugepages", ResourceConfig{HugePageLimit: map[int64]int64{}}, units.ModeUnified, nil, map[string]string{}},
		{"requested size the host lacks is still written", ResourceConfig{HugePageLimit: map[int64]int64{64 << 10: 1 << 20}}, units.ModeUnified, nil,
			map[string]string{"hugetlb.64KB.max": "1048576"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HugetlbFiles(tt.rc, tt.mode, tt.host)
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := HugetlbRsvdFile("hugetlb.2MB.limit_in_bytes"); got != "hugetlb.2MB.rsvd.limit_in_bytes" {
		t.Errorf("HugetlbRsvdFile v1 = %q", got)
	}
	if got := HugetlbRsvdFile("hugetlb.1GB.max"); got != "hugetlb.1GB.rsvd.max" {
		t.Errorf("HugetlbRsvdFile v2 = %q", got)
	}
}

func TestCgroupfsFiles(t *testing.T) {
	rc := ResourceConfig{HugePageLimit: map[int64]int64{}, Unified: map[string]string{
		"memory.min": "5", "memory.oom.group": "1", "memory.low": "bogus",
	}}
	got := CgroupfsFiles(rc, units.ModeUnified, []int64{2 * mi})
	want := map[string]string{"hugetlb.2MB.max": "0", "memory.oom.group": "1", "memory.low": "bogus"}
	if !maps.Equal(got, want) {
		t.Errorf("v2 got %v, want %v", got, want)
	}
	got = CgroupfsFiles(rc, units.ModeHybrid, []int64{2 * mi})
	if !maps.Equal(got, map[string]string{"hugetlb.2MB.limit_in_bytes": "0"}) {
		t.Errorf("v1 got %v", got)
	}
}
