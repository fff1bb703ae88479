package cluster

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHoldStatus(t *testing.T) {
	ready := &v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}, {Type: v1.NodeReady, Status: v1.ConditionTrue}}}
	notReady := &v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}}
	tests := []struct {
		name     string
		settling bool
		api      *v1.NodeStatus
		since    time.Duration
		want     bool
	}{
		{"settling, the API's Node Ready: held", true, ready, time.Second, true},
		{"settled: written", false, ready, time.Second, false},
		{"settling past the hold: written", true, ready, StartupStatusHold, false},
		{"settling, the API's Node not Ready: written", true, notReady, time.Second, false},
		{"settling, a new Node: written", true, &v1.NodeStatus{}, time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldStatus(tc.settling, tc.api, tc.since); got != tc.want {
				t.Errorf("HoldStatus = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHoldPodStatus(t *testing.T) {
	started := metav1.Now()
	const id = "containerd://c1"
	run := func(name, id string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}
	}
	creating := func(name string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	}
	running := v1.PodStatus{Phase: v1.PodRunning, StartTime: &started, ContainerStatuses: []v1.ContainerStatus{run("main", id)}}
	// What a node whose listing missed the pod's containers computes: every container
	// waiting to be created, no ID.
	unseen := v1.PodStatus{Phase: v1.PodPending, StartTime: &started, ContainerStatuses: []v1.ContainerStatus{creating("main")}}
	restarted := v1.PodStatus{Phase: v1.PodRunning, StartTime: &started, ContainerStatuses: []v1.ContainerStatus{run("main", "containerd://c2")}}
	gone := creating("main")
	gone.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 137, ContainerID: id}
	tests := []struct {
		name       string
		local, api v1.PodStatus
		since      time.Duration
		want       bool
	}{
		{"admitted, not synced, the API shows it started: held", v1.PodStatus{Phase: v1.PodPending}, running, time.Second, true},
		{"admitted, not synced, long after the start: held", v1.PodStatus{Phase: v1.PodPending}, running, time.Hour, true},
		{"admitted, not synced, a new pod: written", v1.PodStatus{Phase: v1.PodPending}, v1.PodStatus{Phase: v1.PodPending}, time.Second, false},
		{"a sync that did not read the runtime, the API shows it started: held", v1.PodStatus{Phase: v1.PodPending, StartTime: &started,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}, running, time.Second, true},
		{"starting, the API shows the container running, local never saw it: held", unseen, running, time.Second, true},
		{"starting, an init container the API shows ran, local never saw it: held",
			v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{creating("init")}, ContainerStatuses: []v1.ContainerStatus{creating("main")}},
			v1.PodStatus{Phase: v1.PodPending, StartTime: &started, InitContainerStatuses: []v1.ContainerStatus{run("init", id)}, ContainerStatuses: []v1.ContainerStatus{creating("main")}},
			time.Second, true},
		{"past the start's hold, the containers are gone: written", unseen, running, StartupStatusHold, false},
		{"a new pod creating its containers: written", unseen, v1.PodStatus{Phase: v1.PodPending, StartTime: &started,
			ContainerStatuses: []v1.ContainerStatus{creating("main")}}, time.Second, false},
		{"synced Pending (creating), the API has no container statuses: written", unseen, v1.PodStatus{Phase: v1.PodPending, StartTime: &started}, time.Second, false},
		{"a container ended, waiting to restart (its last termination known): written",
			v1.PodStatus{Phase: v1.PodRunning, StartTime: &started, ContainerStatuses: []v1.ContainerStatus{gone}}, running, time.Second, false},
		{"a container restarted (another ID): written", restarted, running, time.Second, false},
		{"synced Running: written", running, running, time.Second, false},
		{"rejected: written", v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}, running, time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldPodStatus(tc.local, tc.api, tc.since); got != tc.want {
				t.Errorf("HoldPodStatus = %v, want %v", got, tc.want)
			}
		})
	}
}
