package lifecycle

import (
	"reflect"
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

func TestContainerResourcesMemoryQoSAndPodLevel(t *testing.T) {
	mem := func(req, lim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		if req != "" {
			r.Requests[v1.ResourceMemory] = resource.MustParse(req)
		}
		if lim != "" {
			r.Limits[v1.ResourceMemory] = resource.MustParse(lim)
		}
		return r
	}
	tiered := slices.Options{EnforceMemoryQoS: true, MemoryReservationPolicy: slices.MemoryReservationTiered}
	none := slices.Options{EnforceMemoryQoS: true, MemoryReservationPolicy: slices.MemoryReservationNone}
	guaranteed := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}}}}}
	burstable := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: mem("64Mi", "")}}}}
	podLevel := &v1.Pod{Spec: v1.PodSpec{
		Resources:  &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}},
		Containers: []v1.Container{{Name: "a"}},
	}}
	cases := []struct {
		name        string
		pod         *v1.Pod
		opts        slices.Options
		wantUnified map[string]string
		wantMem     int64
		wantShares  uint64
	}{
		{"Guaranteed, tiered: memory.min", guaranteed, tiered, map[string]string{"memory.min": "1073741824"}, 1 << 30, 1024},
		{"Burstable, tiered: memory.low", burstable, tiered, map[string]string{"memory.low": "67108864"}, 0, slices.MinShares},
		{"policy None: protection cleared", burstable, none, map[string]string{"memory.min": "0", "memory.low": "0"}, 0, slices.MinShares},
		{"no memory QoS: nothing", burstable, slices.Options{}, nil, 0, slices.MinShares},
		// Pod-level limits stand in for the container's own: memory 1Gi, shares from the cpu
		// limit (no cpu request).
		{"pod-level limits inherited", podLevel, slices.Options{}, nil, 1 << 30, 2048},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := ContainerResources(c.pod, &c.pod.Spec.Containers[0], c.opts)
			if !reflect.DeepEqual(rc.Unified, c.wantUnified) {
				t.Errorf("unified %v, want %v", rc.Unified, c.wantUnified)
			}
			if got := deref(rc.Memory); got != c.wantMem {
				t.Errorf("memory %d, want %d", got, c.wantMem)
			}
			if got := deref(rc.CPUShares); got != c.wantShares {
				t.Errorf("shares %d, want %d", got, c.wantShares)
			}
		})
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func TestContainerHugePageLimits(t *testing.T) {
	host := []int64{2 << 20, 1 << 30}
	limits := func(kv ...string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Limits: v1.ResourceList{}}
		for i := 0; i < len(kv); i += 2 {
			r.Limits[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return r
	}
	podLevel := &v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-2Mi": resource.MustParse("8Mi"), v1.ResourceMemory: resource.MustParse("1Gi")}}}
	cases := []struct {
		name string
		spec *v1.PodSpec
		c    v1.ResourceRequirements
		want map[int64]int64
	}{
		{"none: 0 for every host size", &v1.PodSpec{}, limits(), map[int64]int64{2 << 20: 0, 1 << 30: 0}},
		{"the container's", &v1.PodSpec{}, limits("hugepages-2Mi", "4Mi"), map[int64]int64{2 << 20: 4 << 20, 1 << 30: 0}},
		{"a size the host lacks is dropped", &v1.PodSpec{}, limits("hugepages-64Ki", "128Ki"), map[int64]int64{2 << 20: 0, 1 << 30: 0}},
		{"pod-level when the container names none", podLevel, limits(), map[int64]int64{2 << 20: 8 << 20, 1 << 30: 0}},
		{"the container's over pod-level", podLevel, limits("hugepages-2Mi", "2Mi"), map[int64]int64{2 << 20: 2 << 20, 1 << 30: 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: *c.spec}
			got := ContainerHugePageLimits(pod, &v1.Container{Name: "a", Resources: c.c}, host)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("limits %v, want %v", got, c.want)
			}
		})
	}
}
