package kubeletserver

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// resourceMetric is one family of the kubelet's /metrics/resource
// (pkg/kubelet/metrics/collectors/resource_metrics.go): the names, help and types
// metrics-server reads (it scrapes this endpoint, not the summary, since v0.6).
type resourceMetric struct {
	name, help, kind string
	labels           []string // in the exposition's order (sorted)
}

var (
	nodeCPUMetric       = resourceMetric{"node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter", nil}
	nodeMemoryMetric    = resourceMetric{"node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge", nil}
	nodeSwapMetric      = resourceMetric{"node_swap_usage_bytes", "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", "gauge", nil}
	containerCPUMetric  = resourceMetric{"container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter", []string{"container", "namespace", "pod"}}
	containerMemMetric  = resourceMetric{"container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge", []string{"container", "namespace", "pod"}}
	containerSwapMetric = resourceMetric{"container_swap_usage_bytes", "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", "gauge", []string{"container", "namespace", "pod"}}
	containerSwapLimit  = resourceMetric{"container_swap_limit_bytes", "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", "gauge", []string{"container", "namespace", "pod"}}
	containerStartTime  = resourceMetric{"container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge", []string{"container", "namespace", "pod"}}
	podCPUMetric        = resourceMetric{"pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter", []string{"namespace", "pod"}}
	podMemoryMetric     = resourceMetric{"pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge", []string{"namespace", "pod"}}
	podSwapMetric       = resourceMetric{"pod_swap_usage_bytes", "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", "gauge", []string{"namespace", "pod"}}
	scrapeErrorMetric   = resourceMetric{"resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge", nil}
	resourceMetricOrder = []resourceMetric{containerCPUMetric, containerMemMetric, containerStartTime, containerSwapLimit, containerSwapMetric,
		nodeCPUMetric, nodeMemoryMetric, nodeSwapMetric, podCPUMetric, podMemoryMetric, podSwapMetric, scrapeErrorMetric}
)

// sample is one line of a family: label values in the family's order, the value, and the
// time it was read (zero: none written).
type sample struct {
	labels []string
	value  float64
	at     time.Time
}

// labelEscaper escapes a label value for the text exposition format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// WriteResourceMetrics writes the kubelet's /metrics/resource made of a stats summary, in the
// Prometheus text exposition format (version 0.0.4) with each sample's time, as the kubelet's
// collector does: CPU in core-seconds (cumulative), working set and swap in bytes (a
// container's swap limit: what is left of it plus what it uses), the containers' start times,
// and resource_scrape_error 0 (the kubelet v1.37 hides the deprecated scrape_error).
func WriteResourceMetrics(w io.Writer, s statsv1alpha1.Summary) error {
	families := map[string][]sample{}
	add := func(m resourceMetric, v float64, at time.Time, labels ...string) {
		families[m.name] = append(families[m.name], sample{labels: labels, value: v, at: at})
	}
	if c := s.Node.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
		add(nodeCPUMetric, float64(*c.UsageCoreNanoSeconds)/1e9, c.Time.Time)
	}
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		add(nodeMemoryMetric, float64(*m.WorkingSetBytes), m.Time.Time)
	}
	if sw := s.Node.Swap; sw != nil && sw.SwapUsageBytes != nil {
		add(nodeSwapMetric, float64(*sw.SwapUsageBytes), sw.Time.Time)
	}
	for _, p := range s.Pods {
		ns, pod := p.PodRef.Namespace, p.PodRef.Name
		if c := p.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
			add(podCPUMetric, float64(*c.UsageCoreNanoSeconds)/1e9, c.Time.Time, ns, pod)
		}
		if m := p.Memory; m != nil && m.WorkingSetBytes != nil {
			add(podMemoryMetric, float64(*m.WorkingSetBytes), m.Time.Time, ns, pod)
		}
		if sw := p.Swap; sw != nil && sw.SwapUsageBytes != nil {
			add(podSwapMetric, float64(*sw.SwapUsageBytes), sw.Time.Time, ns, pod)
		}
		for _, c := range p.Containers {
			if !c.StartTime.IsZero() {
				add(containerStartTime, float64(c.StartTime.UnixNano())/1e9, c.StartTime.Time, c.Name, ns, pod)
			}
			if u := c.CPU; u != nil && u.UsageCoreNanoSeconds != nil {
				add(containerCPUMetric, float64(*u.UsageCoreNanoSeconds)/1e9, u.Time.Time, c.Name, ns, pod)
			}
			if m := c.Memory; m != nil && m.WorkingSetBytes != nil {
				add(containerMemMetric, float64(*m.WorkingSetBytes), m.Time.Time, c.Name, ns, pod)
			}
			if sw := c.Swap; sw != nil {
				var used float64
				if sw.SwapUsageBytes != nil {
					used = float64(*sw.SwapUsageBytes)
					add(containerSwapMetric, used, sw.Time.Time, c.Name, ns, pod)
				}
				if sw.SwapAvailableBytes != nil {
					add(containerSwapLimit, float64(*sw.SwapAvailableBytes)+used, sw.Time.Time, c.Name, ns, pod)
				}
			}
		}
	}
	add(scrapeErrorMetric, 0, time.Time{})
	var b strings.Builder
	for _, m := range resourceMetricOrder {
		samples := families[m.name]
		if len(samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for _, smp := range samples {
			b.WriteString(m.name)
			if len(m.labels) > 0 {
				b.WriteByte('{')
				for i, l := range m.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `%s="%s"`, l, labelEscaper.Replace(smp.labels[i]))
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(smp.value, 'g', -1, 64))
			if !smp.at.IsZero() {
				b.WriteByte(' ')
				b.WriteString(strconv.FormatInt(smp.at.UnixMilli(), 10))
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
