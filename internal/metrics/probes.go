package metrics

import "github.com/prometheus/client_golang/prometheus"

// ProbeResults is the kubelet's prober_probe_total (pkg/kubelet/prober/prober_manager.go
// ProberResults): cumulative container probe results by probe_type (Liveness, Readiness,
// Startup), result (successful, failed, unknown), container, pod, namespace and pod_uid. Like
// SystemdOperations it exists on its own, built before the pod worker that feeds it and
// registered by New.
type ProbeResults struct{ c *prometheus.CounterVec }

// NewProbeResults returns the counter, not registered yet.
func NewProbeResults() *ProbeResults {
	return &ProbeResults{c: prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober", Name: "probe_total",
		Help: alpha + "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})}
}

// ProbeResult counts one probe result (worker.ProbeMetrics).
func (p *ProbeResults) ProbeResult(probeType, result, container, pod, namespace, podUID string) {
	if p == nil {
		return
	}
	p.c.WithLabelValues(probeType, result, container, pod, namespace, podUID).Inc()
}
