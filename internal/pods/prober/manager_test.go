package prober

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// script is an exec probe whose exit codes are given per call; the last one repeats.
type script struct {
	mu    sync.Mutex
	codes []int32
	calls int
}

func (s *script) exec(context.Context, []string, time.Duration) ([]byte, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.codes)-1)
	s.calls++
	if s.codes[i] != 0 {
		return []byte("boom"), s.codes[i], nil
	}
	return nil, 0, nil
}

// recorder is a Reporter keeping what it was told.
type recorder struct {
	mu      sync.Mutex
	probes  []string
	changes int
}

func (r *recorder) Probed(_ *Instance, k Kind, res Result, out string, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes = append(r.probes, k.String()+":"+res.String())
}

func (r *recorder) Changed(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes++
}

func execProbe(delay, period, succ, fail int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:        v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		InitialDelaySeconds: delay, PeriodSeconds: period, SuccessThreshold: succ, FailureThreshold: fail,
	}
}

func instance(c *v1.Container, s *script, started time.Time) Instance {
	pod := &v1.Pod{}
	pod.UID = "u1"
	return Instance{Pod: pod, Container: c, ID: "c1", StartedAt: started, Exec: s.exec}
}

func TestManager(t *testing.T) {
	type step struct {
		at   time.Duration // since the start
		want Status
	}
	tests := []struct {
		name  string
		c     v1.Container
		codes []int32
		steps []step
	}{
		{
			name: "readiness: not ready until the first success, ready after it, not ready after failureThreshold failures",
			c:    v1.Container{Name: "app", ReadinessProbe: execProbe(0, 10, 1, 2)},
			// t=0 fail, 10 ok, 20 fail, 30 fail
			codes: []int32{1, 0, 1, 1},
			steps: []step{
				{5 * time.Second, Status{Started: true}},
				{15 * time.Second, Status{Started: true, Ready: true}},
				{25 * time.Second, Status{Started: true, Ready: true}},
				{35 * time.Second, Status{Started: true}},
			},
		},
		{
			name:  "readiness: initialDelaySeconds holds the first probe back",
			c:     v1.Container{Name: "app", ReadinessProbe: execProbe(25, 10, 1, 3)},
			codes: []int32{0},
			steps: []step{
				{25 * time.Second, Status{Started: true}},
				{31 * time.Second, Status{Started: true, Ready: true}},
			},
		},
		{
			name:  "readiness: successThreshold successes in a row",
			c:     v1.Container{Name: "app", ReadinessProbe: execProbe(0, 5, 3, 3)},
			codes: []int32{0},
			steps: []step{
				{6 * time.Second, Status{Started: true}},
				{11 * time.Second, Status{Started: true, Ready: true}},
			},
		},
		{
			name:  "liveness: failed after failureThreshold failures, then on hold",
			c:     v1.Container{Name: "app", LivenessProbe: execProbe(0, 10, 1, 3)},
			codes: []int32{1},
			steps: []step{
				{15 * time.Second, Status{Started: true, Ready: true}},
				{25 * time.Second, Status{Started: true, Ready: true, Failed: true, FailedKind: Liveness}},
			},
		},
		{
			name: "startup gates readiness and liveness until it succeeds",
			c: v1.Container{Name: "app", StartupProbe: execProbe(0, 10, 1, 30),
				ReadinessProbe: execProbe(0, 1, 1, 1), LivenessProbe: execProbe(0, 1, 1, 1)},
			// startup: fails at 0, 10, succeeds at 20; the others succeed from then on
			codes: []int32{1, 1, 0},
			steps: []step{
				{15 * time.Second, Status{}},
				{19*time.Second + 500*time.Millisecond, Status{}},
				{22 * time.Second, Status{Started: true, Ready: true}},
			},
		},
		{
			name:  "startup: failureThreshold failures fail the run",
			c:     v1.Container{Name: "app", StartupProbe: execProbe(0, 10, 1, 2)},
			codes: []int32{1},
			steps: []step{
				{5 * time.Second, Status{}},
				{15 * time.Second, Status{Failed: true, FailedKind: Startup}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				m := NewManager(clock.RealClock{}, rec)
				defer m.Close()
				s := &script{codes: tc.codes}
				start := time.Now()
				m.Ensure(instance(&tc.c, s, start))
				for _, st := range tc.steps {
					time.Sleep(time.Until(start.Add(st.at)))
					synctest.Wait()
					got, ok := m.Status("c1")
					if !ok || got != st.want {
						t.Fatalf("at %s: status %+v (known %v), want %+v; probes %v", st.at, got, ok, st.want, rec.probes)
					}
				}
			})
		})
	}
}

func TestManagerHoldAndKeep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		m := NewManager(clock.RealClock{}, rec)
		defer m.Close()
		s := &script{codes: []int32{1}}
		c := v1.Container{Name: "app", LivenessProbe: execProbe(0, 1, 1, 1)}
		m.Ensure(instance(&c, s, time.Now()))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		s.mu.Lock()
		calls := s.calls
		s.mu.Unlock()
		if calls != 1 {
			t.Errorf("liveness probed %d times after its failure, want 1 (on hold)", calls)
		}
		if rec.changes != 1 {
			t.Errorf("%d changes reported, want 1", rec.changes)
		}
		m.Keep("u1", nil)
		if _, ok := m.Status("c1"); ok {
			t.Error("a run not kept is still probed")
		}
	})
}

// TestManagerAdoptedRun: a run that was running before the manager started (the agent
// restarted, or took over the kubelet's node) is ready as its pod was until its readiness
// probe's first verdict, as the kubelet after a restart; a run started since is not.
func TestManagerAdoptedRun(t *testing.T) {
	readyPod := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	notReadyPod := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}}
	tests := []struct {
		name     string
		started  time.Duration // relative to the manager's start
		status   v1.PodStatus
		codes    []int32
		before   bool // ready before the first verdict (at 5 s)
		verdict  bool // ready after it (at 25 s)
		noProbes bool
	}{
		{"adopted, pod ready, probe failing", -time.Minute, readyPod, []int32{1}, true, false, false},
		{"adopted, pod ready, probe passing", -time.Minute, readyPod, []int32{0}, true, true, false},
		{"adopted, pod not ready", -time.Minute, notReadyPod, []int32{0}, false, true, false},
		{"adopted, no status", -time.Minute, v1.PodStatus{}, []int32{0}, false, true, false},
		{"started within the grace", -5 * time.Second, readyPod, []int32{0}, false, true, false},
		{"adopted, no readiness probe", -time.Minute, notReadyPod, []int32{0}, true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := NewManager(clock.RealClock{}, &recorder{})
				defer m.Close()
				start := time.Now()
				c := &v1.Container{Name: "app", ReadinessProbe: execProbe(0, 10, 2, 3)} // verdicts at 10 s (success) or 20 s (failure)
				if tc.noProbes {
					c.ReadinessProbe = nil
				}
				in := instance(c, &script{codes: tc.codes}, start.Add(tc.started))
				in.Pod.Status = tc.status
				m.Ensure(in)
				for _, st := range []struct {
					at   time.Duration
					want bool
				}{{5 * time.Second, tc.before}, {25 * time.Second, tc.verdict}} {
					time.Sleep(time.Until(start.Add(st.at)))
					synctest.Wait()
					if got, _ := m.Status("c1"); got.Ready != st.want {
						t.Fatalf("at %s: ready %v, want %v", st.at, got.Ready, st.want)
					}
				}
			})
		})
	}
}
