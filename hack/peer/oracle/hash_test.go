package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// TestContainerHashAsKubelet: slicelet's container hash is the kubelet's own
// (kubecontainer.HashContainer), whatever else the container holds.
func TestContainerHashAsKubelet(t *testing.T) {
	tests := []struct {
		name string
		c    v1.Container
	}{
		{"name and image", v1.Container{Name: "c", Image: "busybox"}},
		{"tag", v1.Container{Name: "web", Image: "nginx:1.27"}},
		{"digest", v1.Container{Name: "app", Image: "registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097"}},
		{"no image", v1.Container{Name: "host-command"}},
		{"characters JSON escapes", v1.Container{Name: "a<b>&c", Image: "\"quoted\"\u2028"}},
		{"other fields do not count", v1.Container{Name: "c", Image: "busybox", Args: []string{"sleep", "1"}, Env: []v1.EnvVar{{Name: "A", Value: "1"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := worker.ContainerHash(&tt.c), kubecontainer.HashContainer(&tt.c); got != want {
				t.Errorf("hash %x, the kubelet's %x", got, want)
			}
		})
	}
}
