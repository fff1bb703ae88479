package cluster

import (
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podCond(t v1.PodConditionType, s v1.ConditionStatus, at time.Time) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(at)}
}

func TestAPIPodStatus(t *testing.T) {
	now := t0.Add(time.Minute)
	start := metav1.NewTime(t0)
	running := v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}
	tests := []struct {
		name        string
		api         v1.PodStatus
		local       v1.PodStatus
		hostNetwork bool
		check       func(t *testing.T, got v1.PodStatus)
	}{
		{
			name:  "a terminal phase in the API is never regressed",
			api:   v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"},
			local: running,
			check: func(t *testing.T, got v1.PodStatus) {
				if got.Phase != v1.PodFailed || got.Reason != "OutOfcpu" {
					t.Errorf("phase %s reason %s, want the API's Failed OutOfcpu", got.Phase, got.Reason)
				}
			},
		},
		{
			name: "unchanged conditions keep their transition time; changed ones move to now; foreign ones stay",
			api: v1.PodStatus{Phase: v1.PodRunning, StartTime: &start, Conditions: []v1.PodCondition{
				podCond(v1.PodReady, v1.ConditionFalse, t0), podCond(v1.PodScheduled, v1.ConditionTrue, t0), podCond(v1.DisruptionTarget, v1.ConditionTrue, t0)}},
			local: running,
			check: func(t *testing.T, got v1.PodStatus) {
				want := map[v1.PodConditionType]time.Time{v1.PodReady: now, v1.ContainersReady: now, v1.PodScheduled: t0, v1.DisruptionTarget: t0}
				if len(got.Conditions) != len(want) {
					t.Fatalf("conditions %v", got.Conditions)
				}
				for _, c := range got.Conditions {
					if !c.LastTransitionTime.Time.Equal(want[c.Type]) {
						t.Errorf("%s transition %v, want %v", c.Type, c.LastTransitionTime, want[c.Type])
					}
				}
				if !got.StartTime.Time.Equal(t0) {
					t.Errorf("startTime %v, want the API's", got.StartTime)
				}
			},
		},
		{
			name:  "the qos class the API server set stays; hostIPs are the node's; no podIP off the host network",
			api:   v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSGuaranteed},
			local: running,
			check: func(t *testing.T, got v1.PodStatus) {
				if got.QOSClass != v1.PodQOSGuaranteed {
					t.Errorf("qosClass %s", got.QOSClass)
				}
				if got.HostIP != "10.0.0.5" || len(got.HostIPs) != 2 || got.PodIP != "" || got.PodIPs != nil {
					t.Errorf("hostIP %q hostIPs %v podIP %q podIPs %v", got.HostIP, got.HostIPs, got.PodIP, got.PodIPs)
				}
				if got.StartTime == nil || !got.StartTime.Time.Equal(now) {
					t.Errorf("startTime %v, want now for a pod that started", got.StartTime)
				}
			},
		},
		{
			name: "host network: the podIPs are the node's", api: v1.PodStatus{Phase: v1.PodPending}, local: running, hostNetwork: true,
			check: func(t *testing.T, got v1.PodStatus) {
				if got.PodIP != "10.0.0.5" || len(got.PodIPs) != 2 || got.PodIPs[1].IP != "fd00::5" {
					t.Errorf("podIP %q podIPs %v", got.PodIP, got.PodIPs)
				}
			},
		},
		{
			name: "a rejection: Failed with the reason and message", api: v1.PodStatus{Phase: v1.PodPending},
			local: RefusedStatus("OutOfmemory", "Node didn't have enough resource: memory"),
			check: func(t *testing.T, got v1.PodStatus) {
				if got.Phase != v1.PodFailed || got.Reason != "OutOfmemory" || got.Message != "Node didn't have enough resource: memory" {
					t.Errorf("status %+v", got)
				}
			},
		},
		{
			// A resize (or any spec change) bumped the generation to 2 after the last sync:
			// the status, made for generation 1, must not claim 2 (a client waiting for
			// observedGeneration would read the old resources as the new ones).
			name: "a status made for an older generation shows that generation", api: v1.PodStatus{Phase: v1.PodRunning},
			local: func() v1.PodStatus { s := *running.DeepCopy(); s.ObservedGeneration = 1; return s }(),
			check: func(t *testing.T, got v1.PodStatus) {
				for _, c := range got.Conditions {
					if c.ObservedGeneration != 1 {
						t.Errorf("condition %s observedGeneration %d, want 1", c.Type, c.ObservedGeneration)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: tc.api}
			got := APIPodStatus(api, tc.local, []string{"10.0.0.5", "fd00::5"}, tc.hostNetwork, now)
			tc.check(t, got)
			wantGen := int64(2)
			if tc.local.ObservedGeneration > 0 {
				wantGen = tc.local.ObservedGeneration
			}
			if !isTerminal(tc.api.Phase) && got.ObservedGeneration != wantGen {
				t.Errorf("observedGeneration %d, want %d", got.ObservedGeneration, wantGen)
			}
			// The same inputs a second time, over the status written: nothing to write.
			api.Status = got
			if again := APIPodStatus(api, tc.local, []string{"10.0.0.5", "fd00::5"}, tc.hostNetwork, now.Add(time.Minute)); !PodStatusEqual(again, got) {
				t.Errorf("not stable:\n%+v\n%+v", got, again)
			}
		})
	}
}

func TestPodStatusPatch(t *testing.T) {
	old := v1.PodStatus{Phase: v1.PodPending}
	tests := []struct {
		name          string
		new           v1.PodStatus
		wantUnchanged bool
		wantKeys      []string
	}{
		{name: "same status: only the uid", new: old, wantUnchanged: true},
		{name: "phase changed", new: v1.PodStatus{Phase: v1.PodRunning}, wantKeys: []string{"metadata", "status"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			patch, unchanged, err := PodStatusPatch("uid-1", old, tc.new)
			if err != nil || unchanged != tc.wantUnchanged {
				t.Fatalf("unchanged %v err %v, want %v", unchanged, err, tc.wantUnchanged)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(patch, &m); err != nil {
				t.Fatal(err)
			}
			if string(m["metadata"]) != `{"uid":"uid-1"}` {
				t.Errorf("patch %s has no uid precondition", patch)
			}
			for _, k := range tc.wantKeys {
				if _, ok := m[k]; !ok {
					t.Errorf("patch %s lacks %s", patch, k)
				}
			}
		})
	}
}
