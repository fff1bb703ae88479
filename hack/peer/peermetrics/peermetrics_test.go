package peermetrics

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

const kubeletText = `# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 2
# HELP kubelet_pod_worker_duration_seconds [ALPHA] Duration in seconds to sync a single pod.
# TYPE kubelet_pod_worker_duration_seconds histogram
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="0.005"} 1
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="+Inf"} 2
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 0.5
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 2
# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="memory.available"} 1
# HELP workqueue_depth [ALPHA] Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{name="a"} 0
`

const sliceletText = `# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods counter
kubelet_running_pods{node="x"} 2
# HELP kubelet_pod_worker_duration_seconds [ALPHA] Duration in seconds to sync a single pod.
# TYPE kubelet_pod_worker_duration_seconds histogram
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="0.01"} 1
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="+Inf"} 2
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 0.5
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 2
# HELP kubelet_evictions [BETA] Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="memory.available"} 1
# HELP slicelet_up Up.
# TYPE slicelet_up gauge
slicelet_up 1
`

func mustParse(t *testing.T, text string) map[string]Family {
	t.Helper()
	f, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParse(t *testing.T) {
	f := mustParse(t, kubeletText)
	h := f["kubelet_pod_worker_duration_seconds"]
	if h.Type != "histogram" || !slices.Equal(h.Labels, []string{"operation_type"}) || !slices.Equal(h.Buckets, []string{"0.005", "+Inf"}) || h.Series != 1 {
		t.Errorf("histogram %+v", h)
	}
	if g := f["kubelet_running_pods"]; g.Type != "gauge" || len(g.Labels) != 0 || g.Buckets != nil {
		t.Errorf("gauge %+v", g)
	}
	if _, err := Parse([]byte("# TYPE x gauge\nx{ 1\n")); err == nil {
		t.Error("a broken exposition parsed")
	}
}

func TestCompare(t *testing.T) {
	noticed := MixinNames([]byte(`expr: sum(rate(kubelet_pod_worker_duration_seconds_bucket[5m])) by (le) and kubelet_running_pods`),
		[]byte("    path: /metrics/slis\n"))
	k := map[string]Scrape{
		"/metrics":      {Status: 200, Families: mustParse(t, kubeletText)},
		"/metrics/slis": {Status: 200, Families: map[string]Family{}},
	}
	s := map[string]Scrape{
		"/metrics":      {Status: 200, Families: mustParse(t, sliceletText)},
		"/metrics/slis": {Status: 404},
	}
	var got []string
	for _, d := range Compare(k, s, noticed) {
		line := d.String()
		if d.Noticed {
			line += " ★"
		}
		got = append(got, line)
	}
	want := []string{
		"/metrics kubelet_evictions: help: kubelet [ALPHA] Cumulative number of pod evictions by eviction signal, slicelet [BETA] Cumulative number of pod evictions by eviction signal",
		"/metrics kubelet_pod_worker_duration_seconds: buckets: kubelet 0.005,+Inf, slicelet 0.01,+Inf ★",
		"/metrics kubelet_running_pods: type: kubelet gauge, slicelet counter ★",
		"/metrics kubelet_running_pods: labels: kubelet {}, slicelet {node} ★",
		"/metrics slicelet_up: slicelet only",
		"/metrics workqueue_depth: kubelet only",
		"/metrics/slis -: endpoint: kubelet 200, slicelet 404 ★",
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestExplain(t *testing.T) {
	diffs := []Difference{
		{Endpoint: "/metrics", Family: "workqueue_depth", What: KubeletOnly},
		{Endpoint: "/metrics", Family: "kubelet_volume_stats_used_bytes", What: KubeletOnly, Noticed: true},
		{Endpoint: "/metrics", Family: "kubelet_running_pods", What: KubeletOnly, Noticed: true},
	}
	divs := []Divergence{
		{Pattern: regexp.MustCompile(`^/metrics kubelet_volume_stats_`), Reason: "no PVCs", Noticed: true},
		{Pattern: regexp.MustCompile(`: kubelet only$`), Reason: "the kubelet's internals"},
	}
	explained, rest := Explain(diffs, divs)
	if len(explained["no PVCs"]) != 1 || len(explained["the kubelet's internals"]) != 1 {
		t.Errorf("explained %v", explained)
	}
	// A noticed difference is not explained by a divergence for unnoticed ones.
	if len(rest) != 1 || rest[0].Family != "kubelet_running_pods" {
		t.Errorf("rest %v", rest)
	}
}

func TestMarkdown(t *testing.T) {
	k := map[string]Scrape{"/metrics": {Status: 200, Families: mustParse(t, kubeletText)}, "/metrics/slis": {Status: 200}}
	s := map[string]Scrape{"/metrics": {Status: 200, Families: mustParse(t, sliceletText)}, "/metrics/slis": {Status: 404}}
	diffs := Compare(k, s, map[string]bool{"kubelet_running_pods": true})
	if !slices.ContainsFunc(diffs, func(d Difference) bool { return d.What == HelpDiffers && d.Family == "kubelet_evictions" }) {
		t.Errorf("no help difference in %v", diffs)
	}
	divs := []Divergence{{Pattern: regexp.MustCompile(`: (kubelet|slicelet) only$`), Reason: "internals"}}
	explained, open := Explain(diffs, divs)
	md := Markdown(Report{Date: "2026-11-29", Commit: "abc", Command: "make peer-metrics", Kubelet: k, Slicelet: s,
		Explained: explained, Reasons: []string{"internals"}, Open: open})
	for _, want := range []string{
		"2026-11-29, commit abc: `make peer-metrics`.",
		"| `/metrics` | 4 | 4 | 3 | 1 | 1 | 4 | 2 |",
		"| `/metrics/slis` | 0 | not served (404) | 0 | 0 | 0 | 0 | 0 |",
		"- internals\n  - `/metrics`: `slicelet_up`, `workqueue_depth`",
		"(type: kubelet `gauge`, slicelet `counter`) ★",
		"`kubelet_evictions` (help)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
