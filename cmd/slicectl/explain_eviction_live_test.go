package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/eviction"
)

// liveDecision is a daemon's last decision under hard memory pressure, explained the way the
// daemon's backend does it (RFC 3339 times).
func liveDecision() eviction.Explanation {
	at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	d := eviction.Decision{
		ThresholdsMet: []eviction.ThresholdReport{{Signal: eviction.SignalMemoryAvailable, Hard: true, Quantity: resource.MustParse("500Mi"),
			Available: resource.MustParse("300Mi"), Capacity: resource.MustParse("8Gi"), FirstObservedAt: at.Add(-2 * time.Second), Actionable: true}},
		NodeConditions: []v1.NodeConditionType{v1.NodeMemoryPressure},
		Reclaim:        v1.ResourceMemory,
		Signal:         eviction.SignalMemoryAvailable,
		Ranking: []eviction.Candidate{
			{Name: "default/hog", Reason: "working set 3Gi exceeds memory request 0"},
			{Name: "default/db", Priority: 1000, Reason: "working set 1Gi within memory request 2Gi"},
		},
		Evict: &eviction.Eviction{Name: "default/hog", Signal: eviction.SignalMemoryAvailable, GracePeriod: time.Second,
			Message: "The node was low on resource: memory. "},
	}
	return eviction.Explain(d, at.Format(time.RFC3339Nano), func(t time.Time) string { return t.Format(time.RFC3339Nano) })
}

// TestExplainEvictionLive: without --observations, `slicectl explain eviction` shows the
// daemon's last decision (GET /v1/explain/eviction); the replay-only and live-only flags do not
// mix, and a daemon that is not running is exit code 3.
func TestExplainEvictionLive(t *testing.T) {
	f := newFakeDaemon()
	f.Eviction = liveDecision()
	sock := startDaemon(t, f)
	idle := startDaemon(t, newFakeDaemon()) // no cycle yet: the zero explanation
	obs := writeFile(t, t.TempDir(), "episode.yaml", evictionEpisode)
	tests := []struct {
		name    string
		args    []string
		code    int
		out     []string
		errOut  string
		jsonOut bool
	}{
		{name: "table", args: []string{"explain", "eviction", "--socket", sock}, out: []string{
			"Explained by slicelet at " + sock,
			"Last cycle at 2026-11-21T08:00:00Z",
			"memory.available < 500Mi (hard): available 300Mi of 8Gi, since 2026-11-21T07:59:58Z",
			"Node conditions:  MemoryPressure",
			"Reclaim:          memory (memory.available)",
			"1     default/hog  0         working set 3Gi exceeds memory request 0",
			"2     default/db   1000      working set 1Gi within memory request 2Gi",
			"Evict: default/hog (grace 1s)",
		}},
		{name: "json", args: []string{"explain", "eviction", "--socket", sock, "-o", "json"}, jsonOut: true},
		{name: "no cycle yet", args: []string{"explain", "eviction", "--socket", idle}, out: []string{"has not completed a cycle yet"}},
		{name: "daemon down", args: []string{"explain", "eviction", "--socket", filepath.Join(t.TempDir(), "none.sock")}, code: exitDaemonDown},
		{name: "socket with observations", args: []string{"explain", "eviction", "--observations", obs, "--socket", sock}, code: exitUsage, errOut: "--socket is for the live explanation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			for _, w := range tt.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tt.errOut) {
				t.Errorf("stderr lacks %q:\n%s", tt.errOut, errOut)
			}
			if tt.jsonOut {
				var got eviction.Explanation
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("output is not an explanation: %v\n%s", err, out)
				}
				if want := liveDecision(); !reflect.DeepEqual(got, want) {
					t.Errorf("json explanation:\n%+v\nwant\n%+v", got, want)
				}
			}
		})
	}
}
