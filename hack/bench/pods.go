package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// podsBench is the pods benchmark (internal/agent/bench_linux_test.go).
const podsBench = "BenchmarkPodsManifestToRunning"

// rssTargets are the pods benchmark's RSS targets in MiB, by number of idle pods.
var rssTargets = map[int]float64{110: 25, 1000: 40}

// sliceletBinary is where the pods section builds cmd/slicelet, relative to the module root (and
// visible inside the sandbox, unlike /tmp).
const sliceletBinary = "build/bench/slicelet"

// buildTags are the Makefile's TAGS: grpc-go without golang.org/x/net/trace, which would link
// html/template and keep every exported method of the binary (see the Makefile).
const buildTags = "grpcnotrace"

// buildEnv is make build's environment: no cgo, as the packages ship the binaries (no libc
// and dynamic loader mapped into the daemon: 2 MiB less of it resident).
const buildEnv = "CGO_ENABLED=0"

// buildCommand builds the measured binary as make build does: the environment assignment,
// then the command.
func buildCommand(goBin string) []string {
	return []string{buildEnv, goBin, "build", "-trimpath", "-tags", buildTags, "-o", sliceletBinary, "./cmd/slicelet"}
}

// buildSlicelet builds cmd/slicelet for the pods section.
func buildSlicelet(o options) error {
	c := buildCommand(o.goBin)
	fmt.Fprintf(o.stdout, "bench: %s\n", strings.Join(c, " "))
	cmd := exec.Command(c[1], c[2:]...)
	cmd.Dir = o.moduleRoot
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", c[0])
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("section pods: %s: %w\n%s", strings.Join(c, " "), err, out)
	}
	return nil
}

// podsRun is the go test invocation of the pods section.
func podsRun(o options) benchRun {
	return benchRun{
		env: []string{
			"SLICELET_BENCH_PODS=" + strconv.Itoa(o.manifestPods),
			"SLICELET_BENCH_ROUNDS=" + strconv.Itoa(o.rounds),
			"SLICELET_BENCH_RSS_PODS=" + o.rssPods,
			"SLICELET_BENCH_IDLE=" + o.idle.String(),
			"SLICELET_BENCH_BINARY=" + sliceletBinary,
		},
		args: []string{"test", "./internal/agent", "-run", "^$", "-bench", "^" + podsBench + "$", "-benchtime", "1x", "-count", "1", "-timeout", "60m"},
	}
}

// parseCounts reads the -rss-pods list ("110,1000").
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-rss-pods %q: want comma-separated positive pod counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// rssRuns are the rss sub-benchmarks present in r, by pod count, ascending.
func rssRuns(r Results) []int {
	var out []int
	for name := range r {
		if v, ok := strings.CutPrefix(name, podsBench+"/rss-pods="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

func renderPods(o options, m Machine, res []Results, runs []benchRun) string {
	r := res[0]
	lat := podsBench + "/latency"
	get := func(name, unit string) (float64, bool) { return r.Metric(name, unit) }
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("## Pods: manifest dropped → containers running, and slicelet's memory\n\n")
	if v, ok := get(lat, "cmd-slicelet"); ok && v == 1 {
		p("slicelet (`cmd/slicelet`, built as below, `slicelet --config F run` with its default info-level logging to the journal) runs as a Type=notify service inside the sandbox with an empty manifest directory. ")
	} else {
		p("slicelet (the agent package's test binary in agent mode, logging at debug level to the journal) runs as a Type=notify service inside the sandbox with an empty manifest directory. ")
	}
	p("In each slicelet round, %s BestEffort pods (one container, `/bin/sleep infinity`, distinct names) are written as temp files and renamed into the directory one after the other; ", numOf(r, lat, "pods", 0))
	p("a poller lists `slicelet-*.service` every 5 ms and timestamps each container unit's first `active` (Type=exec: the binary was executed); a second poller lists the pods through the API every 50 ms for `Running`. ")
	p("Per-pod latency is from the pod's rename to its unit's `active`; \"all running\" is from the first rename to the last unit `active`. The pods are then removed and the benchmark waits until nothing of them is left. ")
	p("The floor is the same workload through `systemd-run --slice=kubepods-besteffort-pod<uid>.slice --unit=<name> -p … /bin/sleep infinity`, with the container unit properties slicelet's systemd runtime sets for these pods "+
		"(Type=exec, RemainAfterExit, journal output with the pod's LogExtraFields, KillSignal, TimeoutStopSec, OOMScoreAdjust=1000, accounting, CPUShares=2): "+
		"all %s are submitted at once and run %d `systemd-run` processes at a time, the concurrency of slicelet's pod controller (8 sync workers); ", numOf(r, lat, "pods", 0), 8)
	p("per-pod latency is from that submission to the unit's `active`, seen by the same poller. systemd creates the floor's pod slice implicitly, without properties, while slicelet starts the pod slice as its own transient unit with the kubelet's properties first: " +
		"the floor is one transient unit per pod, slicelet two. ")
	p("The paths alternate round by round (slicelet first in even rounds) in the same run, so machine noise hits both; %s rounds per path. ", numOf(r, lat, "rounds", 0))
	p("Memory: a fresh slicelet per pod count gets that many pods at once, and its `/proc/<MainPID>/status` is read before, when every pod is Running (units active and the API agreeing), and after %s of idling (steady resyncs every minute, every 10 s for pods with ConfigMap, Secret, projected or downward API volumes; manifest rescans every 20 s). ", o.idle)
	p("Source: `internal/agent/bench_linux_test.go`.\n\n")

	p("Measured %s with:\n\n```sh\nmake bench   # = go run ./hack/bench -out docs/benchmarks.md\n%s\n%s\n```\n\n", o.startedAt, strings.Join(buildCommand(o.goBin), " "), runs[0].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())

	p("### Manifest → running, %s pods at once\n\n", numOf(r, lat, "pods", 0))
	p("| path | per-pod p50 | per-pod p99 | all running (mean of rounds) | systemd CPU/pod | slicelet CPU/pod |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(label, pre, all string, cpu bool) {
		p50, ok50 := get(lat, pre+"-p50-µs")
		p99, ok99 := get(lat, pre+"-p99-µs")
		a, aok := get(lat, all)
		pid1, pok := get(lat, strings.SplitN(pre, "-", 2)[0]+"-pid1-cpu-µs/pod")
		c, cok := get(lat, "slicelet-cpu-µs/pod")
		allCell, pid1Cell, cCell := "", "", ""
		if all != "" {
			allCell = ms(a, aok) + " ms"
		}
		if cpu {
			pid1Cell = ms(pid1, pok) + " ms"
			if pre == "slicelet" {
				cCell = ms(c, cok) + " ms"
			}
		}
		p("| %s | %s ms | %s ms | %s | %s | %s |\n", label, ms(p50, ok50), ms(p99, ok99), allCell, pid1Cell, cCell)
	}
	row("slicelet: rename → container unit active", "slicelet", "slicelet-all-µs", true)
	row("slicelet: rename → API reports Running", "slicelet-api-running", "", false)
	row("floor: `systemd-run`, 8 at once", "floor", "floor-all-µs", true)
	p("\nsystemd CPU is PID 1's CPU time (`/proc/1/schedstat`) over the round, per pod; slicelet CPU is the service's user+system time over the round, per pod (10 ms ticks).\n\n")

	p("### Against the target (≤%.1f× the floor)\n\n| measure | slicelet/floor | ≤%.1f× |\n|---|---:|---|\n", targetRatio, targetRatio)
	for _, x := range []struct{ label, unit string }{
		{"all running", "all-ratio"}, {"per-pod p50", "p50-ratio"}, {"per-pod p99", "p99-ratio"},
	} {
		v, ok := get(lat, x.unit)
		p("| %s | %s× | %s |\n", x.label, num(v, ok, 2), met(ok && v <= targetRatio))
	}
	p("\n")

	p("### slicelet's memory with idle pods\n\n")
	p("| pods | all Running after | VmRSS at start | VmRSS, all Running | VmRSS after idle | of which anon / file | VmHWM | CPU while idle | target | |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, n := range rssRuns(r) {
		name := fmt.Sprintf("%s/rss-pods=%d", podsBench, n)
		mib := func(unit string) string { v, ok := get(name, unit); return num(v, ok, 1) + " MiB" }
		conv, cok := get(name, "converge-s")
		cpu, cpuok := get(name, "idle-cpu-%")
		idle, iok := get(name, "idle-rss-MiB")
		target, mark := "", ""
		if t, ok := rssTargets[n]; ok {
			target, mark = fmt.Sprintf("≤%.0f MiB", t), met(iok && idle <= t)
		}
		p("| %d | %s s | %s | %s | %s | %s / %s | %s | %s %% | %s | %s |\n", n, num(conv, cok, 1), mib("start-rss-MiB"), mib("converged-rss-MiB"), mib("idle-rss-MiB"),
			mib("idle-anon-MiB"), mib("idle-file-MiB"), mib("hwm-MiB"), num(cpu, cpuok, 1), target, mark)
	}
	p("\nThe target is checked against VmRSS after idling; VmHWM is the peak while the pods were being created. ")
	p("File-backed RSS is the binary's own pages (text and read-only data) that have been touched; anonymous RSS is the Go heap, stacks and runtime.\n\n")

	p("### Interpretation\n\n%s\n\n", interpretPods(o, r))

	p("<details><summary>raw benchmark output</summary>\n\n```\n")
	for _, name := range slices.Sorted(maps.Keys(r)) {
		p("%s\n", r[name].Line)
	}
	p("```\n\n</details>\n")
	return b.String()
}

// interpretPods states what the numbers say about the targets.
func interpretPods(o options, r Results) string {
	lat := podsBench + "/latency"
	need := []string{"all-ratio", "p50-ratio", "p99-ratio", "slicelet-all-µs", "floor-all-µs", "slicelet-pid1-cpu-µs/pod", "floor-pid1-cpu-µs/pod", "slicelet-cpu-µs/pod", "slicelet-api-running-p50-µs", "slicelet-p50-µs"}
	var missing []string
	for _, u := range need {
		if _, ok := r.Metric(lat, u); !ok {
			missing = append(missing, "latency "+u)
		}
	}
	if len(missing) > 0 {
		return "No interpretation: the run did not report " + strings.Join(missing, ", ") + "."
	}
	get := func(name, unit string) float64 { v, _ := r.Metric(name, unit); return v }
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	all := get(lat, "all-ratio")
	add("- **Latency.** All %.0f pods run %.2f s after their manifests were dropped, against %.2f s for the floor: %.2f× (target ≤%.1f×: %s); per pod p50 %.2f× and p99 %.2f×. "+
		"systemd spends %.1f ms of CPU per pod on slicelet's path and %.1f ms on the floor's (slicelet's path adds the pod slice as a transient unit with accounting properties, and the status reads of its pod sync); slicelet itself spends %.1f ms per pod. "+
		"The API reports a pod Running %.0f ms (p50) after its unit is active: the controller's status update after the start. "+
		"The floor is the issue's: one `systemd-run` process per pod, each opening its own connection to systemd (authentication, Hello, job and unit subscriptions, the signals systemd then sends it), "+
		"which is why systemd spends more CPU per pod on it than on slicelet's path although slicelet makes two units per pod. "+
		"A floor with one long-lived D-Bus connection starting both units (as the pod slice section's floor does for slices) would be tighter; against it slicelet's extra cost is its own work per pod (%.1f ms of CPU, shared with the API polling of this benchmark) and the pod slice's properties.",
		get(lat, "pods"), get(lat, "slicelet-all-µs")/1e6, get(lat, "floor-all-µs")/1e6, all, targetRatio, met(all <= targetRatio),
		get(lat, "p50-ratio"), get(lat, "p99-ratio"),
		get(lat, "slicelet-pid1-cpu-µs/pod")/1000, get(lat, "floor-pid1-cpu-µs/pod")/1000, get(lat, "slicelet-cpu-µs/pod")/1000,
		(get(lat, "slicelet-api-running-p50-µs")-get(lat, "slicelet-p50-µs"))/1000, get(lat, "slicelet-cpu-µs/pod")/1000)
	for _, n := range rssRuns(r) {
		name := fmt.Sprintf("%s/rss-pods=%d", podsBench, n)
		idle, ok := r.Metric(name, "idle-rss-MiB")
		if !ok {
			continue
		}
		verdict := "no target"
		if t, ok := rssTargets[n]; ok {
			verdict = fmt.Sprintf("target ≤%.0f MiB: %s", t, met(idle <= t))
		}
		add("- **Memory, %d pods.** VmRSS %.1f MiB after %s idle (%s; %.1f MiB anonymous, %.1f MiB file-backed), peak %.1f MiB while creating them; %.1f s until all were Running.",
			n, idle, o.idle.Round(time.Second), verdict, get(name, "idle-anon-MiB"), get(name, "idle-file-MiB"), get(name, "hwm-MiB"), get(name, "converge-s"))
	}
	return strings.Join(out, "\n")
}
