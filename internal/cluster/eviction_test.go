package cluster

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/internal/pods"
)

// evictMessage is the kubelet's message for a memory eviction (pkg/kubelet/eviction/helpers.go,
// evictionMessage), as slicelet's eviction manager writes it.
const evictMessage = "The node was low on resource: memory. Threshold quantity: 150Mi, available: 102400Ki. " +
	"Container hog was using 300Mi, request is 10Mi, has larger consumption of memory. "

// evictedLocal is the controller's status of a pod it evicted (internal/pods, evictedStatus).
func evictedLocal(at time.Time) v1.PodStatus {
	t := metav1.NewTime(at)
	return v1.PodStatus{Phase: v1.PodFailed, Reason: pods.ReasonEvicted, Message: evictMessage, QOSClass: v1.PodQOSBurstable,
		Conditions: []v1.PodCondition{
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t},
			{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: pods.ReasonTerminationByKubelet, Message: evictMessage, LastTransitionTime: t},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error", FinishedAt: t}}}}}
}

func condition(st v1.PodStatus, ct v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == ct {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestTerminalStatus(t *testing.T) {
	now := t0.Add(time.Minute)
	evictedAt := t0.Add(30 * time.Second)
	running := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		podCond(v1.PodReady, v1.ConditionTrue, t0), podCond(v1.PodScheduled, v1.ConditionTrue, t0)}}
	tests := []struct {
		name     string
		api      v1.PodStatus
		local    v1.PodStatus
		couldRun bool
		// Want: the phase, reason and message sent, and the DisruptionTarget condition's
		// reason and transition time (no condition when reason is empty).
		phase                  v1.PodPhase
		reason, message        string
		disruption             string
		disruptionTransitionAt time.Time
	}{
		{
			name: "evicted, containers stopped: Failed, Evicted, the message, DisruptionTarget TerminationByKubelet at now",
			api:  running, local: evictedLocal(evictedAt),
			phase: v1.PodFailed, reason: "Evicted", message: evictMessage,
			disruption: "TerminationByKubelet", disruptionTransitionAt: now,
		},
		{
			name: "evicted, containers still stopping: the API's phase stays, no DisruptionTarget yet",
			api:  running, local: evictedLocal(evictedAt), couldRun: true,
			phase: v1.PodRunning,
		},
		{
			name: "a DisruptionTarget already true in the API (the Eviction API's) is replaced, its transition time kept",
			api: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
				{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.NewTime(t0)}}},
			local: evictedLocal(evictedAt),
			phase: v1.PodFailed, reason: "Evicted", message: evictMessage,
			disruption: "TerminationByKubelet", disruptionTransitionAt: t0,
		},
		{
			name:  "already Failed in the API: no delay, no shared condition added",
			api:   v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "earlier"},
			local: evictedLocal(evictedAt), couldRun: true,
			phase: v1.PodFailed, reason: "Evicted", message: evictMessage,
		},
		{
			name:  "refused at admission under MemoryPressure (reason Evicted, never started): Failed at once, no DisruptionTarget",
			api:   v1.PodStatus{Phase: v1.PodPending},
			local: RefusedStatus(pods.ReasonEvicted, "The node had condition: [MemoryPressure]. "),
			phase: v1.PodFailed, reason: "Evicted", message: "The node had condition: [MemoryPressure]. ",
		},
		{
			name: "a pod that succeeded: Succeeded, no shared condition",
			api:  running, local: v1.PodStatus{Phase: v1.PodSucceeded},
			phase: v1.PodSucceeded,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := apiPod("hog", func(p *v1.Pod) { p.Status = tc.api; p.Generation = 3 })
			want := APIPodStatus(api, tc.local, []string{"10.0.0.5"}, false, now)
			got := TerminalStatus(api, tc.local, want, tc.couldRun, now)
			if got.Phase != tc.phase || got.Reason != tc.reason || got.Message != tc.message {
				t.Errorf("phase %s reason %q message %q, want %s %q %q", got.Phase, got.Reason, got.Message, tc.phase, tc.reason, tc.message)
			}
			dt := condition(got, v1.DisruptionTarget)
			switch {
			case tc.disruption == "" && dt != nil && dt.Reason == pods.ReasonTerminationByKubelet:
				t.Errorf("DisruptionTarget %+v sent early", dt)
			case tc.disruption == "":
			case dt == nil:
				t.Errorf("no DisruptionTarget in %+v", got.Conditions)
			case dt.Reason != tc.disruption || dt.Status != v1.ConditionTrue || dt.Message != evictMessage ||
				!dt.LastTransitionTime.Time.Equal(tc.disruptionTransitionAt) || dt.ObservedGeneration != 3:
				t.Errorf("DisruptionTarget %+v, want %s at %v", dt, tc.disruption, tc.disruptionTransitionAt)
			}
			if n := 0; dt != nil {
				for _, c := range got.Conditions {
					if c.Type == v1.DisruptionTarget {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d DisruptionTarget conditions", n)
				}
			}
		})
	}
}

// stoppingController is the fake controller with PodCleanedUp: the evicted pods' slices
// destroyed so far.
type stoppingController struct {
	*fakeController
	cleaned map[string]bool
}

func (c stoppingController) PodCleanedUp(uid string) bool { return c.cleaned[uid] }

// TestSyncPodsEvictedPod: the API sees an evicted pod as the kubelet's node shows it — Running
// while the eviction stops its containers, then Failed, Evicted, the eviction manager's message,
// DisruptionTarget (TerminationByKubelet), Ready and ContainersReady false (PodFailed).
func TestSyncPodsEvictedPod(t *testing.T) {
	hog := apiPod("hog", func(p *v1.Pod) {
		p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{podCond(v1.PodReady, v1.ConditionTrue, t0)}}
	})
	f := newFixture(t, hog)
	ctrl := stoppingController{fakeController: f.ctrl, cleaned: map[string]bool{}}
	f.agent.o.Controller = ctrl
	local := hog.DeepCopy()
	local.Status = evictedLocal(t0)
	f.ctrl.pods = []v1.Pod{*local}
	get := func() *v1.Pod {
		p, err := f.cs.CoreV1().Pods("default").Get(context.Background(), "hog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := f.agent.SyncPods(context.Background(), listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	if p := get(); p.Status.Phase != v1.PodRunning || condition(p.Status, v1.DisruptionTarget) != nil {
		t.Errorf("while the containers stop: %s, conditions %+v; want Running and no DisruptionTarget", p.Status.Phase, p.Status.Conditions)
	}
	ctrl.cleaned[string(hog.UID)] = true
	if err := f.agent.SyncPods(context.Background(), listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	p := get()
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != "Evicted" || p.Status.Message != evictMessage {
		t.Errorf("status %s %q %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	want := map[v1.PodConditionType]string{v1.DisruptionTarget: "TerminationByKubelet", v1.PodReady: "PodFailed", v1.ContainersReady: "PodFailed"}
	for ct, reason := range want {
		if c := condition(p.Status, ct); c == nil || c.Reason != reason {
			t.Errorf("condition %s: %+v, want reason %s", ct, c, reason)
		}
	}
}

func TestEvictedEventAnnotated(t *testing.T) {
	hog := apiPod("hog")
	f := newFixture(t, hog)
	f.ctrl.pods = []v1.Pod{*hog}
	fake := record.NewFakeRecorder(10)
	f.agent.events.recorder = fake
	if err := f.agent.SyncPods(context.Background(), listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	annotated := hog.DeepCopy()
	annotated.Annotations = map[string]string{"other": "x",
		pods.AnnotationEvictionPrefix + "offending_containers": "c", pods.AnnotationEvictionPrefix + "offending_containers_usage": "300Mi",
		pods.AnnotationEvictionPrefix + "starved_resource": "memory"}
	tests := []struct {
		name   string
		object *v1.Pod
		reason string
		want   string
	}{
		{name: "the eviction: its annotations, unprefixed, on the event", object: annotated, reason: "Evicted",
			want: "Warning Evicted m map[offending_containers:c offending_containers_usage:300Mi starved_resource:memory]"},
		{name: "an eviction without stats: a plain event", object: hog, reason: "Evicted", want: "Warning Evicted m"},
		{name: "another reason: a plain event", object: annotated, reason: "Killing", want: "Warning Killing m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.agent.Eventf(tc.object, v1.EventTypeWarning, tc.reason, "%s", "m")
			select {
			case e := <-fake.Events:
				if e != tc.want {
					t.Errorf("event %q, want %q", e, tc.want)
				}
			default:
				t.Error("not recorded")
			}
		})
	}
}
