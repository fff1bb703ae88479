package main

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want summary
	}{
		{"none", nil, summary{}},
		{"one", []float64{5}, summary{n: 1, median: 5, min: 5, max: 5}},
		{"odd count, unsorted", []float64{9, 1, 5, 7, 3}, summary{n: 5, median: 5, min: 1, max: 9}},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, summary{n: 4, median: 2.5, min: 1, max: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.in); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRowsVerdict(t *testing.T) {
	var r results
	for _, v := range []float64{100, 110, 90} {
		r.add("one", peerrun.Kubelet, v)
	}
	for _, v := range []float64{40, 50, 60} {
		r.add("one", peerrun.Slicelet, v)
	}
	for _, v := range []float64{30, 30, 30} {
		r.add("rss", peerrun.Kubelet, v)
		r.add("rss", peerrun.Slicelet, v/2)
	}
	got := map[string]row{}
	for _, rw := range rows(r, metrics) {
		got[rw.m.key] = rw
	}
	for _, tc := range []struct {
		name, key, verdict string
		ratio              float64
	}{
		{"ratio under the target", "one", "met", 0.5},
		{"ratio over the target", "rss", "**not met**", 0.5},
		{"no samples", "evict-kill", "not measured", 0},
		{"no target", "start", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := got[tc.key]
			if rw.verdict() != tc.verdict || rw.ratio != tc.ratio {
				t.Fatalf("verdict %q ratio %v, want %q %v", rw.verdict(), rw.ratio, tc.verdict, tc.ratio)
			}
		})
	}
	if tb := table(rows(r, metrics)); !strings.Contains(tb, "| manifest → Running, one pod | ms | 100 (90.0–110, n=3) | 50.0 (40.0–60.0, n=3) | 0.500× | ≤ 0.8× | met |") {
		t.Fatalf("table:\n%s", tb)
	}
}

func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name    string
		only    string
		want    selection
		wantErr string
	}{
		{name: "image GC alone", only: "imagegc", want: selection{imageGC: true}},
		{name: "two of four", only: "latency, eviction", want: selection{latency: true, eviction: true}},
		{name: "cluster alone", only: "cluster", want: selection{cluster: true}},
		{name: "density at -density-pods", only: "density", want: selection{density: true}},
		{name: "density at 1000 pods, slicelet alone", only: "density1000", want: selection{density: true, densityPods: 1000, sliceletAlone: true}},
		{name: "idle footprint alone", only: "idle", want: selection{idle: true}},
		{name: "unknown scenario", only: "imagegc,gc", wantErr: `unknown scenario "gc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scenarios(tc.only)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseAgents(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []peerrun.Kind
		wantErr  bool
	}{
		{name: "both", in: "kubelet,slicelet", want: []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet}},
		{name: "slicelet alone, spaces", in: " slicelet ", want: []peerrun.Kind{peerrun.Slicelet}},
		{name: "repeated once", in: "slicelet,slicelet", want: []peerrun.Kind{peerrun.Slicelet}},
		{name: "unknown", in: "kubelet,crio", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAgents(tc.in)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v %v, want %v (error %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100 … 1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []float64
		q    float64
		want float64
	}{
		{"none", nil, 0.99, 0},
		{"one sample is every percentile", []float64{7}, 0.99, 7},
		{"p50 of four: the second (nearest rank, no mean)", []float64{4, 1, 3, 2}, 0.5, 2},
		{"p99 of twenty: the largest", []float64{5, 1, 9, 2, 3, 4, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 0.99, 20},
		{"p99 of a hundred: the 99th", hundred, 0.99, 99},
		{"p90 of a hundred", hundred, 0.9, 90},
		{"p100", []float64{3, 1, 2}, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.in, tc.q); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLimitVerdict(t *testing.T) {
	slo := metric{key: "x", limit: 5000, quantile: 0.99, targetText: "≤ 5000 ms (SLO)"}
	for _, tc := range []struct {
		name               string
		kubelet, slicelet  []float64
		verdict, ratioText string
	}{
		{name: "both within", kubelet: []float64{100, 4000}, slicelet: []float64{90, 300}, verdict: "met", ratioText: "0.075×"},
		{name: "the kubelet over", kubelet: []float64{100, 6000}, slicelet: []float64{90, 300}, verdict: "**not met**", ratioText: "0.050×"},
		{name: "slicelet alone, within", slicelet: []float64{90, 4999}, verdict: "met", ratioText: "—"},
		{name: "slicelet alone, over", slicelet: []float64{90, 5001}, verdict: "**not met**", ratioText: "—"},
		{name: "nothing", verdict: "not measured", ratioText: "—"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r results
			for _, v := range tc.kubelet {
				r.add("x", peerrun.Kubelet, v)
			}
			for _, v := range tc.slicelet {
				r.add("x", peerrun.Slicelet, v)
			}
			rw := rows(r, []metric{slo})[0]
			if rw.verdict() != tc.verdict {
				t.Fatalf("verdict %q, want %q", rw.verdict(), tc.verdict)
			}
			if tb := table([]row{rw}); !strings.Contains(tb, "| "+tc.ratioText+" | ≤ 5000 ms (SLO) | "+tc.verdict+" |") {
				t.Fatalf("table:\n%s", tb)
			}
		})
	}
}

func TestStartedInAPI(t *testing.T) {
	two := []v1.Container{{Name: "a"}, {Name: "b"}}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	exited := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	for _, tc := range []struct {
		name     string
		statuses []v1.ContainerStatus
		want     bool
	}{
		{"no status yet", nil, false},
		{"one of two reported", []v1.ContainerStatus{{Name: "a", State: running}}, false},
		{"both running, not ready: started all the same", []v1.ContainerStatus{{Name: "a", State: running}, {Name: "b", State: running}}, true},
		{"one ran and ended, one running", []v1.ContainerStatus{{Name: "a", State: exited}, {Name: "b", State: running}}, true},
		{"one still creating", []v1.ContainerStatus{{Name: "a", State: running}, {Name: "b", State: waiting}}, false},
		{"waiting to restart after it ran", []v1.ContainerStatus{{Name: "a", State: running}, {Name: "b", State: waiting, LastTerminationState: exited}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{Spec: v1.PodSpec{Containers: two}, Status: v1.PodStatus{ContainerStatuses: tc.statuses}}
			if got := startedInAPI(p); got != tc.want {
				t.Fatalf("got %t, want %t", got, tc.want)
			}
		})
	}
}
