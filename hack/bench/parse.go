package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Result is one benchmark line of `go test -bench` output.
type Result struct {
	// Name is the benchmark name without the GOMAXPROCS suffix, e.g.
	// "BenchmarkPodSlices/workers=8".
	Name string
	// Iterations is b.N.
	Iterations int
	// Metrics maps each unit ("ns/op", "floor-pods/s", ...) to its value.
	Metrics map[string]float64
	// Line is the line as printed.
	Line string
}

// Results are the benchmark lines of one run, by name.
type Results map[string]Result

// Metric returns the value of unit in benchmark name, and whether it was reported.
func (r Results) Metric(name, unit string) (float64, bool) {
	res, ok := r[name]
	if !ok {
		return 0, false
	}
	v, ok := res.Metrics[unit]
	return v, ok
}

// ParseBench reads `go test -bench` output and returns its benchmark lines. Other lines (logs,
// PASS, ok) are ignored. A line that starts like a result but does not parse is an error naming
// it, so a format change is noticed rather than silently dropped.
func ParseBench(out string) (Results, error) {
	res := Results{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue // a benchmark's name printed alone (before its logs), not a result
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue // the name followed by log output on the same line
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: metrics are not value/unit pairs", line)
		}
		r := Result{Name: trimProcs(f[0]), Iterations: n, Metrics: map[string]float64{}, Line: line}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: value %q of %s: %w", line, f[i], f[i+1], err)
			}
			r.Metrics[f[i+1]] = v
		}
		res[r.Name] = r
	}
	return res, sc.Err()
}

// trimProcs removes the "-N" GOMAXPROCS suffix the testing package appends to a name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}
