package lifecycle

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func withCPU(c v1.Container, req string) v1.Container {
	c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(req)}
	return c
}

func TestResize(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	sidecar := func(req string) v1.Container {
		c := withCPU(ctr("side"), req)
		c.RestartPolicy = &always
		return c
	}
	restart := func(c v1.Container) v1.Container {
		c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: v1.RestartContainer}}
		return c
	}
	pod := func(init []v1.Container, cs ...v1.Container) *v1.Pod {
		p := testPod("", cs...)
		p.Spec.InitContainers = init
		return p
	}
	tests := []struct {
		name         string
		old, new     *v1.Pod
		wantResize   bool
		wantRestarts []string
	}{
		{name: "unchanged", old: pod(nil, withCPU(ctr("a"), "100m")), new: pod(nil, withCPU(ctr("a"), "100m"))},
		{name: "equal quantities", old: pod(nil, withCPU(ctr("a"), "100m")), new: pod(nil, withCPU(ctr("a"), "0.1"))},
		{name: "container cpu", old: pod(nil, withCPU(ctr("a"), "100m")), new: pod(nil, withCPU(ctr("a"), "200m")), wantResize: true},
		{name: "sidecar", old: pod([]v1.Container{sidecar("100m")}, ctr("a")), new: pod([]v1.Container{sidecar("200m")}, ctr("a")), wantResize: true},
		{name: "regular init containers are not resized", old: pod([]v1.Container{withCPU(ctr("i"), "1")}, ctr("a")), new: pod([]v1.Container{withCPU(ctr("i"), "2")}, ctr("a"))},
		{name: "restart policy", old: pod(nil, restart(withCPU(ctr("a"), "100m"))), new: pod(nil, restart(withCPU(ctr("a"), "200m"))), wantResize: true, wantRestarts: []string{"a (cpu)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResizeRequested(tt.old, tt.new); got != tt.wantResize {
				t.Errorf("ResizeRequested = %v, want %v", got, tt.wantResize)
			}
			if got := ResizeRestarts(tt.old, tt.new); !reflect.DeepEqual(got, tt.wantRestarts) {
				t.Errorf("ResizeRestarts = %v, want %v", got, tt.wantRestarts)
			}
			if ResizeRequested(tt.old, WithAllocatedResources(tt.new, tt.old)) {
				t.Error("WithAllocatedResources still asks for a resize")
			}
		})
	}
}
