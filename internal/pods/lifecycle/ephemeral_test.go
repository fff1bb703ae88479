package lifecycle

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// withEphemeral adds ephemeral containers to pod.
func withEphemeral(pod *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "example.test/debug:1", Stdin: true, TTY: true}})
	}
	return pod
}

// TestDecideEphemeral: an ephemeral container starts once (before initialization too), never
// restarts, not in a pod that is done or being killed; its status is apart and changes
// neither the phase nor readiness.
func TestDecideEphemeral(t *testing.T) {
	running := &Container{State: StateRunning, Current: &Instance{N: 1, StartedAt: t0}}
	tests := []struct {
		name      string
		pod       *v1.Pod
		obs       *Pod
		killed    bool
		wantStart []StartAction
	}{
		{name: "started next to a running pod", pod: withEphemeral(testPod("", ctr("app")), "debugger"),
			obs: obs(true, map[string]*Container{"app": running}), wantStart: []StartAction{sa("debugger", false, 1)}},
		{name: "started before initialization", pod: withEphemeral(&v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr("init")}, Containers: []v1.Container{ctr("app")}}}, "debugger"),
			obs: obs(false, map[string]*Container{"init": running}), wantStart: []StartAction{sa("debugger", false, 1)}},
		{name: "never restarted", pod: withEphemeral(testPod(v1.RestartPolicyAlways, ctr("app")), "debugger"),
			obs: obs(true, map[string]*Container{"app": running, "debugger": exited(1, 1, t0)})},
		{name: "not in a pod that is done", pod: withEphemeral(testPod(v1.RestartPolicyNever, ctr("app")), "debugger"),
			obs: obs(true, map[string]*Container{"app": exited(1, 0, t0)})},
		{name: "not in a pod being killed", pod: withEphemeral(testPod("", ctr("app")), "debugger"),
			obs: obs(true, map[string]*Container{"app": running}), killed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.pod, tt.obs, t0, DefaultBackoff(), tt.killed)
			if !reflect.DeepEqual(p.Start, tt.wantStart) {
				t.Errorf("Start = %v, want %v", p.Start, tt.wantStart)
			}
		})
	}
}

func TestPodStatusEphemeral(t *testing.T) {
	running := &Container{State: StateRunning, Current: &Instance{N: 1, StartedAt: t0, ContainerID: "rt://e"}}
	pod := withEphemeral(testPod("", ctr("app")), "debugger", "later")
	o := obs(true, map[string]*Container{"app": {State: StateRunning, Current: &Instance{N: 1, StartedAt: t0}}, "debugger": running})
	st := PodStatus(pod, o, Decide(pod, o, t0, DefaultBackoff(), false))
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 1 {
		t.Fatalf("phase %s, %d container statuses", st.Phase, len(st.ContainerStatuses))
	}
	if len(st.EphemeralContainerStatuses) != 2 {
		t.Fatalf("ephemeral statuses %+v", st.EphemeralContainerStatuses)
	}
	dbg, later := st.EphemeralContainerStatuses[0], st.EphemeralContainerStatuses[1]
	if dbg.Name != "debugger" || dbg.State.Running == nil || dbg.Ready || dbg.Started != nil || dbg.ContainerID != "rt://e" {
		t.Errorf("debugger status %+v", dbg)
	}
	if later.State.Waiting == nil || later.State.Waiting.Reason != ReasonContainerCreating {
		t.Errorf("later status %+v", later)
	}
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady && c.Status != v1.ConditionTrue {
			t.Errorf("ready condition %+v: an ephemeral container must not make the pod unready", c)
		}
	}
}

// TestInitContainerReady: a regular init container that succeeded is ready, one that failed
// or runs is not (the InitContainer conformance specs' "should be in Ready status").
func TestInitContainerReady(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr("ok"), ctr("bad"), ctr("running")}, Containers: []v1.Container{ctr("app")}}}
	o := obs(false, map[string]*Container{"ok": exited(1, 0, t0), "bad": exited(1, 1, t0),
		"running": {State: StateRunning, Current: &Instance{N: 1, StartedAt: t0}}})
	st := PodStatus(pod, o, Decide(pod, o, t0, DefaultBackoff(), false))
	want := map[string]bool{"ok": true, "bad": false, "running": false}
	for _, cs := range st.InitContainerStatuses {
		if cs.Ready != want[cs.Name] {
			t.Errorf("init container %s ready = %v, want %v", cs.Name, cs.Ready, want[cs.Name])
		}
	}
}

// TestPodReadyToStartContainers: the condition follows the pod's ready sandbox.
func TestPodReadyToStartContainers(t *testing.T) {
	pod := testPod("", ctr("app"))
	for _, ready := range []bool{false, true} {
		o := obs(true, nil)
		o.SandboxReady = ready
		st := PodStatus(pod, o, Decide(pod, o, t0, DefaultBackoff(), false))
		want := conditionStatus(ready)
		for _, c := range st.Conditions {
			if c.Type == v1.PodReadyToStartContainers && (c.Status != want || c.Reason != "") {
				t.Errorf("sandbox ready %v: condition %+v, want %s", ready, c, want)
			}
		}
	}
}

// TestTerminalPodConditions: a terminal pod's ContainersReady and Ready are False with the
// phase's reason (PodCompleted, PodFailed) and no message; a completed pod was Initialized,
// reason PodCompleted.
func TestTerminalPodConditions(t *testing.T) {
	tests := []struct {
		name                  string
		code                  int32
		wantPhase             v1.PodPhase
		wantReady, wantInitOK string
	}{
		{name: "succeeded", code: 0, wantPhase: v1.PodSucceeded, wantReady: "PodCompleted", wantInitOK: "PodCompleted"},
		{name: "failed", code: 1, wantPhase: v1.PodFailed, wantReady: "PodFailed", wantInitOK: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyNever, ctr("app"))
			o := obs(true, map[string]*Container{"app": exited(1, tt.code, t0)})
			st := PodStatus(pod, o, Decide(pod, o, t0, DefaultBackoff(), false))
			if st.Phase != tt.wantPhase {
				t.Fatalf("phase %s, want %s", st.Phase, tt.wantPhase)
			}
			for _, c := range st.Conditions {
				switch c.Type {
				case v1.ContainersReady, v1.PodReady:
					if c.Status != v1.ConditionFalse || c.Reason != tt.wantReady || c.Message != "" {
						t.Errorf("%+v, want False %s", c, tt.wantReady)
					}
				case v1.PodInitialized:
					if c.Status != v1.ConditionTrue || c.Reason != tt.wantInitOK {
						t.Errorf("%+v, want True %q", c, tt.wantInitOK)
					}
				}
			}
		})
	}
}
