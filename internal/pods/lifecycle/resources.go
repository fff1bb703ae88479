package lifecycle

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/slicelet/slicelet/slices"
)

// ContainerResources is the kubelet's container-level cgroup configuration
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go, generateLinuxContainerResources and
// calculateLinuxResources):
//   - the CPU and memory limits are the container's, or, when it has none and the pod has
//     pod-level resources, the pod-level limits;
//   - CPU shares come from the CPU request when the container names one (an explicit 0 gives
//     MinShares), otherwise from the CPU limit (MinShares when there is none either);
//   - with CPU limits enforced the period is always set and the quota is the limit's (0, i.e.
//     none, without a limit);
//   - the memory limit is set when non-zero;
//   - with EnforceMemoryQoS: under TieredReservation a container with a memory request gets
//     memory.min (Guaranteed pod) or memory.low (otherwise) = its request; every other
//     container gets memory.min=0 and memory.low=0, clearing stale protection. memory.high is
//     not written (memoryThrottlingFactor is unset by default since 1.37).
func ContainerResources(pod *v1.Pod, c *v1.Container, opts slices.Options) slices.ResourceConfig {
	var rc slices.ResourceConfig
	cpuLimit, memLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	cpuRequest := cpuLimit
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = c.Resources.Requests.Cpu()
	}
	shares := slices.MilliCPUToShares(cpuRequest.MilliValue())
	rc.CPUShares = &shares
	if opts.EnforceCPULimits {
		period := opts.CPUPeriod
		if period == 0 {
			period = slices.QuotaPeriod
		}
		quota := slices.MilliCPUToQuota(cpuLimit.MilliValue(), int64(period))
		rc.CPUQuota, rc.CPUPeriod = &quota, &period
	}
	if !memLimit.IsZero() {
		v := memLimit.Value()
		rc.Memory = &v
	}
	if opts.EnforceMemoryQoS {
		req := c.Resources.Requests.Memory().Value()
		switch {
		case req != 0 && opts.MemoryReservationPolicy == slices.MemoryReservationTiered && slices.QOSClass(pod) == v1.PodQOSGuaranteed:
			rc.Unified = map[string]string{slices.UnifiedMemoryMin: strconv.FormatInt(req, 10)}
		case req != 0 && opts.MemoryReservationPolicy == slices.MemoryReservationTiered:
			rc.Unified = map[string]string{slices.UnifiedMemoryLow: strconv.FormatInt(req, 10)}
		default:
			rc.Unified = map[string]string{slices.UnifiedMemoryMin: "0", slices.UnifiedMemoryLow: "0"}
		}
	}
	return rc
}

// ContainerHugePageLimits are the hugetlb limits the kubelet sends for a container
// (kuberuntime GetHugepageLimitsFromResources): page size in bytes → limit in bytes, one entry
// per page size the host supports (hostPageSizes), 0 unless the container's limits name that
// size, or, failing that, the pod-level limits do. Sizes the host lacks are dropped; of two
// spellings of one size in the same list (hugepages-2Mi, hugepages-2097152) the larger value
// is taken, where the kubelet takes whichever its map iteration meets last.
func ContainerHugePageLimits(pod *v1.Pod, c *v1.Container, hostPageSizes []int64) map[int64]int64 {
	out := make(map[int64]int64, len(hostPageSizes))
	for _, size := range hostPageSizes {
		out[size] = 0
	}
	apply := func(rl v1.ResourceList) {
		got := map[int64]int64{}
		for name, q := range rl {
			size, err := slices.HugePageSizeFromResourceName(name)
			if err != nil {
				continue
			}
			if _, err := slices.HugePageUnitSize(size); err != nil {
				continue
			}
			got[size] = max(got[size], q.Value())
		}
		for size, v := range got {
			if _, ok := out[size]; ok {
				out[size] = v
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		apply(pod.Spec.Resources.Limits)
	}
	apply(c.Resources.Limits)
	return out
}
