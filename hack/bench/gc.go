package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Benchmarks of the gc and cri sections and their targets.
const (
	planImages10k     = "BenchmarkPlanImageGC10000"
	planContainers10k = "BenchmarkPlanContainerGC10000"
	criPodStart       = "BenchmarkPodStart"
	criRaw            = "BenchmarkRawCRI"

	targetPlanImagesMs     = 20.0
	targetPlanContainersMs = 50.0
)

func gcRuns() []benchRun {
	return []benchRun{{args: []string{"test", "./gc", "-run", "^$", "-bench", "^(" + planImages10k + "|" + planContainers10k + ")$", "-benchmem", "-count", "1", "-timeout", "10m"}}}
}

func criRuns(o options) []benchRun {
	return []benchRun{{args: []string{"test", "./internal/pods/crirt", "-run", "^$", "-bench", "^(" + criPodStart + "|" + criRaw + ")$", "-benchtime", strconv.Itoa(o.criPods) + "x", "-count", "1", "-timeout", "20m"}}}
}

func renderGC(o options, m Machine, res []Results, runs []benchRun) string {
	r := res[0]
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Garbage collection planning\n\n")
	p("`gc.PlanImageGC` over 10 000 images (mixed ages, sizes, in-use and pinned images, usage above the high threshold) and ")
	p("`gc.PlanContainerGC` over 10 000 dead containers in many pods and container names (per-container and node-wide limits). ")
	p("Planning is pure: these numbers are the whole decision, without the runtime calls. Source: `gc/image_test.go`, `gc/container_test.go`.\n\n")
	p("Measured %s with:\n\n```sh\ngo run ./hack/bench -only gc\n%s\n```\n\n", o.startedAt, runs[0].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())
	p("| plan | time | allocated | allocations | target | |\n|---|---:|---:|---:|---:|---|\n")
	for _, row := range []struct {
		name, what string
		target     float64
	}{
		{planImages10k, "image GC, 10 000 images", targetPlanImagesMs},
		{planContainers10k, "container GC, 10 000 dead containers", targetPlanContainersMs},
	} {
		ns, ok := r.Metric(row.name, "ns/op")
		bytes, bok := r.Metric(row.name, "B/op")
		allocs, aok := r.Metric(row.name, "allocs/op")
		p("| %s | %s ms | %s MiB | %s | ≤ %.0f ms | %s |\n", row.what, num(ns/1e6, ok, 2), num(bytes/(1<<20), bok, 1), num(allocs, aok, 0), row.target, met(ok && ns/1e6 <= row.target))
	}
	p("\n<details><summary>raw benchmark output</summary>\n\n```\n%s\n%s\n```\n\n</details>\n", r[planImages10k].Line, r[planContainers10k].Line)
	return b.String()
}

func renderCRI(o options, m Machine, res []Results, runs []benchRun) string {
	r := res[0]
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## CRI pod start: slicelet's CRI runtime vs the bare CRI calls\n\n")
	p("A one-container pod (busybox from a locally imported image, host network, its pod slice created beforehand) on Debian's containerd ")
	p("started by the test setup inside the throwaway systemd (systemd cgroup driver). `BenchmarkPodStart` is `crirt.Runtime.SyncPod` until the ")
	p("container reports running (pull-policy check, RunPodSandbox, CreateContainer, StartContainer and the status reads around them); ")
	p("`BenchmarkRawCRI` is the same pod with only the three CRI calls, as a client talking to containerd directly would make them. ")
	p("Teardown is not timed. Source: `internal/pods/crirt/bench_linux_test.go`.\n\n")
	p("Measured %s with:\n\n```sh\ngo run ./hack/bench -only cri\n%s\n```\n\n", o.startedAt, runs[0].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())
	start, sok := r.Metric(criPodStart, "ns/op")
	raw, rok := r.Metric(criRaw, "ns/op")
	p("| path | pod start (mean) | pods |\n|---|---:|---:|\n")
	p("| slicelet CRI runtime (SyncPod) | %s ms | %d |\n", num(start/1e6, sok, 1), r[criPodStart].Iterations)
	p("| bare CRI calls | %s ms | %d |\n\n", num(raw/1e6, rok, 1), r[criRaw].Iterations)
	ratio := 0.0
	if sok && rok && raw > 0 {
		ratio = start / raw
	}
	p("Ratio slicelet / bare CRI: **%s×**.\n\n", num(ratio, sok && rok && raw > 0, 2))
	p("<details><summary>raw benchmark output</summary>\n\n```\n%s\n%s\n```\n\n</details>\n", r[criPodStart].Line, r[criRaw].Line)
	return b.String()
}
