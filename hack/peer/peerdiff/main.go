// Command peerdiff runs every manifest of a corpus under the real kubelet and under slicelet
// (CRI runtime), one agent at a time on the same containerd with the same node settings
// (hack/peer/peerrun), on cgroup v1 (a throwaway systemd sandbox on this machine's hybrid
// layout) and on cgroup v2 (a throwaway VM), and compares the cgroups they made level by level:
// kubepods, QoS, pod, container. It prints one line per difference,
//
//	<v1|v2> <manifest> <namespace>/<name> <level> <field>: slicelet=<value> kubelet=<value>
//
// then "peer-diff: N manifests, D differences (v1), E differences (v2)", and exits 1 on any
// difference. Differences slicelet makes on purpose are printed as "deliberate: ..." lines and
// not counted (docs/peer.md).
//
// The corpus is every Pod document under the -corpus directories (and the pod each workload
// there makes from its template) plus -n pods of the seeded generator
// (hack/peer/podgen); each is rewritten to run offline with the local busybox test image
// (commands kept when busybox has the program, sleep otherwise).
//
// On the host, peerdiff prepares the corpus, boots the sandbox and the VM and runs itself
// inside them with -inside, which runs the batches and writes the cgroups it read to the work
// directory; the host compares.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// options are the command line.
type options struct {
	corpus, work, kubelet, slicelet, cgroups, agents string
	n                                                int
	seed                                             uint64
	inside                                           string
	vmMem, vmCPUs, batchPods                         int
	prepareOnly, compareOnly                         bool
	shard                                            shard
	sandboxName                                      string
	waitLimit                                        time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "testdata/corpus", "directories of manifests, comma-separated (searched recursively for *.yaml, *.yml, *.json: Pods, and the pods of Deployments, DaemonSets, StatefulSets, Jobs, ...); empty for none")
	flag.IntVar(&o.n, "n", 40, "generated pods")
	flag.Uint64Var(&o.seed, "seed", 1, "generator seed")
	flag.StringVar(&o.work, "work", "build/peer-diff", "work directory (emptied first)")
	flag.StringVar(&o.kubelet, "kubelet", "build/peer/v1.37.2/kubelet", "the kubelet binary")
	flag.StringVar(&o.slicelet, "slicelet", "bin/slicelet", "the slicelet binary")
	flag.StringVar(&o.cgroups, "cgroups", "v1,v2", "cgroup versions to run: v1 (sandbox), v2 (VM)")
	flag.StringVar(&o.agents, "agents", "kubelet,slicelet", "agents to run; slicelet alone checks that every pod it admits comes up with the test image (no comparison)")
	flag.IntVar(&o.vmMem, "vm-mem", 8192, "the VM's memory in MiB (pods only touch a little of it; more makes fewer, larger batches)")
	flag.IntVar(&o.vmCPUs, "vm-cpus", runtime.NumCPU(), "the VM's CPUs (emulated; more than this machine's cores makes batches larger, but 8 on 2 busy cores stalled the guest for minutes: docs/peer.md)")
	flag.BoolVar(&o.compareOnly, "compare-only", false, "compare the results already in -work (of an earlier or unfinished run) without running anything")
	flag.IntVar(&o.batchPods, "batch-pods", 30, "most pods in one batch")
	flag.BoolVar(&o.prepareOnly, "prepare-only", false, "prepare the corpus, print its batches and exit: for this machine, or for the VM (-vm-cpus, -vm-mem) when -cgroups starts with v2")
	flag.StringVar(&o.inside, "inside", "", "internal: run the batches inside the sandbox or VM, for this cgroup version")
	flag.StringVar(&o.sandboxName, "sandbox-name", fmt.Sprintf("peerdiff-%d", os.Getpid()), "the v1 sandbox's name (unique on the machine)")
	flag.DurationVar(&o.waitLimit, "wait-limit", 0, "how long a batch waits for its pods to settle under each agent before reporting those that did not as not settled (0: 5m on v1, 15m on v2; under emulation the guest's clock, which on a busy machine runs at a third of the host's)")
	shardFlag := flag.String("shard", "", "i/n: run only the i-th of n contiguous ranges of each version's batches, keeping the other shards' results in -work; the report compares every batch whose shard has run (docs/peer.md)")
	flag.Parse()
	var err error
	if o.shard, err = parseShard(*shardFlag); err != nil {
		fmt.Fprintln(os.Stderr, "peerdiff:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := 0
	if o.inside != "" {
		err = inside(ctx, o)
	} else {
		code, err = host(ctx, o, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerdiff:", err)
		code = 2
	}
	os.Exit(code)
}

// corpusFile and resultFile are the files host and inside exchange in the work directory.
const (
	corpusFile = "corpus.json"
	resultFile = "results.json"
)

// batchResult is what one batch left under each agent.
type batchResult struct {
	// Batch is the batch's number (from 1) of Batches in its cgroup version.
	Batch   int              `json:"batch,omitempty"`
	Batches int              `json:"batches,omitempty"`
	Keys    []peerrun.PodKey `json:"keys"`
	// Waited are the keys of the pods that can come up on the node (startsHere), which the
	// batch waited for.
	Waited   []peerrun.PodKey          `json:"waited,omitempty"`
	Misfits  bool                      `json:"misfits,omitempty"`
	Snapshot map[peerrun.Kind]snapshot `json:"snapshot"`
	Complete map[peerrun.Kind][]string `json:"complete"`
	Took     map[peerrun.Kind]string   `json:"took"`
	Errors   map[peerrun.Kind]string   `json:"errors,omitempty"`
	// KubeletCgroupErrors are the errors of the kubelet's cgroup manager in its journal
	// (kubeletCgroupErrors): the kubelet logs a failed Set and goes on, leaving the cgroup
	// at systemd's defaults, so the batch does not show the kubelet's rules where it failed.
	KubeletCgroupErrors []string `json:"kubeletCgroupErrors,omitempty"`
	// Unsettled are, per agent, the pods (by key; "-" for the node's levels) that had not
	// settled when the batch's wait limit passed, or whose cgroups were still changing when
	// read, with what they waited for: not compared, reported as not settled.
	Unsettled map[peerrun.Kind]map[string]string `json:"unsettled,omitempty"`
}

// snapshot is peerrun.Snapshot with string keys (JSON).
type snapshot struct {
	Node map[string]peerrun.Values `json:"node"`
	Pods map[string]peerrun.Pod    `json:"pods"`
	// Statuses are the agent's own pod statuses (phase and reason of a refusal).
	Statuses map[string]peerrun.PodStatus `json:"statuses"`
}

func toJSON(s peerrun.Snapshot) snapshot {
	out := snapshot{Node: s.Node, Pods: map[string]peerrun.Pod{}, Statuses: map[string]peerrun.PodStatus{}}
	for k, p := range s.Pods {
		out.Pods[k.String()] = p
	}
	for k, st := range s.Statuses {
		out.Statuses[k.String()] = st
	}
	return out
}

// host prepares the corpus, runs each cgroup version inside and compares.
func host(ctx context.Context, o options, stdout, stderr io.Writer) (int, error) {
	entries, err := corpusEntries(o)
	if err != nil {
		return 0, err
	}
	if o.prepareOnly {
		// The batches of the first cgroup version asked for: the VM's own CPUs and memory on v2.
		cpus, mem := thisMachine()
		if v, _, _ := strings.Cut(o.cgroups, ","); strings.TrimSpace(v) == "v2" {
			// The guest's MemTotal is its memory less what its kernel keeps (about 2%).
			cpus, mem = o.vmCPUs, int64(o.vmMem)<<20*98/100
		}
		bs := batches(entries, nodeAllocatable(peerrun.DefaultNodeConfig(), cpus, mem), o.batchPods)
		for i, b := range bs {
			var names []string
			for _, e := range b.pods {
				names = append(names, e.Key.String())
			}
			kind := ""
			if b.misfits {
				kind = " (misfits)"
			}
			fmt.Fprintf(stdout, "batch %d%s: %d pods: %s\n", i+1, kind, len(b.pods), strings.Join(names, " "))
		}
		fmt.Fprintf(stdout, "peer-diff: %d manifests, %d batches on %d CPUs, %d MiB\n", len(entries), len(bs), cpus, mem>>20)
		return 0, nil
	}
	work, err := filepath.Abs(o.work)
	if err != nil {
		return 0, err
	}
	if o.compareOnly {
		return compareOnly(stdout, work, o.cgroups)
	}
	// A shard keeps the other shards' results; a whole run starts from nothing.
	if o.shard.n == 0 {
		if err := os.RemoveAll(work); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, err
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(work, corpusFile), data, 0o644); err != nil {
		return 0, err
	}
	kubelet := ""
	if strings.Contains(o.agents, string(peerrun.Kubelet)) {
		if kubelet, err = filepath.EvalSymlinks(o.kubelet); err == nil {
			// The inside half runs in / of the sandbox: the path must not be relative.
			kubelet, err = filepath.Abs(kubelet)
		}
		if err != nil {
			return 0, fmt.Errorf("kubelet binary (make peer-build): %w", err)
		}
	}
	slicelet, err := filepath.Abs(o.slicelet)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(slicelet); err != nil {
		return 0, fmt.Errorf("slicelet binary (make build): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.Skip != "" {
			fmt.Fprintf(stdout, "skipped: %s %s: %s\n", e.Origin, e.Key, e.Skip)
		}
	}
	counts := map[string]int{}
	var versions []string
	for _, v := range strings.Split(o.cgroups, ",") {
		v = strings.TrimSpace(v)
		t0 := time.Now()
		dir := filepath.Join(work, v)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
		args := []string{"-inside", v, "-work", work, "-batch-pods", strconv.Itoa(o.batchPods), "-agents", o.agents, "-shard", o.shard.String(), "-wait-limit", o.waitLimit.String()}
		if err := o.shard.clear(dir); err != nil {
			return 0, err
		}
		switch v {
		case "v1":
			err = runSandbox(ctx, o.sandboxName, work, binaryDirs(kubelet, slicelet), append(args, "-kubelet", kubelet, "-slicelet", slicelet), stderr)
		case "v2":
			err = runVM(ctx, self, work, kubelet, slicelet, args, o.vmMem, o.vmCPUs, stderr)
		default:
			return 0, fmt.Errorf("-cgroups: %q: want v1 or v2", v)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v, err)
		}
		results, note, err := readAllResults(dir)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v, err)
		}
		if note != "" {
			fmt.Fprintf(stdout, "%s: %s\n", v, note)
			counts[v+" missing"]++
		}
		if o.agents == string(peerrun.Slicelet) {
			counts[v] = checkAlone(stdout, v, entries, results)
			versions = append(versions, v)
			continue
		}
		countDiffs(stdout, v, compareRun(v, entries, results), counts)
		fmt.Fprintf(stderr, "peerdiff: %s: shard %s: %d batches compared, run in %s\n", v, o.shard, len(results), time.Since(t0).Round(time.Second))
		versions = append(versions, v)
	}
	if o.agents == string(peerrun.Slicelet) {
		fmt.Fprintf(stdout, "peer-diff-check: %d manifests through slicelet alone, %s not up (v1), %s not up (v2)\n", len(entries), countOf(counts, versions, "v1"), countOf(counts, versions, "v2"))
		return min(1, counts["v1"]+counts["v2"]), nil
	}
	return summary(stdout, len(entries), counts, versions), nil
}

// countDiffs prints the differences of version v and counts them in counts: v's real ones,
// "v not settled" for the pods and levels not compared.
func countDiffs(w io.Writer, v string, diffs []difference, counts map[string]int) {
	for _, d := range diffs {
		fmt.Fprintln(w, d.line())
		switch {
		case d.unsettled != "":
			counts[v+" not settled"]++
		case d.deliberate == "":
			counts[v]++
		}
	}
}

// summary prints the last line and returns the exit code: 1 when a version has a difference,
// a pod or level not settled (the run does not say whether they differ) or batches not run.
func summary(w io.Writer, manifests int, counts map[string]int, versions []string) int {
	var incomplete []string
	code := 0
	for _, v := range versions {
		if n := counts[v+" not settled"]; n > 0 {
			incomplete = append(incomplete, fmt.Sprintf("%d not settled (%s)", n, v))
		}
		if counts[v+" missing"] > 0 {
			incomplete = append(incomplete, fmt.Sprintf("batches not run (%s)", v))
		}
		if counts[v] > 0 || counts[v+" not settled"] > 0 || counts[v+" missing"] > 0 {
			code = 1
		}
	}
	tail := ""
	if len(incomplete) > 0 {
		tail = "; incomplete: " + strings.Join(incomplete, ", ")
	}
	fmt.Fprintf(w, "peer-diff: %d manifests, %s differences (v1), %s differences (v2)%s\n", manifests, countOf(counts, versions, "v1"), countOf(counts, versions, "v2"), tail)
	return code
}

// compareOnly compares the results an earlier (or unfinished) run left in work.
func compareOnly(stdout io.Writer, work, cgroups string) (int, error) {
	data, err := os.ReadFile(filepath.Join(work, corpusFile))
	if err != nil {
		return 0, err
	}
	var entries []entry
	if err := json.Unmarshal(data, &entries); err != nil {
		return 0, fmt.Errorf("%s: %w", corpusFile, err)
	}
	// The decoded pods (for the deliberate divergences) are not in the file.
	for i := range entries {
		var pod v1.Pod
		if yaml.Unmarshal(entries[i].YAML, &pod) == nil {
			entries[i].Pod = &pod
		}
	}
	counts := map[string]int{}
	var versions []string
	for _, v := range strings.Split(cgroups, ",") {
		v = strings.TrimSpace(v)
		results, note, err := readAllResults(filepath.Join(work, v))
		if err != nil {
			continue
		}
		if note != "" {
			fmt.Fprintf(stdout, "%s: %s\n", v, note)
			counts[v+" missing"]++
		}
		countDiffs(stdout, v, compareRun(v, entries, results), counts)
		fmt.Fprintf(stdout, "%s: %d batches compared\n", v, len(results))
		versions = append(versions, v)
	}
	return summary(stdout, len(entries), counts, versions), nil
}

// countOf is the count of version v as printed: "-" when v did not run.
func countOf(counts map[string]int, ran []string, v string) string {
	for _, r := range ran {
		if r == v {
			return strconv.Itoa(counts[v])
		}
	}
	return "-"
}

// checkAlone prints every pod slicelet ran (it admitted it) whose containers did not all
// start (running, or exited: a kept command may complete or fail), and returns their number:
// the prepared corpus must run offline with the test image, nothing pulled. A pod that cannot
// come up on the node (it reads a ConfigMap or Secret, which the prepared corpus does not
// have; a volume the node cannot give it: batchResult.Waited) and a pod that finished are left
// out.
func checkAlone(w io.Writer, version string, entries []entry, results []batchResult) int {
	byKey := map[string]entry{}
	for _, e := range entries {
		byKey[e.Key.String()] = e
	}
	n := 0
	for _, r := range results {
		waited := map[string]bool{}
		for _, k := range r.Waited {
			waited[k.String()] = true
		}
		for k, p := range r.Snapshot[peerrun.Slicelet].Pods {
			e := byKey[k]
			if e.Pod == nil || referencesObjects(e.Pod) || !p.Ready || r.Waited != nil && !waited[k] {
				// A pod without a ready sandbox ran and finished.
				continue
			}
			var bad []string
			for _, name := range e.Containers {
				st := p.Containers[name].State
				if st != "CONTAINER_RUNNING" && st != "CONTAINER_EXITED" {
					bad = append(bad, fmt.Sprintf("%s=%q", name, st))
				}
			}
			if len(bad) > 0 {
				fmt.Fprintf(w, "%s %s %s not up under slicelet: containers %s\n", version, e.Origin, k, strings.Join(bad, " "))
				n++
			}
		}
		if msg := r.Errors[peerrun.Slicelet]; msg != "" {
			fmt.Fprintf(w, "%s slicelet: %s\n", version, oneLine(msg))
			n++
		}
	}
	return n
}

// corpusEntries loads and prepares the corpus and the generated pods.
func corpusEntries(o options) ([]entry, error) {
	var raw []entry
	for _, dir := range strings.Split(o.corpus, ",") {
		if dir = strings.TrimSpace(dir); dir == "" {
			continue
		}
		c, err := loadCorpus(dir)
		if err != nil {
			return nil, err
		}
		raw = append(raw, c...)
	}
	raw = append(raw, generated(o.seed, o.n)...)
	return prepare(raw, testApplets())
}

// binaryDirs are the directories of the given binaries (empty names skipped), once each: the
// sandbox binds them, since a checkout under /tmp (or any directory the sandbox replaces) is
// invisible inside otherwise.
func binaryDirs(binaries ...string) []string {
	var dirs []string
	for _, b := range binaries {
		if d := filepath.Dir(b); b != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// runSandbox boots the v1 sandbox with binds and runs peerdiff inside; its output goes to stderr.
func runSandbox(ctx context.Context, name, work string, binds, args []string, stderr io.Writer) error {
	sb, err := peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: name, WorkDir: work, Binds: binds, Log: stderr})
	if err != nil {
		return err
	}
	inner, err := peerrun.CopySelf(work, "peerdiff")
	if err != nil {
		_ = sb.Stop()
		return err
	}
	cmd := sb.Command(ctx, "/", inner, args...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	runErr := cmd.Run()
	if err := sb.Stop(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// runVM runs peerdiff in the cgroup v2 VM with the kubelet and slicelet copied in.
func runVM(ctx context.Context, self, work, kubelet, slicelet string, args []string, mem, cpus int, stderr io.Writer) error {
	files := map[string]string{"slicelet": slicelet}
	if kubelet != "" {
		files["kubelet"] = kubelet
	}
	res, err := peerrun.RunVM(ctx, peerrun.VMOptions{
		Binary: self,
		Args:   append(args, "-kubelet", "/mnt/io/kubelet", "-slicelet", "/mnt/io/slicelet"),
		Files:  files,
		Dir:    work, MemMiB: mem, CPUs: cpus, Timeout: 90 * time.Minute,
	})
	stderr.Write(res.Output)
	if err != nil {
		return fmt.Errorf("%w; console: %s", err, tail(res.Console, 30))
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("inside the VM: exit %d", res.ExitCode)
	}
	return nil
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readResults(path string) ([]batchResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var out []batchResult
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	return out, nil
}

// nodeAllocatable is what pods get on a machine of cpus CPUs and memTotal bytes of memory
// under c (capacity minus reservations and the hard memory eviction threshold), with a tenth
// kept back for rounding and for what runs beside the pods.
func nodeAllocatable(c peerrun.NodeConfig, cpus int, memTotal int64) allocatable {
	cpu := int64(cpus) * 1000
	for _, r := range []map[string]string{c.SystemReserved, c.KubeReserved} {
		cpu -= quantity(r["cpu"], true)
		memTotal -= quantity(r["memory"], false)
	}
	memTotal -= quantity(c.EvictionHard["memory.available"], false)
	return allocatable{CPUMilli: cpu * 9 / 10, MemoryBytes: memTotal * 9 / 10, Pods: c.MaxPods}
}

// thisMachine is the CPUs and memory (MemTotal, bytes) of the machine this program runs on.
func thisMachine() (int, int64) {
	memTotal := int64(0)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				memTotal = kb * 1024
			}
		}
		f.Close()
	}
	return runtime.NumCPU(), memTotal
}
