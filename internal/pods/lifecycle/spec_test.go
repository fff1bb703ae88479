package lifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestShouldRestart(t *testing.T) {
	cases := []struct {
		name   string
		policy v1.RestartPolicy
		code   int32
		want   bool
	}{
		{"Always, success", v1.RestartPolicyAlways, 0, true},
		{"Always, failure", v1.RestartPolicyAlways, 1, true},
		{"OnFailure, success", v1.RestartPolicyOnFailure, 0, false},
		{"OnFailure, failure", v1.RestartPolicyOnFailure, 2, true},
		{"Never, failure", v1.RestartPolicyNever, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ShouldRestart(c.policy, c.code); got != c.want {
				t.Errorf("ShouldRestart(%s, %d) = %v, want %v", c.policy, c.code, got, c.want)
			}
		})
	}
	if got := RestartPolicy(&v1.Pod{}); got != v1.RestartPolicyAlways {
		t.Errorf("default restart policy %s, want Always", got)
	}
}

func TestSpecHelpers(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(2000)},
		InitContainers:  []v1.Container{{Name: "side", RestartPolicy: &always}, {Name: "init"}},
		Containers: []v1.Container{
			{Name: "own", SecurityContext: &v1.SecurityContext{RunAsUser: i64(1), RunAsGroup: i64(2)}},
			{Name: "inherits"},
		},
	}}
	cases := []struct {
		name              string
		container         string
		wantInit, sidecar bool
		wantUser, wantGrp int64
	}{
		{"sidecar", "side", true, true, 1000, 2000},
		{"regular init container", "init", true, false, 1000, 2000},
		{"own security context", "own", false, false, 1, 2},
		{"the pod's security context", "inherits", false, false, 1000, 2000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctr, init := ContainerByName(pod, c.container)
			if ctr == nil || ctr.Name != c.container || init != c.wantInit {
				t.Fatalf("ContainerByName = %v %v", ctr, init)
			}
			if IsSidecar(ctr) != c.sidecar {
				t.Errorf("IsSidecar = %v, want %v", !c.sidecar, c.sidecar)
			}
			if u := RunAsUser(pod, ctr); u == nil || *u != c.wantUser {
				t.Errorf("RunAsUser = %v, want %d", u, c.wantUser)
			}
			if g := RunAsGroup(pod, ctr); g == nil || *g != c.wantGrp {
				t.Errorf("RunAsGroup = %v, want %d", g, c.wantGrp)
			}
		})
	}
	if c, _ := ContainerByName(pod, "missing"); c != nil {
		t.Errorf("ContainerByName(missing) = %v", c)
	}
	if u, g := RunAsUser(&v1.Pod{}, &v1.Container{}), RunAsGroup(&v1.Pod{}, &v1.Container{}); u != nil || g != nil {
		t.Errorf("no security context: %v %v, want nil", u, g)
	}
}

func TestGracePeriod(t *testing.T) {
	secs := func(v int64) *int64 { return &v }
	cases := []struct {
		name string
		g    *int64
		want time.Duration
	}{
		{"unset", nil, DefaultGracePeriod},
		{"zero", secs(0), 0},
		{"set", secs(5), 5 * time.Second},
		{"negative", secs(-1), DefaultGracePeriod},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := GracePeriod(&v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: c.g}}); got != c.want {
				t.Errorf("GracePeriod = %v, want %v", got, c.want)
			}
		})
	}
}
