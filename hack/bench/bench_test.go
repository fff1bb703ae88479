package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseBench(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    map[string]map[string]float64
		wantErr string
	}{
		{
			name: "sub-benchmarks with custom metrics, logs ignored",
			out: `systemdtest: sandbox units-1 booted in 150ms
goos: linux
BenchmarkPodSlices/sequential-2   	       1	2039995854 ns/op	         0.9631 create-ratio	      5871 floor-create-p50-µs	       106.3 floor-pods/s
BenchmarkPodSlices/workers=8-2    	       1	2045779655 ns/op	         1.024 create-ratio
    bench_podslices_linux_test.go:104: pods=100
PASS
ok  	github.com/slicelet/slicelet/units	5.394s
`,
			want: map[string]map[string]float64{
				"BenchmarkPodSlices/sequential": {"ns/op": 2039995854, "create-ratio": 0.9631, "floor-create-p50-µs": 5871, "floor-pods/s": 106.3},
				"BenchmarkPodSlices/workers=8":  {"ns/op": 2045779655, "create-ratio": 1.024},
			},
		},
		{
			name: "name without GOMAXPROCS suffix",
			out:  "BenchmarkBootStop 10 123 ns/op 412 boot-p50-ms\n",
			want: map[string]map[string]float64{"BenchmarkBootStop": {"ns/op": 123, "boot-p50-ms": 412}},
		},
		{
			name: "name printed before its logs is not a result",
			out:  "BenchmarkPodSlices\n    x_test.go:1: log\nBenchmarkPodSlices/a-2 1 5 ns/op\n",
			want: map[string]map[string]float64{"BenchmarkPodSlices/a": {"ns/op": 5}},
		},
		{
			name:    "value that is not a number",
			out:     "BenchmarkX-2 1 abc ns/op\n",
			wantErr: `value "abc" of ns/op`,
		},
		{
			name:    "odd metric fields",
			out:     "BenchmarkX-2 1 5 ns/op 7\n",
			wantErr: "not value/unit pairs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBench(tt.out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d results %v, want %d", len(got), got, len(tt.want))
			}
			for name, metrics := range tt.want {
				for unit, v := range metrics {
					if g, ok := got.Metric(name, unit); !ok || g != v {
						t.Errorf("%s %s = %v (reported %v), want %v", name, unit, g, ok, v)
					}
				}
				if n := len(got[name].Metrics); n != len(metrics) {
					t.Errorf("%s: %d metrics, want %d", name, n, len(metrics))
				}
			}
		})
	}
}

func TestTrimProcs(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"suffix", "BenchmarkA-2", "BenchmarkA"},
		{"sub-benchmark with equals", "BenchmarkA/workers=8-16", "BenchmarkA/workers=8"},
		{"no suffix", "BenchmarkA", "BenchmarkA"},
		{"dash in name, no number", "BenchmarkA/slicelet-alone", "BenchmarkA/slicelet-alone"},
		{"dash in name and suffix", "BenchmarkA/slicelet-alone-2", "BenchmarkA/slicelet-alone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trimProcs(tt.in); got != tt.want {
				t.Errorf("trimProcs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestReplaceSection(t *testing.T) {
	b, e := beginMarker("x"), endMarker("x")
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr string
	}{
		{
			name: "empty document gets the header and the section",
			doc:  "",
			want: docHeader + "\n" + b + "\nnew\n" + e + "\n",
		},
		{
			name: "missing section is appended, other text kept",
			doc:  "# B\n\nhand-written\n",
			want: "# B\n\nhand-written\n\n" + b + "\nnew\n" + e + "\n",
		},
		{
			name: "existing section replaced, text around kept",
			doc:  "top\n" + b + "\nold\nlines\n" + e + "\nbottom\n",
			want: "top\n" + b + "\nnew\n" + e + "\nbottom\n",
		},
		{
			name: "other sections untouched",
			doc:  beginMarker("y") + "\ny\n" + endMarker("y") + "\n" + b + "\nold\n" + e + "\n",
			want: beginMarker("y") + "\ny\n" + endMarker("y") + "\n" + b + "\nnew\n" + e + "\n",
		},
		{
			name:    "begin without end",
			doc:     "top\n" + b + "\nold\n",
			wantErr: "found only one",
		},
		{
			name:    "end before begin",
			doc:     e + "\n" + b + "\n",
			wantErr: "comes before",
		},
		{
			name:    "duplicated markers",
			doc:     b + "\n" + e + "\n" + b + "\n" + e + "\n",
			wantErr: "more than once",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReplaceSection(tt.doc, "x", "new\n\n")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "./units", "./units"},
		{"flag with equals", "-count=1", "-count=1"},
		{"regexp", "^$", "'^$'"},
		{"single quote", "a'b", `'a'\''b'`},
		{"empty", "", "''"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellQuote(tt.in); got != tt.want {
				t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTaxCorrected(t *testing.T) {
	seq, tax := podSlices+"/sequential", podSlices+"/conn-tax"
	mk := func(sp, fp, x float64) Results {
		return Results{
			seq: {Name: seq, Metrics: map[string]float64{"slicelet-pods/s": sp, "floor-pods/s": fp}},
			tax: {Name: tax, Metrics: map[string]float64{"tax-µs/pod": x}},
		}
	}
	tests := []struct {
		name string
		r    Results
		want float64
	}{
		{"no tax keeps the ratio", mk(100, 200, 0), 2},
		{"tax removed from both", mk(100, 200, 1000), (0.010 - 0.001) / (0.005 - 0.001)},
		{"negative tax (noise) counts as none", mk(100, 200, -500), 2},
		{"tax larger than the floor's time is meaningless", mk(100, 200, 6000), 0},
		{"missing numbers", Results{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := taxCorrected(tt.r, seq, tax); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("taxCorrected = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRenderMissingMetrics: a run that lacks metrics (an older benchmark, a renamed unit) renders
// dashes, not a panic or made-up numbers.
func TestRenderMissingMetrics(t *testing.T) {
	o := options{pods: 10, batch: 5, goBin: "go", startedAt: "now"}
	runs := sections(o)
	pods := renderPodSlices(o, Machine{}, []Results{{}}, runs[0].runs)
	if !strings.Contains(pods, "| – ms |") || !strings.Contains(pods, "No interpretation") || strings.Contains(pods, "| met |") {
		t.Errorf("pod slices section without metrics:\n%s", pods)
	}
	sb := renderSandbox(o, Machine{}, []Results{{}, {}}, runs[1].runs)
	if !strings.Contains(sb, "| – ms |") {
		t.Errorf("sandbox section without metrics:\n%s", sb)
	}
	ev := renderEviction(o, Machine{}, []Results{{}, {}}, runs[3].runs)
	if !strings.Contains(ev, "| – ms |") || strings.Contains(ev, "| met |") {
		t.Errorf("eviction section without metrics:\n%s", ev)
	}
}

// TestRenderEvictionTargets: the eviction section checks the eviction targets against the worst
// event-mode round and the median speedup.
func TestRenderEvictionTargets(t *testing.T) {
	o := options{evictionRounds: 5, goBin: "go", startedAt: "now"}
	runs := sections(o)
	decide := Results{decide1000: {Name: decide1000, Metrics: map[string]float64{"ns/op": 2.5e6, "allocs/op": 1200}}}
	tests := []struct {
		name                   string
		eventMax, speedup      float64
		wantReaction, wantFast string
	}{
		{"both met", 3, 3000, "| met |", "| met |"},
		{"slow worst round", 400, 3000, "| **missed** |", "| met |"},
		{"too little speedup", 100, 10, "| met |", "| **missed** |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			react := Results{evictionReaction: {Name: evictionReaction, Iterations: 5, Metrics: map[string]float64{
				"event-p50-ms": 1, "event-max-ms": tt.eventMax, "polling-p50-ms": 9500, "polling-max-ms": 9900, "speedup-x": tt.speedup}}}
			out := renderEviction(o, Machine{}, []Results{react, decide}, runs[3].runs)
			lines := strings.Split(out, "\n")
			find := func(prefix string) string {
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						return l
					}
				}
				return ""
			}
			if l := find("| event-mode reaction"); !strings.HasSuffix(l, tt.wantReaction) {
				t.Errorf("reaction target row %q, want it to end %q", l, tt.wantReaction)
			}
			if l := find("| event mode ≥"); !strings.HasSuffix(l, tt.wantFast) {
				t.Errorf("speedup target row %q, want it to end %q", l, tt.wantFast)
			}
			if !strings.Contains(out, "| decision with 1000 pods | 2.50 ms (1200 allocs) |") {
				t.Errorf("decision row missing:\n%s", out)
			}
		})
	}
}

// TestRenderGCAndCRI: targets are judged from the numbers, missing numbers render as dashes.
func TestRenderGCAndCRI(t *testing.T) {
	o := options{criPods: 20, goBin: "go", startedAt: "now"}
	gcRes, err := ParseBench("BenchmarkPlanImageGC10000-2 \t 100\t 4000000 ns/op\t 1048576 B/op\t 12 allocs/op\n" +
		"BenchmarkPlanContainerGC10000-2 \t 10\t 60000000 ns/op\t 2097152 B/op\t 40 allocs/op\n")
	if err != nil {
		t.Fatal(err)
	}
	out := renderGC(o, Machine{}, []Results{gcRes}, gcRuns())
	for _, want := range []string{"| image GC, 10 000 images | 4.00 ms | 1.0 MiB | 12 | ≤ 20 ms | met |", "| container GC, 10 000 dead containers | 60.00 ms |", "≤ 50 ms | **missed** |"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc section lacks %q:\n%s", want, out)
		}
	}
	criRes, err := ParseBench("BenchmarkPodStart-2 \t 20\t 300000000 ns/op\nBenchmarkRawCRI-2 \t 20\t 200000000 ns/op\n")
	if err != nil {
		t.Fatal(err)
	}
	out = renderCRI(o, Machine{}, []Results{criRes}, criRuns(o))
	for _, want := range []string{"| slicelet CRI runtime (SyncPod) | 300.0 ms | 20 |", "| bare CRI calls | 200.0 ms | 20 |", "**1.50×**", "-benchtime 20x"} {
		if !strings.Contains(out, want) {
			t.Errorf("cri section lacks %q:\n%s", want, out)
		}
	}
	out = renderCRI(o, Machine{}, []Results{{}}, criRuns(o))
	if !strings.Contains(out, "**–×**") {
		t.Errorf("missing numbers should render as a dash:\n%s", out)
	}
}
