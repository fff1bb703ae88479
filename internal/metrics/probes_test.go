package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestProbeResults: prober_probe_total and prober_probe_duration_seconds with the kubelet's
// names, help, labels and buckets, linted, on the local /metrics; /metrics/probes serves them
// with process_start_time_seconds, as the kubelet does.
func TestProbeResults(t *testing.T) {
	p := NewProbeResults()
	m := New(Options{Version: "1", NoRuntimeCollectors: true, Probes: p, Started: time.Unix(1_700_000_000, 0)})
	p.ProbeResult("Readiness", "failed", "app", "web", "default", "u1", time.Second)
	p.ProbeResult("Readiness", "failed", "app", "web", "default", "u1", time.Second)
	p.ProbeResult("Liveness", "successful", "app", "web", "default", "u1", 30*time.Millisecond)
	p.ProbeResult("Startup", "unknown", "app", "web", "default", "u1", 2*time.Second)
	want := `
# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Liveness",result="successful"} 1
prober_probe_total{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="failed"} 2
prober_probe_total{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Startup",result="unknown"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	// The kubelet times successful and unknown results only: no Readiness series.
	if n := testutil.CollectAndCount(p.d); n != 2 {
		t.Errorf("prober_probe_duration_seconds has %d series, want 2 (Liveness, Startup)", n)
	}
	for _, tc := range []struct {
		probe string
		sum   float64
	}{{"Liveness", 0.03}, {"Startup", 2}} {
		h, err := p.d.GetMetricWithLabelValues(tc.probe, "app", "web", "default")
		if err != nil {
			t.Fatal(err)
		}
		if got := histogramSum(t, h); got != tc.sum {
			t.Errorf("%s duration sum %v, want %v", tc.probe, got, tc.sum)
		}
	}
	problems, err := testutil.GatherAndLint(m.Gatherer(), "prober_probe_total", "prober_probe_duration_seconds")
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/probes", nil))
	if strings.Contains(rec.Body.String(), `le="0.05"`) {
		t.Errorf("/metrics/probes: prober_probe_duration_seconds has classic buckets:\n%s", rec.Body)
	}
	for _, line := range []string{
		`prober_probe_duration_seconds_bucket{container="app",namespace="default",pod="web",probe_type="Liveness",le="+Inf"} 1`,
		"process_start_time_seconds 1.7e+09",
	} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("/metrics/probes lacks %q:\n%s", line, rec.Body)
		}
	}
}

// histogramSum is the sum of the histogram observer o.
func histogramSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	var pb dto.Metric
	if err := o.(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleSum()
}
