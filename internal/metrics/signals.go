package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// signalObservations is the collector of the eviction signals' latest observations. The age is
// computed at scrape time, so a stalled eviction loop shows as a growing age rather than as a
// frozen, fresh-looking value.
type signalObservations struct {
	clock                          clock.PassiveClock
	availableBytes, available, age *prometheus.Desc

	mu   sync.Mutex
	last map[string]signalObservation
}

// signalObservation is one signal's latest reading.
type signalObservation struct {
	available int64
	at        time.Time
}

func (s *signalObservations) init(clk clock.PassiveClock) {
	s.clock = clk
	s.last = map[string]signalObservation{}
	s.availableBytes = prometheus.NewDesc(Namespace+"_eviction_signal_available_bytes",
		"Bytes available at the latest observation of a memory or filesystem eviction signal (memory.available, nodefs.available, ...).",
		[]string{"signal"}, nil)
	s.available = prometheus.NewDesc(Namespace+"_eviction_signal_available",
		"Inodes or process IDs available at the latest observation of a counting eviction signal (nodefs.inodesFree, imagefs.inodesFree, pid.available).",
		[]string{"signal"}, nil)
	s.age = prometheus.NewDesc(Namespace+"_eviction_signal_observation_age_seconds",
		"Seconds since the latest observation of an eviction signal.",
		[]string{"signal"}, nil)
}

func (s *signalObservations) set(signal string, available int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[signal] = signalObservation{available: available, at: at}
}

// countsItems reports whether signal counts inodes or process IDs rather than bytes: those go to
// a metric without the _bytes unit, since one metric must not mix units.
func countsItems(signal string) bool {
	return strings.HasSuffix(signal, ".inodesFree") || strings.HasPrefix(signal, "pid.")
}

// Describe implements prometheus.Collector.
func (s *signalObservations) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.availableBytes
	ch <- s.available
	ch <- s.age
}

// Collect implements prometheus.Collector.
func (s *signalObservations) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	last := maps.Clone(s.last)
	s.mu.Unlock()
	now := s.clock.Now()
	for _, signal := range slices.Sorted(maps.Keys(last)) {
		o := last[signal]
		desc := s.availableBytes
		if countsItems(signal) {
			desc = s.available
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(o.available), signal)
		// A reading from the future (clock stepped back) is fresh, not negative-aged.
		age := max(now.Sub(o.at), 0)
		ch <- prometheus.MustNewConstMetric(s.age, prometheus.GaugeValue, age.Seconds(), signal)
	}
}
