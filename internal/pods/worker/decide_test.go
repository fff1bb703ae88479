package worker

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cstate is one container's current run: "running", "starting", "exit" (with code), "created"
// (created in the current sandbox, not started), with n the run's number.
type cstate struct {
	name  string
	state string
	code  int32
	n     int
}

// mkObserved builds what a sync observed of a pod from container states, in one ready sandbox.
func mkObserved(pod *v1.Pod, states ...cstate) *observed {
	sb := &Sandbox{ID: "sb", PodUID: string(pod.UID), Ready: true, CreatedAt: t0}
	o := &observed{pod: pod, rec: newPodRecord(), sandbox: sb, sandboxes: []Sandbox{*sb}, startTime: t0, byName: map[string]*containerView{}}
	for _, s := range states {
		n := max(s.n, 1)
		in := &instance{ContainerStatus: ContainerStatus{
			Container: Container{ID: fmt.Sprintf("%s-%d", s.name, n), SandboxID: "sb", Name: s.name, Attempt: uint32(n - 1), State: StateRunning},
			StartedAt: t0,
		}}
		switch s.state {
		case "starting":
			in.StartedAt = time.Time{}
		case "created":
			in.State, in.StartedAt = StateCreated, time.Time{}
		case "exit":
			in.State, in.ExitCode, in.FinishedAt = StateExited, s.code, t0.Add(time.Second)
		}
		o.byName[s.name] = &containerView{current: in}
	}
	return o
}

func newDecideWorker(t *testing.T) *Worker {
	w, _ := newTestWorker(t, newFakeRT(), "")
	return w
}

// start is the action that starts instance n of container name.
func start(name string, init bool, n int) lifecycle.StartAction {
	return lifecycle.StartAction{Container: name, Init: init, N: n}
}

func TestDecideAndPhase(t *testing.T) {
	sidecar := cmd("side", "infinity")
	sidecar.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
	pod := func(policy v1.RestartPolicy, inits ...v1.Container) *v1.Pod {
		p := testPod("ph-1", policy, "a", "b")
		p.Spec.InitContainers = inits
		return p
	}
	now := t0.Add(time.Hour)
	cases := []struct {
		name        string
		pod         *v1.Pod
		rec         []cstate
		initialized bool
		wantStart   []lifecycle.StartAction
		wantStop    []string
		wantPhase   v1.PodPhase
		wantInit    bool
		wantReady   bool
	}{
		{name: "new pod starts all app containers", pod: pod(""), rec: nil,
			wantStart: []lifecycle.StartAction{start("a", false, 1), start("b", false, 1)}, wantPhase: v1.PodPending, wantInit: true},
		{name: "new pod with init containers starts the first only", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: nil,
			wantStart: []lifecycle.StartAction{start("i1", true, 1)}, wantPhase: v1.PodPending},
		{name: "first init running: wait", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: cs(cstate{name: "i1", state: "running"}),
			wantPhase: v1.PodPending},
		{name: "first init done: second starts", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: cs(cstate{name: "i1", state: "exit"}),
			wantStart: []lifecycle.StartAction{start("i2", true, 1)}, wantPhase: v1.PodPending},
		{name: "inits done: apps start", pod: pod("", cmd("i1", "1"), cmd("i2", "1")), rec: cs(cstate{name: "i1", state: "exit"}, cstate{name: "i2", state: "exit"}),
			wantStart: []lifecycle.StartAction{start("a", false, 1), start("b", false, 1)}, wantPhase: v1.PodPending, wantInit: true},
		{name: "init failed, OnFailure: restart it", pod: pod(v1.RestartPolicyOnFailure, cmd("i1", "1")), rec: cs(cstate{name: "i1", state: "exit", code: 2}),
			wantStart: []lifecycle.StartAction{start("i1", true, 2)}, wantPhase: v1.PodPending},
		{name: "init failed, Never: pod failed", pod: pod(v1.RestartPolicyNever, cmd("i1", "1"), cmd("i2", "1")), rec: cs(cstate{name: "i1", state: "exit", code: 2}),
			wantPhase: v1.PodFailed},
		{name: "init failed, Never: running sidecar stopped", pod: pod(v1.RestartPolicyNever, sidecar, cmd("i1", "1")),
			rec: cs(cstate{name: "side", state: "running"}, cstate{name: "i1", state: "exit", code: 1}), wantStop: []string{"side"}, wantPhase: v1.PodFailed},
		{name: "sidecar starts before the next init", pod: pod("", sidecar, cmd("i1", "1")), rec: nil,
			wantStart: []lifecycle.StartAction{start("side", true, 1)}, wantPhase: v1.PodPending},
		{name: "sidecar starting: next init waits", pod: pod("", sidecar, cmd("i1", "1")), rec: cs(cstate{name: "side", state: "starting"}),
			wantPhase: v1.PodPending},
		{name: "sidecar running: next init starts", pod: pod("", sidecar, cmd("i1", "1")), rec: cs(cstate{name: "side", state: "running"}),
			wantStart: []lifecycle.StartAction{start("i1", true, 1)}, wantPhase: v1.PodPending},
		{name: "sidecar exited 0 is restarted", pod: pod(v1.RestartPolicyNever, sidecar), rec: cs(cstate{name: "side", state: "exit"}, cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}),
			initialized: true, wantStart: []lifecycle.StartAction{start("side", true, 2)}, wantPhase: v1.PodRunning, wantInit: true},
		{name: "apps done under Never: sidecar stopped, Succeeded", pod: pod(v1.RestartPolicyNever, sidecar),
			rec:         cs(cstate{name: "side", state: "running"}, cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}),
			initialized: true, wantStop: []string{"side"}, wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "running", pod: pod(""), rec: cs(cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}), initialized: true,
			wantPhase: v1.PodRunning, wantInit: true, wantReady: true},
		{name: "one starting: Pending", pod: pod(""), rec: cs(cstate{name: "a", state: "running"}, cstate{name: "b", state: "starting"}), initialized: true,
			wantPhase: v1.PodPending, wantInit: true},
		{name: "Never: one succeeded one running", pod: pod(v1.RestartPolicyNever), rec: cs(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "running"}), initialized: true,
			wantPhase: v1.PodRunning, wantInit: true},
		{name: "Never: all succeeded", pod: pod(v1.RestartPolicyNever), rec: cs(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "Never: one failed", pod: pod(v1.RestartPolicyNever), rec: cs(cstate{name: "a", state: "exit", code: 3}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodFailed, wantInit: true},
		{name: "OnFailure: failed one restarts", pod: pod(v1.RestartPolicyOnFailure), rec: cs(cstate{name: "a", state: "exit", code: 3}, cstate{name: "b", state: "exit"}), initialized: true,
			wantStart: []lifecycle.StartAction{start("a", false, 2)}, wantPhase: v1.PodRunning, wantInit: true},
		{name: "OnFailure: all succeeded", pod: pod(v1.RestartPolicyOnFailure), rec: cs(cstate{name: "a", state: "exit"}, cstate{name: "b", state: "exit"}), initialized: true,
			wantPhase: v1.PodSucceeded, wantInit: true},
		{name: "Always: exit 0 restarts", pod: pod(v1.RestartPolicyAlways), rec: cs(cstate{name: "a", state: "exit", n: 4}, cstate{name: "b", state: "running"}), initialized: true,
			wantStart: []lifecycle.StartAction{start("a", false, 5)}, wantPhase: v1.PodRunning, wantInit: true},
		// Created, never started (slicelet stopped between the two): the sync starts it; nothing
		// creates another run.
		{name: "created never started: no new run", pod: pod(""), rec: cs(cstate{name: "a", state: "created", n: 3}, cstate{name: "b", state: "running"}), initialized: true,
			wantPhase: v1.PodPending, wantInit: true},
		{name: "initialized pods never rerun init containers", pod: pod(v1.RestartPolicyAlways, cmd("i1", "1")), rec: cs(cstate{name: "a", state: "running"}, cstate{name: "b", state: "running"}),
			initialized: true, wantPhase: v1.PodRunning, wantInit: true, wantReady: true},
	}
	w := newDecideWorker(t)
	w.clock = testingclock.NewFakeClock(now)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := mkObserved(c.pod, c.rec...)
			o.initialized = c.initialized
			p := w.decide(o, false)
			if !reflect.DeepEqual(p.Start, c.wantStart) {
				t.Errorf("start %v, want %v", p.Start, c.wantStart)
			}
			if !reflect.DeepEqual(p.StopSidecars, c.wantStop) {
				t.Errorf("stop %v, want %v", p.StopSidecars, c.wantStop)
			}
			if p.Initialized != c.wantInit {
				t.Errorf("initialized %v, want %v", p.Initialized, c.wantInit)
			}
			st := w.podStatus(o, p)
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
			if k := w.decide(o, true); len(k.Start) > 0 || len(k.StopSidecars) > 0 {
				t.Errorf("killed pod plans %v %v", k.Start, k.StopSidecars)
			}
		})
	}
}

// TestContainerStatusStates: runs as lifecycle sees them (container IDs, signal, reason) in a
// container's status.
func TestContainerStatusStates(t *testing.T) {
	w := newDecideWorker(t)
	c := v1.Container{Name: "a"}
	prev := &instance{ContainerStatus: ContainerStatus{Container: Container{ID: "x-a-1", Name: "a", State: StateExited},
		StartedAt: t0, FinishedAt: t0.Add(time.Second), ExitCode: 137, Signal: 9, Reason: lifecycle.ReasonOOMKilled}}
	run := &instance{ContainerStatus: ContainerStatus{Container: Container{ID: "x-a-2", Name: "a", Attempt: 1, State: StateRunning}, StartedAt: t0.Add(20 * time.Second)}}
	status := func(v *containerView, p lifecycle.Plan, waitReason string) v1.ContainerStatus {
		o := mkObserved(testPod("cs-1", "", "a"))
		if v != nil {
			o.byName["a"] = v
		}
		return lifecycle.ContainerStatus(&c, w.view(o, false).Containers["a"], false, p, waitReason)
	}
	st := status(&containerView{current: run, previous: prev}, lifecycle.Plan{}, lifecycle.ReasonContainerCreating)
	if st.State.Running == nil || !st.State.Running.StartedAt.Time.Equal(run.StartedAt) || st.RestartCount != 1 || !st.Ready || !*st.Started ||
		st.ContainerID != "fake://x-a-2" || st.Image != "" {
		t.Errorf("running: %+v", st)
	}
	if lt := st.LastTerminationState.Terminated; lt == nil || lt.Reason != lifecycle.ReasonOOMKilled || lt.ExitCode != 137 || lt.Signal != 9 || lt.ContainerID != "fake://x-a-1" {
		t.Errorf("last termination: %+v", lt)
	}
	// In back-off: waiting CrashLoopBackOff with the dead run as last termination.
	wt := v1.ContainerStateWaiting{Reason: lifecycle.ReasonCrashLoopBackOff, Message: "back-off 10s"}
	st = status(&containerView{current: prev}, lifecycle.Plan{Waiting: map[string]v1.ContainerStateWaiting{"a": wt}}, "")
	if st.State.Waiting == nil || st.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || st.LastTerminationState.Terminated == nil || st.Ready {
		t.Errorf("back-off: %+v", st)
	}
	// Created, never started: waiting ContainerCreating with its ID and restart count.
	created := &instance{ContainerStatus: ContainerStatus{Container: Container{ID: "x-a-3", Name: "a", Attempt: 2, State: StateCreated}}}
	st = status(&containerView{current: created}, lifecycle.Plan{}, lifecycle.ReasonPodInitializing)
	if st.State.Waiting == nil || st.State.Waiting.Reason != lifecycle.ReasonContainerCreating || st.RestartCount != 2 {
		t.Errorf("created: %+v", st)
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
		rec    []cstate
		want   v1.PodPhase
	}{
		{"Always, all exit 0", v1.RestartPolicyAlways, cs(cstate{name: "a", state: "exit"}), v1.PodSucceeded},
		{"Always, killed by SIGTERM", v1.RestartPolicyAlways, cs(cstate{name: "a", state: "exit", code: 143}), v1.PodFailed},
		{"OnFailure, failed", v1.RestartPolicyOnFailure, cs(cstate{name: "a", state: "exit", code: 1}), v1.PodFailed},
		{"still running", v1.RestartPolicyAlways, cs(cstate{name: "a", state: "running"}), v1.PodRunning},
	}
	w := newDecideWorker(t)
	w.clock = testingclock.NewFakeClock(t0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("kp-1", c.policy, "a")
			o := mkObserved(pod, c.rec...)
			o.initialized = true
			if got := w.podStatus(o, w.decide(o, true)).Phase; got != c.want {
				t.Errorf("phase %s, want %s", got, c.want)
			}
			// Not killed, Always: Running (restarts pending).
			if c.policy == v1.RestartPolicyAlways {
				if got := w.podStatus(o, w.decide(o, false)).Phase; got != v1.PodRunning {
					t.Errorf("not killed: phase %s, want Running", got)
				}
			}
		})
	}
}

// cs lists container states.
func cs(states ...cstate) []cstate { return states }

func cmd(name string, _ ...string) v1.Container {
	return v1.Container{Name: name, Command: []string{"/bin/sleep", "1"}}
}

func ptr[T any](v T) *T { return &v }

func condition(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func describe(st v1.PodStatus) string {
	var b []string
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			switch {
			case cs.State.Running != nil:
				b = append(b, cs.Name+"=running")
			case cs.State.Terminated != nil:
				b = append(b, cs.Name+"=terminated("+cs.State.Terminated.Reason+")")
			case cs.State.Waiting != nil:
				b = append(b, cs.Name+"=waiting("+cs.State.Waiting.Reason+")")
			}
		}
	}
	return fmt.Sprint(b)
}
