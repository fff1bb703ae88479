package peerrun

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestSettledStatus: a status is settled when it shows what the pod keeps — terminal, stuck,
// or every container running, ended or backing off — and not while a container is being made.
func TestSettledStatus(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	spec := v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}, {Name: "proxy", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "a"}, {Name: "b"}},
	}
	run := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	ended := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}
	failed := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	wait := func(r string) v1.ContainerState {
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r}}
	}
	cs := func(name string, st v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: st}
	}
	initialized := []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}}
	cases := []struct {
		name   string
		policy v1.RestartPolicy // "" is Always
		status v1.PodStatus
		want   bool
	}{
		{"succeeded", "", v1.PodStatus{Phase: v1.PodSucceeded}, true},
		{"refused", "", v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}, true},
		{"no statuses yet", "", v1.PodStatus{Phase: v1.PodPending}, false},
		{"all up", "", v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", run), cs("b", wait("CrashLoopBackOff"))}}, true},
		{"one being created", "", v1.PodStatus{Phase: v1.PodPending, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", run), cs("b", wait("ContainerCreating"))}}, false},
		{"init running", "", v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", run), cs("proxy", wait("PodInitializing"))},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", wait("PodInitializing")), cs("b", wait("PodInitializing"))}}, false},
		{"init in a crash loop", "", v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", wait("CrashLoopBackOff")), cs("proxy", wait("PodInitializing"))},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", wait("PodInitializing")), cs("b", wait("PodInitializing"))}}, true},
		{"stuck on a missing object", "", v1.PodStatus{Phase: v1.PodPending,
			ContainerStatuses: []v1.ContainerStatus{cs("a", wait("CreateContainerConfigError"))}}, true},
		// Regular containers that ended: the pod keeps that under Always (they restart) and
		// OnFailure with a failure; under Never, or OnFailure with every one succeeded, the
		// pod is being stopped (its sidecar within its grace period) until it is terminal.
		{"ended, Always", "", v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", ended)}}, true},
		{"ended, Never, sidecar being stopped", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", failed)}}, false},
		{"ended, Never, terminal", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodFailed, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", ended)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", failed)}}, true},
		{"succeeded, OnFailure, sidecar being stopped", v1.RestartPolicyOnFailure, v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", ended)}}, false},
		{"one failed, OnFailure", v1.RestartPolicyOnFailure, v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", failed)}}, true},
		{"one still running, Never", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []v1.ContainerStatus{cs("init", ended), cs("proxy", run)},
			ContainerStatuses:     []v1.ContainerStatus{cs("a", ended), cs("b", run)}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := spec
			spec.RestartPolicy = tc.policy
			pod := &v1.Pod{Spec: spec, Status: tc.status}
			if got := settledStatus(pod); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeSettled: the node must show what the status says: a terminal pod released (no ready
// sandbox, no pod slice), a running one with its containers running in its ready sandbox.
func TestNodeSettled(t *testing.T) {
	k := PodKey{Namespace: "default", Name: "p"}
	up := PodStatus{Phase: v1.PodRunning, Settled: true, Running: []string{"a"}}
	done := PodStatus{Phase: v1.PodSucceeded, Settled: true}
	cases := []struct {
		name string
		node nodePods
		st   PodStatus
		want bool
	}{
		{"running as the status says", nodePods{ready: map[PodKey]map[string]bool{k: {"a": true}}}, up, true},
		{"the container not running yet", nodePods{ready: map[PodKey]map[string]bool{k: {}}}, up, false},
		{"no ready sandbox yet", nodePods{}, up, false},
		{"status not settled", nodePods{ready: map[PodKey]map[string]bool{k: {"a": true}}}, PodStatus{Phase: v1.PodPending, Running: []string{"a"}}, false},
		{"finished and released", nodePods{}, done, true},
		{"finished, sandbox still ready", nodePods{ready: map[PodKey]map[string]bool{k: {}}}, done, false},
		{"finished, slice still there", nodePods{slices: map[PodKey]bool{k: true}}, done, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.node.settled(k, tc.st); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUnsettledWhy: a pod still unsettled at the wait's limit is reported with what it waits
// for, so a "not settled" line says which side was slow and at what.
func TestUnsettledWhy(t *testing.T) {
	k := PodKey{Namespace: "default", Name: "p"}
	cases := []struct {
		name string
		node nodePods
		st   PodStatus
		want string
	}{
		{"status not settled", nodePods{}, PodStatus{Phase: v1.PodPending}, "status Pending not settled, running []"},
		{"no status phase yet", nodePods{}, PodStatus{}, "status - not settled, running []"},
		{"finished, slice left", nodePods{slices: map[PodKey]bool{k: true}}, PodStatus{Phase: v1.PodSucceeded, Settled: true},
			"Succeeded, but its sandbox ready false and pod slice true remain"},
		{"running, no sandbox", nodePods{}, PodStatus{Phase: v1.PodRunning, Settled: true, Running: []string{"a"}}, "status Running, but no ready sandbox"},
		{"a container not running on the node yet", nodePods{ready: map[PodKey]map[string]bool{k: {"a": true}}},
			PodStatus{Phase: v1.PodRunning, Settled: true, Running: []string{"a", "b"}}, "status Running, containers [b] not running in its sandbox yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.node.unsettledWhy(k, tc.st); got != tc.want {
				t.Errorf("unsettledWhy = %q, want %q", got, tc.want)
			}
		})
	}
}
