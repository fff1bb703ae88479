package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// metric is one figure of the benchmark.
type metric struct {
	// key names it in results.json.
	key string
	// title is its row in the table; unit its unit.
	title, unit string
	// target is the highest slicelet/kubelet ratio the issue asks for; 0 for none.
	target float64
	// targetText is how the target is written.
	targetText string
	// quantile, when set, makes the figure that quantile of all samples (nearest rank, as
	// the e2e framework's latency percentiles) instead of the median.
	quantile float64
	// limit is the highest figure the row allows each measured agent, in unit (an SLO rather
	// than a ratio); 0 for none. targetText then says it.
	limit float64
}

// metrics are the rows of the table, in order.
var metrics = []metric{
	{key: "one", title: "manifest → Running, one pod", unit: "ms", target: 0.8, targetText: "≤ 0.8×"},
	{key: "thirty", title: "manifest → Running, 30 pods at once (the last)", unit: "ms", target: 0.8, targetText: "≤ 0.8×"},
	{key: "start", title: "agent start → 110 pods Running (the last)", unit: "ms"},
	{key: "rss", title: "RSS with 110 pods, idle", unit: "MiB", target: 1.0 / 3, targetText: "≤ 1/3"},
	{key: "cpu", title: "idle CPU with 110 pods", unit: "% of a core", target: 0.25, targetText: "≤ 1/4"},
	{key: "imagegc", title: "image GC: agent start → 10 unused images removed", unit: "ms"},
	{key: "imagegc-removed", title: "image GC: images removed (11 unused: the set and the test image, also named as the sandbox image)", unit: "image IDs"},
	{key: "imagegc-freed", title: "image GC: space of the removed images (CRI sizes)", unit: "MiB"},
	{key: "evict-cross", title: "eviction: hog start → threshold crossed", unit: "ms"},
	{key: "evict-kill", title: "eviction: threshold crossed → victim killed", unit: "ms", target: 1.0 / 20, targetText: "≤ 1/20"},
	{key: "evict-gone", title: "eviction: victim killed → pod gone", unit: "ms"},
}

// idleMetrics are the rows of the idle scenario's table (-only idle), in order.
var idleMetrics = []metric{
	{key: "start", title: "agent start → 110 pods Running (the last)", unit: "ms"},
	{key: "rss", title: "RSS with 110 pods, idle", unit: "MiB", target: 1.0 / 3, targetText: "≤ 1/3"},
	{key: "rss-anon", title: "RSS with 110 pods, idle: anonymous", unit: "MiB"},
	{key: "rss-file", title: "RSS with 110 pods, idle: file-backed", unit: "MiB"},
	{key: "cpu", title: "idle CPU with 110 pods", unit: "% of a core", target: 0.25, targetText: "≤ 1/4"},
}

// baselineKind keys the samples of -baseline's slicelet binary.
const baselineKind peerrun.Kind = "slicelet-baseline"

// clusterMetrics are the rows of the cluster-mode table (docs/cluster.md), in order.
var clusterMetrics = []metric{
	{key: "cluster-one", title: "pod created through the API → Running in the API, one pod", unit: "ms", target: 0.8, targetText: "≤ 0.8×"},
	{key: "cluster-thirty", title: "pods created through the API → Running in the API, 30 at once (the last)", unit: "ms", target: 0.8, targetText: "≤ 0.8×"},
	{key: "cluster-lag", title: "container started (containerd's StartedAt) → Running in the API, one pod", unit: "ms"},
	{key: "cluster-ready", title: "agent start → Node Ready in the API", unit: "ms"},
	{key: "cluster-many", title: "110 pods created through the API at once → Running in the API (the last)", unit: "ms"},
	{key: "cluster-rss", title: "RSS with 110 API pods, idle", unit: "MiB", target: 1.0 / 3, targetText: "≤ 1/3"},
	{key: "cluster-cpu", title: "idle CPU with 110 API pods", unit: "% of a core", target: 0.25, targetText: "≤ 1/4"},
}

// results is what the inside half measured: samples by metric key and agent.
type results struct {
	Reps    int                                   `json:"reps"`
	Samples map[string]map[peerrun.Kind][]float64 `json:"samples"`
	// GCOthers are the images outside the image GC set that each agent removed in its image GC
	// rounds (the test image, the sandbox image).
	GCOthers map[peerrun.Kind][]string `json:"gcOthers,omitempty"`
	// Load is /proc/loadavg's three averages at the start of each cluster turn and at the end.
	Load []string `json:"load,omitempty"`
	// DensityLoad is the same for the density rounds.
	DensityLoad []string `json:"densityLoad,omitempty"`
	// Errors are the rounds that failed, as "<agent> round <n>: <error>".
	Errors []string `json:"errors,omitempty"`
}

func (r *results) add(key string, k peerrun.Kind, v float64) {
	if r.Samples == nil {
		r.Samples = map[string]map[peerrun.Kind][]float64{}
	}
	if r.Samples[key] == nil {
		r.Samples[key] = map[peerrun.Kind][]float64{}
	}
	r.Samples[key][k] = append(r.Samples[key][k], v)
}

// summary is the figure (the median, or a quantile) and the range of samples.
type summary struct {
	n                int
	median, min, max float64
}

// percentile is the nearest-rank q-quantile (0 < q ≤ 1) of xs: the smallest sample at least
// q of the samples do not exceed, as test/e2e/framework's latency percentiles take it
// (sorted[ceil(n·q)−1]); 0 for no samples.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(math.Ceil(float64(len(s))*q)) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// summarizeAt is summarize with the figure the q-quantile of xs when q is set.
func summarizeAt(xs []float64, q float64) summary {
	s := summarize(xs)
	if q > 0 && s.n > 0 {
		s.median = percentile(xs, q)
	}
	return s
}

// summarize returns the median (the mean of the middle two for an even count) and the range;
// n is 0 for no samples.
func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{}
	}
	s := slices.Sorted(slices.Values(xs))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{n: len(s), median: m, min: s[0], max: s[len(s)-1]}
}

// format writes a figure with a precision that suits its size.
func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func (s summary) String() string {
	if s.n == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s–%s, n=%d)", format(s.median), format(s.min), format(s.max), s.n)
}

// row is one line of the table, with the verdict on the target.
type row struct {
	m                 metric
	kubelet, slicelet summary
	ratio             float64 // slicelet/kubelet of the medians
	measured          bool    // both agents have samples and the kubelet's median is not 0
}

// verdict says whether the target is met.
func (r row) verdict() string {
	switch {
	case r.m.limit > 0:
		return r.limitVerdict()
	case r.m.target == 0:
		return ""
	case !r.measured:
		return "not measured"
	case r.ratio <= r.m.target:
		return "met"
	default:
		return "**not met**"
	}
}

// limitVerdict is met when every agent with samples is within the row's limit.
func (r row) limitVerdict() string {
	var measured []summary
	for _, s := range []summary{r.kubelet, r.slicelet} {
		if s.n > 0 {
			measured = append(measured, s)
		}
	}
	if len(measured) == 0 {
		return "not measured"
	}
	for _, s := range measured {
		if s.median > r.m.limit {
			return "**not met**"
		}
	}
	return "met"
}

// rows summarizes every metric of ms.
func rows(r results, ms []metric) []row {
	var out []row
	for _, m := range ms {
		rw := row{m: m, kubelet: summarizeAt(r.Samples[m.key][peerrun.Kubelet], m.quantile), slicelet: summarizeAt(r.Samples[m.key][peerrun.Slicelet], m.quantile)}
		if rw.kubelet.n > 0 && rw.slicelet.n > 0 && rw.kubelet.median > 0 {
			rw.ratio, rw.measured = rw.slicelet.median/rw.kubelet.median, true
		}
		out = append(out, rw)
	}
	return out
}

// table renders the rows as markdown.
func table(rs []row) string {
	var b strings.Builder
	b.WriteString("| figure | unit | kubelet median (range, n) | slicelet median (range, n) | slicelet/kubelet | target | |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		ratio := "—"
		if r.measured {
			ratio = fmt.Sprintf("%.3f×", r.ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.m.title, r.m.unit, r.kubelet, r.slicelet, ratio, r.m.targetText, r.verdict())
	}
	return b.String()
}
