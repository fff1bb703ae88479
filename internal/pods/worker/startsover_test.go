package worker

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestStartsOver: the kubelet's rule for a pod without a ready sandbox.
func TestStartsOver(t *testing.T) {
	done := func(code int32) *containerView {
		return &containerView{current: &instance{ContainerStatus: ContainerStatus{Container: Container{State: StateExited}, ExitCode: code}}}
	}
	running := &containerView{current: &instance{ContainerStatus: ContainerStatus{Container: Container{State: StateRunning}}}}
	for _, tc := range []struct {
		name       string
		policy     v1.RestartPolicy
		containers map[string]*containerView
		hadSandbox bool
		want       bool
	}{
		{name: "first sandbox", policy: v1.RestartPolicyAlways, want: true},
		{name: "first sandbox, never", policy: v1.RestartPolicyNever, want: true},
		{name: "always, app killed", policy: v1.RestartPolicyAlways, hadSandbox: true, containers: map[string]*containerView{"init": done(0), "main": done(137)}, want: true},
		{name: "always, app succeeded", policy: v1.RestartPolicyAlways, hadSandbox: true, containers: map[string]*containerView{"main": done(0), "side": done(0)}, want: true},
		{name: "always, during init", policy: v1.RestartPolicyAlways, hadSandbox: true, containers: map[string]*containerView{"init": done(137)}, want: true},
		{name: "never, container created", policy: v1.RestartPolicyNever, hadSandbox: true, containers: map[string]*containerView{"init": done(0)}, want: false},
		{name: "never, nothing created", policy: v1.RestartPolicyNever, hadSandbox: true, containers: map[string]*containerView{}, want: true},
		{name: "on failure, one app failed", policy: v1.RestartPolicyOnFailure, hadSandbox: true, containers: map[string]*containerView{"main": done(0), "side": done(1)}, want: true},
		{name: "on failure, one app running", policy: v1.RestartPolicyOnFailure, hadSandbox: true, containers: map[string]*containerView{"main": done(0), "side": running}, want: true},
		{name: "on failure, one app never ran", policy: v1.RestartPolicyOnFailure, hadSandbox: true, containers: map[string]*containerView{"main": done(0)}, want: true},
		{name: "on failure, apps succeeded", policy: v1.RestartPolicyOnFailure, hadSandbox: true, containers: map[string]*containerView{"init": done(0), "main": done(0), "side": done(0)}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("u1", tc.policy, "main", "side")
			pod.Spec.InitContainers = []v1.Container{cmd("init")}
			o := &observed{pod: pod, byName: map[string]*containerView{}}
			maps.Copy(o.byName, tc.containers)
			if got := startsOver(pod, o, tc.hadSandbox); got != tc.want {
				t.Errorf("startsOver = %v, want %v", got, tc.want)
			}
		})
	}
}
