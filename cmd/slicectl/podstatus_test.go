package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	always := v1.ContainerRestartPolicyAlways
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	waiting := func(reason string) v1.ContainerState {
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
	}
	terminated := func(code, signal int32, reason string) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Signal: signal, Reason: reason}}
	}
	pod := func(inits []v1.Container, initStatus []v1.ContainerStatus, containers int, status []v1.ContainerStatus) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "aaaaaaaa-0000-0000-0000-000000000001", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Minute))},
			Spec:       v1.PodSpec{InitContainers: inits},
			Status:     v1.PodStatus{Phase: v1.PodRunning, InitContainerStatuses: initStatus, ContainerStatuses: status},
		}
		for range containers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c"})
		}
		return p
	}
	twoInits := []v1.Container{{Name: "i1"}, {Name: "i2"}}
	for _, tc := range []struct {
		name                    string
		pod                     *v1.Pod
		ready, status, restarts string
	}{
		{"running", pod(nil, nil, 1, []v1.ContainerStatus{{Ready: true, State: running}}), "1/1", "Running", "0"},
		{"first init running", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: running}, {Name: "i2", State: waiting("PodInitializing")}}, 1, nil), "0/1", "Init:0/2", "0"},
		{"second init running", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: terminated(0, 0, "Completed")}, {Name: "i2", State: running}}, 1, nil), "0/1", "Init:1/2", "0"},
		{"init failed", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: terminated(2, 0, "Error"), RestartCount: 1}}, 1, nil), "0/1", "Init:Error", "1"},
		{"init exit code", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: terminated(3, 0, "")}}, 1, nil), "0/1", "Init:ExitCode:3", "0"},
		{"init signal", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: terminated(137, 9, "")}}, 1, nil), "0/1", "Init:Signal:9", "0"},
		{"init crash loop", pod(twoInits, []v1.ContainerStatus{{Name: "i1", State: waiting("CrashLoopBackOff")}}, 1, nil), "0/1", "Init:CrashLoopBackOff", "0"},
		{"sidecar started", pod([]v1.Container{{Name: "side", RestartPolicy: &always}}, []v1.ContainerStatus{{Name: "side", Started: ptr(true), Ready: true, State: running}},
			1, []v1.ContainerStatus{{Ready: true, State: running}}), "2/2", "Running", "0"},
		{"sidecar not started", pod([]v1.Container{{Name: "side", RestartPolicy: &always}}, []v1.ContainerStatus{{Name: "side", Started: ptr(false), State: waiting("")}},
			1, nil), "0/2", "Init:0/1", "0"},
		{"oom killed", pod(nil, nil, 1, []v1.ContainerStatus{{State: terminated(137, 0, "OOMKilled")}}), "0/1", "OOMKilled", "0"},
		{"exit code", pod(nil, nil, 1, []v1.ContainerStatus{{State: terminated(1, 0, "")}}), "0/1", "ExitCode:1", "0"},
		{"signal", pod(nil, nil, 1, []v1.ContainerStatus{{State: terminated(143, 15, "")}}), "0/1", "Signal:15", "0"},
		{"completed with one still running", pod(nil, nil, 2, []v1.ContainerStatus{{State: terminated(0, 0, "Completed")}, {Ready: true, State: running}}), "1/2", "NotReady", "0"},
		{"restarts with time", func() *v1.Pod {
			p := pod(nil, nil, 1, []v1.ContainerStatus{{Ready: true, State: running, RestartCount: 4,
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-45 * time.Minute))}}}})
			return p
		}(), "1/1", "Running", "4 (45m ago)"},
		{"rejected", func() *v1.Pod {
			p := pod(nil, nil, 1, nil)
			p.Status.Phase, p.Status.Reason = v1.PodFailed, "OutOfmemory"
			return p
		}(), "0/1", "OutOfmemory", "0"},
		{"terminating", func() *v1.Pod {
			p := pod(nil, nil, 1, []v1.ContainerStatus{{Ready: true, State: running}})
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}(), "1/1", "Terminating", "0"},
		{"no phase yet", func() *v1.Pod {
			p := pod(nil, nil, 1, nil)
			p.Status.Phase = ""
			return p
		}(), "0/1", "Pending", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPodRow(tc.pod, now)
			if r.Ready != tc.ready || r.Status != tc.status || r.Restarts != tc.restarts || r.Age != "90m" {
				t.Errorf("row = READY %s STATUS %s RESTARTS %s AGE %s; want %s %s %s 90m", r.Ready, r.Status, r.Restarts, r.Age, tc.ready, tc.status, tc.restarts)
			}
		})
	}
}
