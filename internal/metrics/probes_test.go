package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestProbeResults: prober_probe_total with the kubelet's name, help and labels, linted, on the
// local /metrics (the kubelet API serves it on /metrics/probes alone).
func TestProbeResults(t *testing.T) {
	p := NewProbeResults()
	m := New(Options{Version: "1", NoRuntimeCollectors: true, Probes: p})
	p.ProbeResult("Readiness", "failed", "app", "web", "default", "u1")
	p.ProbeResult("Readiness", "failed", "app", "web", "default", "u1")
	p.ProbeResult("Liveness", "successful", "app", "web", "default", "u1")
	want := `
# HELP prober_probe_total [ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Liveness",result="successful"} 1
prober_probe_total{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="failed"} 2
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(m.Gatherer(), "prober_probe_total")
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
