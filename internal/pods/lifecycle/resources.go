package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/slices"
)

// ContainerResources is the kubelet's container-level cgroup configuration
// (kuberuntime calculateLinuxResources): CPU shares from the CPU request (from the limit when
// only a limit is set; MinShares when neither), a CFS quota from the CPU limit when CPU limits
// are enforced, and the memory limit.
func ContainerResources(c *v1.Container, opts slices.Options) slices.ResourceConfig {
	var rc slices.ResourceConfig
	req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	shares := slices.MilliCPUToShares(req.MilliValue())
	if req.IsZero() && !lim.IsZero() {
		shares = slices.MilliCPUToShares(lim.MilliValue())
	}
	rc.CPUShares = &shares
	if opts.EnforceCPULimits && !lim.IsZero() {
		period := opts.CPUPeriod
		if period == 0 {
			period = slices.QuotaPeriod
		}
		quota := slices.MilliCPUToQuota(lim.MilliValue(), int64(period))
		rc.CPUQuota, rc.CPUPeriod = &quota, &period
	}
	if mem := c.Resources.Limits.Memory(); !mem.IsZero() {
		v := mem.Value()
		rc.Memory = &v
	}
	return rc
}
