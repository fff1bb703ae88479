package lifecycle

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// testPod is a pod with the given restart policy and containers.
func testPod(policy v1.RestartPolicy, containers ...v1.Container) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: policy, Containers: containers}}
	p.Name, p.Namespace, p.UID = "web", "default", "uid-1"
	return p
}

func ctr(name string) v1.Container {
	return v1.Container{Name: name, Image: "example.test/" + name + ":1"}
}

// obs is an observed pod from containers by name; initialized as given.
func obs(initialized bool, cs map[string]*Container) *Pod {
	return &Pod{Initialized: initialized, Containers: cs}
}

func exited(n int, code int32, finished time.Time) *Container {
	return &Container{State: StateExited, Current: &Instance{N: n, ContainerID: "rt://c", StartedAt: t0, FinishedAt: finished, ExitCode: code}}
}

func sa(name string, init bool, n int) StartAction {
	return StartAction{Container: name, Init: init, N: n}
}

// TestDecideHoldsAndBackoff: containers held back by a failed pull or create, or by the
// restart back-off, wait with the kubelet's reasons, and NextSync is the earliest end.
func TestDecideHoldsAndBackoff(t *testing.T) {
	now := t0.Add(time.Hour)
	b := DefaultBackoff()
	inBackoff := func(code int32) *Container {
		c := exited(3, code, now.Add(-5*time.Second))
		c.Backoff, c.BackoffUpdated = 20*time.Second, now.Add(-time.Minute)
		return c
	}
	held := func(c *Container, reason string, until time.Time) *Container {
		if c == nil {
			c = &Container{}
		}
		c.Hold = &Hold{Reason: reason, Message: "because", Until: until}
		return c
	}
	cases := []struct {
		name        string
		pod         *v1.Pod
		obs         *Pod
		wantStart   []StartAction
		wantWaiting map[string]string
		wantNext    time.Time
	}{
		{name: "pull failed: ImagePullBackOff until the hold ends", pod: testPod("", ctr("a"), ctr("b")),
			obs:       obs(true, map[string]*Container{"a": held(nil, ReasonErrImagePull, now.Add(10*time.Second))}),
			wantStart: []StartAction{sa("b", false, 1)}, wantWaiting: map[string]string{"a": ReasonImagePullBackOff}, wantNext: now.Add(10 * time.Second)},
		{name: "create failed: CreateContainerError", pod: testPod("", ctr("a")),
			obs:         obs(true, map[string]*Container{"a": held(nil, ReasonCreateContainerError, now.Add(time.Second))}),
			wantWaiting: map[string]string{"a": ReasonCreateContainerError}, wantNext: now.Add(time.Second)},
		{name: "hold over: starts", pod: testPod("", ctr("a")),
			obs:       obs(true, map[string]*Container{"a": held(nil, ReasonErrImagePull, now)}),
			wantStart: []StartAction{sa("a", false, 1)}, wantWaiting: map[string]string{}},
		{name: "held init container blocks the next", pod: func() *v1.Pod {
			p := testPod("", ctr("a"))
			p.Spec.InitContainers = []v1.Container{ctr("i1"), ctr("i2")}
			return p
		}(),
			obs:         obs(false, map[string]*Container{"i1": held(nil, ReasonErrImagePull, now.Add(time.Minute))}),
			wantWaiting: map[string]string{"i1": ReasonImagePullBackOff}, wantNext: now.Add(time.Minute)},
		{name: "restart in back-off: CrashLoopBackOff", pod: testPod(v1.RestartPolicyAlways, ctr("a")),
			obs:         obs(true, map[string]*Container{"a": inBackoff(1)}),
			wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff}, wantNext: now.Add(15 * time.Second)},
		{name: "back-off over but held: the hold's reason", pod: testPod(v1.RestartPolicyAlways, ctr("a")),
			obs:         obs(true, map[string]*Container{"a": held(exited(3, 1, now.Add(-time.Minute)), ReasonErrImagePull, now.Add(3*time.Second))}),
			wantWaiting: map[string]string{"a": ReasonImagePullBackOff}, wantNext: now.Add(3 * time.Second)},
		{name: "earliest of several ends", pod: testPod(v1.RestartPolicyAlways, ctr("a"), ctr("b")),
			obs:         obs(true, map[string]*Container{"a": inBackoff(2), "b": held(nil, ReasonErrImagePull, now.Add(2*time.Second))}),
			wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff, "b": ReasonImagePullBackOff}, wantNext: now.Add(2 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(c.pod, c.obs, now, b, false)
			if !reflect.DeepEqual(p.Start, c.wantStart) {
				t.Errorf("start %v, want %v", p.Start, c.wantStart)
			}
			got := map[string]string{}
			for name, w := range p.Waiting {
				got[name] = w.Reason
			}
			if c.wantWaiting == nil {
				c.wantWaiting = map[string]string{}
			}
			if !reflect.DeepEqual(got, c.wantWaiting) {
				t.Errorf("waiting %v, want %v", got, c.wantWaiting)
			}
			if !p.NextSync.Equal(c.wantNext) {
				t.Errorf("next sync %v, want %v", p.NextSync, c.wantNext)
			}
			// The waiting states are what the status shows.
			st := PodStatus(c.pod, c.obs, p)
			for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
				if want, ok := c.wantWaiting[cs.Name]; ok && (cs.State.Waiting == nil || cs.State.Waiting.Reason != want) {
					t.Errorf("%s: state %+v, want waiting %s", cs.Name, cs.State, want)
				}
			}
			// Killed: nothing starts, nothing waits.
			if k := Decide(c.pod, c.obs, now, b, true); len(k.Start) > 0 || len(k.Waiting) > 0 || !k.NextSync.IsZero() || !k.Killed {
				t.Errorf("killed pod plans %+v", k)
			}
		})
	}
}

func TestDecideBackoffMessage(t *testing.T) {
	now := t0.Add(time.Hour)
	c := exited(2, 1, now.Add(-time.Second))
	c.Backoff, c.BackoffUpdated = 10*time.Second, now.Add(-time.Second)
	p := Decide(testPod(v1.RestartPolicyOnFailure, ctr("a")), obs(true, map[string]*Container{"a": c}), now, DefaultBackoff(), false)
	want := "back-off 10s restarting failed container=a pod=web_default(uid-1)"
	if w := p.Waiting["a"]; w.Reason != ReasonCrashLoopBackOff || w.Message != want {
		t.Errorf("waiting %+v, want %s %q", w, ReasonCrashLoopBackOff, want)
	}
}

func TestContainerStatus(t *testing.T) {
	c := ctr("a")
	prev := &Instance{N: 1, ContainerID: "rt://1", ImageID: "sha256:old", StartedAt: t0, FinishedAt: t0.Add(time.Second), ExitCode: 137, Signal: 9, Reason: ReasonOOMKilled}
	cur := &Instance{N: 2, ContainerID: "rt://2", ImageID: "sha256:img", StartedAt: t0.Add(20 * time.Second)}
	backoff := Plan{Waiting: map[string]v1.ContainerStateWaiting{"a": {Reason: ReasonCrashLoopBackOff}}}
	pull := Plan{Waiting: map[string]v1.ContainerStateWaiting{"a": {Reason: ReasonImagePullBackOff, Message: "no such image"}}}
	cases := []struct {
		name        string
		cr          *Container
		images      bool
		p           Plan
		wantState   string // running, waiting:<reason>, terminated:<reason>
		wantID      string
		wantImageID string
		wantImage   bool
		wantRestart int32
		wantLast    bool
		wantReady   bool
	}{
		{name: "never ran", wantState: "waiting:Wait"},
		{name: "never ran, images", images: true, wantState: "waiting:Wait", wantImage: true},
		{name: "held before the first run", p: pull, images: true, wantState: "waiting:" + ReasonImagePullBackOff, wantImage: true},
		{name: "recorded, never created", cr: &Container{State: StateNone, Current: &Instance{N: 3, ContainerID: "rt://3"}, Previous: prev},
			wantState: "waiting:Wait", wantRestart: 2, wantLast: true},
		{name: "starting", cr: &Container{State: StateStarting, Current: cur}, wantState: "waiting:" + ReasonContainerCreating, wantID: "rt://2", wantImageID: "sha256:img", wantRestart: 1},
		{name: "running after an OOM kill", cr: &Container{State: StateRunning, Current: cur, Previous: prev}, images: true,
			wantState: "running", wantID: "rt://2", wantImageID: "sha256:img", wantImage: true, wantRestart: 1, wantLast: true, wantReady: true},
		{name: "exited", cr: &Container{State: StateExited, Current: prev}, wantState: "terminated:" + ReasonOOMKilled, wantID: "rt://1", wantImageID: "sha256:old"},
		{name: "exited, in back-off", cr: &Container{State: StateExited, Current: prev}, p: backoff,
			wantState: "waiting:" + ReasonCrashLoopBackOff, wantID: "rt://1", wantImageID: "sha256:old", wantLast: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := ContainerStatus(&c, tc.cr, tc.images, tc.p, "Wait")
			state := ""
			switch {
			case cs.State.Running != nil:
				state = "running"
			case cs.State.Waiting != nil:
				state = "waiting:" + cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				state = "terminated:" + cs.State.Terminated.Reason
			}
			if state != tc.wantState || cs.ContainerID != tc.wantID || cs.ImageID != tc.wantImageID || (cs.Image != "") != tc.wantImage ||
				cs.RestartCount != tc.wantRestart || (cs.LastTerminationState.Terminated != nil) != tc.wantLast || cs.Ready != tc.wantReady || *cs.Started != tc.wantReady {
				t.Errorf("status %s %+v", state, cs)
			}
			if tc.wantImage && cs.Image != c.Image {
				t.Errorf("image %q, want %q", cs.Image, c.Image)
			}
			if lt := cs.LastTerminationState.Terminated; lt != nil && tc.cr.Previous != nil && (lt.Signal != 9 || lt.ExitCode != 137 || lt.ContainerID != "rt://1") {
				t.Errorf("last termination %+v", lt)
			}
		})
	}
}

func TestPodPhase(t *testing.T) {
	term := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	run := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	wait := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}
	backoff := v1.ContainerStatus{State: wait.State, LastTerminationState: term(1).State}
	ok := Plan{Initialized: true}
	cases := []struct {
		name   string
		policy v1.RestartPolicy
		cs     []v1.ContainerStatus
		p      Plan
		want   v1.PodPhase
	}{
		{"init failed", v1.RestartPolicyNever, []v1.ContainerStatus{wait}, Plan{InitFailed: true}, v1.PodFailed},
		{"initializing", "", []v1.ContainerStatus{wait}, Plan{}, v1.PodPending},
		{"one waits for its first run", "", []v1.ContainerStatus{run, wait}, ok, v1.PodPending},
		{"one runs", v1.RestartPolicyNever, []v1.ContainerStatus{run, term(0)}, ok, v1.PodRunning},
		{"in back-off counts as stopped, Always", "", []v1.ContainerStatus{backoff}, ok, v1.PodRunning},
		{"all succeeded, OnFailure", v1.RestartPolicyOnFailure, []v1.ContainerStatus{term(0), term(0)}, ok, v1.PodSucceeded},
		{"all ended, Always", v1.RestartPolicyAlways, []v1.ContainerStatus{term(0)}, ok, v1.PodRunning},
		{"one failed, Never", v1.RestartPolicyNever, []v1.ContainerStatus{term(0), term(1)}, ok, v1.PodFailed},
		{"one failed, OnFailure: restarts", v1.RestartPolicyOnFailure, []v1.ContainerStatus{term(1)}, ok, v1.PodRunning},
		{"killed, all exit 0", v1.RestartPolicyAlways, []v1.ContainerStatus{term(0)}, Plan{Initialized: true, Killed: true}, v1.PodSucceeded},
		{"killed, one failed", v1.RestartPolicyAlways, []v1.ContainerStatus{term(0), term(143)}, Plan{Initialized: true, Killed: true}, v1.PodFailed},
		{"no containers", "", nil, ok, v1.PodPending},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PodPhase(testPod(c.policy), c.cs, c.p); got != c.want {
				t.Errorf("phase %s, want %s", got, c.want)
			}
		})
	}
}
