// Package metrics is slicelet's Prometheus endpoint: one registry with the daemon's metrics,
// typed methods the other packages call (they depend on a small interface of their own, never
// on prometheus), collectors that read the pod controller at scrape time, and the HTTP server
// for /metrics and /healthz on a TCP address or a unix socket.
//
// Names follow the Prometheus conventions: the slicelet_ prefix, base units in the name
// (_seconds, _bytes), _total on counters. Label values that name Kubernetes things keep the
// Kubernetes spelling (qos="BestEffort", phase="Running", reason="OutOfcpu").
package metrics

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
	// Now is the clock for the age of signal observations; time.Now when nil.
	Now func() time.Time
	// NoRuntimeCollectors leaves out the Go and process collectors (tests that compare the whole
	// registry; their values change on every scrape).
	NoRuntimeCollectors bool
}

// Metrics holds slicelet's registry and its metrics. Its methods are safe for concurrent use and
// do nothing on a nil *Metrics, so a component can be built without metrics.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	systemdOps          *prometheus.HistogramVec
	admissionRejections *prometheus.CounterVec
	evictions           *prometheus.CounterVec
	gcRuns              *prometheus.CounterVec
	gcFreed             *prometheus.CounterVec
	gcRemoved           *prometheus.CounterVec
	nodeCondition       *prometheus.GaugeVec

	pods    atomic.Pointer[podSourceBox]
	signals signalObservations
}

// podSourceBox lets an interface value live in an atomic.Pointer.
type podSourceBox struct{ src PodSource }

// New builds the registry with every slicelet metric, slicelet_build_info, and (unless
// opts.NoRuntimeCollectors) the standard Go and process collectors. Pods are collected once
// SetPodSource was called.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		now: opts.Now,
		systemdOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "systemd", Name: "operation_duration_seconds",
			Help:    "Duration of systemd operations over D-Bus (start and stop include waiting for the job), by operation and result.",
			Buckets: systemdBuckets,
		}, []string{"operation", "result"}),
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
		nodeCondition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "node_condition",
			Help: "Node conditions (MemoryPressure, DiskPressure, PIDPressure): 1 when the condition is true, 0 when false.",
		}, []string{"condition"}),
	}
	m.signals.init(opts.Now)
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
	m.reg.MustRegister(m.systemdOps, m.admissionRejections, m.evictions, m.gcRuns, m.gcFreed,
		m.gcRemoved, m.nodeCondition, buildInfo, &m.signals, podCollector{m})
	if !opts.NoRuntimeCollectors {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry is the registry holding every metric, for the HTTP handler and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveSystemd records one systemd operation (units.ObserveFunc's op, units.ResultOf of its
// error, its duration) in slicelet_systemd_operation_duration_seconds.
func (m *Metrics) ObserveSystemd(op, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.systemdOps.WithLabelValues(op, result).Observe(d.Seconds())
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

// SetNodeCondition sets a node condition (MemoryPressure, DiskPressure, PIDPressure) to true
// or false.
func (m *Metrics) SetNodeCondition(condition string, on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.nodeCondition.WithLabelValues(condition).Set(v)
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

// SetPodSource makes every scrape count the pods src knows (the pod controller). Until it is
// called, no pod metrics are exported.
func (m *Metrics) SetPodSource(src PodSource) {
	if m == nil {
		return
	}
	m.pods.Store(&podSourceBox{src})
}

// podSource returns the current pod source, nil when none was set.
func (m *Metrics) podSource() PodSource {
	if b := m.pods.Load(); b != nil {
		return b.src
	}
	return nil
}
