package conformance

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	specHostPath = "[sig-storage] HostPath should support r/w [NodeConformance]"
	specLocalDir = "[sig-storage] PersistentVolumes-local [LocalVolumeType: dir] One pod requesting one prebound PVC should be able to mount volume and read from pod1"
	specInTree   = "[sig-storage] In-tree Volumes [Driver: local] [LocalVolumeType: dir] [Testpattern: Pre-provisioned PV (default fs)] subPath should support existing directory"
	specSlow     = "[sig-storage] In-tree Volumes [Driver: hostPath] [Testpattern: Inline-volume (default fs)] subPath should support restarting containers using directory as subpath [Slow]"
)

func TestSpecGroup(t *testing.T) {
	for _, tc := range []struct{ name, spec, want string }{
		{"storage test pattern", specInTree, "[sig-storage] In-tree Volumes [Driver: local] [LocalVolumeType: dir]"},
		{"word and its tags", specLocalDir, "[sig-storage] PersistentVolumes-local [LocalVolumeType: dir]"},
		{"word alone", specHostPath, "[sig-storage] HostPath"},
		{"no SIG", "Kubelet should run", "Kubelet"},
		{"unclosed tag", "[sig-storage] X [Driver: y", "[sig-storage] X"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SpecGroup(tc.spec); got != tc.want {
				t.Fatalf("SpecGroup(%q) = %q, want %q", tc.spec, got, tc.want)
			}
		})
	}
}

func TestFocusRunFocus(t *testing.T) {
	focus := `\[sig-storage\] (HostPath |In-tree Volumes \[Driver: (local|hostPath)\] )`
	for _, tc := range []struct {
		name, runName, focus, skip, only string
		match, miss                      []string
		err                              string
	}{
		{name: "the focus as given", runName: "storage-local", focus: focus, match: []string{specHostPath, specInTree}, miss: []string{specLocalDir}},
		{name: "a re-run: both must match, either order", runName: "storage-local", focus: focus, only: `subPath|should support r/w`,
			match: []string{specInTree, specHostPath}, miss: []string{specLocalDir, "[sig-storage] In-tree Volumes [Driver: local] volumes should store data"}},
		{name: "bad name", runName: "Storage local", focus: focus, err: "focus run name"},
		{name: "bad skip", runName: "x", focus: focus, skip: "(", err: "skip \"(\""},
		{name: "no focus", runName: "x", err: "no focus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FocusRunFocus(tc.runName, tc.focus, tc.skip, tc.only)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(got)
			for _, m := range tc.match {
				if !re.MatchString(m) {
					t.Errorf("%q misses %q", got, m)
				}
			}
			for _, m := range tc.miss {
				if re.MatchString(m) {
					t.Errorf("%q matches %q", got, m)
				}
			}
		})
	}
}

func TestFocusKept(t *testing.T) {
	rs := Results{specHostPath: {Status: "passed"}, specInTree: {Status: "skipped"}, specSlow: {Status: "skipped"},
		SuitePrefix + "[SynchronizedBeforeSuite] ": {Status: "failed"}}
	got := FocusKept(rs, `\[Slow\]`, "")
	if _, ok := got[specSlow]; ok || len(got) != 3 {
		t.Errorf("skip: kept %v", got)
	}
	got = FocusKept(rs, `\[Slow\]`, `r/w`)
	if _, ok := got[specHostPath]; !ok || len(got) != 2 {
		t.Errorf("skip and only: kept %v (the spec and the suite-level node)", got)
	}
}

// TestFocusSection: the focus runs' report: each run's counts per cluster and per group, the
// newest run counting, re-runs apart, differences and failures with their notes.
func TestFocusSection(t *testing.T) {
	day := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	run := func(kind string, started time.Time, only string, specs Results) ShardRun {
		return ShardRun{Nodes: []string{kind, kind}, Name: "storage-local", Focus: `\[sig-storage\] HostPath `, Skip: `\[Slow\]`,
			Started: started, Duration: "30m0s", Procs: 2, Commit: "c" + kind, Only: only, Specs: specs}
	}
	kubelet := run("kubelet", day, "", Results{specHostPath: {Status: "passed"}, specInTree: {Status: "passed"}, specLocalDir: {Status: "skipped"}})
	old := run("slicelet", day.Add(-time.Hour), "", Results{specHostPath: {Status: "failed", Message: "old failure"}})
	slicelet := run("slicelet", day.Add(time.Hour), "", Results{specHostPath: {Status: "passed"}, specInTree: {Status: "failed", Message: "no file"},
		specLocalDir: {Status: "skipped"}})
	rerun := run("slicelet", day.Add(2*time.Hour), "subPath", Results{specInTree: {Status: "passed"}})
	if rerun.FileName() != "slicelet_storage-local_rerun.json" || slicelet.FileName() != "slicelet_storage-local.json" {
		t.Fatalf("file names %s, %s", rerun.FileName(), slicelet.FileName())
	}
	got := FocusSection([]ShardRun{kubelet, old, slicelet, rerun}, []Note{{Pattern: `subPath should support existing`, Why: "the cause"}}, "intro\n")
	for _, tc := range []struct{ name, want string }{
		{"totals", "| storage-local | 2 / 2 / 0 / 1 | 2 / 1 / 1 / 1 | not run | 1 |"},
		{"a group", "| [sig-storage] In-tree Volumes [Driver: local] [LocalVolumeType: dir] | 1 / 1 / 0 / 0 | 1 / 0 / 1 / 0 | not run | 1 |"},
		{"the run", "| storage-local | `\\[sig-storage\\] HostPath ` | `\\[Slow\\]` | slicelet | slicelet,slicelet | 2026-11-29 15:00 | cslicelet | 30m0s | 2 | 3 | — |"},
		{"the difference with its note", "| " + specInTree + " | passed | failed | the cause |"},
		{"the failure", "| " + specInTree + " | slicelet | failed | the cause |"},
		{"the re-run apart", "| " + specInTree + " | slicelet | passed | 2026-11-29 16:00 | cslicelet | 30m0s, 1 ran, 1 passed, 0 failed |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Fatalf("section lacks %q:\n%s", tc.want, got)
			}
		})
	}
	if strings.Contains(got, "old failure") {
		t.Errorf("section shows the replaced run:\n%s", got)
	}
}
