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

func TestNotSyncedYet(t *testing.T) {
	started := metav1.Now()
	running := v1.PodStatus{Phase: v1.PodRunning, StartTime: &started}
	tests := []struct {
		name       string
		local, api v1.PodStatus
		want       bool
	}{
		{"admitted, not synced, the API shows it started: held", v1.PodStatus{Phase: v1.PodPending}, running, true},
		{"admitted, not synced, a new pod: written", v1.PodStatus{Phase: v1.PodPending}, v1.PodStatus{Phase: v1.PodPending}, false},
		{"a sync that did not read the runtime, the API shows it started: held", v1.PodStatus{Phase: v1.PodPending, StartTime: &started,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}, running, true},
		{"synced Pending (creating): written", v1.PodStatus{Phase: v1.PodPending, StartTime: &started,
			ContainerStatuses: []v1.ContainerStatus{{Name: "main"}}}, running, false},
		{"synced Running: written", running, running, false},
		{"rejected: written", v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}, running, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NotSyncedYet(tc.local, tc.api); got != tc.want {
				t.Errorf("NotSyncedYet = %v, want %v", got, tc.want)
			}
		})
	}
}
