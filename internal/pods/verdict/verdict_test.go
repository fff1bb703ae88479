package verdict

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/podfields"
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

// TestImplementedVolumesReachTheRuntime: every volume source the field registry says a node
// implements, for a static pod or for a pod from the API server, is one both runtimes accept;
// a source the worker sets up but a runtime refuses would make the registry's word untrue.
func TestImplementedVolumesReachTheRuntime(t *testing.T) {
	sourceType := reflect.TypeFor[v1.VolumeSource]()
	for _, e := range podfields.Entries() {
		name, ok := strings.CutPrefix(e.Path, "spec.volumes[*].")
		if !ok || strings.Contains(name, ".") {
			continue
		}
		h, _ := e.In(podfields.Manifest)
		if hc, _ := e.In(podfields.APIServer); h != podfields.Implemented && hc != podfields.Implemented {
			continue
		}
		var field reflect.StructField
		for i := range sourceType.NumField() {
			if tag, _, _ := strings.Cut(sourceType.Field(i).Tag.Get("json"), ","); tag == name {
				field = sourceType.Field(i)
			}
		}
		if field.Type == nil {
			continue // a field of v1.Volume itself (name)
		}
		t.Run(name, func(t *testing.T) {
			vol := v1.Volume{Name: "data"}
			reflect.ValueOf(&vol.VolumeSource).Elem().FieldByIndex(field.Index).Set(reflect.New(field.Type.Elem()))
			for _, rt := range []struct {
				name string
				c    v1.Container
			}{
				{"cri", v1.Container{Name: "app", Image: "busybox:1"}},
				{"systemd", v1.Container{Name: "app", Command: []string{"/bin/true"}}},
			} {
				c := rt.c
				c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
				v, err := Spec(rt.name, &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{vol}, Containers: []v1.Container{c}}})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range v.Problems {
					if strings.HasPrefix(p, "spec.volumes[0]: ") {
						t.Errorf("%s runtime refuses a %s volume the registry implements: %s", rt.name, name, p)
					}
				}
			}
		})
	}
}
