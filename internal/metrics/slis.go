package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicelet/slicelet/internal/health"
)

// The kubelet's /metrics/slis (k8s.io/component-base/metrics/prometheus/slis, installed by
// pkg/kubelet/server/server.go): each health check's last result and a count of results by
// status, fed when a health endpoint is asked, and process_start_time_seconds. kube-prometheus
// scrapes the path on every kubelet; a node without it is a target down.
const (
	healthcheckSuccess = "success"
	healthcheckError   = "error"
	// Health check types: the endpoint that evaluated the check.
	healthzType = "healthz"
	readyzType  = "readyz"
	// stable is component-base's prefix of a STABLE metric's help.
	stable = "[STABLE] "
)

// healthchecks are kubernetes_healthcheck and kubernetes_healthchecks_total.
type healthchecks struct {
	last  *prometheus.GaugeVec
	total *prometheus.CounterVec
}

// newHealthchecks returns the health check families, registered in reg.
func newHealthchecks(reg prometheus.Registerer) *healthchecks {
	h := &healthchecks{
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubernetes", Name: "healthcheck",
			Help: stable + "This metric records the result of a single healthcheck."}, []string{"name", "type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubernetes", Name: "healthchecks_total",
			Help: stable + "This metric records the results of all healthcheck."}, []string{"name", "type", "status"}),
	}
	reg.MustRegister(h.last, h.total)
	return h
}

// startTimeRegistry holds process_start_time_seconds as component-base registers it beside
// /metrics/probes' and /metrics/slis' families (RegisterProcessStartTime); empty when started
// is zero.
func startTimeRegistry(started time.Time) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	if !started.IsZero() {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "process_start_time_seconds",
			Help: alpha + "Start time of the process since unix epoch in seconds."},
			func() float64 { return float64(started.UnixNano()) / 1e9 }))
	}
	return reg
}

// observer records the checks of one endpoint type.
func (h *healthchecks) observer(kind string) health.Observer {
	return func(check string, ok bool) {
		status, v := healthcheckSuccess, 1.0
		if !ok {
			status, v = healthcheckError, 0
		}
		h.last.WithLabelValues(check, kind).Set(v)
		h.total.WithLabelValues(check, kind, status).Inc()
	}
}

// HealthHandler answers /healthz (or, with ready, /readyz) from the health tracker
// (health.ObservedHandler), each check's result recorded on /metrics/slis.
func (m *Metrics) HealthHandler(ready bool) http.Handler {
	kind := healthzType
	if ready {
		kind = readyzType
	}
	return health.ObservedHandler(m.health, ready, m.healthchecks.observer(kind))
}
