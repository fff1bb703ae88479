package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCounts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{"two counts", "110,1000", []int{110, 1000}, false},
		{"spaces", " 110 , 1000 ", []int{110, 1000}, false},
		{"zero", "0", nil, true},
		{"not a number", "110,many", nil, true},
		{"empty", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCounts(tt.in)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("parseCounts(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRenderPods(t *testing.T) {
	o := options{manifestPods: 100, rounds: 3, rssPods: "110,1000", idle: time.Minute, goBin: "go", startedAt: "now"}
	run := podsRun(o)
	lat := podsBench + "/latency"
	full := Results{
		lat: {Name: lat, Metrics: map[string]float64{
			"pods": 100, "rounds": 3, "all-ratio": 1.2, "p50-ratio": 1.1, "p99-ratio": 1.5,
			"slicelet-all-µs": 2e6, "floor-all-µs": 1.6e6, "slicelet-p50-µs": 900e3, "slicelet-p99-µs": 1.9e6,
			"floor-p50-µs": 800e3, "floor-p99-µs": 1.5e6, "slicelet-pid1-cpu-µs/pod": 9000, "floor-pid1-cpu-µs/pod": 5000,
			"slicelet-cpu-µs/pod": 3000, "slicelet-api-running-p50-µs": 1e6, "slicelet-api-running-p99-µs": 2e6,
		}},
		podsBench + "/rss-pods=110":  {Name: podsBench + "/rss-pods=110", Metrics: map[string]float64{"idle-rss-MiB": 20}},
		podsBench + "/rss-pods=1000": {Name: podsBench + "/rss-pods=1000", Metrics: map[string]float64{"idle-rss-MiB": 45}},
	}
	tests := []struct {
		name      string
		r         Results
		want      []string
		forbidden []string
	}{
		{
			name: "targets checked per row",
			r:    full,
			want: []string{"| all running | 1.20× | met |", "| per-pod p99 | 1.50× | **missed** |", "| 110 |", "≤25 MiB | met |", "≤40 MiB | **missed** |", "rounds per path", "SLICELET_BENCH_RSS_PODS=110,1000"},
		},
		{
			name:      "missing metrics render dashes, not verdicts",
			r:         Results{},
			want:      []string{"| – ms |", "No interpretation"},
			forbidden: []string{"| met |"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderPods(o, Machine{}, []Results{tt.r}, []benchRun{run})
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, f := range tt.forbidden {
				if strings.Contains(got, f) {
					t.Errorf("unexpected %q in\n%s", f, got)
				}
			}
		})
	}
}
