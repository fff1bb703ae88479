package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSLIs: /metrics/slis has each check a health endpoint evaluated (ping, then the warnables
// it considers) with its last result and a count by status, as the kubelet's
// kubernetes_healthcheck and kubernetes_healthchecks_total, and process_start_time_seconds;
// the kubelet API serves the same registry.
func TestSLIs(t *testing.T) {
	tr := testTracker()
	m := New(Options{Health: tr, NoRuntimeCollectors: true, Started: time.Unix(1_700_000_000, 500_000_000)})
	h := m.Handler(nil)
	get := func(path string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	get("/healthz")
	tr.SetUnhealthy(loop, "stuck")
	get("/healthz")
	get("/readyz")
	want := `
# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.
# TYPE kubernetes_healthcheck gauge
kubernetes_healthcheck{name="eviction-loop",type="healthz"} 0
kubernetes_healthcheck{name="eviction-loop",type="readyz"} 0
kubernetes_healthcheck{name="ping",type="healthz"} 1
kubernetes_healthcheck{name="ping",type="readyz"} 1
# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.
# TYPE kubernetes_healthchecks_total counter
kubernetes_healthchecks_total{name="eviction-loop",status="error",type="healthz"} 1
kubernetes_healthchecks_total{name="eviction-loop",status="error",type="readyz"} 1
kubernetes_healthchecks_total{name="eviction-loop",status="success",type="healthz"} 1
kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 2
kubernetes_healthchecks_total{name="ping",status="success",type="readyz"} 1
# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7000000005e+09
`
	for name, handler := range map[string]http.Handler{"local": h, "kubelet API": m.KubeletHandlers(nil).SLIs} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/slis", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s /metrics/slis: %d", name, rec.Code)
		}
		got := rec.Body.String()
		for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
			if !strings.Contains(got, line+"\n") {
				t.Errorf("%s /metrics/slis lacks %q:\n%s", name, line, got)
			}
		}
	}
	// The kubelet API's /healthz feeds the same families.
	m.KubeletHandlers(nil).Healthz.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	if got := testutil.ToFloat64(m.healthchecks.total.WithLabelValues("ping", "healthz", "success")); got != 3 {
		t.Errorf("ping successes after the kubelet API's /healthz: %v, want 3", got)
	}
	// Without a start time, no process_start_time_seconds.
	rec := httptest.NewRecorder()
	New(Options{NoRuntimeCollectors: true}).Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/slis", nil))
	if strings.Contains(rec.Body.String(), "process_start_time_seconds") {
		t.Errorf("process_start_time_seconds without a start time:\n%s", rec.Body)
	}
}
