package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Targets of the pod slice benchmark.
const (
	targetRatio      = 1.3
	targetPodsPerSec = 200.0
)

const podSlices = "BenchmarkPodSlices"

// met renders a target check.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// num formats v with the given decimals; a missing value is "–".
func num(v float64, ok bool, decimals int) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

// ms renders a value reported in µs as milliseconds.
func ms(v float64, ok bool) string { return num(v/1000, ok, 2) }

// workersRun returns the name of the concurrent run ("BenchmarkPodSlices/workers=8").
func workersRun(r Results) string {
	for _, name := range slices.Sorted(maps.Keys(r)) {
		if strings.HasPrefix(name, podSlices+"/workers=") {
			return name
		}
	}
	return podSlices + "/workers=?"
}

func renderPodSlices(o options, m Machine, res []Results, runs []benchRun) string {
	r := res[0]
	seq, wk := podSlices+"/sequential", workersRun(r)
	alone, tax, reduce := podSlices+"/slicelet-alone", podSlices+"/conn-tax", podSlices+"/reduce-cpu"
	pop := podSlices + "/population"
	workers := strings.TrimPrefix(wk, podSlices+"/")
	get := func(name, unit string) (float64, bool) { return r.Metric(name, unit) }

	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Pod slices: slicelet's path vs raw go-systemd\n\n")
	p("%d Burstable pods (one container, requests 100m/100Mi, limits 200m/200Mi, distinct UIDs) are created and then all destroyed ", o.pods)
	p("through slicelet's path (`hierarchy.Manager.EnsurePod` / `DestroyPod` over the real `units.Manager`, the node level started once, `Run` serving the QoS reconciles) ")
	p("and through the floor: raw go-systemd `StartTransientUnitContext(name, \"replace\", props, ch)` and `StopUnitContext`, each waiting for its job, ")
	p("with exactly the properties slicelet sends (`BaseSliceProperties` + `SliceProperties`; the benchmark checks that systemd holds the same values for both). ")
	p("In the same-run rows the two paths alternate in batches of %d (slicelet first on even batches, the floor first on odd ones), so machine noise hits both; ", o.batch)
	p("at the peak %d pod slices exist. Every figure is over %d iterations of that cycle. Source: `units/bench_podslices_linux_test.go`.\n\n", 2*o.pods, o.iterations)
	p("Measured %s with:\n\n```sh\nmake bench   # = go run ./hack/bench -out docs/benchmarks.md\n%s\n```\n\n", o.startedAt, runs[0].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())

	// Latency and throughput.
	p("### Latency and throughput\n\n")
	p("| run | path | create p50 | create p99 | destroy p50 | destroy p99 | pods/s (create+destroy) | creates/s | systemd CPU/pod | client CPU/pod |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(run, label, name, prefix string) {
		g := func(unit string) (float64, bool) { return get(name, prefix+unit) }
		c50, c50ok := g("create-p50-µs")
		c99, c99ok := g("create-p99-µs")
		d50, d50ok := g("destroy-p50-µs")
		d99, d99ok := g("destroy-p99-µs")
		ps, psok := g("pods/s")
		cs, csok := g("creates/s")
		pid1, pid1ok := g("pid1-cpu-µs/pod")
		cl, clok := g("client-cpu-µs/pod")
		p("| %s | %s | %s ms | %s ms | %s ms | %s ms | %s | %s | %s ms | %s ms |\n", run, label,
			ms(c50, c50ok), ms(c99, c99ok), ms(d50, d50ok), ms(d99, d99ok),
			num(ps, psok, 0), num(cs, csok, 0), ms(pid1, pid1ok), ms(cl, clok))
	}
	row("same run, sequential", "slicelet", seq, "slicelet-")
	row("same run, sequential", "floor", seq, "floor-")
	row("same run, "+workers, "slicelet", wk, "slicelet-")
	row("same run, "+workers, "floor", wk, "floor-")
	row("alone, sequential", "slicelet", alone, "")
	row("floor alone, sequential", "floor + idle connection", tax, "taxed-")
	row("floor alone, sequential", "floor", tax, "untaxed-")
	p("\nLatencies are per operation (with %s they include waiting behind the other workers). ", workers)
	p("Throughput is pods created and destroyed per second of the path's own wall time. ")
	p("systemd CPU is PID 1's CPU time (`/proc/1/schedstat` inside the sandbox) per pod; client CPU is the benchmark process's.\n\n")

	// Ratios against the targets.
	p("### Against the targets (≤%.1f× the floor, ≥%.0f pod slices/s)\n\n", targetRatio, targetPodsPerSec)
	p("| run | slicelet/floor time | create | destroy | ≤%.1f× | slicelet pods/s | ≥%.0f/s |\n|---|---:|---:|---:|---|---:|---|\n", targetRatio, targetPodsPerSec)
	for _, x := range []struct{ label, name string }{{"same run, sequential", seq}, {"same run, " + workers, wk}} {
		a, aok := get(x.name, "ratio")
		c, cok := get(x.name, "create-ratio")
		d, dok := get(x.name, "destroy-ratio")
		ps, psok := get(x.name, "slicelet-pods/s")
		p("| %s | %s× | %s× | %s× | %s | %s | %s |\n", x.label, num(a, aok, 2), num(c, cok, 2), num(d, dok, 2),
			met(aok && a <= targetRatio), num(ps, psok, 0), met(psok && ps >= targetPodsPerSec))
	}
	corrected := taxCorrected(r, seq, tax)
	p("| same run, sequential, without the idle-connection tax (estimate) | %s× | | | %s | | |\n", num(corrected, corrected > 0, 2), met(corrected > 0 && corrected <= targetRatio))
	sp, spok := get(alone, "pods/s")
	p("| slicelet alone, sequential | | | | | %s | %s |\n\n", num(sp, spok, 0), met(spok && sp >= targetPodsPerSec))
	p("The estimate removes the per-pod cost of one idle connection (conn-tax: %s µs/pod, the floor's batches with and without an idle `units.Manager`, interleaved) ", numOf(r, tax, "tax-µs/pod", 0))
	p("from both paths' per-pod time in the sequential same-run row.\n\n")

	// Breakdown.
	p("### Where slicelet's time goes (alone, sequential, per pod)\n\n")
	p("| phase | call | calls/pod | time/pod |\n|---|---|---:|---:|\n")
	for _, phase := range []string{"create", "destroy"} {
		res := r[alone]
		var calls []string
		for unit := range res.Metrics {
			if c, ok := strings.CutPrefix(unit, "bd-"+phase+"-"); ok {
				if name, ok := strings.CutSuffix(c, "-µs/pod"); ok && name != "other" {
					calls = append(calls, name)
				}
			}
		}
		slices.Sort(calls)
		for _, c := range calls {
			t, tok := res.Metrics["bd-"+phase+"-"+c+"-µs/pod"], true
			n, nok := res.Metrics["bd-"+phase+"-"+c+"-calls/pod"]
			p("| %s | `%s` | %s | %s µs |\n", phase, c, num(n, nok, 2), num(t, tok, 0))
		}
		o, ok := res.Metrics["bd-"+phase+"-other-µs/pod"]
		p("| %s | slicelet itself (math, bookkeeping) | | %s µs |\n", phase, num(o, ok, 0))
	}
	qc, qcok := get(alone, "bd-qos-calls")
	qt, qtok := get(alone, "bd-qos-µs/pod")
	p("| async | QoS reconcile writes (whole run: %s calls for %d pods) | | %s µs |\n\n", num(qc, qcok, 0), o.pods, num(qt, qtok, 0))

	// Reduce-CPU variants.
	p("### The CPU reduction before a pod slice's stop\n\n")
	p("`DestroyPod` first lowers the slice's CPU weight (the kubelet's `ReduceCPULimits`), then stops it; it writes the cgroup file (`destroySlice` in slices/manager.go), where it used to call `SetProperties`. ")
	p("Three destroy variants through `units.Manager`, same run, batches rotated:\n\n")
	p("| variant | destroy mean | destroy p50 | destroy p99 | systemd CPU/pod (create+destroy) |\n|---|---:|---:|---:|---:|\n")
	for _, v := range []struct{ key, label string }{
		{"setprops", "`SetProperties(CPUShares=2)` then `Stop` (before)"},
		{"cgroupfs", "write `cpu.shares`=2 to cgroupfs then `Stop` (now)"},
		{"none", "`Stop` only"},
	} {
		mean, mok := get(reduce, v.key+"-destroy-µs/pod")
		d50, d50ok := get(reduce, v.key+"-destroy-p50-µs")
		d99, d99ok := get(reduce, v.key+"-destroy-p99-µs")
		cpu, cok := get(reduce, v.key+"-pid1-cpu-µs/pod")
		p("| %s | %s ms | %s ms | %s ms | %s ms |\n", v.label, ms(mean, mok), ms(d50, d50ok), ms(d99, d99ok), ms(cpu, cok))
	}
	p("\n")

	// Population.
	pb, _ := get(pop, "batch")
	p("### systemd's cost grows with the number of sibling slices\n\n")
	p("The floor alone creates %s pods in batches of %.0f, then destroys them in reverse; first and last batches compared (per pod slice):\n\n", numOf(r, pop, "pods", 0), pb)
	p("| | next to ≤%.0f siblings | next to ~%d siblings |\n|---|---:|---:|\n", pb, o.pods)
	for _, x := range []struct{ label, few, many string }{
		{"create, wall", "create-empty-µs", "create-full-µs"},
		{"create, systemd CPU", "create-empty-pid1-µs", "create-full-pid1-µs"},
		{"destroy, wall", "destroy-empty-µs", "destroy-full-µs"},
		{"destroy, systemd CPU", "destroy-empty-pid1-µs", "destroy-full-pid1-µs"},
	} {
		f, fok := get(pop, x.few)
		m, mok := get(pop, x.many)
		p("| %s | %s ms | %s ms |\n", x.label, ms(f, fok), ms(m, mok))
	}
	p("\n")

	p("### Interpretation\n\n")
	p("%s\n\n", interpretPodSlices(o, r, seq, wk, alone, tax, reduce, pop))

	p("<details><summary>raw benchmark output</summary>\n\n```\n")
	for _, name := range slices.Sorted(maps.Keys(r)) {
		p("%s\n", r[name].Line)
	}
	p("```\n\n</details>\n")
	return b.String()
}

// taxCorrected is the sequential same-run ratio with the idle-connection tax removed from both
// paths' per-pod time; 0 when the numbers are missing or the correction is meaningless.
func taxCorrected(r Results, seq, tax string) float64 {
	sp, ok1 := r.Metric(seq, "slicelet-pods/s")
	fp, ok2 := r.Metric(seq, "floor-pods/s")
	x, ok3 := r.Metric(tax, "tax-µs/pod")
	if !ok1 || !ok2 || !ok3 || sp <= 0 || fp <= 0 {
		return 0
	}
	x = max(x, 0) / 1e6
	s, f := 1/sp-x, 1/fp-x
	if s <= 0 || f <= 0 {
		return 0
	}
	return s / f
}

// numOf formats a metric of r.
func numOf(r Results, name, unit string, decimals int) string {
	v, ok := r.Metric(name, unit)
	return num(v, ok, decimals)
}

// interpretPodSlices states what the numbers say: targets, the floor's own limit, and where
// slicelet's extra time goes.
func interpretPodSlices(o options, r Results, seq, wk, alone, tax, reduce, pop string) string {
	var missing []string
	for _, need := range [][2]string{
		{seq, "ratio"}, {seq, "create-ratio"}, {seq, "destroy-ratio"}, {seq, "slicelet-pods/s"}, {seq, "floor-pods/s"},
		{wk, "ratio"}, {wk, "create-ratio"}, {wk, "destroy-ratio"}, {wk, "slicelet-pods/s"}, {wk, "floor-pods/s"},
		{alone, "pods/s"}, {alone, "creates/s"}, {tax, "untaxed-pods/s"}, {alone, "bd-create-other-µs/pod"}, {alone, "bd-qos-calls"},
		{tax, "tax-µs/pod"}, {tax, "untaxed-pods/s"}, {tax, "untaxed-pid1-cpu-µs/pod"},
		{reduce, "setprops-destroy-µs/pod"}, {reduce, "none-destroy-µs/pod"}, {reduce, "cgroupfs-destroy-µs/pod"},
		{pop, "create-empty-µs"}, {pop, "create-full-µs"}, {pop, "destroy-empty-µs"}, {pop, "destroy-full-µs"},
		{pop, "create-empty-pid1-µs"}, {pop, "create-full-pid1-µs"}, {pop, "batch"},
	} {
		if _, ok := r.Metric(need[0], need[1]); !ok {
			missing = append(missing, strings.TrimPrefix(need[0], podSlices+"/")+" "+need[1])
		}
	}
	if len(missing) > 0 {
		return "No interpretation: the run did not report " + strings.Join(missing, ", ") + "."
	}
	get := func(name, unit string) float64 { v, _ := r.Metric(name, unit); return v }
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }

	like := func(ratio float64) string {
		switch {
		case ratio <= 1.1:
			return "about the floor's cost"
		case ratio <= targetRatio:
			return "within the target"
		}
		return "above the target"
	}
	seqRatio, wkRatio, corrected := get(seq, "ratio"), get(wk, "ratio"), taxCorrected(r, seq, tax)
	add("- **Ratio.** In the same run slicelet takes %.2f× the floor's time sequentially and %.2f× with %s (target ≤%.1f×: %s, %s); "+
		"without the idle-connection tax both paths pay in that run, an estimated %.2f× (%s). "+
		"Creation is %s (create ratio %.2f× / %.2f×); destruction is %s (%.2f× / %.2f×).",
		seqRatio, wkRatio, strings.TrimPrefix(wk, podSlices+"/"), targetRatio, met(seqRatio <= targetRatio), met(wkRatio <= targetRatio),
		corrected, met(corrected > 0 && corrected <= targetRatio),
		like(max(get(seq, "create-ratio"), get(wk, "create-ratio"))), get(seq, "create-ratio"), get(wk, "create-ratio"),
		like(max(get(seq, "destroy-ratio"), get(wk, "destroy-ratio"))), get(seq, "destroy-ratio"), get(wk, "destroy-ratio"))

	pid1 := get(tax, "untaxed-pid1-cpu-µs/pod")
	best := max(get(seq, "slicelet-pods/s"), get(wk, "slicelet-pods/s"), get(alone, "pods/s"))
	add("- **Throughput.** slicelet cycles (creates and destroys) %.0f pods/s sequentially and %.0f with %s in the same run, %.0f alone "+
		"(%.0f creates/s alone); target ≥%.0f: %s. The floor does %.0f and %.0f in the same run, %.0f alone (conn-tax, untaxed batches). "+
		"The alone runs were measured at different moments of a shared machine, so compare within a run, not across runs. "+
		"The floor's own limit is systemd: it spends %.1f ms of CPU per pod lifecycle with these properties "+
		"(cgroup realisation in every v1 hierarchy the accounting properties enable, unit load and GC, the D-Bus signals it sends to every client) "+
		"and serves D-Bus calls one at a time, so one systemd tops out near %.0f pods/s whatever the client does; "+
		"more workers overlap the client's work with systemd's but add no systemd capacity. "+
		"systemd's cost per slice also grows with the number of sibling slices under the same parent: a create costs %.1f ms of systemd CPU next to ≤%.0f siblings "+
		"and %.1f ms next to ~%d (population table). With %d pods created before any is destroyed (%d at the peak in the same-run rows) "+
		"the benchmark measures systemd well above its cost on a small node: next to few siblings the floor cycles about %.0f pods/s "+
		"(population table, first batches), the regime of a real node (the kubelet's default max-pods is 110).",
		get(seq, "slicelet-pods/s"), get(wk, "slicelet-pods/s"), strings.TrimPrefix(wk, podSlices+"/"), get(alone, "pods/s"),
		get(alone, "creates/s"), targetPodsPerSec, met(best >= targetPodsPerSec),
		get(seq, "floor-pods/s"), get(wk, "floor-pods/s"), get(tax, "untaxed-pods/s"),
		pid1/1000, 1e6/max(pid1, 1),
		get(pop, "create-empty-pid1-µs")/1000, get(pop, "batch"), get(pop, "create-full-pid1-µs")/1000, o.pods, o.pods, 2*o.pods,
		1e6/max(get(pop, "create-empty-µs")+get(pop, "destroy-empty-µs"), 1))

	setprops, none, cgfs := get(reduce, "setprops-destroy-µs/pod"), get(reduce, "none-destroy-µs/pod"), get(reduce, "cgroupfs-destroy-µs/pod")
	cg := 0.0
	var cgCalls []string
	for _, unit := range slices.Sorted(maps.Keys(r[alone].Metrics)) {
		if c, ok := strings.CutPrefix(unit, "bd-destroy-cg."); ok {
			if call, ok := strings.CutSuffix(c, "-µs/pod"); ok {
				cg += r[alone].Metrics[unit]
				cgCalls = append(cgCalls, "`"+call+"`")
			}
		}
	}
	add("- **Destroy.** `DestroyPod` lowers the slice's CPU weight by writing the cgroup file, then stops the slice. "+
		"The `SetProperties(CPUShares=2)` it used before cost %.2f ms per pod on top of the stop (%.2f ms vs %.2f ms, reduce-cpu table; it holds up to %d slices at once, "+
		"so its absolute times run higher than the same-run rows'), because systemd persists the change as a drop-in "+
		"file under /run/systemd/transient (written, then loaded into the unit), re-realises the cgroup, and deletes the drop-in again at the stop; "+
		"the cgroupfs write costs %.2f ms over a plain stop. The cgroupfs calls around the stop (%s) add %.2f ms per pod. "+
		"`EnsurePod` adds nothing measurable beyond `StartSlice` (%.0f µs of slicelet's own work per pod), "+
		"and the QoS reconcile is coalesced as designed (%.0f writes for %d pods).",
		(setprops-none)/1000, setprops/1000, none/1000, 3*o.pods, (cgfs-none)/1000, strings.Join(cgCalls, ", "), cg/1000,
		get(alone, "bd-create-other-µs/pod"), get(alone, "bd-qos-calls"), o.pods)
	add("- **Connection tax.** In the same-run rows both connections are open, and systemd sends every signal to every client of its private socket "+
		"(go-systemd opens two per connection), so each path also pays for the other's idle connection: %.2f ms per pod here (conn-tax). "+
		"That adds the same cost to both paths and pulls the measured ratio toward 1, hence the estimate without it. "+
		"The slicelet-alone row has no tax but is not interleaved with anything, so machine noise is not cancelled there (this machine is shared; see the load average).",
		get(tax, "tax-µs/pod")/1000)
	return strings.Join(out, "\n")
}

func renderSandbox(o options, m Machine, res []Results, runs []benchRun) string {
	boot, units := res[0], res[1]
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Sandbox boot/stop and the units adapter's D-Bus latency\n\n")
	p("Measured %s with:\n\n```sh\n%s\n%s\n```\n\n", o.startedAt, runs[0].Command(o.goBin), runs[1].Command(o.goBin))
	p("Machine:\n\n%s\n", m.Markdown())
	bs := boot["BenchmarkBootStop"]
	bp, bpok := bs.Metrics["boot-p50-ms"]
	sp, spok := bs.Metrics["stop-p50-ms"]
	p("| what | p50 | p99 | runs |\n|---|---:|---:|---:|\n")
	p("| sandbox boot (start to `is-system-running`) | %s ms | | %d |\n", num(bp, bpok, 0), bs.Iterations)
	p("| sandbox stop (poweroff, cgroups removed) | %s ms | | %d |\n", num(sp, spok, 0), bs.Iterations)
	us := units["BenchmarkIntegrationSliceCreateDestroy"]
	for _, x := range []struct{ label, key string }{
		{"`units.Manager.StartSlice` (StartTransientUnit + job, MemoryLimit)", "start"},
		{"`units.Manager.Stop` (StopUnit + job)", "stop"},
	} {
		v50, ok50 := us.Metrics[x.key+"-p50-µs"]
		v99, ok99 := us.Metrics[x.key+"-p99-µs"]
		p("| %s | %s ms | %s ms | %d |\n", x.label, ms(v50, ok50), ms(v99, ok99), us.Iterations)
	}
	p("\nBoot includes systemd's own start-up and the harness's cgroup, mount and unit preparation; ")
	p("the D-Bus figures are one slice with a single property at a time, so they are the lower bound of the pod slice numbers above.\n\n")
	p("<details><summary>raw benchmark output</summary>\n\n```\n%s\n%s\n```\n\n</details>\n", bs.Line, us.Line)
	return b.String()
}
