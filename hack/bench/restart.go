package main

import (
	"fmt"
	"strconv"
	"strings"
)

// restartBench is the restart benchmark (internal/agent/bench_restart_linux_test.go).
const restartBench = "BenchmarkPodsColdStartAndRestart"

// restartRun is the go test invocation of the restart section: the built cmd/slicelet, as the
// pods section measures it.
func restartRun(o options) benchRun {
	return benchRun{
		env: []string{
			"SLICELET_BENCH_COLD_PODS=" + strconv.Itoa(o.coldPods),
			"SLICELET_BENCH_BINARY=" + sliceletBinary,
		},
		args: []string{"test", "./internal/agent", "-run", "^$", "-bench", "^" + restartBench + "$", "-benchtime", "1x", "-count", "1", "-timeout", "60m"},
	}
}

func renderRestart(o options, m Machine, res []Results, runs []benchRun) string {
	r := res[0]
	get := func(unit string) (float64, bool) { return r.Metric(restartBench, unit) }
	sec := func(unit string) string {
		v, ok := get(unit)
		return num(v/1e6, ok, 2) + " s"
	}
	ms := func(unit string) string {
		v, ok := get(unit)
		return num(v/1e3, ok, 0) + " ms"
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	n := numOf(r, restartBench, "pods", 0)
	p("## Cold start and restart with %s manifest pods\n\n", n)
	p("**Cold start.** %s BestEffort pods (one container, `/bin/sleep infinity`) are in the manifest directory when slicelet (`cmd/slicelet`, built as below) starts as a Type=notify service in the sandbox; ", n)
	p("measured from the start of its service to READY, to the last container unit `active` (a poller lists `slicelet-*.service` every 5 ms) and to the API reporting every pod Running. ")
	p("The floor is the same units through one D-Bus connection (`units.Manager`, as slicelet holds one): per pod its pod slice with the properties slicelet gives it (`BaseSliceProperties` + `SliceProperties`), ")
	p("then its container service with the properties of slicelet's systemd runtime, 8 pods at a time (the controller's sync workers), measured in the same run (first) to the last unit `active`. ")
	p("**Restart.** With the %s pods running, slicelet is stopped and started again: from the start to READY, and from READY to the API listing every pod Running (polled every 50 ms); ", n)
	p("every listing after READY in which a pod is not Running counts as a status regression. Source: `internal/agent/bench_restart_linux_test.go`.\n\n")
	p("Measured %s with:\n\n```sh\nmake bench   # = go run ./hack/bench -out docs/benchmarks.md\n%s\n%s\n```\n\n", o.startedAt, strings.Join(buildCommand(o.goBin), " "), runs[0].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())
	p("| cold start | time |\n|---|---:|\n")
	p("| slicelet: start → READY | %s |\n", ms("cold-ready-µs"))
	p("| slicelet: start → last container unit active | %s |\n", sec("cold-all-active-µs"))
	p("| slicelet: start → API reports every pod Running | %s |\n", sec("cold-all-running-µs"))
	p("| floor: first start → last container unit active | %s |\n", sec("floor-all-active-µs"))
	ratio, rok := get("cold-ratio")
	p("| **ratio slicelet / floor (last unit active)** | **%s×** |\n\n", num(ratio, rok, 2))
	pid1, pok := get("cold-pid1-cpu-µs/pod")
	fpid1, fok := get("floor-pid1-cpu-µs/pod")
	p("systemd's CPU per pod: %s ms on slicelet's path, %s ms on the floor's.\n\n", num(pid1/1e3, pok, 2), num(fpid1/1e3, fok, 2))
	p("| restart | |\n|---|---:|\n")
	p("| start → READY | %s |\n", ms("restart-ready-µs"))
	p("| READY → API reports every pod Running | %s |\n", ms("restart-running-after-ready-µs"))
	first, _ := get("restart-first-listing-running")
	reg, regok := get("restart-regressed-listings")
	polls, _ := get("restart-listings")
	p("| pods Running in the first listing after READY | %.0f of %s |\n", first, n)
	p("| listings after READY with a pod not Running | %s of %.0f |\n\n", num(reg, regok, 0), polls)
	p("slicelet reports READY (and serves its API) once every source reported and one relist (one listing of the container units) gave every pod its status, so the time to READY includes reading the %s manifests and that relist; the READY → Running figure is the first API listing's round trip while the restarted daemon resyncs its pods.\n\n", n)
	p("<details><summary>raw benchmark output</summary>\n\n```\n%s\n```\n\n</details>\n", r[restartBench].Line)
	return b.String()
}
