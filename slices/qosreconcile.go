package slices

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// QOSOptions are the node settings of the QoS reconcile (the kubelet's UpdateCgroups).
type QOSOptions struct {
	// EnforceMemoryQoS is the MemoryQoS feature on a cgroup v2 host.
	EnforceMemoryQoS bool
	// MemoryReservationPolicy is MemoryReservationNone ("" means None) or MemoryReservationTiered.
	MemoryReservationPolicy string
	// QOSReservedMemoryPercent is qos_reserved.memory as a percentage (0–100); nil turns the
	// reserve off (the kubelet's QOSReserved gate off or no memory entry).
	QOSReservedMemoryPercent *int64
	// NodeAllocatableMemory is the memory limit of kubepods.slice (KubepodsLimits' memory) the
	// reserve is computed from; 0 skips the reserve.
	NodeAllocatableMemory int64
	// HugePageSizes are the host's hugepage sizes in bytes; with the hugetlb controller available
	// each gets an unbounded limit on the three QoS cgroups. nil when hugetlb is unavailable.
	HugePageSizes []int64
	// DRANodeAllocatableResources counts DRA node-allocatable claims in pod requests (see
	// Options.DRANodeAllocatableResources).
	DRANodeAllocatableResources bool
}

// QOSCgroupConfigs are the configurations of the three QoS cgroups that one reconcile writes.
type QOSCgroupConfigs struct {
	// Kubepods is kubepods.slice, the Guaranteed QoS cgroup. Its CPU and limits come from node
	// allocatable (KubepodsConfig); this path only sets hugepages and memory protection.
	Kubepods ResourceConfig
	// Burstable is kubepods-burstable.slice.
	Burstable ResourceConfig
	// BestEffort is kubepods-besteffort.slice.
	BestEffort ResourceConfig
}

// QOSMemoryRequests sums the memory requests (PodRequests: overhead, init containers, pod-level
// values) of the active Guaranteed and of the active Burstable pods. BestEffort pods are skipped.
func QOSMemoryRequests(activePods []*v1.Pod, dra bool) (guaranteed, burstable int64) {
	for _, pod := range activePods {
		switch QOSClass(pod) {
		case v1.PodQOSGuaranteed:
			reqs := PodRequestsFor(pod, dra)
			guaranteed += reqs.Memory().Value()
		case v1.PodQOSBurstable:
			reqs := PodRequestsFor(pod, dra)
			burstable += reqs.Memory().Value()
		}
	}
	return guaranteed, burstable
}

// QOSConfigs computes what the kubelet's periodic QoS reconcile (UpdateCgroups, every minute and
// whenever a pod slice is created; pkg/kubelet/cm/qos_container_manager_linux.go) writes, in its
// steps 1–4:
//  1. CPU: Burstable shares = MilliCPUToShares(Σ CPU requests of active Burstable pods), so 2
//     when there are none; BestEffort shares = 2; kubepods untouched.
//  2. Hugepages: an unbounded limit for every host page size on all three.
//  3. Memory QoS (EnforceMemoryQoS): TieredReservation writes kubepods memory.min = G + B and
//     burstable memory.low = B (G, B = Guaranteed and Burstable memory requests); policy None
//     writes "0" to both to clear stale values. Values are always written, "0" included.
//  4. QoS reserve (QOSReservedMemoryPercent, P): burstable memory limit = allocatable − G·P/100,
//     besteffort memory limit = that − B·P/100 (int64 arithmetic), skipped when
//     NodeAllocatableMemory is 0.
//
// If writing the reserve fails because a cgroup already uses more, apply CapMemoryToUsage and
// write again, as the kubelet's retrySetMemoryReserve does.
//
// Not applied: the *(verify)* kubepods memory.low = B of the 2026 system-partition test, and the
// pre-2026 variant (burstable memory.min, written only when > 0).
func QOSConfigs(activePods []*v1.Pod, opts QOSOptions) QOSCgroupConfigs {
	var cfg QOSCgroupConfigs

	var burstableMilliCPU int64
	for _, pod := range activePods {
		if QOSClass(pod) != v1.PodQOSBurstable {
			continue
		}
		if q, ok := PodRequestsFor(pod, opts.DRANodeAllocatableResources)[v1.ResourceCPU]; ok {
			burstableMilliCPU += q.MilliValue()
		}
	}
	burstableShares := MilliCPUToShares(burstableMilliCPU)
	bestEffortShares := MinShares
	cfg.Burstable.CPUShares = &burstableShares
	cfg.BestEffort.CPUShares = &bestEffortShares

	if len(opts.HugePageSizes) > 0 {
		cfg.Kubepods.HugePageLimit = UnboundedHugePages(opts.HugePageSizes)
		cfg.Burstable.HugePageLimit = UnboundedHugePages(opts.HugePageSizes)
		cfg.BestEffort.HugePageLimit = UnboundedHugePages(opts.HugePageSizes)
	}

	g, b := QOSMemoryRequests(activePods, opts.DRANodeAllocatableResources)
	if opts.EnforceMemoryQoS {
		memMin, memLow := "0", "0"
		if opts.MemoryReservationPolicy == MemoryReservationTiered {
			memMin, memLow = strconv.FormatInt(g+b, 10), strconv.FormatInt(b, 10)
		}
		cfg.Kubepods.Unified = map[string]string{UnifiedMemoryMin: memMin}
		cfg.Burstable.Unified = map[string]string{UnifiedMemoryLow: memLow}
	}

	if p := opts.QOSReservedMemoryPercent; p != nil && opts.NodeAllocatableMemory > 0 {
		burstableLimit := opts.NodeAllocatableMemory - g*(*p)/100
		bestEffortLimit := burstableLimit - b*(*p)/100
		cfg.Burstable.Memory = &burstableLimit
		cfg.BestEffort.Memory = &bestEffortLimit
	}
	return cfg
}

// CapMemoryToUsage is the kubelet's retrySetMemoryReserve: for each QoS cgroup whose memory limit
// is set and below its current usage (usage by class: v1 memory.usage_in_bytes, v2
// memory.current), the limit becomes the usage, so the cgroup cannot grow while eviction brings
// it down. Classes missing from usage are left alone.
func (c *QOSCgroupConfigs) CapMemoryToUsage(usage map[v1.PodQOSClass]int64) {
	for qos, rc := range map[v1.PodQOSClass]*ResourceConfig{
		v1.PodQOSGuaranteed: &c.Kubepods,
		v1.PodQOSBurstable:  &c.Burstable,
		v1.PodQOSBestEffort: &c.BestEffort,
	} {
		u, ok := usage[qos]
		if ok && rc.Memory != nil && u > *rc.Memory {
			rc.Memory = &u
		}
	}
}
