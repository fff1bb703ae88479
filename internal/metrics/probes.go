package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProbeResults are the kubelet's prober families (pkg/kubelet/prober/prober_manager.go):
// prober_probe_total, cumulative container probe results by probe_type (Liveness, Readiness,
// Startup), result (successful, failed, unknown), container, pod, namespace and pod_uid, and
// prober_probe_duration_seconds, the duration of the probes whose result is successful or
// unknown (the kubelet times no failure) by probe_type, container, pod and namespace. Like
// SystemdOperations they exist on their own, built before the pod worker that feeds them and
// registered by New.
type ProbeResults struct {
	c *prometheus.CounterVec
	d *prometheus.HistogramVec
}

// NewProbeResults returns the families, not registered yet.
func NewProbeResults() *ProbeResults {
	return &ProbeResults{
		c: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: beta + "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		// No classic buckets: a native histogram with component-base's options
		// (k8s.io/component-base/metrics/internal NativeHistogramConfig), as the kubelet v1.37
		// serves it (the text format shows its +Inf bucket alone).
		d: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help:                        alpha + "Duration in seconds for a probe response.",
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160,
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
}

// ProbeResult counts one probe result that took d (worker.ProbeMetrics).
func (p *ProbeResults) ProbeResult(probeType, result, container, pod, namespace, podUID string, d time.Duration) {
	if p == nil {
		return
	}
	p.c.WithLabelValues(probeType, result, container, pod, namespace, podUID).Inc()
	if result != probeFailed {
		p.d.WithLabelValues(probeType, container, pod, namespace).Observe(d.Seconds())
	}
}

// probeFailed is prober_probe_total's result of a failed probe.
const probeFailed = "failed"

func (p *ProbeResults) collectors() []prometheus.Collector { return []prometheus.Collector{p.c, p.d} }
