// Package metrics is slicelet's Prometheus endpoint: one registry with the daemon's metrics,
// typed methods the other packages call (they depend on a small interface of their own, never
// on prometheus), collectors that read the pod controller and the health tracker at scrape
// time, and the HTTP server for /metrics, /healthz and /readyz on a TCP address or a unix
// socket.
//
// Names follow the Prometheus conventions: the slicelet_ prefix, base units in the name
// (_seconds, _bytes), _total on counters. Label values that name Kubernetes things keep the
// Kubernetes spelling (qos="BestEffort", phase="Running", reason="OutOfcpu").
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/health"
)

// Namespace prefixes every slicelet metric.
const Namespace = "slicelet"

// GC kinds, the kind label of the slicelet_gc_* metrics.
const (
	GCKindImages     = "images"
	GCKindContainers = "containers"
)

// Results, the result label of slicelet_gc_runs_total.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// systemdBuckets spans a D-Bus call on an idle systemd (≈0.5 ms) to a start job waiting out the
// default job timeout (30 s): systemd under load can take seconds for a millisecond job.
var systemdBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Options configure New. The zero value is usable.
type Options struct {
	// Version is the slicelet version for slicelet_build_info (buildinfo.Version); "unknown"
	// when empty.
	Version string
	// Clock is the clock for the age of signal observations; clock.RealClock when nil.
	Clock clock.PassiveClock
	// Systemd is slicelet_systemd_operation_duration_seconds, built before the systemd
	// connection whose observer feeds it (NewSystemdOperations); a new one when nil.
	Systemd *SystemdOperations
	// Probes is prober_probe_total, built before the pod worker that feeds it
	// (NewProbeResults); nil exports no probe series.
	Probes *ProbeResults
	// Pods is read at every scrape for slicelet_pods and slicelet_pods_rejected (the pod
	// controller); nil exports no pod series.
	Pods PodSource
	// Health is read at every scrape for slicelet_health*, slicelet_node_condition, and by
	// /healthz and /readyz; nil exports no health series and answers both with "ok".
	Health *health.Tracker
	// Kubelet are the kubelet's own families (kubelet_*, rest_client_*), built before the
	// components that feed them (NewKubeletFamilies); nil exports none of them.
	Kubelet *KubeletFamilies
	// Cadvisor is read at every scrape of /metrics/cadvisor; nil serves no such path.
	Cadvisor CadvisorSource
	// CadvisorPressure adds cAdvisor's pressure stall families to /metrics/cadvisor
	// (container_pressure_*): true where the kernel accounts PSI per cgroup
	// (eviction.PSIAvailable, the kubelet's IsPsiEnabled).
	CadvisorPressure bool
	// Started is when the process started (/metrics/slis's process_start_time_seconds); zero
	// leaves it out.
	Started time.Time
	// NoRuntimeCollectors leaves out the Go and process collectors (tests that compare the whole
	// registry; their values change on every scrape).
	NoRuntimeCollectors bool
}

// Metrics holds slicelet's registry and its metrics. Its methods are safe for concurrent use and
// do nothing on a nil *Metrics, so a component can be built without metrics.
type Metrics struct {
	reg    *prometheus.Registry
	health *health.Tracker
	// probes holds the prober's families (on the local /metrics too) and cadvisor
	// /metrics/cadvisor (nil when there is no source).
	probes, cadvisor *prometheus.Registry
	// probesEndpoint is /metrics/probes: probes and process_start_time_seconds; slis is
	// /metrics/slis: the health checks HealthHandler feeds and process_start_time_seconds.
	probesEndpoint, slis prometheus.Gatherer
	healthchecks         *healthchecks
	kubelet              *KubeletFamilies

	systemdOps          *SystemdOperations
	admissionRejections *prometheus.CounterVec
	evictions           *prometheus.CounterVec
	gcRuns              *prometheus.CounterVec
	gcFreed             *prometheus.CounterVec
	gcRemoved           *prometheus.CounterVec

	signals signalObservations
}

// SystemdOperations is slicelet_systemd_operation_duration_seconds. It exists on its own so
// that it can be built before the systemd connection (its observer feeds it from the first
// operation on) and registered by New with everything else.
type SystemdOperations struct{ h *prometheus.HistogramVec }

// NewSystemdOperations returns the histogram, not registered yet.
func NewSystemdOperations() *SystemdOperations {
	return &SystemdOperations{h: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "systemd", Name: "operation_duration_seconds",
		Help:    "Duration of systemd operations over D-Bus (start and stop include waiting for the job), by operation and result.",
		Buckets: systemdBuckets,
	}, []string{"operation", "result"})}
}

// Observe records one systemd operation (units.ObserveFunc's op, units.ResultOf of its error,
// its duration).
func (s *SystemdOperations) Observe(op, result string, d time.Duration) {
	if s == nil {
		return
	}
	s.h.WithLabelValues(op, result).Observe(d.Seconds())
}

// New builds the registry with every slicelet metric, slicelet_build_info, the collectors of
// opts.Pods and opts.Health, and (unless opts.NoRuntimeCollectors) the standard Go and process
// collectors.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Systemd == nil {
		opts.Systemd = NewSystemdOperations()
	}
	m := &Metrics{
		reg:        prometheus.NewRegistry(),
		probes:     prometheus.NewRegistry(),
		kubelet:    opts.Kubelet,
		health:     opts.Health,
		systemdOps: opts.Systemd,
		admissionRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "admission", Name: "rejections_total",
			Help: "Pods refused at admission, by the kubelet's reason (OutOfcpu, OutOfmemory, OutOfpods, Evicted, ...).",
		}, []string{"reason"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "evictions_total",
			Help: "Pods evicted by the eviction manager, by the signal under pressure (memory.available, nodefs.available, ...).",
		}, []string{"signal"}),
		gcRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "gc", Name: "runs_total",
			Help: "Garbage collection runs, by kind (images, containers) and result (success, error).",
		}, []string{"kind", "result"}),
		gcFreed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "gc", Name: "freed_bytes_total",
			Help: "Bytes freed by garbage collection, by kind (images, containers).",
		}, []string{"kind"}),
		gcRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "gc", Name: "removed_total",
			Help: "Images or dead containers removed by garbage collection, by kind (images, containers).",
		}, []string{"kind"}),
	}
	m.signals.init(opts.Clock)
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels carry the slicelet version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": opts.Version, "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	// The kinds are fixed: start their series at zero so rate() and increase() see the first run.
	for _, kind := range []string{GCKindImages, GCKindContainers} {
		m.gcRuns.WithLabelValues(kind, ResultSuccess)
		m.gcRuns.WithLabelValues(kind, ResultError)
		m.gcFreed.WithLabelValues(kind)
		m.gcRemoved.WithLabelValues(kind)
	}
	m.reg.MustRegister(m.systemdOps.h, m.admissionRejections, m.evictions, m.gcRuns, m.gcFreed,
		m.gcRemoved, buildInfo, &m.signals)
	if opts.Probes != nil {
		m.probes.MustRegister(opts.Probes.collectors()...)
	}
	if opts.Kubelet != nil {
		m.reg.MustRegister(opts.Kubelet.collectors()...)
	}
	if opts.Pods != nil {
		m.reg.MustRegister(podCollector{opts.Pods})
		if opts.Kubelet != nil {
			m.reg.MustRegister(runningCollector{opts.Pods})
		}
	}
	if opts.Cadvisor != nil {
		m.cadvisor = NewCadvisorRegistry(opts.Cadvisor, opts.CadvisorPressure)
	}
	started, slis := startTimeRegistry(opts.Started), prometheus.NewRegistry()
	m.healthchecks = newHealthchecks(slis)
	m.probesEndpoint, m.slis = prometheus.Gatherers{m.probes, started}, prometheus.Gatherers{slis, started}
	if opts.Health != nil {
		m.reg.MustRegister(healthCollector{opts.Health})
	}
	if !opts.NoRuntimeCollectors {
		// The Go runtime's every metric, as the kubelet registers its Go collector
		// (k8s.io/component-base/metrics/legacyregistry).
		m.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry is the registry holding every metric of /metrics but prober_probe_total, for the
// HTTP handlers and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Gatherer is everything the local /metrics serves: the registry and prober_probe_total.
func (m *Metrics) Gatherer() prometheus.Gatherer { return prometheus.Gatherers{m.reg, m.probes} }

// Kubelet is the kubelet's families (nil when built without them).
func (m *Metrics) Kubelet() *KubeletFamilies {
	if m == nil {
		return nil
	}
	return m.kubelet
}

// ObserveSystemd records one systemd operation (units.ObserveFunc's op, units.ResultOf of its
// error, its duration) in slicelet_systemd_operation_duration_seconds.
func (m *Metrics) ObserveSystemd(op, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.systemdOps.Observe(op, result, d)
}

// AdmissionRejected counts one pod refused at admission with the kubelet's reason.
func (m *Metrics) AdmissionRejected(reason string) {
	if m == nil {
		return
	}
	m.admissionRejections.WithLabelValues(reason).Inc()
}

// Evicted counts one pod evicted because of signal (memory.available, nodefs.available, ...).
func (m *Metrics) Evicted(signal string) {
	if m == nil {
		return
	}
	m.evictions.WithLabelValues(signal).Inc()
	if m.kubelet != nil {
		m.kubelet.evictions.WithLabelValues(signal).Inc()
	}
}

// GCRun records one garbage collection run of kind (GCKindImages, GCKindContainers) with result
// (ResultSuccess, ResultError) that freed freedBytes and removed removed items. A failed run can
// still have freed something before it failed.
func (m *Metrics) GCRun(kind, result string, freedBytes uint64, removed int) {
	if m == nil {
		return
	}
	m.gcRuns.WithLabelValues(kind, result).Inc()
	m.gcFreed.WithLabelValues(kind).Add(float64(freedBytes))
	if removed > 0 {
		m.gcRemoved.WithLabelValues(kind).Add(float64(removed))
	}
}

// SetSignalObservation records the latest observation of an eviction signal: available is the
// amount left (bytes for memory and filesystem signals, inodes for *.inodesFree, process IDs for
// pid.available) and observedAt when it was read. Its age is computed at scrape time.
func (m *Metrics) SetSignalObservation(signal string, available int64, observedAt time.Time) {
	if m == nil {
		return
	}
	m.signals.set(signal, available, observedAt)
}
