package slices

import (
	"maps"
	"math"
	stdslices "slices"
	"strconv"
	"strings"

	"github.com/slicelet/slicelet/units"
)

// USecInfinity is systemd's USEC_INFINITY and "infinity" for TasksMax and memory properties.
const USecInfinity uint64 = math.MaxUint64

// BaseSliceProperties are the properties libcontainer's systemd driver gives every slice it
// creates for the kubelet (Apply): Description, Wants=<parent> (a slice's parent is implied by its
// name; Wants= additionally pulls the parent in), accounting for memory, CPU, IO and tasks, and
// DefaultDependencies=false so the slice has no implicit ordering against shutdown.target.
// Cgroup v1 (legacy and hybrid) calls IO accounting BlockIOAccounting.
func BaseSliceProperties(description, parent string, mode units.Mode) []units.Property {
	io := "BlockIOAccounting"
	if mode.V2() {
		io = "IOAccounting"
	}
	return []units.Property{
		{Name: "Description", Value: description},
		{Name: "Wants", Value: []string{parent}},
		{Name: "MemoryAccounting", Value: true},
		{Name: "CPUAccounting", Value: true},
		{Name: io, Value: true},
		{Name: "TasksAccounting", Value: true},
		{Name: "DefaultDependencies", Value: false},
	}
}

// SliceProperties returns the systemd resource properties of rc, as opencontainers/cgroups
// v0.1.0's systemd driver builds them for the kubelet; unset fields give no property.
//
//   - cgroup v1 (ModeLegacy, ModeHybrid): MemoryLimit, CPUShares, CPUQuotaPeriodUSec,
//     CPUQuotaPerSecUSec, TasksMax.
//   - cgroup v2 (ModeUnified): MemoryMax, CPUWeight (the kubelet's linear CPUSharesToWeight),
//     CPUQuotaPeriodUSec, CPUQuotaPerSecUSec, TasksMax, then the Unified keys systemd knows
//     (memory.min/low/high/max/swap.max → MemoryMin/Low/High/Max/SwapMax, pids.max → TasksMax,
//     cpu.weight → CPUWeight) in key order. Other Unified keys are files (CgroupfsFiles).
//
// Values follow the driver: a memory limit of 0 is "unset" (no property), a negative one
// infinity; shares 0 are unset; TasksMax is infinity for a negative limit and 1 for 0 (systemd
// rejects 0); CPU quota per second as in CPUQuotaPerSec. CPUQuotaPeriodUSec needs systemd ≥ 242
// (older ones reject the property; slicelet does not support them). Hugetlb limits have no
// systemd property: see HugetlbFiles.
func SliceProperties(rc ResourceConfig, mode units.Mode) []units.Property {
	var props []units.Property
	add := func(name string, v uint64) { props = append(props, units.Property{Name: name, Value: v}) }
	v2 := mode.V2()

	if rc.Memory != nil && *rc.Memory != 0 {
		v := uint64(*rc.Memory)
		if *rc.Memory < 0 {
			v = USecInfinity
		}
		if v2 {
			add("MemoryMax", v)
		} else {
			add("MemoryLimit", v)
		}
	}
	if rc.CPUShares != nil && *rc.CPUShares != 0 {
		if v2 {
			add("CPUWeight", CPUSharesToWeight(*rc.CPUShares))
		} else {
			add("CPUShares", *rc.CPUShares)
		}
	}
	var quota int64
	var period uint64
	if rc.CPUQuota != nil {
		quota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		period = *rc.CPUPeriod
	}
	if period != 0 {
		add("CPUQuotaPeriodUSec", period)
	}
	if quota != 0 || period != 0 {
		perSec, _ := CPUQuotaPerSec(quota, period)
		add("CPUQuotaPerSecUSec", perSec)
	}
	if rc.PidsLimit != nil {
		add("TasksMax", tasksMax(*rc.PidsLimit))
	}
	if v2 {
		for _, k := range stdslices.Sorted(maps.Keys(rc.Unified)) {
			name, ok := unifiedProperty[k]
			if !ok {
				continue
			}
			v, ok := parseUnifiedValue(k, rc.Unified[k])
			if !ok {
				continue
			}
			add(name, v)
		}
	}
	return props
}

// unifiedProperty maps the cgroup v2 files systemd manages to their unit properties (the driver's
// unifiedResToSystemdProps).
var unifiedProperty = map[string]string{
	"memory.min":      "MemoryMin",
	"memory.low":      "MemoryLow",
	"memory.high":     "MemoryHigh",
	"memory.max":      "MemoryMax",
	"memory.swap.max": "MemorySwapMax",
	"pids.max":        "TasksMax",
	"cpu.weight":      "CPUWeight",
}

// parseUnifiedValue converts a Unified value to the property value: "max" is infinity, TasksMax
// 0 becomes 1. Unparsable values are not properties (the cgroupfs write reports them).
func parseUnifiedValue(key, value string) (uint64, bool) {
	value = strings.TrimSpace(value)
	if value == "max" && key != "cpu.weight" {
		return USecInfinity, true
	}
	v, err := strconv.ParseUint(value, 10, 64)
	if err != nil {
		return 0, false
	}
	if key == "pids.max" && v == 0 {
		v = 1
	}
	return v, true
}

// tasksMax converts a pids limit to TasksMax: negative → infinity, 0 → 1 (systemd does not accept
// 0), else the limit.
func tasksMax(limit int64) uint64 {
	switch {
	case limit < 0:
		return USecInfinity
	case limit == 0:
		return 1
	}
	return uint64(limit)
}

// CPUQuotaPerSec converts a CFS quota and period (µs) to systemd's CPUQuotaPerSecUSec, and
// returns the quota the kernel ends up with. systemd stores the quota as a whole percentage of
// one CPU, so the driver rounds the per-second value up to a multiple of 10 ms and adjusts the
// quota to match, so that child cgroups can be given the quota they expect
// (opencontainers/cgroups addCPUQuota). A quota ≤ 0 (-1 = unlimited, or 0 with a period) gives
// infinity. A period of 0 means the 100 ms default.
func CPUQuotaPerSec(quota int64, period uint64) (perSec uint64, applied int64) {
	if quota <= 0 {
		return USecInfinity, quota
	}
	if period == 0 {
		period = QuotaPeriod
	}
	perSec = uint64(quota) * 1000000 / period
	if perSec%10000 != 0 {
		perSec = (perSec/10000 + 1) * 10000
		return perSec, int64(perSec * period / 1000000)
	}
	return perSec, quota
}

// HugetlbFiles returns the hugetlb controller files to write for rc, relative to the cgroup
// directory, as the kubelet does through libcontainer (maybeSetHugetlb): for each page size
// with a limit in rc, and for every other page size of the host (hostPageSizes, bytes) the
// limit 0, so a pod can only use the hugepages it requested. v1 names the file
// hugetlb.<size>.limit_in_bytes, v2 hugetlb.<size>.max, with <size> as HugePageUnitSize ("2MB").
// Page sizes that cannot be named are skipped. The writer should also write the same value to
// the ".rsvd" twin when it exists (HugetlbRsvdFile), and skip all of this when the hugetlb
// controller is not available.
func HugetlbFiles(rc ResourceConfig, mode units.Mode, hostPageSizes []int64) map[string]string {
	suffix := ".limit_in_bytes"
	if mode.V2() {
		suffix = ".max"
	}
	files := map[string]string{}
	for size, limit := range rc.HugePageLimit {
		name, err := HugePageUnitSize(size)
		if err != nil {
			continue
		}
		files["hugetlb."+name+suffix] = strconv.FormatInt(limit, 10)
	}
	for _, size := range hostPageSizes {
		name, err := HugePageUnitSize(size)
		if err != nil {
			continue
		}
		if _, ok := files["hugetlb."+name+suffix]; !ok {
			files["hugetlb."+name+suffix] = "0"
		}
	}
	return files
}

// HugetlbRsvdFile returns the reservation twin of a hugetlb limit file:
// hugetlb.2MB.limit_in_bytes → hugetlb.2MB.rsvd.limit_in_bytes, hugetlb.2MB.max →
// hugetlb.2MB.rsvd.max. Kernels before 5.7 have no such file.
func HugetlbRsvdFile(file string) string {
	for _, suffix := range []string{".limit_in_bytes", ".max"} {
		if base, ok := strings.CutSuffix(file, suffix); ok {
			return base + ".rsvd" + suffix
		}
	}
	return file
}

// CgroupfsFiles returns everything of rc that must be written to cgroupfs because systemd has no
// property for it: the hugetlb files (HugetlbFiles) and, on cgroup v2, the Unified keys that
// SliceProperties does not map.
func CgroupfsFiles(rc ResourceConfig, mode units.Mode, hostPageSizes []int64) map[string]string {
	files := HugetlbFiles(rc, mode, hostPageSizes)
	if mode.V2() {
		for k, v := range rc.Unified {
			if _, ok := unifiedProperty[k]; ok {
				if _, parsed := parseUnifiedValue(k, v); parsed {
					continue
				}
			}
			files[k] = v
		}
	}
	return files
}
