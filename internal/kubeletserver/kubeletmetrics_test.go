package kubeletserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestWriteResourceMetrics(t *testing.T) {
	at := time.Unix(1700000000, 0)
	u := func(n uint64) *uint64 { return &n }
	cpu := func(ns uint64) *statsv1alpha1.CPUStats {
		return &statsv1alpha1.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: u(ns)}
	}
	mem := func(b uint64) *statsv1alpha1.MemoryStats {
		return &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u(b)}
	}
	swap := func(used uint64, left *uint64) *statsv1alpha1.SwapStats {
		return &statsv1alpha1.SwapStats{Time: metav1.NewTime(at), SwapUsageBytes: u(used), SwapAvailableBytes: left}
	}
	tests := []struct {
		name string
		in   statsv1alpha1.Summary
		want string
	}{
		{name: "nothing sampled: resource_scrape_error alone", want: `# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`},
		{name: "node, pod and container", in: statsv1alpha1.Summary{
			Node: statsv1alpha1.NodeStats{NodeName: "n", CPU: cpu(1500e6), Memory: mem(2048), Swap: swap(4096, nil)},
			Pods: []statsv1alpha1.PodStats{{PodRef: statsv1alpha1.PodReference{Namespace: "default", Name: "web"}, CPU: cpu(2e9), Memory: mem(100), Swap: swap(10, nil),
				Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: metav1.NewTime(at.Add(-time.Minute)), CPU: cpu(1e9), Memory: mem(90), Swap: swap(10, u(30))}}}},
		}, want: `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1 1700000000000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 90 1700000000000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.69999994e+09 1699999940000
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{container="app",namespace="default",pod="web"} 40 1700000000000
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="default",pod="web"} 10 1700000000000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1.5 1700000000000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2048 1700000000000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 4096 1700000000000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1700000000000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 100 1700000000000
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{namespace="default",pod="web"} 10 1700000000000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteResourceMetrics(&b, tc.in); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

// metricsOnlyAccess allows token-user nodes/metrics on node-1 and nothing else.
type metricsOnlyAccess struct{}

func (metricsOnlyAccess) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	out := r.DeepCopy()
	ra := r.Spec.ResourceAttributes
	out.Status.Allowed = r.Spec.User == "token-user" && ra.Resource == "nodes" && ra.Subresource == "metrics" && ra.Name == "node-1" && ra.Verb == "get"
	return out, nil
}

// TestKubeletMetricsEndpoints: /metrics, /metrics/probes and /metrics/cadvisor are served
// with the kubelet's authorization (get nodes/metrics of the node): a client allowed that and
// nothing else reads them and no other endpoint; a path without a handler is not served.
func TestKubeletMetricsEndpoints(t *testing.T) {
	text := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) })
	}
	srv, err := New(Options{NodeName: "node-1", CertDir: filepath.Join(t.TempDir(), "pki"),
		Tokens: fakeTokens{&fakeReviews{}}, Access: metricsOnlyAccess{},
		Pods:    func() []v1.Pod { return nil },
		Summary: func() statsv1alpha1.Summary { return statsv1alpha1.Summary{} },
		Metrics: text("kubelet_node_name"), MetricsProbes: text("prober_probe_total"), MetricsCadvisor: text("container_cpu_usage_seconds_total")})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	for _, tc := range []struct {
		path, token string
		status      int
		body        string
	}{
		{"/metrics", "good", http.StatusOK, "kubelet_node_name"},
		{"/metrics/probes", "good", http.StatusOK, "prober_probe_total"},
		{"/metrics/cadvisor", "good", http.StatusOK, "container_cpu_usage_seconds_total"},
		{"/metrics/cadvisor", "", http.StatusUnauthorized, ""},
		{"/pods", "good", http.StatusForbidden, "subresource(s)=[pods proxy]"},
		{"/metrics/slis", "good", http.StatusNotFound, ""},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s (token %q): %d %q, want %d containing %q", tc.path, tc.token, rec.Code, rec.Body, tc.status, tc.body)
		}
	}
}
