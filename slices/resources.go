package slices

import (
	"fmt"
	"maps"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Memory reservation policies (the kubelet's memoryReservationPolicy,
// pkg/kubelet/apis/config/types.go).
const (
	// MemoryReservationNone writes no memory.min/memory.low protection (explicit "0" resets on the
	// QoS cgroups).
	MemoryReservationNone = "None"
	// MemoryReservationTiered writes memory.min for Guaranteed and memory.low for Burstable.
	MemoryReservationTiered = "TieredReservation"
)

// Unified (cgroup v2) keys slicelet writes through ResourceConfig.Unified.
const (
	// UnifiedMemoryMin is the cgroup v2 hard memory protection (systemd MemoryMin=).
	UnifiedMemoryMin = "memory.min"
	// UnifiedMemoryLow is the cgroup v2 best-effort memory protection (systemd MemoryLow=).
	UnifiedMemoryLow = "memory.low"
)

// ResourceConfig is the kubelet's cm.ResourceConfig: the values for one cgroup. A nil field means
// "not set" (leave whatever the cgroup has); this is what separates, e.g., a Burstable pod without
// CPU limits (CPUQuota nil) from one whose quota is disabled (CPUQuota -1).
type ResourceConfig struct {
	// CPUShares is cpu.shares (v1) or, converted with CPUSharesToWeight, cpu.weight (v2).
	CPUShares *uint64
	// CPUQuota is the CFS quota in µs; -1 means unlimited.
	CPUQuota *int64
	// CPUPeriod is the CFS period in µs.
	CPUPeriod *uint64
	// Memory is the memory limit in bytes (memory.limit_in_bytes, memory.max).
	Memory *int64
	// PidsLimit is pids.max; a negative value means unlimited.
	PidsLimit *int64
	// HugePageLimit maps page size in bytes → hugetlb limit in bytes.
	HugePageLimit map[int64]int64
	// Unified holds raw cgroup v2 files (e.g. memory.min) → value. Ignored on cgroup v1.
	Unified map[string]string
}

// Options are the node settings that ResourceConfigForPod depends on. Start from DefaultOptions:
// the zero value disables CPU limit enforcement.
type Options struct {
	// EnforceCPULimits is the kubelet's cpuCFSQuota: false sets every quota to -1.
	EnforceCPULimits bool
	// CPUPeriod is the CFS period in µs; 0 means the default QuotaPeriod (100 ms).
	CPUPeriod uint64
	// EnforceMemoryQoS is the MemoryQoS feature on a cgroup v2 host.
	EnforceMemoryQoS bool
	// MemoryReservationPolicy is MemoryReservationNone ("" means None) or MemoryReservationTiered.
	MemoryReservationPolicy string
	// PodPidsLimit sets pids.max on every pod cgroup when > 0.
	PodPidsLimit int64
	// DRANodeAllocatableResources adds node-allocatable DRA claims from the pod status
	// (status.nodeAllocatableResourceClaimStatuses) to requests and declared limits, like the
	// kubelet's DRANodeAllocatableResources gate. slicelet has no DRA driver, so this only matters
	// for pods whose manifest carries that status.
	DRANodeAllocatableResources bool
}

// DefaultOptions returns the kubelet defaults: CPU limits enforced, 100 ms period, no memory QoS,
// policy None, no pod pids limit.
func DefaultOptions() Options {
	return Options{EnforceCPULimits: true, CPUPeriod: QuotaPeriod, MemoryReservationPolicy: MemoryReservationNone}
}

// period returns the effective CFS period.
func (o Options) period() uint64 {
	if o.CPUPeriod == 0 {
		return QuotaPeriod
	}
	return o.CPUPeriod
}

// podResourceOptions are the component-helpers options of the cgroup path: spec values only
// (no status resources), pod-level resources honoured (PodLevelResources is GA).
func (o Options) podResourceOptions() resourcehelper.PodResourcesOptions {
	return resourcehelper.PodResourcesOptions{UseDRANodeAllocatableResourceClaimStatus: o.DRANodeAllocatableResources}
}

// PodResources is the kubelet's ResourceConfigForPod plus the pod pids limit of EnsureExists: the
// values of the pod's slice (pkg/kubelet/cm/helpers_linux.go, ResourceConfigForPod).
//
// Requests and limits come from component-helpers PodRequests/PodLimits (init containers,
// sidecars, overhead, pod-level resources). CPU quota and period are set for a Burstable pod
// only if every container (init containers included) declares a CPU limit, or the pod has a
// pod-level CPU limit; memory likewise. BestEffort pods get only MinShares. Hugepage limits come
// from the requests for every class. With EnforceMemoryQoS and TieredReservation, a pod with a
// memory request gets memory.min if Guaranteed, memory.low otherwise.
//
// Not done here (the kubelet does them elsewhere or behind gates slicelet lacks): pod-level
// memory.high (memoryThrottlingFactor is unset by default since 1.37), KEP-5474 writable cgroups.
func PodResources(pod *v1.Pod, opts Options) ResourceConfig {
	ro := opts.podResourceOptions()
	reqs := resourcehelper.PodRequests(pod, ro) // = PodRequestsFor(pod, opts.DRANodeAllocatableResources)
	limits := resourcehelper.PodLimits(pod, ro)

	// The kubelet tracks these through a per-container callback of PodLimits; component-helpers
	// v0.37 has no callback any more, so walk the same containers (regular and init, not
	// ephemeral) here.
	cpuLimitsDeclared, memoryLimitsDeclared := true, true
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Limits.Cpu().IsZero() {
				cpuLimitsDeclared = false
			}
			if list[i].Resources.Limits.Memory().IsZero() {
				memoryLimitsDeclared = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimitsDeclared = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memoryLimitsDeclared = true
		}
	}

	period := opts.period()
	shares := MilliCPUToShares(reqs.Cpu().MilliValue())
	quota := MilliCPUToQuota(limits.Cpu().MilliValue(), int64(period))
	if !opts.EnforceCPULimits {
		quota = -1
	}
	memory := limits.Memory().Value()

	var rc ResourceConfig
	qos := QOSClass(pod)
	switch qos {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memory
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuLimitsDeclared {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memoryLimitsDeclared {
			rc.Memory = &memory
		}
	default:
		minShares := MinShares
		rc.CPUShares = &minShares
	}
	rc.HugePageLimit = HugePageLimits(reqs)

	// Any pod with a memory request gets protection: memory.min when Guaranteed, memory.low
	// otherwise — a BestEffort pod too, which only pod-level resources can give a memory request
	// (pod-level cpu "0" alone classifies the pod while its containers request memory).
	if memReq := reqs.Memory().Value(); opts.EnforceMemoryQoS && opts.MemoryReservationPolicy == MemoryReservationTiered && memReq > 0 {
		key := UnifiedMemoryLow
		if qos == v1.PodQOSGuaranteed {
			key = UnifiedMemoryMin
		}
		rc.Unified = map[string]string{key: strconv.FormatInt(memReq, 10)}
	}
	if opts.PodPidsLimit > 0 {
		pids := opts.PodPidsLimit
		rc.PidsLimit = &pids
	}
	return rc
}

// ReducedCPUConfig is the kubelet's ReduceCPULimits: the configuration written on a pod's slice
// while the pod is being killed, so leftover processes stop competing (shares 2, v2 weight 1).
func ReducedCPUConfig() ResourceConfig {
	shares := MinShares
	return ResourceConfig{CPUShares: &shares}
}

// CPURequestFromConfig returns the CPU request in millicores that rc's shares stand for, or
// false when rc has no shares (the kubelet's CPURequestsFromConfig).
func CPURequestFromConfig(rc ResourceConfig) (int64, bool) {
	if rc.CPUShares == nil || *rc.CPUShares == 0 {
		return 0, false
	}
	return SharesToMilliCPU(int64(*rc.CPUShares)), true
}

// CPULimitFromConfig returns the CPU limit in millicores of rc's quota and period, or false when
// there is none (period unset or 0, quota unset or -1; the kubelet's CPULimitsFromConfig).
func CPULimitFromConfig(rc ResourceConfig) (int64, bool) {
	if rc.CPUPeriod == nil || *rc.CPUPeriod == 0 || rc.CPUQuota == nil || *rc.CPUQuota == -1 {
		return 0, false
	}
	return QuotaToMilliCPU(*rc.CPUQuota, int64(*rc.CPUPeriod)), true
}

// MemoryLimitFromConfig returns rc's memory limit, or false when it is unset or ≤ 0 (the
// kubelet's MemoryLimitsFromConfig).
func MemoryLimitFromConfig(rc ResourceConfig) (int64, bool) {
	if rc.Memory == nil || *rc.Memory <= 0 {
		return 0, false
	}
	return *rc.Memory, true
}

// String renders rc for logs: set fields only, e.g. "shares=102 quota=20000 period=100000".
func (rc ResourceConfig) String() string {
	s := ""
	add := func(format string, args ...any) {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf(format, args...)
	}
	if rc.CPUShares != nil {
		add("shares=%d", *rc.CPUShares)
	}
	if rc.CPUQuota != nil {
		add("quota=%d", *rc.CPUQuota)
	}
	if rc.CPUPeriod != nil {
		add("period=%d", *rc.CPUPeriod)
	}
	if rc.Memory != nil {
		add("memory=%d", *rc.Memory)
	}
	if rc.PidsLimit != nil {
		add("pids=%d", *rc.PidsLimit)
	}
	if len(rc.HugePageLimit) > 0 {
		add("hugepages=%v", rc.HugePageLimit)
	}
	if len(rc.Unified) > 0 {
		add("unified=%v", rc.Unified)
	}
	return s
}

// PodRequestsFor returns the pod's effective requests as the cgroup path computes them
// (component-helpers PodRequests: init containers, sidecars, overhead, pod-level values; DRA
// node-allocatable claims when dra is set).
func PodRequestsFor(pod *v1.Pod, dra bool) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseDRANodeAllocatableResourceClaimStatus: dra})
}

// MergeConfig returns base with every field that overlay sets replaced by overlay's value;
// Unified maps are merged key by key (overlay wins). This is what a cgroup holds after base and
// then overlay were written, since unset fields are not written.
func MergeConfig(base, overlay ResourceConfig) ResourceConfig {
	out := base
	if overlay.CPUShares != nil {
		out.CPUShares = overlay.CPUShares
	}
	if overlay.CPUQuota != nil {
		out.CPUQuota = overlay.CPUQuota
	}
	if overlay.CPUPeriod != nil {
		out.CPUPeriod = overlay.CPUPeriod
	}
	if overlay.Memory != nil {
		out.Memory = overlay.Memory
	}
	if overlay.PidsLimit != nil {
		out.PidsLimit = overlay.PidsLimit
	}
	if overlay.HugePageLimit != nil {
		out.HugePageLimit = overlay.HugePageLimit
	}
	if len(overlay.Unified) > 0 {
		u := maps.Clone(base.Unified)
		if u == nil {
			u = map[string]string{}
		}
		maps.Copy(u, overlay.Unified)
		out.Unified = u
	}
	return out
}
