package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// PodSource is what the pod metrics read at scrape time: every pod slicelet knows, with its
// status (*pods.Controller).
type PodSource interface {
	Pods() []v1.Pod
}

// qosClasses and podPhases are every label value slicelet_pods always exports, so each series
// exists (at zero) from the first scrape on.
var (
	qosClasses = []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort}
	podPhases  = []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}
)

var (
	podsDesc = prometheus.NewDesc(Namespace+"_pods",
		"Pods slicelet knows, by QoS class and phase (admitted and rejected alike).",
		[]string{"qos", "phase"}, nil)
	podsRejectedDesc = prometheus.NewDesc(Namespace+"_pods_rejected",
		"Pods currently refused at admission (phase Failed with a reason, no container ever ran), by the kubelet's reason.",
		[]string{"reason"}, nil)
)

// qosPhase is one slicelet_pods series.
type qosPhase struct {
	qos   v1.PodQOSClass
	phase v1.PodPhase
}

// podCounts is what one scrape exports about pods.
type podCounts struct {
	byQOSPhase map[qosPhase]int
	rejected   map[string]int // by reason
}

// countPods counts pods by QoS class and phase, and the rejected ones by reason. A pod without
// a phase counts as Unknown. A pod is rejected when it is Failed with a reason and has no
// container status: the controller fails a pod it refuses at admission before any container
// exists, while a pod whose containers ran and failed has their statuses.
func countPods(pods []v1.Pod) podCounts {
	c := podCounts{byQOSPhase: map[qosPhase]int{}, rejected: map[string]int{}}
	for _, q := range qosClasses {
		for _, p := range podPhases {
			c.byQOSPhase[qosPhase{q, p}] = 0
		}
	}
	for i := range pods {
		st := &pods[i].Status
		phase := st.Phase
		if phase == "" {
			phase = v1.PodUnknown
		}
		c.byQOSPhase[qosPhase{st.QOSClass, phase}]++
		if phase == v1.PodFailed && st.Reason != "" && len(st.ContainerStatuses) == 0 &&
			len(st.InitContainerStatuses) == 0 && len(st.EphemeralContainerStatuses) == 0 {
			c.rejected[st.Reason]++
		}
	}
	return c
}

// podCollector exports slicelet_pods and slicelet_pods_rejected from the pod source at scrape
// time.
type podCollector struct{ src PodSource }

// Describe implements prometheus.Collector.
func (pc podCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- podsDesc
	ch <- podsRejectedDesc
}

// Collect implements prometheus.Collector.
func (pc podCollector) Collect(ch chan<- prometheus.Metric) {
	// The registry sorts what it gathers; map order does not matter here.
	c := countPods(pc.src.Pods())
	for k, n := range c.byQOSPhase {
		ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(n), string(k.qos), string(k.phase))
	}
	for reason, n := range c.rejected {
		ch <- prometheus.MustNewConstMetric(podsRejectedDesc, prometheus.GaugeValue, float64(n), reason)
	}
}
