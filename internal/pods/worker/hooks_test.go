package worker

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func sleepHook(s int64) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}}
}

// TestPostStartHook: a postStart hook runs right after the start; one that fails is reported
// (FailedPostStartHook, the kubelet's message), the container is killed and restarted per the
// restart policy.
func TestPostStartHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(3)
		w, events := newTestWorker(t, f, "")
		pod := testPod("ps-1", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: execHook("/bin/setup")}
		st := mustSync(t, w, pod)
		if cs := st.ContainerStatuses[0]; cs.RestartCount != 1 {
			t.Errorf("after a failed postStart hook: %+v, want the container killed and restarted", cs)
		}
		got := drain(events)
		if !slices.ContainsFunc(got, func(e string) bool {
			return strings.HasPrefix(e, `Warning FailedPostStartHook Exec lifecycle hook ([/bin/setup]) for Container "app" in Pod "web_default(ps-1)" failed - error: command '/bin/setup' exited with 3`)
		}) || !slices.Contains(got, "Normal Killing FailedPostStartHook") {
			t.Errorf("events %q: want FailedPostStartHook and Killing", got)
		}
		f.setExecCode(0)
		time.Sleep(10 * time.Second)
		st = mustSync(t, w, pod)
		if cs := st.ContainerStatuses[0]; cs.State.Running == nil {
			t.Errorf("a postStart hook that succeeds: %+v, want running", cs.State)
		}
	})
}

// TestPreStopHook: the preStop hook runs before the stop signal, and its time counts against
// the grace period; the stop gets at least 2 s; a hook that outlasts the grace period is left.
func TestPreStopHook(t *testing.T) {
	tests := []struct {
		name      string
		hook      *v1.LifecycleHandler
		grace     int64
		wantGrace time.Duration
		wantOrder []string
	}{
		{"exec hook, then the stop", execHook("/bin/drain"), 30, 30 * time.Second, []string{"exec [/bin/drain]", "stop"}},
		{"sleep counts against the grace period", sleepHook(5), 30, 25 * time.Second, []string{"stop"}},
		{"a hook longer than the grace period leaves the minimum", sleepHook(60), 10, 2 * time.Second, []string{"stop"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeRT()
				w, _ := newTestWorker(t, f, "")
				pod := testPod("pr-1", v1.RestartPolicyAlways, "app")
				pod.Spec.TerminationGracePeriodSeconds = &tc.grace
				pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: tc.hook}
				st := mustSync(t, w, pod)
				id := strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "fake://")
				if _, err := w.KillPod(t.Context(), pod, time.Duration(tc.grace)*time.Second); err != nil {
					t.Fatal(err)
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				want := slices.Clone(tc.wantOrder)
				want[len(want)-1] = "stop " + id
				if !reflect.DeepEqual(f.order, want) || f.grace[id] != tc.wantGrace {
					t.Errorf("calls %q with grace %s, want %q with %s", f.order, f.grace[id], want, tc.wantGrace)
				}
			})
		})
	}
}

// TestValidateHooks: hooks need one handler; tcpSocket hooks and hooks of init containers that
// are not sidecars are refused with their paths.
func TestValidateHooks(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	pod := testPod("vh-1", "", "app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{}, PreStop: &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{}}}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Command: []string{"/bin/true"}, Lifecycle: &v1.Lifecycle{PreStop: sleepHook(1)}}}
	got := w.Validate(pod).ToAggregate().Error()
	for _, want := range []string{"spec.containers[0].lifecycle.postStart: Required value", "spec.containers[0].lifecycle.preStop.tcpSocket: Forbidden",
		"spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always"} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate = %s\n want %q", got, want)
		}
	}
}
