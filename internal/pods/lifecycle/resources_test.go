package lifecycle

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/slices"
)

func TestContainerResources(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	enforce := slices.Options{EnforceCPULimits: true}
	cases := []struct {
		name      string
		req, lim  v1.ResourceList
		opts      slices.Options
		wantShare uint64
		wantQuota int64 // 0: neither quota nor period; -2: quota 0 with a period
		wantPer   uint64
		wantMem   int64 // 0: none
	}{
		{name: "nothing: MinShares", wantShare: slices.MinShares},
		{name: "explicit zero request: MinShares, not the limit's", req: rl("cpu", "0"), lim: rl("cpu", "1"), opts: enforce, wantShare: slices.MinShares, wantQuota: 100000, wantPer: slices.QuotaPeriod},
		{name: "no limit, enforced: period without quota", req: rl("cpu", "1"), opts: enforce, wantShare: 1024, wantQuota: -2, wantPer: slices.QuotaPeriod},
		{name: "request", req: rl("cpu", "500m"), wantShare: 512},
		{name: "limit only: shares from the limit, quota", lim: rl("cpu", "250m"), opts: enforce, wantShare: 256, wantQuota: 25000, wantPer: slices.QuotaPeriod},
		{name: "limit not enforced: no quota", req: rl("cpu", "1"), lim: rl("cpu", "2"), wantShare: 1024},
		{name: "own period", lim: rl("cpu", "1"), opts: slices.Options{EnforceCPULimits: true, CPUPeriod: 50000}, wantShare: 1024, wantQuota: 50000, wantPer: 50000},
		{name: "memory limit", req: rl("memory", "64Mi"), lim: rl("memory", "128Mi"), wantShare: slices.MinShares, wantMem: 128 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := ContainerResources(&v1.Pod{}, &v1.Container{Resources: v1.ResourceRequirements{Requests: c.req, Limits: c.lim}}, c.opts)
			if rc.CPUShares == nil || *rc.CPUShares != c.wantShare {
				t.Errorf("shares %v, want %d", rc.CPUShares, c.wantShare)
			}
			if c.wantQuota == -2 {
				if rc.CPUQuota == nil || *rc.CPUQuota != 0 || rc.CPUPeriod == nil || *rc.CPUPeriod != c.wantPer {
					t.Errorf("quota %v period %v, want 0 %d", rc.CPUQuota, rc.CPUPeriod, c.wantPer)
				}
			} else if c.wantQuota == 0 {
				if rc.CPUQuota != nil || rc.CPUPeriod != nil {
					t.Errorf("quota %v period %v, want none", rc.CPUQuota, rc.CPUPeriod)
				}
			} else if rc.CPUQuota == nil || *rc.CPUQuota != c.wantQuota || rc.CPUPeriod == nil || *rc.CPUPeriod != c.wantPer {
				t.Errorf("quota %v period %v, want %d %d", rc.CPUQuota, rc.CPUPeriod, c.wantQuota, c.wantPer)
			}
			if (c.wantMem == 0) != (rc.Memory == nil) || (rc.Memory != nil && *rc.Memory != c.wantMem) {
				t.Errorf("memory %v, want %d", rc.Memory, c.wantMem)
			}
		})
	}
}
