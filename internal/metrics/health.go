package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicelet/slicelet/internal/health"
)

var (
	healthStatusDesc = prometheus.NewDesc(Namespace+"_health_status",
		"State of each part of slicelet the health tracker follows (systemd connection, eviction loop, garbage collection, ...): 1 for the current status (Healthy, Unhealthy, Unknown), 0 for the others.",
		[]string{"warnable", "severity", "status"}, nil)
	healthTransitionsDesc = prometheus.NewDesc(Namespace+"_health_transitions_total",
		"Changes between healthy and unhealthy of each part of slicelet the health tracker follows.",
		[]string{"warnable"}, nil)
	healthSinceDesc = prometheus.NewDesc(Namespace+"_health_last_transition_timestamp_seconds",
		"Unix time of the last status change of each part of slicelet the health tracker follows.",
		[]string{"warnable"}, nil)
	nodeConditionDesc = prometheus.NewDesc(Namespace+"_node_condition",
		"Node conditions slicelet reports (MemoryPressure, DiskPressure, PIDPressure, ImageGCFailing, ContainerGCFailing): 1 when the condition is true, 0 when false; absent while unknown.",
		[]string{"condition"}, nil)
)

var healthStatuses = []health.Status{health.StatusHealthy, health.StatusUnhealthy, health.StatusUnknown}

// healthCollector exports the health tracker's state at scrape time.
type healthCollector struct{ t *health.Tracker }

// Describe implements prometheus.Collector.
func (h healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- healthStatusDesc
	ch <- healthTransitionsDesc
	ch <- healthSinceDesc
	ch <- nodeConditionDesc
}

// Collect implements prometheus.Collector.
func (h healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ws := range h.t.State().Warnables {
		for _, st := range healthStatuses {
			v := 0.0
			if ws.Status == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(healthStatusDesc, prometheus.GaugeValue, v, ws.Code, string(ws.Severity), string(st))
		}
		ch <- prometheus.MustNewConstMetric(healthTransitionsDesc, prometheus.CounterValue, float64(ws.Transitions), ws.Code)
		if !ws.Since.IsZero() {
			ch <- prometheus.MustNewConstMetric(healthSinceDesc, prometheus.GaugeValue, float64(ws.Since.UnixNano())/1e9, ws.Code)
		}
		if ws.Condition != "" && ws.Status != health.StatusUnknown {
			v := 0.0
			if ws.Status == health.StatusUnhealthy {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(nodeConditionDesc, prometheus.GaugeValue, v, ws.Condition)
		}
	}
}
