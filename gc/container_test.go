package gc

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// gcContainer is upstream's makeGCContainer: pod name (which is also the pod UID), container
// name, createdAt in nanoseconds since the epoch (small = very old), state.
type gcContainer struct {
	pod, name string
	createdAt int64
	state     string
}

// mPolicy is upstream TestContainerGC's default policy.
var mPolicy = ContainerPolicy{MinAge: time.Hour, MaxPerPodContainer: 2, MaxContainers: 6}

// remaining returns the indexes of tcs that plan p does not remove.
func remaining(tcs []Container, p ContainerPlan) []int {
	removed := map[string]bool{}
	for _, r := range p.Remove {
		if removed[r.ID] {
			panic("removed twice: " + r.ID)
		}
		removed[r.ID] = true
	}
	out := []int{}
	for i, c := range tcs {
		if !removed[c.ID] {
			out = append(out, i)
		}
	}
	return out
}

// TestContainerGC ports every case of the kubelet's TestContainerGC
// (pkg/kubelet/kuberuntime/kuberuntime_gc_test.go), with its case names. As there: every pod
// except "running" is terminated, the pod named "deleted" is deleted, "now" is the planning time.
func TestContainerGC(t *testing.T) {
	now := t0
	nowNs := now.UnixNano()
	E, R := StateExited, StateRunning
	for _, tc := range []struct {
		name                string
		containers          []gcContainer
		policy              *ContainerPolicy
		remain              []int
		evictTerminatedPods bool
		allSourcesReady     bool
	}{
		{
			name:            "all containers should be removed when max container limit is 0",
			containers:      []gcContainer{{"foo", "bar", 0, E}},
			policy:          &ContainerPolicy{MinAge: time.Minute, MaxPerPodContainer: 1, MaxContainers: 0},
			remain:          []int{},
			allSourcesReady: true,
		},
		{
			name:            "max containers should be complied when no max per pod container limit is set",
			containers:      []gcContainer{{"foo", "bar", 4, E}, {"foo", "bar", 3, E}, {"foo", "bar", 2, E}, {"foo", "bar", 1, E}, {"foo", "bar", 0, E}},
			policy:          &ContainerPolicy{MinAge: time.Minute, MaxPerPodContainer: -1, MaxContainers: 4},
			remain:          []int{0, 1, 2, 3},
			allSourcesReady: true,
		},
		{
			name:            "no containers should be removed if both max container and per pod container limits are not set",
			containers:      []gcContainer{{"foo", "bar", 2, E}, {"foo", "bar", 1, E}, {"foo", "bar", 0, E}},
			policy:          &ContainerPolicy{MinAge: time.Minute, MaxPerPodContainer: -1, MaxContainers: -1},
			remain:          []int{0, 1, 2},
			allSourcesReady: true,
		},
		{
			name:            "recently started containers should not be removed",
			containers:      []gcContainer{{"foo", "bar", nowNs, E}, {"foo", "bar", nowNs, E}, {"foo", "bar", nowNs, E}},
			remain:          []int{0, 1, 2},
			allSourcesReady: true,
		},
		{
			name:            "oldest containers should be removed when per pod container limit exceeded",
			containers:      []gcContainer{{"foo", "bar", 2, E}, {"foo", "bar", 1, E}, {"foo", "bar", 0, E}},
			remain:          []int{0, 1},
			allSourcesReady: true,
		},
		{
			name:            "running containers should not be removed",
			containers:      []gcContainer{{"foo", "bar", 2, E}, {"foo", "bar", 1, E}, {"foo", "bar", 0, R}},
			remain:          []int{0, 1, 2},
			allSourcesReady: true,
		},
		{
			name:            "no containers should be removed when limits are not exceeded",
			containers:      []gcContainer{{"foo", "bar", 1, E}, {"foo", "bar", 0, E}},
			remain:          []int{0, 1},
			allSourcesReady: true,
		},
		{
			name: "max container count should apply per (UID, container) pair",
			containers: []gcContainer{
				{"foo", "bar", 2, E}, {"foo", "bar", 1, E}, {"foo", "bar", 0, E},
				{"foo1", "baz", 2, E}, {"foo1", "baz", 1, E}, {"foo1", "baz", 0, E},
				{"foo2", "bar", 2, E}, {"foo2", "bar", 1, E}, {"foo2", "bar", 0, E},
			},
			remain:          []int{0, 1, 3, 4, 6, 7},
			allSourcesReady: true,
		},
		{
			name: "max limit should apply and try to keep from every pod",
			containers: []gcContainer{
				{"foo", "bar", 1, E}, {"foo", "bar", 0, E},
				{"foo1", "bar1", 1, E}, {"foo1", "bar1", 0, E},
				{"foo2", "bar2", 1, E}, {"foo2", "bar2", 0, E},
				{"foo3", "bar3", 1, E}, {"foo3", "bar3", 0, E},
				{"foo4", "bar4", 1, E}, {"foo4", "bar4", 0, E},
			},
			remain:          []int{0, 2, 4, 6, 8},
			allSourcesReady: true,
		},
		{
			name: "oldest pods should be removed if limit exceeded",
			containers: []gcContainer{
				{"foo", "bar", 2, E}, {"foo", "bar", 1, E},
				{"foo1", "bar1", 2, E}, {"foo1", "bar1", 1, E},
				{"foo2", "bar2", 1, E},
				{"foo3", "bar3", 0, E},
				{"foo4", "bar4", 1, E},
				{"foo5", "bar5", 0, E},
				{"foo6", "bar6", 2, E},
				{"foo7", "bar7", 1, E},
			},
			remain:          []int{0, 2, 4, 6, 8, 9},
			allSourcesReady: true,
		},
		{
			name: "all non-running containers should be removed when evictTerminatedPods is set",
			containers: []gcContainer{
				{"foo", "bar", 2, E}, {"foo", "bar", 1, E},
				{"foo1", "bar1", 2, E}, {"foo1", "bar1", 1, E},
				{"running", "bar2", 1, E},
				{"foo3", "bar3", 0, R},
			},
			remain:              []int{4, 5},
			evictTerminatedPods: true,
			allSourcesReady:     true,
		},
		{
			name: "containers for deleted pods should be removed (but still respect MinAge)",
			containers: []gcContainer{
				{"foo", "bar", 1, E}, {"foo", "bar", 0, E},
				{"deleted", "bar1", nowNs, E}, {"deleted", "bar1", 1, E}, {"deleted", "bar1", 0, E},
			},
			remain:          []int{0, 1, 2},
			allSourcesReady: true,
		},
		{
			name:                "containers for deleted pods may not be removed if allSourcesReady is set false",
			containers:          []gcContainer{{"deleted", "bar1", 0, E}},
			remain:              []int{0},
			evictTerminatedPods: true,
			allSourcesReady:     false,
		},
		{
			name:            "(TestUnknownStateContainerGC) an unknown-state container is removed",
			containers:      []gcContainer{{"foo", "bar", 0, StateUnknown}},
			policy:          &ContainerPolicy{MinAge: time.Hour, MaxPerPodContainer: 0, MaxContainers: 0},
			remain:          []int{},
			allSourcesReady: true,
		},
		// Our own edge cases.
		{
			name:            "created (never started) containers are dead too",
			containers:      []gcContainer{{"foo", "bar", 2, StateCreated}, {"foo", "bar", 1, StateCreated}, {"foo", "bar", 0, StateCreated}},
			remain:          []int{0, 1},
			allSourcesReady: true,
		},
		{
			name:            "created exactly MinAge ago is evictable",
			containers:      []gcContainer{{"foo", "bar", now.Add(-time.Hour).UnixNano(), E}, {"foo", "bar", 0, E}},
			policy:          &ContainerPolicy{MinAge: time.Hour, MaxPerPodContainer: 0, MaxContainers: -1},
			remain:          []int{},
			allSourcesReady: true,
		},
		{
			name:            "terminated pods are kept without evictNonDeletedPods",
			containers:      []gcContainer{{"foo", "bar", 1, E}},
			remain:          []int{0},
			allSourcesReady: true,
		},
		{
			name: "node-wide limit with ties on creation time is deterministic",
			containers: []gcContainer{
				{"a", "x", 5, E}, {"b", "x", 5, E}, {"c", "x", 5, E},
			},
			policy:          &ContainerPolicy{MinAge: 0, MaxPerPodContainer: -1, MaxContainers: 1},
			remain:          []int{0},
			allSourcesReady: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := mPolicy
			if tc.policy != nil {
				policy = *tc.policy
			}
			var cs []Container
			terminated := map[string]bool{}
			for i, c := range tc.containers {
				cs = append(cs, Container{ID: fmt.Sprintf("c%02d", i), PodUID: c.pod, Name: c.name, State: c.state, CreatedAt: time.Unix(0, c.createdAt)})
				if c.pod != "running" {
					terminated[c.pod] = true
				}
			}
			for range 3 { // map order must not matter
				p := PlanContainerGC(cs, map[string]bool{"deleted": true}, policy, now, tc.allSourcesReady, tc.evictTerminatedPods, terminated)
				if p.Err != nil {
					t.Fatal(p.Err)
				}
				if got := remaining(cs, p); !slices.Equal(got, tc.remain) {
					t.Fatalf("remain = %v, want %v (removed %+v)", got, tc.remain, p.Remove)
				}
			}
		})
	}
}

func TestContainerGCReasons(t *testing.T) {
	cs := []Container{
		{ID: "d1", PodUID: "gone", Name: "x", State: StateExited, CreatedAt: time.Unix(0, 1)},
		{ID: "u1", PodUID: "p", Name: "x", State: StateUnknown, CreatedAt: time.Unix(0, 1)},
		{ID: "u2", PodUID: "p", Name: "x", State: StateExited, CreatedAt: time.Unix(0, 2)},
		{ID: "u3", PodUID: "p", Name: "x", State: StateExited, CreatedAt: time.Unix(0, 3)},
		{ID: "q1", PodUID: "q", Name: "y", State: StateExited, CreatedAt: time.Unix(0, 4)},
		{ID: "q2", PodUID: "q", Name: "y", State: StateExited, CreatedAt: time.Unix(0, 5)},
	}
	p := PlanContainerGC(cs, map[string]bool{"gone": true}, ContainerPolicy{MaxPerPodContainer: 2, MaxContainers: 2}, t0, true, false, nil)
	want := []ContainerRemoval{
		{ID: "d1", PodUID: "gone", Name: "x", Reason: ReasonPodDeleted},
		{ID: "u1", PodUID: "p", Name: "x", Reason: ReasonMaxPerPodContainer, StopFirst: true},
		{ID: "u2", PodUID: "p", Name: "x", Reason: ReasonMaxContainers},
		{ID: "q1", PodUID: "q", Name: "y", Reason: ReasonMaxContainers},
	}
	if !slices.Equal(p.Remove, want) || p.Err != nil {
		t.Errorf("Remove = %+v, Err = %v\nwant %+v", p.Remove, p.Err, want)
	}
}

func TestContainerGCBadInput(t *testing.T) {
	ok := Container{ID: "a", PodUID: "p", Name: "n", State: StateExited}
	for _, tc := range []struct {
		name       string
		containers []Container
		policy     ContainerPolicy
		want       string
	}{
		{"negative min age", []Container{ok}, ContainerPolicy{MinAge: -time.Second}, "invalid gc input: container gc policy: minimum age -1s must not be negative"},
		{"empty id", []Container{{PodUID: "p", State: StateExited}}, mPolicy, "invalid gc input: container 0: empty ID"},
		{"duplicate id", []Container{ok, ok}, mPolicy, `invalid gc input: container "a": listed twice`},
		{"empty pod uid", []Container{{ID: "a", State: StateExited}}, mPolicy, `invalid gc input: container "a": empty pod UID`},
		{"bad state", []Container{{ID: "a", PodUID: "p", State: "Exited"}}, mPolicy, `invalid gc input: container "a": state "Exited": must be running, exited, created or unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanContainerGC(tc.containers, nil, tc.policy, t0, true, false, nil)
			checkErr(t, p.Err, tc.want, ErrInvalidInput)
			if len(p.Remove) != 0 {
				t.Errorf("Remove = %v, want none on bad input", p.Remove)
			}
		})
	}
}

// TestSandboxGC ports upstream TestSandboxGC (pkg/kubelet/kuberuntime/kuberuntime_gc_test.go);
// "multiple sandboxes" is its last case.
func TestSandboxGC(t *testing.T) {
	type sb struct {
		pod     string
		ready   bool
		created int64
	}
	type ctr struct{ pod, sandbox string } // sandbox: index into sandboxes as "s<i>"
	for _, tc := range []struct {
		name       string
		sandboxes  []sb
		containers []ctr
		deleted    []string
		terminated []string
		evict      bool
		remain     []int
	}{
		{name: "notready sandboxes without containers for deleted pods are removed",
			sandboxes: []sb{{"pod2", false, 0}}, deleted: []string{"pod2"}, remain: []int{}},
		{name: "ready sandboxes without containers for deleted pods are kept",
			sandboxes: []sb{{"pod2", true, 0}}, deleted: []string{"pod2"}, remain: []int{0}},
		{name: "sandboxes for existing pods are kept",
			sandboxes: []sb{{"pod0", true, 0}, {"pod1", false, 0}}, remain: []int{0, 1}},
		{name: "older exited sandboxes without containers for existing pods are removed",
			sandboxes: []sb{{"pod0", false, 1}, {"pod0", false, 0}}, remain: []int{0}},
		{name: "older exited sandboxes with containers for existing pods are kept",
			sandboxes: []sb{{"pod0", false, 1}, {"pod0", false, 0}}, containers: []ctr{{"pod0", "s1"}}, remain: []int{0, 1}},
		{name: "non-ready sandboxes of terminated pods are removed with evictNonDeletedPods",
			sandboxes: []sb{{"pod0", true, 0}, {"pod1", false, 0}}, terminated: []string{"pod0", "pod1"}, evict: true, remain: []int{0}},
		{name: "non-ready sandboxes of terminated pods: the newest stays without evictNonDeletedPods",
			sandboxes: []sb{{"pod0", true, 0}, {"pod1", false, 0}}, terminated: []string{"pod0", "pod1"}, remain: []int{0, 1}},
		{name: "sandbox with containers is kept even for a deleted pod",
			sandboxes: []sb{{"pod0", false, 0}}, containers: []ctr{{"pod0", "s0"}}, deleted: []string{"pod0"}, remain: []int{0}},
		{name: "multiple sandboxes",
			sandboxes:  []sb{{"pod0", true, 1}, {"pod0", false, 0}, {"pod1", false, 1}, {"pod1", false, 0}, {"pod2", false, 0}},
			containers: []ctr{{"pod1", "s2"}},
			deleted:    []string{"pod2"},
			remain:     []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sbs []Sandbox
			for i, s := range tc.sandboxes {
				sbs = append(sbs, Sandbox{ID: fmt.Sprint("s", i), PodUID: s.pod, Ready: s.ready, CreatedAt: time.Unix(0, s.created)})
			}
			var cs []Container
			for i, c := range tc.containers {
				cs = append(cs, Container{ID: fmt.Sprint("c", i), PodUID: c.pod, Name: "bar", SandboxID: c.sandbox, State: StateExited})
			}
			set := func(l []string) map[string]bool {
				m := map[string]bool{}
				for _, s := range l {
					m[s] = true
				}
				return m
			}
			p := PlanSandboxGC(sbs, cs, set(tc.deleted), tc.evict, set(tc.terminated))
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			removed := map[string]bool{}
			for _, r := range p.Remove {
				removed[r.ID] = true
			}
			got := []int{}
			for i, s := range sbs {
				if !removed[s.ID] {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, tc.remain) {
				t.Errorf("remain = %v, want %v (removed %+v)", got, tc.remain, p.Remove)
			}
		})
	}
}

func TestSandboxGCBadInput(t *testing.T) {
	p := PlanSandboxGC([]Sandbox{{ID: "a"}, {ID: "a"}}, nil, nil, false, nil)
	checkErr(t, p.Err, `invalid gc input: sandbox "a": listed twice`, ErrInvalidInput)
}

// TestPodLogDirGC: a pod's log directory is removed once every source is ready and the pod is
// deleted, as the kubelet's TestPodLogDirectoryGC (pkg/kubelet/kuberuntime/kuberuntime_gc_test.go).
func TestPodLogDirGC(t *testing.T) {
	entries := []string{"123", "456", "789", "012", "name_namespace_321", "name_namespace_654"}
	deleted := map[string]bool{"012": true, "789": true, "654": true}
	join := func(names []string) []string {
		out := []string{}
		for _, n := range names {
			out = append(out, filepath.Join("/var/log/pods", n))
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		allSourcesReady bool
		want            []string
	}{
		{"all sources ready: deleted pods' directories", true, []string{"/var/log/pods/789", "/var/log/pods/012", "/var/log/pods/name_namespace_654"}},
		{"sources not ready: nothing", false, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := join(PlanLogDirGC(entries, deleted, tc.allSourcesReady)); !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodUIDFromLogDir(t *testing.T) {
	for in, want := range map[string]string{
		"default_web_8c6c5b9e-1f7a-4a57-9d1e-1b2c3d4e5f60": "8c6c5b9e-1f7a-4a57-9d1e-1b2c3d4e5f60",
		"123": "123",
		"ns_": "",
	} {
		if got := PodUIDFromLogDir(in); got != want {
			t.Errorf("PodUIDFromLogDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkPlanContainerGC10000(b *testing.B) {
	cs := make([]Container, 10000)
	for i := range cs {
		cs[i] = Container{
			ID:        fmt.Sprintf("%064x", i),
			PodUID:    fmt.Sprintf("pod-%04d", i/8),
			Name:      fmt.Sprint("ctr-", i%2),
			State:     StateExited,
			CreatedAt: t0.Add(-time.Duration((i*7919)%10000) * time.Second),
		}
	}
	deleted := map[string]bool{}
	for i := 0; i < 1250; i += 10 {
		deleted[fmt.Sprintf("pod-%04d", i)] = true
	}
	policy := ContainerPolicy{MinAge: time.Minute, MaxPerPodContainer: 2, MaxContainers: 1000}
	b.ReportAllocs()
	for b.Loop() {
		p := PlanContainerGC(cs, deleted, policy, t0, true, false, nil)
		if len(p.Remove) == 0 {
			b.Fatal("nothing removed")
		}
	}
}
