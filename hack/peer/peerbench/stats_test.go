package main

import (
	"strings"
	"testing"

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
		name                       string
		only                       string
		latency, imageGC, eviction bool
		cluster, idle              bool
		wantErr                    string
	}{
		{name: "image GC alone", only: "imagegc", imageGC: true},
		{name: "two of four", only: "latency, eviction", latency: true, eviction: true},
		{name: "cluster alone", only: "cluster", cluster: true},
		{name: "idle footprint alone", only: "idle", idle: true},
		{name: "unknown scenario", only: "imagegc,gc", wantErr: `unknown scenario "gc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, i, e, c, id, err := scenarios(tc.only)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || l != tc.latency || i != tc.imageGC || e != tc.eviction || c != tc.cluster || id != tc.idle {
				t.Fatalf("got %t %t %t %t %t %v, want %t %t %t %t %t", l, i, e, c, id, err, tc.latency, tc.imageGC, tc.eviction, tc.cluster, tc.idle)
			}
		})
	}
}
