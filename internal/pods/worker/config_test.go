package worker

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPullPolicyDefault(t *testing.T) {
	cases := map[string]v1.PullPolicy{
		"busybox":                         v1.PullAlways,
		"busybox:latest":                  v1.PullAlways,
		"busybox:1.36":                    v1.PullIfNotPresent,
		"registry:5000/busybox":           v1.PullAlways,
		"registry:5000/busybox:1":         v1.PullIfNotPresent,
		"busybox@sha256:0123456789abcdef": v1.PullIfNotPresent,
	}
	for img, want := range cases {
		t.Run(img, func(t *testing.T) {
			if got := PullPolicy(&v1.Container{Image: img}); got != want {
				t.Errorf("PullPolicy(%s) = %s, want %s", img, got, want)
			}
		})
	}
}

// TestPodNetwork: with HostNetwork false, a pod without spec.hostNetwork gets its own network
// namespace and its hostname; one with spec.hostNetwork keeps the host's.
func TestPodNetwork(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	w.opts.HostNetwork = false
	cases := []struct {
		name     string
		host     bool
		mode     runtimeapi.NamespaceMode
		hostname string
	}{
		{"own network", false, runtimeapi.NamespaceMode_POD, "web"},
		{"spec.hostNetwork", true, runtimeapi.NamespaceMode_NODE, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("u1", "", "main")
			pod.Spec.HostNetwork = c.host
			cfg := w.SandboxConfig(pod, "s.slice", 0)
			if cfg.Linux.SecurityContext.NamespaceOptions.Network != c.mode || cfg.Hostname != c.hostname {
				t.Errorf("network %v hostname %q, want %v %q", cfg.Linux.SecurityContext.NamespaceOptions.Network, cfg.Hostname, c.mode, c.hostname)
			}
		})
	}
}

// TestSandboxPrivileged: the sandbox is privileged when a container is, as the kubelet makes it
// (containerd refuses a privileged container in an unprivileged sandbox).
func TestSandboxPrivileged(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	yes := true
	cases := []struct {
		name string
		mod  func(*v1.Pod)
		want bool
	}{
		{"no security context", func(*v1.Pod) {}, false},
		{"privileged container", func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes} }, true},
		{"privileged init container", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{Privileged: &yes}}}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("u1", "", "main")
			c.mod(pod)
			if got := w.SandboxConfig(pod, "s.slice", 0).Linux.SecurityContext.Privileged; got != c.want {
				t.Errorf("sandbox privileged = %v, want %v", got, c.want)
			}
		})
	}
}
