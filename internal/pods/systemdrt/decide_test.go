package systemdrt

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rec builds a record from container states: "running", "starting", "exit:N", "intent" (recorded,
// never created), with n the instance number.
type cstate struct {
	name  string
	state string
	code  int32
	n     int
}

func mkRecord(states ...cstate) *podRecord {
	r := newPodRecord("rec-1")
	for _, s := range states {
		n := max(s.n, 1)
		in := &instance{N: n, Unit: "u", Created: true, StartedAt: t0}
		switch s.state {
		case "starting":
			in.StartedAt = time.Time{}
		case "intent":
			in.Created, in.StartedAt = false, time.Time{}
		case "exit":
			in.Done, in.ExitCode, in.FinishedAt = true, s.code, t0.Add(time.Second)
		}
		r.Containers[s.name] = &containerRecord{Current: in}
	}
	return r
}

// start is the action that starts instance n of container name.
func start(name string, init bool, n int) lifecycle.StartAction {
	return lifecycle.StartAction{Container: name, Init: init, N: n}
}

func TestDecideAndPhase(t *testing.T) {
	sidecar := cmd("side", "infinity")
	sidecar.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
	pod := func(policy v1.RestartPolicy, inits ...v1.Container) *v1.Pod {
		p := testPod("ph-1", policy, cmd("a", "1"), cmd("b", "1"))
		p.Spec.InitContainers = inits
		return p
	}
	now := t0.Add(time.Hour)
	cases := []struct {
		name        string
		pod         *v1.Pod
		rec         *podRecord
		initialized bool
		wantStart   []lifecycle.StartAction
		wantStop    []string
		wantPhase   v1.PodPhase
		wantInit    bool
		wantReady   bool
	}{
		{name: "new pod starts all app containers", pod: pod(""), rec: mkRecord(),
			wantStart: []lifecycle.StartAction{start("a", false, 1), start("b", false, 1)}, wantPhase: v1.PodPending, wantInit: true},
		{name: "new pod with init containers starts the first only", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: mkRecord(),
			wantStart: []lifecycle.StartAction{start("i1", true, 1)}, wantPhase: v1.PodPending},
		{name: "first init running: wait", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: mkRecord(cstate{name: "i1", state: "running"}),
			wantPhase: v1.PodPending},
		{name: "first init done: second starts", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: mkRecord(cstate{name: "i1", state: "exit"}),
			wantStart: []lifecycle.StartAction{start("i2", true, 1)}, wantPhase: v1.PodPending},
		{name: "inits done: apps start", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: mkRecord(cstate{name: "i1", state: "exit"}, cstate{name: "i2", state: "exit"}),
			wantStart: []lifecycle.StartAction{start("a", false, 1), start("b", false, 1)}, wantPhase: v1.PodPending, wantInit: true},
		{name: "init failed, OnFailure: restart it", pod: pod(v1.RestartPolicyOnFailure, cmd("i1", "1")), rec: mkRecord(cstate{name: "i1", state: "exit", code: 2}),
			wantStart: []lifecycle.StartAction{start("i1", true, 2)}, wantPhase: v1.PodPending},
		{name: "init failed, Never: pod failed", pod: pod(v1.RestartPolicyNever, cmd("i1", "1"), cmd("i2", "1")), rec: mkRecord(cstate{name: "i1", state: "exit", code: 2}),
			wantPhase: v1.PodFailed},
		{name: "init failed, Never: running sidecar stopped", pod: pod(v1.RestartPolicyNever, sidecar, cmd("i1", "1")),
			rec: mkRecord(cstate{name: "side", state: "running"}, cstate{name: "i1", state: "exit", code: 1}), wantStop: []string{"side"}, wantPhase: v1.PodFailed},
		{name: "sidecar starts before the next init", pod: pod("", sidecar, cmd("i1", "1")), rec: mkRecord(),
			wantStart: []lifecycle.StartAction{start("side", true, 1)}, wantPhase: v1.PodPending},
		{name: "sidecar starting: next init waits", pod: pod("", sidecar, cmd("i1", "1")), rec: mkRecord(cstate{name: "side", state: "starting"}),
			wantPhase: v1.PodPending},
		{name: "sidecar running: next init starts", pod: pod("", sidecar, cmd("i1", "1")), rec: mkRecord(cstate{name: "side", state: "running"}),
			wantStart: []lifecycle.StartAction{start("i1", true, 1)}, wantPhase: v1.PodPending},
		{name: "sidecar exited 0 is restarted", pod: pod(v1.RestartPolicyNever, sidecar), rec: mkRecord(cstate{name: "side", state: "exit"}, cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}),
			initialized: true, wantStart: []lifecycle.StartAction{start("side", true, 2)}, wantPhase: v1.PodRunning, wantInit: true},
		{name: "apps done under Never: sidecar stopped, Succeeded", pod: pod(v1.RestartPolicyNever, sidecar),
			rec:         mkRecord(cstate{name: "side", state: "running"}, cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}),
			initialized: true, wantStop: []string{"side"}, wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "running", pod: pod(""), rec: mkRecord(cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}), initialized: true,
			wantPhase: v1.PodRunning, wantInit: true, wantReady: true},
		{name: "one starting: Pending", pod: pod(""), rec: mkRecord(cstate{name: "a", state: "running"}, cstate{name: "b", state: "starting"}), initialized: true,
			wantPhase: v1.PodPending, wantInit: true},
		{name: "Never: one succeeded one running", pod: pod(v1.RestartPolicyNever), rec: mkRecord(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "running"}), initialized: true,
			wantPhase: v1.PodRunning, wantInit: true},
		{name: "Never: all succeeded", pod: pod(v1.RestartPolicyNever), rec: mkRecord(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "Never: one failed", pod: pod(v1.RestartPolicyNever), rec: mkRecord(cstate{name: "a", state: "exit", code: 3}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodFailed, wantInit: true},
		{name: "OnFailure: failed one restarts", pod: pod(v1.RestartPolicyOnFailure), rec: mkRecord(cstate{name: "a", state: "exit", code: 3}, cstate{name: "b", state: "exit"}), initialized: true,
			wantStart: []lifecycle.StartAction{start("a", false, 2)}, wantPhase: v1.PodRunning, wantInit: true},
		{name: "OnFailure: all succeeded", pod: pod(v1.RestartPolicyOnFailure), rec: mkRecord(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "Always: exit 0 restarts", pod: pod(v1.RestartPolicyAlways), rec: mkRecord(cstate{name: "a", state: "exit", n: 4}, cstate{name: "b", state: "running"}), initialized: true,
			wantStart: []lifecycle.StartAction{start("a", false, 5)}, wantPhase: v1.PodRunning, wantInit: true},
		{name: "recorded never created: same instance", pod: pod(""), rec: mkRecord(cstate{name: "a", state: "intent", n: 3}, cstate{name: "b", state: "running"}), initialized: true,
			wantStart: []lifecycle.StartAction{start("a", false, 3)}, wantPhase: v1.PodPending, wantInit: true},
		{name: "initialized pods never rerun init containers", pod: pod(v1.RestartPolicyAlways, cmd("i1", "1")), rec: mkRecord(cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}),
			initialized: true, wantPhase: v1.PodRunning, wantInit: true, wantReady: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.rec.Initialized = c.initialized
			p := decide(c.pod, c.rec, now, lifecycle.DefaultBackoff(), false)
			if !reflect.DeepEqual(p.Start, c.wantStart) {
				t.Errorf("start %v, want %v", p.Start, c.wantStart)
			}
			if !reflect.DeepEqual(p.StopSidecars, c.wantStop) {
				t.Errorf("stop %v, want %v", p.StopSidecars, c.wantStop)
			}
			if p.Initialized != c.wantInit {
				t.Errorf("initialized %v, want %v", p.Initialized, c.wantInit)
			}
			st := buildStatus(c.pod, c.rec, p)
			if st.Phase != c.wantPhase {
				t.Errorf("phase %s, want %s (%s)", st.Phase, c.wantPhase, describe(st))
			}
			if got := condition(st, v1.PodReady) == v1.ConditionTrue; got != c.wantReady {
				t.Errorf("ready %v, want %v", got, c.wantReady)
			}
			if got := condition(st, v1.PodInitialized) == v1.ConditionTrue; got != c.wantInit {
				t.Errorf("Initialized condition %v, want %v", got, c.wantInit)
			}
			if condition(st, v1.PodScheduled) != v1.ConditionTrue {
				t.Error("PodScheduled not true")
			}
			// killed: nothing is started.
			if k := decide(c.pod, c.rec, now, lifecycle.DefaultBackoff(), true); len(k.Start) > 0 || len(k.StopSidecars) > 0 {
				t.Errorf("killed pod plans %v %v", k.Start, k.StopSidecars)
			}
		})
	}
}

// TestContainerStatusStates: the record's instances as lifecycle sees them (unit IDs, signal,
// reason) in a container's status.
func TestContainerStatusStates(t *testing.T) {
	c := cmd("a", "1")
	prev := &instance{N: 1, Unit: "slicelet-x-a-1.service", Created: true, Done: true, StartedAt: t0, FinishedAt: t0.Add(time.Second), ExitCode: 137, Signal: 9, Reason: lifecycle.ReasonOOMKilled}
	running := &instance{N: 2, Unit: "slicelet-x-a-2.service", Created: true, StartedAt: t0.Add(20 * time.Second)}
	status := func(cr *containerRecord, p lifecycle.Plan, waitReason string) v1.ContainerStatus {
		rec := newPodRecord("cs-1")
		if cr != nil {
			rec.Containers["a"] = cr
		}
		return lifecycle.ContainerStatus(&c, rec.view().Containers["a"], false, p, waitReason)
	}
	st := status(&containerRecord{Current: running, Previous: prev}, lifecycle.Plan{}, lifecycle.ReasonContainerCreating)
	if st.State.Running == nil || !st.State.Running.StartedAt.Time.Equal(running.StartedAt) || st.RestartCount != 1 || !st.Ready || !*st.Started ||
		st.ContainerID != "systemd://slicelet-x-a-2.service" || st.Image != "" {
		t.Errorf("running: %+v", st)
	}
	if lt := st.LastTerminationState.Terminated; lt == nil || lt.Reason != lifecycle.ReasonOOMKilled || lt.ExitCode != 137 || lt.Signal != 9 || lt.ContainerID != "systemd://slicelet-x-a-1.service" {
		t.Errorf("last termination: %+v", lt)
	}
	// In back-off: waiting CrashLoopBackOff with the dead instance as last termination.
	w := v1.ContainerStateWaiting{Reason: lifecycle.ReasonCrashLoopBackOff, Message: "back-off 10s"}
	st = status(&containerRecord{Current: prev}, lifecycle.Plan{Waiting: map[string]v1.ContainerStateWaiting{"a": w}}, "")
	if st.State.Waiting == nil || st.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || st.LastTerminationState.Terminated == nil || st.Ready {
		t.Errorf("back-off: %+v", st)
	}
	// Recorded, never created: waiting with the given reason, no container ID, its restart count.
	st = status(&containerRecord{Current: &instance{N: 3, Unit: "slicelet-x-a-3.service"}}, lifecycle.Plan{}, lifecycle.ReasonPodInitializing)
	if st.State.Waiting == nil || st.State.Waiting.Reason != lifecycle.ReasonPodInitializing || st.ContainerID != "" || st.RestartCount != 2 {
		t.Errorf("intent: %+v", st)
	}
	// Never run: waiting with the given reason, no container ID.
	st = status(nil, lifecycle.Plan{}, lifecycle.ReasonPodInitializing)
	if st.State.Waiting == nil || st.State.Waiting.Reason != lifecycle.ReasonPodInitializing || st.ContainerID != "" {
		t.Errorf("new: %+v", st)
	}
}

func TestKilledPhase(t *testing.T) {
	cases := []struct {
		name   string
		policy v1.RestartPolicy
		rec    *podRecord
		want   v1.PodPhase
	}{
		{"Always, all exit 0", v1.RestartPolicyAlways, mkRecord(cstate{name: "a", state: "exit"}), v1.PodSucceeded},
		{"Always, killed by SIGTERM", v1.RestartPolicyAlways, mkRecord(cstate{name: "a", state: "exit", code: 143}), v1.PodFailed},
		{"OnFailure, failed", v1.RestartPolicyOnFailure, mkRecord(cstate{name: "a", state: "exit", code: 1}), v1.PodFailed},
		{"still running", v1.RestartPolicyAlways, mkRecord(cstate{name: "a", state: "running"}), v1.PodRunning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("kp-1", c.policy, cmd("a", "1"))
			c.rec.Initialized = true
			if got := buildStatus(pod, c.rec, decide(pod, c.rec, t0, lifecycle.DefaultBackoff(), true)).Phase; got != c.want {
				t.Errorf("phase %s, want %s", got, c.want)
			}
			// Not killed, Always: Running (restarts pending).
			if c.policy == v1.RestartPolicyAlways {
				if got := buildStatus(pod, c.rec, decide(pod, c.rec, t0, lifecycle.DefaultBackoff(), false)).Phase; got != v1.PodRunning {
					t.Errorf("not killed: phase %s, want Running", got)
				}
			}
		})
	}
}
