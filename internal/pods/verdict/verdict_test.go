package verdict

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestRuntime(t *testing.T) {
	image := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	host := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Command: []string{"/bin/sh", "-c", "sleep 1"}}}}}
	tests := []struct {
		name, runtime string
		pod           *v1.Pod
		allowed       bool
		problem       string
	}{
		{"systemd refuses an image", "systemd", image, false, `spec.containers[0].image: Invalid value: "nginx:1.27"`},
		{"systemd runs a host command", "systemd", host, true, ""},
		{"cri runs an image", "cri", image, true, ""},
		{"cri needs an image", "cri", host, false, "spec.containers[0].image: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Runtime(tt.runtime, tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if v.Runtime != tt.runtime || v.Allowed != tt.allowed {
				t.Fatalf("verdict = %+v", v)
			}
			if tt.problem != "" && (len(v.Problems) == 0 || !strings.Contains(v.Problems[0], tt.problem)) {
				t.Errorf("problems = %q, want %q first", v.Problems, tt.problem)
			}
		})
	}
	if _, err := Runtime("docker", host); err == nil {
		t.Error("unknown runtime type accepted")
	}
}

// TestRuntimeOn: the configured runtime.network decides what a pod's own network namespace
// allows (a net.* sysctl changes the whole host on its network, the pod's own with "cni").
func TestRuntimeOn(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}},
		Containers:      []v1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	for _, tt := range []struct {
		network string
		allowed bool
	}{{"host", false}, {"cni", true}} {
		v, err := RuntimeOn("cri", tt.network, pod)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed != tt.allowed {
			t.Errorf("runtime.network %q: verdict %+v, want allowed %v", tt.network, v, tt.allowed)
		}
	}
}
