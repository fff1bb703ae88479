// Command bench runs slicelet's benchmarks against real systemd (each go test binary boots its
// own throwaway systemd through internal/testharness/systemdtest) and rewrites the sections it owns in
// docs/benchmarks.md with the numbers, the exact commands, the date and the machine.
//
//	go run ./hack/bench [-out docs/benchmarks.md] [-go go] [-only podslices,sandbox,pods,eviction,gc,cri,restart]
//	                    [-pods 1000] [-batch 25] [-workers 8] [-iterations 3]
//	                    [-manifest-pods 100] [-rounds 3] [-rss-pods 110,1000] [-idle 60s]
//	                    [-eviction-rounds 5] [-cri-pods 20]
//
// Sections:
//   - podslices: 1000 pod slices through slicelet's path and through raw
//     go-systemd (the floor) in the same run (units' BenchmarkPodSlices).
//   - pods: manifests dropped → containers running through slicelet (run as
//     a service) against systemd-run in the same run, and slicelet's RSS with idle pods
//     (internal/agent BenchmarkPodsManifestToRunning).
//   - eviction: the reaction from memory crossing the eviction threshold
//     to the victim's stop in event mode and polling-only mode in the same run (eviction
//     BenchmarkEvictionReaction), and one decision with 1000 pods (BenchmarkDecide1000Pods).
//     The polling rounds take ≈10 s each.
//   - gc: the planning benchmark, image GC over 10 000 images and container GC over
//     10 000 dead containers (gc BenchmarkPlanImageGC10000, BenchmarkPlanContainerGC10000).
//   - cri: the pod start through the CRI runtime against the bare CRI calls on a private
//     containerd (internal/pods/crirt BenchmarkPodStart, BenchmarkRawCRI).
//   - restart: the cold start of -cold-pods manifest pods against the
//     same units through one D-Bus connection in the same run, then a restart of slicelet with
//     them running: time to READY, to every pod Running, and listings with a pod not Running
//     (internal/agent BenchmarkPodsColdStartAndRestart).
//   - sandbox: boot/stop of the throwaway systemd (internal/testharness/sandbox BenchmarkBootStop) and the
//     units adapter's D-Bus latency (units BenchmarkIntegrationSliceCreateDestroy).
//
// It must run as root on a machine where the sandbox works (internal/testharness/sandbox: a throwaway
// systemd in private namespaces); the go test runs get CI=true, so a missing prerequisite
// fails instead of skipping. A section whose benchmarks fail is left as it was.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "markdown file whose sections to rewrite")
	flag.StringVar(&o.goBin, "go", "go", "go command")
	flag.StringVar(&o.only, "only", "podslices,sandbox,pods,eviction,gc,cri,restart", "comma-separated sections to run")
	flag.IntVar(&o.pods, "pods", 1000, "pod slices per path in the pod slice benchmark")
	flag.IntVar(&o.batch, "batch", 25, "pods per batch; the two paths alternate batch by batch")
	flag.IntVar(&o.iterations, "iterations", 3, "iterations of the pod slice benchmark (each creates and destroys -pods per path); the numbers are over all of them")
	flag.IntVar(&o.workers, "workers", 8, "workers per path in the concurrent run")
	flag.IntVar(&o.manifestPods, "manifest-pods", 100, "pods dropped at once per round in the pods benchmark")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds per path (slicelet, systemd-run) in the pods benchmark")
	flag.StringVar(&o.rssPods, "rss-pods", "110,1000", "idle pod counts at which the pods benchmark reads slicelet's RSS")
	flag.IntVar(&o.evictionRounds, "eviction-rounds", 5, "rounds per mode (event, polling-only) in the eviction benchmark; a polling round takes up to the 10 s tick")
	flag.IntVar(&o.criPods, "cri-pods", 20, "pods started per path in the cri benchmark")
	flag.IntVar(&o.coldPods, "cold-pods", 1000, "manifest pods of the cold start and restart benchmark")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long slicelet idles with its pods before the RSS is read")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	out, goBin, only      string
	pods, batch, workers  int
	iterations            int
	manifestPods, rounds  int
	evictionRounds        int
	criPods               int
	coldPods              int
	rssPods               string
	idle                  time.Duration
	stdout                io.Writer // progress; os.Stderr when nil
	moduleRoot, startedAt string
}

// section is one owned part of the document and how to produce it.
type section struct {
	id   string
	runs []benchRun
	// prepare, when set, runs once before the section's runs (e.g. building a binary).
	prepare func(o options) error
	render  func(o options, m Machine, res []Results, runs []benchRun) string
}

// benchRun is one go test invocation.
type benchRun struct {
	env  []string // extra environment, "K=V"
	args []string // after the go command
}

// Command is the run as a shell command line, for the document.
func (r benchRun) Command(goBin string) string {
	parts := append([]string{}, r.env...)
	parts = append(parts, goBin)
	for _, a := range r.args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func sections(o options) []section {
	return []section{
		{
			id: "podslices",
			runs: []benchRun{{
				env: []string{
					"SLICELET_BENCH_PODS=" + strconv.Itoa(o.pods),
					"SLICELET_BENCH_BATCH=" + strconv.Itoa(o.batch),
					"SLICELET_BENCH_WORKERS=" + strconv.Itoa(o.workers),
				},
				args: []string{"test", "./units", "-run", "^$", "-bench", "^BenchmarkPodSlices$", "-benchtime", strconv.Itoa(o.iterations) + "x", "-count", "1", "-timeout", "60m"},
			}},
			render: renderPodSlices,
		},
		{
			id: "sandbox",
			runs: []benchRun{
				{args: []string{"test", "./internal/testharness/sandbox/", "-run", "^$", "-bench", "^BenchmarkBootStop$", "-benchtime", "10x", "-count", "1", "-timeout", "10m"}},
				{args: []string{"test", "./units", "-run", "^$", "-bench", "^BenchmarkIntegrationSliceCreateDestroy$", "-benchtime", "200x", "-count", "1", "-timeout", "10m"}},
			},
			render: renderSandbox,
		},
		{id: "pods", runs: []benchRun{podsRun(o)}, prepare: buildSlicelet, render: renderPods},
		{
			id: "eviction",
			runs: []benchRun{
				{args: []string{"test", "./eviction", "-run", "^$", "-bench", "^" + evictionReaction + "$", "-benchtime", strconv.Itoa(o.evictionRounds) + "x", "-count", "1", "-timeout", "30m"}},
				{args: []string{"test", "./eviction", "-run", "^$", "-bench", "^" + decide1000 + "$", "-benchmem", "-count", "1", "-timeout", "10m"}},
			},
			render: renderEviction,
		},
		{id: "gc", runs: gcRuns(), render: renderGC},
		{id: "cri", runs: criRuns(o), render: renderCRI},
		{id: "restart", runs: []benchRun{restartRun(o)}, prepare: buildSlicelet, render: renderRestart},
	}
}

func run(o options) error {
	if o.pods <= 0 || o.batch <= 0 || o.workers <= 0 || o.iterations <= 0 {
		return fmt.Errorf("-pods, -batch, -workers and -iterations must be positive (got %d, %d, %d, %d)", o.pods, o.batch, o.workers, o.iterations)
	}
	if o.evictionRounds <= 0 {
		return fmt.Errorf("-eviction-rounds must be positive (got %d)", o.evictionRounds)
	}
	if o.coldPods <= 0 {
		return fmt.Errorf("-cold-pods must be positive (got %d)", o.coldPods)
	}
	if o.manifestPods <= 0 || o.rounds <= 0 || o.idle <= 0 {
		return fmt.Errorf("-manifest-pods, -rounds and -idle must be positive (got %d, %d, %s)", o.manifestPods, o.rounds, o.idle)
	}
	if _, err := parseCounts(o.rssPods); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("must run as root: the benchmarks boot throwaway systemd instances (internal/testharness/sandbox)")
	}
	if o.stdout == nil {
		o.stdout = os.Stderr
	}
	root, err := moduleRoot(o.goBin)
	if err != nil {
		return err
	}
	o.moduleRoot = root
	want := map[string]bool{}
	for _, id := range strings.Split(o.only, ",") {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	all := sections(o)
	var ids []string
	for _, s := range all {
		ids = append(ids, s.id)
	}
	for id := range want {
		if !slices.Contains(ids, id) {
			return fmt.Errorf("-only: unknown section %q (have %s)", id, strings.Join(ids, ", "))
		}
	}

	machine := ReadMachine(o.goBin)
	o.startedAt = time.Now().UTC().Format("2006-01-02 15:04 MST")
	var errs []error
	for _, s := range all {
		if !want[s.id] {
			continue
		}
		var results []Results
		var failed error
		if s.prepare != nil {
			failed = s.prepare(o)
		}
		for _, r := range s.runs {
			if failed != nil {
				break
			}
			res, err := runBench(o, r)
			if err != nil {
				failed = fmt.Errorf("section %s: %s: %w", s.id, r.Command(o.goBin), err)
				break
			}
			results = append(results, res)
		}
		if failed != nil {
			errs = append(errs, failed)
			continue
		}
		if err := writeSection(o.out, s.id, s.render(o, machine, results, s.runs)); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(o.stdout, "bench: section %s written to %s\n", s.id, o.out)
	}
	return errors.Join(errs...)
}

// runBench runs one go test invocation from the module root, streaming its output, and parses
// the benchmark lines. A failing run or one without benchmark results is an error.
func runBench(o options, r benchRun) (Results, error) {
	fmt.Fprintf(o.stdout, "bench: %s\n", r.Command(o.goBin))
	cmd := exec.Command(o.goBin, r.args...)
	cmd.Dir = o.moduleRoot
	// CI=true: a missing sandbox prerequisite fails the run instead of skipping the benchmark.
	cmd.Env = append(append(os.Environ(), "CI=true", "GOTOOLCHAIN=local"), r.env...)
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, o.stdout)
	cmd.Stderr = io.MultiWriter(&buf, o.stdout)
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	res, err := ParseBench(buf.String())
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, errors.New("no benchmark results in the output")
	}
	return res, nil
}

// writeSection replaces the section id of the document at path (created if missing).
func writeSection(path, id, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("benchmarks document: %w", err)
	}
	doc, err := ReplaceSection(string(old), id, body)
	if err != nil {
		return fmt.Errorf("benchmarks document %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("benchmarks document: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("benchmarks document: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("benchmarks document: %w", err)
	}
	return nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(goBin string) (string, error) {
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the slicelet module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func itoa(n int) string { return strconv.Itoa(n) }
