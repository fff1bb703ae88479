package gc

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// containerScenario: pod "gone" is deleted (no source knows it); pod "live" has a crash-looping
// app and a sidecar whose oldest dead instance is in unknown state; pod "term" is terminated.
// Log directories exist for all three.
func containerScenario(t *testing.T) (*fakeRuntime, string) {
	now := time.Now()
	ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	f := newFake()
	f.containers = []Container{
		{ID: "l3", PodUID: "live", Name: "app", SandboxID: "sb-live", State: StateExited, CreatedAt: ago(1)},
		{ID: "g2", PodUID: "gone", Name: "app", SandboxID: "sb-gone", State: StateExited, CreatedAt: ago(2)},
		{ID: "l1", PodUID: "live", Name: "app", SandboxID: "sb-live", State: StateExited, CreatedAt: ago(3)},
		{ID: "l4", PodUID: "live", Name: "app", SandboxID: "sb-live", State: StateRunning, CreatedAt: ago(0)},
		{ID: "g1", PodUID: "gone", Name: "app", SandboxID: "sb-gone", State: StateExited, CreatedAt: ago(3)},
		{ID: "l2", PodUID: "live", Name: "app", SandboxID: "sb-live", State: StateExited, CreatedAt: ago(2)},
		{ID: "s1", PodUID: "live", Name: "side", SandboxID: "sb-live", State: StateUnknown, CreatedAt: ago(3)},
		{ID: "s2", PodUID: "live", Name: "side", SandboxID: "sb-live", State: StateExited, CreatedAt: ago(1)},
		{ID: "t1", PodUID: "term", Name: "job", SandboxID: "sb-term", State: StateExited, CreatedAt: ago(1)},
	}
	f.sandboxes = []Sandbox{
		{ID: "sb-gone", PodUID: "gone", CreatedAt: ago(3)},
		{ID: "sb-live-old", PodUID: "live", CreatedAt: ago(4)},
		{ID: "sb-live", PodUID: "live", Ready: true, CreatedAt: ago(3)},
		{ID: "sb-term", PodUID: "term", CreatedAt: ago(1)},
	}
	logs := t.TempDir()
	for _, d := range []string{"default_gone_gone", "default_live_live", "default_term_term"} {
		if err := os.MkdirAll(filepath.Join(logs, d, "app"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logs, d, "app", "0.log"), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f, logs
}

func TestCollectContainers(t *testing.T) {
	ready := PodState{Known: map[string]bool{"live": true, "term": true}, Terminated: map[string]bool{"term": true}, AllSourcesReady: true}
	periodic := []string{
		"RemoveContainer g1", "RemoveContainer g2", // the deleted pod's, oldest first
		"RemoveContainer l1", "RemoveContainer l2", // beyond one per (pod, container)
		"StopContainer s1", "RemoveContainer s1", // unknown state: stopped first
		"StopSandbox sb-gone", "RemoveSandbox sb-gone", // now unreferenced
		"StopSandbox sb-live-old", "RemoveSandbox sb-live-old", // superseded
	}
	for _, tc := range []struct {
		name     string
		pods     PodState
		setup    func(*fakeRuntime)
		reclaim  bool // DeleteAllUnusedContainers
		dryRun   bool
		wantPlan []string // container IDs planned
		want     []string // mutating calls
		wantGone []string // log directories removed (planned, in a dry run)
		wantFail []string // "op id"
		wantErr  string
	}{
		{
			name:     "periodic: containers, then sandboxes, then log directories",
			pods:     ready,
			wantPlan: []string{"g1", "g2", "l1", "l2", "s1"},
			want:     periodic,
			wantGone: []string{"default_gone_gone"},
		},
		{
			name:     "dry run plans the same and changes nothing",
			pods:     ready,
			dryRun:   true,
			wantPlan: []string{"g1", "g2", "l1", "l2", "s1"},
			wantGone: []string{"default_gone_gone"},
		},
		{
			name: "sources not ready: no pod counts as deleted",
			pods: PodState{Known: map[string]bool{"live": true}},
			// g1 goes only as the older of its unit; sb-gone stays as its pod's newest.
			wantPlan: []string{"g1", "l1", "l2", "s1"},
			want: []string{"RemoveContainer g1", "RemoveContainer l1", "RemoveContainer l2", "StopContainer s1", "RemoveContainer s1",
				"StopSandbox sb-live-old", "RemoveSandbox sb-live-old"},
		},
		{
			name:     "a failed stop keeps the container",
			pods:     ready,
			setup:    func(f *fakeRuntime) { f.fail["StopContainer s1"] = errors.New("timeout") },
			wantPlan: []string{"g1", "g2", "l1", "l2", "s1"},
			want: []string{"RemoveContainer g1", "RemoveContainer g2", "RemoveContainer l1", "RemoveContainer l2", "StopContainer s1",
				"StopSandbox sb-gone", "RemoveSandbox sb-gone", "StopSandbox sb-live-old", "RemoveSandbox sb-live-old"},
			wantGone: []string{"default_gone_gone"},
			wantFail: []string{"stop-container s1"},
			wantErr:  "container s1: stop: timeout",
		},
		{
			name:     "a failed removal is reported, its sandbox stays referenced, the rest goes on",
			pods:     ready,
			setup:    func(f *fakeRuntime) { f.fail["RemoveContainer g1"] = errors.New("device busy") },
			wantPlan: []string{"g1", "g2", "l1", "l2", "s1"},
			want: []string{"RemoveContainer g1", "RemoveContainer g2", "RemoveContainer l1", "RemoveContainer l2", "StopContainer s1", "RemoveContainer s1",
				"StopSandbox sb-live-old", "RemoveSandbox sb-live-old"},
			wantGone: []string{"default_gone_gone"},
			wantFail: []string{"remove-container g1"},
			wantErr:  "container g1: remove: device busy",
		},
		{
			name:     "a failed sandbox stop keeps the sandbox",
			pods:     ready,
			setup:    func(f *fakeRuntime) { f.fail["StopSandbox sb-gone"] = errors.New("netns busy") },
			wantPlan: []string{"g1", "g2", "l1", "l2", "s1"},
			want: append(slices.Clone(periodic[:7]),
				"StopSandbox sb-live-old", "RemoveSandbox sb-live-old"),
			wantGone: []string{"default_gone_gone"},
			wantFail: []string{"stop-sandbox sb-gone"},
			wantErr:  "sandbox sb-gone: stop: netns busy",
		},
		{
			name:     "eviction reclaim takes terminated pods' containers and sandboxes too",
			pods:     ready,
			reclaim:  true,
			wantPlan: []string{"g1", "g2", "t1", "l1", "l2", "s1"},
			want: []string{"RemoveContainer g1", "RemoveContainer g2", "RemoveContainer t1", "RemoveContainer l1", "RemoveContainer l2",
				"StopContainer s1", "RemoveContainer s1",
				"StopSandbox sb-gone", "RemoveSandbox sb-gone", "StopSandbox sb-live-old", "RemoveSandbox sb-live-old",
				"StopSandbox sb-term", "RemoveSandbox sb-term"},
			wantGone: []string{"default_gone_gone"},
		},
		{
			name:    "container list fails",
			pods:    ready,
			setup:   func(f *fakeRuntime) { f.err["ListContainers"] = errors.New("runtime down") },
			wantErr: "container gc: container list: runtime down",
		},
		{
			name:    "garbage from the runtime: a container without a pod",
			pods:    ready,
			setup:   func(f *fakeRuntime) { f.containers = append(f.containers, Container{ID: "x", State: StateExited}) },
			wantErr: `container gc: invalid gc input: container "x": empty pod UID`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, logs := containerScenario(t)
				if tc.setup != nil {
					tc.setup(f)
				}
				c, err := NewCollector(CollectorOptions{
					Containers: f, Sandboxes: f, ImagePolicy: defaultPolicy,
					ContainerPolicy: ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
					PodLogRoot:      logs,
					PodState:        func() PodState { return tc.pods },
				})
				if err != nil {
					t.Fatal(err)
				}
				var res ContainerResult
				if tc.reclaim {
					res, err = c.DeleteAllUnusedContainers(t.Context())
				} else {
					res, err = c.CollectContainers(t.Context(), tc.dryRun)
				}
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				var plan []string
				for _, r := range res.Remove {
					plan = append(plan, r.ID)
				}
				if !slices.Equal(plan, tc.wantPlan) {
					t.Errorf("plan %q, want %q", plan, tc.wantPlan)
				}
				if got := f.mutations(); !slices.Equal(got, tc.want) {
					t.Errorf("runtime calls\n%q\nwant\n%q", got, tc.want)
				}
				var fails []string
				for _, fl := range res.Failed {
					fails = append(fails, fl.Op+" "+fl.ID)
				}
				if !slices.Equal(fails, tc.wantFail) {
					t.Errorf("failed %q, want %q", fails, tc.wantFail)
				}
				if !slices.Equal(res.RemoveLogDirs, nonNil(tc.wantGone)) {
					t.Errorf("log dirs planned %q, want %q", res.RemoveLogDirs, tc.wantGone)
				}
				for _, d := range []string{"default_gone_gone", "default_live_live", "default_term_term"} {
					_, statErr := os.Stat(filepath.Join(logs, d))
					wantGone := !tc.dryRun && slices.Contains(tc.wantGone, d)
					if gone := errors.Is(statErr, os.ErrNotExist); gone != wantGone {
						t.Errorf("log dir %s gone %v, want %v", d, gone, wantGone)
					}
				}
				if tc.dryRun && (len(res.Removed) != 0 || len(res.RemovedSandboxes) != 0 || len(res.RemovedLogDirs) != 0) {
					t.Errorf("dry run removed %v %v %v", res.Removed, res.RemovedSandboxes, res.RemovedLogDirs)
				}
				if !tc.dryRun && tc.wantErr == "" && len(res.Removed) != len(res.Remove) {
					t.Errorf("removed %q of %q", res.Removed, plan)
				}
			})
		})
	}
}

func TestCollectContainersWithoutPodState(t *testing.T) {
	f, _ := containerScenario(t)
	c, err := NewCollector(CollectorOptions{Containers: f, Sandboxes: f, ImagePolicy: defaultPolicy, ContainerPolicy: ContainerPolicy{MaxPerPodContainer: -1, MaxContainers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CollectContainers(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	// No pod state: nothing is deleted, no limit: only the superseded inactive sandbox goes.
	if len(res.Remove) != 0 || res.AllSourcesReady || len(res.DeletedPods) != 0 {
		t.Errorf("result %+v", res)
	}
	if got := f.mutations(); !slices.Equal(got, []string{"StopSandbox sb-live-old", "RemoveSandbox sb-live-old"}) {
		t.Errorf("calls %q", got)
	}
}

func TestContainerResultJSON(t *testing.T) {
	f, logs := containerScenario(t)
	c, err := NewCollector(CollectorOptions{Containers: f, Sandboxes: f, ImagePolicy: defaultPolicy, ContainerPolicy: ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		PodLogRoot: logs, PodState: func() PodState { return PodState{Known: map[string]bool{"live": true}, AllSourcesReady: true} }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CollectContainers(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	m, data := jsonObject(t, res)
	want := []string{"kind", "dryRun", "startedAt", "duration", "allSourcesReady", "deletedPods", "remove", "removeSandboxes",
		"removeLogDirs", "removed", "removedSandboxes", "removedLogDirs", "failed", "error"}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing in %s", k, data)
		}
	}
	if len(m) != len(want) {
		t.Errorf("%d keys, want %d: %s", len(m), len(want), data)
	}
	if got := m["deletedPods"]; !slices.Equal(toStrings(got), []string{"gone", "term"}) {
		t.Errorf("deletedPods %v", got)
	}
	first := m["remove"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "podUID", "name", "reason", "stopFirst"} {
		if _, ok := first[k]; !ok {
			t.Errorf("remove[0] lacks %q: %v", k, first)
		}
	}
	if m["removed"] == nil || m["error"] != nil {
		t.Errorf("removed %v, error %v", m["removed"], m["error"])
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestCollectContainersWithoutSandboxes: a runtime without sandboxes (the systemd runtime) is
// wired without a SandboxRuntime: no sandbox is listed, planned or removed, and the containers
// of deleted pods still go.
func TestCollectContainersWithoutSandboxes(t *testing.T) {
	f, _ := containerScenario(t)
	c, err := NewCollector(CollectorOptions{Containers: f, ImagePolicy: defaultPolicy, ContainerPolicy: ContainerPolicy{MaxPerPodContainer: -1, MaxContainers: -1},
		PodState: func() PodState { return PodState{Known: map[string]bool{"live": true}, AllSourcesReady: true} }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CollectContainers(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RemoveSandboxes) != 0 || len(res.RemovedSandboxes) != 0 || len(res.Removed) == 0 {
		t.Errorf("result %+v", res)
	}
	for _, call := range f.calls {
		if strings.Contains(call, "Sandbox") {
			t.Errorf("sandbox call %q without a sandbox runtime", call)
		}
	}
}
