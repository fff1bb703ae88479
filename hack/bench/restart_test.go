package main

import (
	"strings"
	"testing"
)

func TestRenderRestart(t *testing.T) {
	o := options{coldPods: 1000, goBin: "go", startedAt: "now"}
	run := restartRun(o)
	full := Results{restartBench: {Name: restartBench, Line: "BenchmarkPodsColdStartAndRestart-2 1 1 ns/op", Metrics: map[string]float64{
		"pods": 1000, "cold-ready-µs": 400e3, "cold-all-active-µs": 30e6, "cold-all-running-µs": 31e6, "floor-all-active-µs": 25e6,
		"cold-ratio": 1.2, "cold-pid1-cpu-µs/pod": 8000, "floor-pid1-cpu-µs/pod": 5000,
		"restart-ready-µs": 900e3, "restart-running-after-ready-µs": 300e3, "restart-first-listing-running": 1000,
		"restart-regressed-listings": 0, "restart-listings": 11,
	}}}
	got := renderRestart(o, Machine{}, []Results{full}, []benchRun{run})
	for _, want := range []string{"1000 manifest pods", "**1.20×**", "| start → READY | 900 ms |", "| READY → API reports every pod Running | 300 ms |",
		"| pods Running in the first listing after READY | 1000 of 1000 |", "| listings after READY with a pod not Running | 0 of 11 |",
		"SLICELET_BENCH_COLD_PODS=1000", "-bench '^BenchmarkPodsColdStartAndRestart$'", "| floor: first start → last container unit active | 25.00 s |"} {
		if !strings.Contains(got, want) {
			t.Errorf("render lacks %q:\n%s", want, got)
		}
	}
	if missing := renderRestart(o, Machine{}, []Results{{}}, []benchRun{run}); !strings.Contains(missing, "–") && !strings.Contains(missing, "-") {
		t.Errorf("missing metrics: %s", missing)
	}
}
