// Command peerbench measures slicelet against the real kubelet on the same node (make
// peer-bench): one run, in a throwaway systemd sandbox on this machine's cgroup v1 hybrid layout
// (hack/peer/peerrun: the same containerd, the same node settings), the two agents alternated
// round by round (kubelet first in even rounds, slicelet first in odd ones), -reps rounds:
//
//   - manifest → Running: a manifest renamed into the idle agent's manifest directory until its
//     container runs (containerd's StartedAt), one pod five times per round, then 30 pods at
//     once (the last one); the same pod through direct CRI calls, no agent, is the floor;
//   - agent start → 110 pods Running: the agent started on a directory of 110 manifests;
//   - RSS (VmRSS) and idle CPU (user+system over -idle) of the agent with those 110 pods;
//   - image GC: 10 unused images of distinct sizes imported (ctr) before the agent starts with
//     image GC due at once (high threshold 1 %, low 0 %, no minimum age); agent start → none of
//     them left, how many images it removed and their CRI sizes (imagegc.go);
//   - eviction end to end: the kubelet registered with a local control plane
//     (hack/peer/controlplane; pods created through the API, because a standalone kubelet never
//     evicts static pods) and slicelet (pods through its local API), each with a hard
//     memory.available threshold 300 MiB below what is available at the round's start; a
//     BestEffort hog grows past it: hog start (StartedAt) → threshold crossed (the node's
//     working set, read every 10 ms as the kubelet computes it) → victim killed (the hog's
//     FinishedAt) → pod gone (its sandbox no longer ready);
//   - cluster mode (cluster.go): one control plane, the kubelet node and the slicelet node taking
//     turns as the same Node (deleted between turns): agent start → Node Ready in the API; one
//     pod (five times) and 30 pods created through the API → Running with its containers ready
//     in a watch event; then -pods API pods, and the agent's RSS and idle CPU over
//     -cluster-idle with them (watch and lease traffic included);
//   - idle footprint alone (-only idle): each agent started on -pods manifests, its RSS (and
//     its anonymous and file-backed parts) and CPU over -idle once they run, -reps rounds; with
//     -baseline a second slicelet binary (the tree before a change) takes its turn in the same
//     rounds. It prints its table and writes no section.
//
// -only runs some scenarios alone (-only imagegc, -only cluster). It writes the "## peer-bench"
// section of -out (docs/peer.md) with the table of the standalone scenarios, the
// slicelet/kubelet ratios of the medians, the machine and the command, and the "## Benchmarks"
// section of -cluster-out (docs/cluster.md) with the cluster scenario's, and prints them.
//
// On the host it boots the sandbox and runs itself inside with -inside, which writes the
// samples to <work>/results.json.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/slicelet/slicelet/hack/peer/markdown"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// options are the command line.
type options struct {
	work, kubelet, slicelet, bin, out string
	reps, pods                        int
	idle, clusterIdle                 time.Duration
	latency, eviction, imageGC        bool
	cluster, idleOnly                 bool
	baseline, dropIn                  string
	noKubelet                         bool
	clusterOut                        string
	only                              string
	inside                            bool
	// density runs the density rounds: densityPods background pods, densitySamples pods one
	// at a time on the loaded node, for the agents of densityAgents.
	density                     bool
	densityPods, densitySamples int
	densityAgents               []peerrun.Kind
}

// selection is what -only chose.
type selection struct {
	latency, imageGC, eviction, cluster, density, idle bool
	// densityPods and sliceletAlone are set by density1000: 1000 pods, slicelet alone.
	densityPods   int
	sliceletAlone bool
}

func main() {
	var o options
	flag.StringVar(&o.work, "work", "build/peer-bench", "work directory (emptied first)")
	flag.StringVar(&o.kubelet, "kubelet", "build/peer/v1.37.2/kubelet", "the kubelet binary")
	flag.StringVar(&o.slicelet, "slicelet", "bin/slicelet", "the slicelet binary")
	flag.StringVar(&o.bin, "bin", "build/peer/v1.37.2", "the control plane's binaries (etcd, kube-apiserver)")
	flag.StringVar(&o.out, "out", "docs/peer.md", "markdown file whose \"## peer-bench\" section to write; empty for none")
	flag.IntVar(&o.reps, "reps", 5, "rounds per agent")
	flag.IntVar(&o.pods, "pods", 110, "pods of the start and idle figures")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "idle window of the CPU figure")
	flag.BoolVar(&o.latency, "latency", true, "run the latency and footprint rounds")
	flag.BoolVar(&o.eviction, "eviction", true, "run the eviction rounds (needs etcd and kube-apiserver in -bin)")
	flag.BoolVar(&o.imageGC, "imagegc", true, "run the image GC rounds")
	flag.BoolVar(&o.cluster, "cluster", true, "run the cluster-mode rounds (needs etcd and kube-apiserver in -bin)")
	flag.DurationVar(&o.clusterIdle, "cluster-idle", time.Minute, "idle window of the cluster-mode CPU figure")
	flag.StringVar(&o.clusterOut, "cluster-out", "docs/cluster.md", "markdown file whose \"## Benchmarks\" section to write with the cluster-mode table; empty for none")
	flag.StringVar(&o.only, "only", "", "run only these scenarios, comma-separated: latency, imagegc, eviction, cluster, density, density1000 (density at 1000 pods, slicelet alone), idle")
	flag.BoolVar(&o.density, "density", false, "run the density rounds (cluster mode; needs etcd and kube-apiserver in -bin)")
	flag.IntVar(&o.densityPods, "density-pods", 250, "background pods of the density rounds")
	flag.IntVar(&o.densitySamples, "density-samples", 20, "pods created one at a time on the loaded node per density round")
	agents := flag.String("density-agents", "kubelet,slicelet", "agents of the density rounds, comma-separated")
	flag.StringVar(&o.baseline, "baseline", "", "idle scenario: a second slicelet binary measured in the same rounds (reported as slicelet-baseline)")
	flag.StringVar(&o.dropIn, "slicelet-dropin", "", "a TOML file given to every slicelet of the run as its config.d drop-in")
	flag.BoolVar(&o.noKubelet, "no-kubelet", false, "idle scenario: slicelet (and -baseline) alone, no ratio to the kubelet")
	flag.BoolVar(&o.idleOnly, "idle-rounds", false, "internal: run the idle footprint rounds (-only idle)")
	flag.BoolVar(&o.inside, "inside", false, "internal: run the rounds inside the sandbox")
	flag.Parse()
	var err error
	if o.densityAgents, err = parseAgents(*agents); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(2)
	}
	if o.only != "" {
		sel, err := scenarios(o.only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peerbench:", err)
			os.Exit(2)
		}
		o.latency, o.imageGC, o.eviction, o.cluster, o.density, o.idleOnly = sel.latency, sel.imageGC, sel.eviction, sel.cluster, sel.density, sel.idle
		if sel.densityPods > 0 {
			o.densityPods = sel.densityPods
		}
		if sel.sliceletAlone {
			o.densityAgents = []peerrun.Kind{peerrun.Slicelet}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.inside {
		err = inside(ctx, o)
	} else {
		err = host(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// scenarios reads -only: which of the latency and footprint, image GC, eviction, cluster and
// density rounds run.
func scenarios(only string) (selection, error) {
	var sel selection
	for _, s := range strings.Split(only, ",") {
		switch strings.TrimSpace(s) {
		case "latency":
			sel.latency = true
		case "imagegc":
			sel.imageGC = true
		case "eviction":
			sel.eviction = true
		case "cluster":
			sel.cluster = true
		case "density":
			sel.density = true
		case "idle":
			sel.idle = true
		case "density1000":
			sel.density, sel.densityPods, sel.sliceletAlone = true, 1000, true
		default:
			return selection{}, fmt.Errorf("-only %q: unknown scenario %q (latency, imagegc, eviction, cluster, density, density1000, idle)", only, s)
		}
	}
	return sel, nil
}

// parseAgents reads -density-agents.
func parseAgents(s string) ([]peerrun.Kind, error) {
	var out []peerrun.Kind
	for _, a := range strings.Split(s, ",") {
		switch k := peerrun.Kind(strings.TrimSpace(a)); k {
		case peerrun.Kubelet, peerrun.Slicelet:
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		default:
			return nil, fmt.Errorf("-density-agents %q: unknown agent %q (kubelet, slicelet)", s, a)
		}
	}
	return out, nil
}

// resultFile is where the inside half leaves the samples, in the work directory.
const resultFile = "results.json"

// host boots the sandbox, runs the rounds inside and writes the section.
func host(ctx context.Context, o options) error {
	if o.reps < 1 || o.pods < 1 || o.idle <= 0 || o.clusterIdle <= 0 || o.densityPods < 1 || o.densitySamples < 1 {
		return fmt.Errorf("-reps %d, -pods %d, -idle %s, -cluster-idle %s, -density-pods %d, -density-samples %d: want positive values",
			o.reps, o.pods, o.idle, o.clusterIdle, o.densityPods, o.densitySamples)
	}
	work, err := filepath.Abs(o.work)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	kubelet, err := resolve(o.kubelet)
	if err != nil {
		return fmt.Errorf("kubelet binary (make peer-build): %w", err)
	}
	bin, err := resolve(o.bin)
	if err != nil && (o.eviction || o.cluster || o.density) {
		return fmt.Errorf("control plane binaries (make peer-build): %w", err)
	}
	slicelet, err := filepath.Abs(o.slicelet)
	if err == nil {
		_, err = os.Stat(slicelet)
	}
	if err != nil {
		return fmt.Errorf("slicelet binary (make build): %w", err)
	}
	binds := []string{filepath.Dir(kubelet), filepath.Dir(slicelet)}
	var extra []string
	if o.baseline != "" {
		base, err := filepath.Abs(o.baseline)
		if err == nil {
			_, err = os.Stat(base)
		}
		if err != nil {
			return fmt.Errorf("-baseline: %w", err)
		}
		binds = append(binds, filepath.Dir(base))
		extra = append(extra, "-baseline", base)
	}
	if o.dropIn != "" {
		d, err := filepath.Abs(o.dropIn)
		if err == nil {
			_, err = os.Stat(d)
		}
		if err != nil {
			return fmt.Errorf("-slicelet-dropin: %w", err)
		}
		binds = append(binds, filepath.Dir(d))
		extra = append(extra, "-slicelet-dropin", d)
	}
	if bin != "" {
		binds = append(binds, bin)
	}
	// PEERRUN_SANDBOX_PREFIX prefixes the sandbox's name (one per person sharing a machine).
	sb, err := peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: fmt.Sprintf("%speerbench-%d", os.Getenv("PEERRUN_SANDBOX_PREFIX"), os.Getpid()), WorkDir: work, Binds: binds, Log: os.Stderr})
	if err != nil {
		return err
	}
	inner, err := peerrun.CopySelf(work, "peerbench")
	if err != nil {
		return errors.Join(err, sb.Stop())
	}
	began := time.Now()
	cmd := sb.Command(ctx, "/", inner, "-inside", "-work", work, "-kubelet", kubelet, "-slicelet", slicelet,
		"-bin", bin, "-reps", strconv.Itoa(o.reps), "-pods", strconv.Itoa(o.pods), "-idle", o.idle.String(), "-eviction="+strconv.FormatBool(o.eviction), "-latency="+strconv.FormatBool(o.latency), "-imagegc="+strconv.FormatBool(o.imageGC),
		"-cluster="+strconv.FormatBool(o.cluster), "-cluster-idle="+o.clusterIdle.String(),
		"-density="+strconv.FormatBool(o.density), "-density-pods="+strconv.Itoa(o.densityPods), "-density-samples="+strconv.Itoa(o.densitySamples),
		"-density-agents="+joinKinds(o.densityAgents), "-idle-rounds="+strconv.FormatBool(o.idleOnly), "-no-kubelet="+strconv.FormatBool(o.noKubelet))
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	if err := sb.Stop(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if runErr != nil {
		return fmt.Errorf("inside the sandbox: %w", runErr)
	}
	data, err := os.ReadFile(filepath.Join(work, resultFile))
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", resultFile, err)
	}
	mach, took := machine(), time.Since(began)
	if o.latency || o.imageGC || o.eviction {
		body := render(o, r, mach, began, took)
		fmt.Println(body)
		if err := writeSection(o.out, "# slicelet beside the real kubelet\n", "## peer-bench", body); err != nil {
			return err
		}
	}
	if o.idleOnly {
		fmt.Println(renderIdle(o, r, mach, began, took))
	}
	if o.cluster {
		body := renderCluster(o, r, mach, began, took)
		fmt.Println(body)
		if err := writeSection(o.clusterOut, "# Cluster mode\n", "## Benchmarks", body); err != nil {
			return err
		}
	}
	if o.density {
		body := renderDensity(o, r, mach, began, took)
		fmt.Println(body)
		if err := writeSection(o.clusterOut, "# Cluster mode\n", densityHeading(o), body); err != nil {
			return err
		}
	}
	return nil
}

func joinKinds(ks []peerrun.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// writeSection replaces the section under heading in the markdown file path (made with head
// when absent) with body; an empty path writes nothing.
func writeSection(path, head, heading, body string) error {
	if path == "" {
		return nil
	}
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(doc) == 0 {
		doc = []byte(head)
	}
	return os.WriteFile(path, []byte(markdown.ReplaceSection(string(doc), heading, body)), 0o644)
}

// resolve is the absolute path of p with symbolic links followed (build/peer/<version> may link
// to another checkout's build; the sandbox runs the inside half in /).
func resolve(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(r)
}

// render is the section's body.
func render(o options, r results, mach string, began time.Time, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`make peer-bench` (`build/peerbench -reps %d -pods %d -idle %s -latency=%t -imagegc=%t -eviction=%t`), run %s, took %s. ",
		o.reps, o.pods, o.idle, o.latency, o.imageGC, o.eviction, began.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	b.WriteString("One run in one cgroup v1 (hybrid) systemd sandbox, both agents on the same containerd with the same node settings (hack/peer/peerrun), ")
	fmt.Fprintf(&b, "%d rounds, the agents alternated (kubelet first in even rounds, slicelet first in odd ones). ", r.Reps)
	b.WriteString("Figures are medians with the range and the number of samples; the ratio is slicelet's median over the kubelet's. ")
	b.WriteString("Running is containerd's StartedAt of the pod's container (both agents use the same containerd); the kubelet runs standalone on static pods except in the eviction rounds, where it is registered with a local kube-apiserver and etcd (hack/peer/controlplane) and the pods are created through the API; slicelet's pods there come through its local API.\n\n")
	fmt.Fprintf(&b, "Machine: %s.\n\n", mach)
	b.WriteString(table(rows(r, metrics)))
	if f := summarize(r.Samples["one"][floor]); f.n > 0 {
		fmt.Fprintf(&b, "\nCRI floor: the same one pod through direct CRI calls with no agent running (RunPodSandbox, CreateContainer, StartContainer; the first call to StartedAt), five times per round: %s ms.\n", f)
	}
	if r.Samples["imagegc"] != nil {
		fmt.Fprintf(&b, "\nImage GC: %d unused images of 1–%d MiB (plus the test and sandbox images, unused too) imported before each round, the agent started with a high threshold of 1 %%, a low one of 0 %% and no minimum age (the kubelet: --minimum-image-ttl-duration=0s, since its defaulting turns imageMinimumGCAge 0s in the file into 2m; its GC loop runs at its start; slicelet gc.images.period 1s, its timer's first run). ", gcImages, gcImages)
		for _, k := range []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet} {
			fmt.Fprintf(&b, "Besides the set, %s removed: %s. ", k, orNone(r.GCOthers[k]))
		}
		b.WriteString("\n")
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nRounds that failed (left out of the figures):\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	b.WriteString("\nNot measured yet: the cgroup v2 VM.\n")
	return b.String()
}

// renderIdle is the idle scenario's report: the command, the machine and its load, the table,
// and the baseline binary's figures beside slicelet's.
func renderIdle(o options, r results, mach string, began time.Time, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`build/peerbench -only idle -reps %d -pods %d -idle %s", o.reps, o.pods, o.idle)
	if o.baseline != "" {
		fmt.Fprintf(&b, " -baseline %s", o.baseline)
	}
	if o.dropIn != "" {
		fmt.Fprintf(&b, " -slicelet-dropin %s", o.dropIn)
	}
	if o.noKubelet {
		b.WriteString(" -no-kubelet")
	}
	fmt.Fprintf(&b, "`, run %s, took %s. Each agent started on %d manifests in turn (the kubelet first in even rounds), its footprint read 10 s after the last pod ran: VmRSS (RssAnon and RssFile) of its main process, user+system CPU over %s.\n\n", began.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), o.pods, o.idle)
	fmt.Fprintf(&b, "Machine: %s. Load average (1, 5, 15 min) at each round's start and at the end: %s.\n\n", mach, strings.Join(r.Load, "; "))
	b.WriteString(table(rows(r, idleMetrics)))
	if o.baseline != "" {
		b.WriteString("\nslicelet-baseline (-baseline):\n\n")
		for _, m := range idleMetrics {
			base, cur := summarize(r.Samples[m.key][baselineKind]), summarize(r.Samples[m.key][peerrun.Slicelet])
			rel := "—"
			if base.n > 0 && cur.n > 0 && base.median > 0 {
				rel = fmt.Sprintf("%.3f×", cur.median/base.median)
			}
			fmt.Fprintf(&b, "- %s (%s): baseline %s, slicelet %s, slicelet/baseline %s\n", m.title, m.unit, base, cur, rel)
		}
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nRounds that failed (left out of the figures):\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	return b.String()
}

// renderCluster is the body of docs/cluster.md's benchmark section.
func renderCluster(o options, r results, mach string, began time.Time, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`make peer-bench` (`build/peerbench -reps %d -pods %d -cluster-idle %s`; this table alone: `build/peerbench -only cluster -out ''`), run %s, took %s (all scenarios of the run). ",
		o.reps, o.pods, o.clusterIdle, began.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	b.WriteString("One control plane (etcd and kube-apiserver from build/peer, the Node authorizer and NodeRestriction, no scheduler or controller manager: the pods are created with `spec.nodeName` set) and one private containerd in a cgroup v1 (hybrid) systemd sandbox (hack/peer/peerrun, hack/peer/controlplane); ")
	fmt.Fprintf(&b, "the kubelet node (`--kubeconfig` with the node's `system:node:%s` certificate) and the slicelet node (`[cluster]` with the same credentials) take turns as the same Node, which is deleted with its Lease and pods between turns; ", peerrun.NodeName)
	fmt.Fprintf(&b, "%d rounds, the agents alternated (kubelet first in even rounds, slicelet first in odd ones). ", r.Reps)
	b.WriteString("Times are from the client's create call (the agent's start) to the watch event that shows the pod Running with its containers ready (the Node Ready); the pods are BestEffort busybox sleepers without a service-account token. ")
	fmt.Fprintf(&b, "RSS is the VmRSS of the agent's main process (the kubelet's is the kubelet alone), idle CPU its user+system time over %s with %d API pods running, after 10 s of settling. ", o.clusterIdle, o.pods)
	b.WriteString("Figures are medians with the range and the number of samples; the ratio is slicelet's median over the kubelet's.\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1, 5, 15 min) at each turn's start and at the end: %s (2 cores shared with other work).\n\n", mach, strings.Join(r.Load, "; "))
	b.WriteString(table(rows(r, clusterMetrics)))
	failedRounds(&b, r.Errors, "cluster")
	return b.String()
}

// failedRounds lists the errors that mention scenario.
func failedRounds(b *strings.Builder, errors []string, scenario string) {
	var errs []string
	for _, e := range errors {
		if strings.Contains(e, scenario) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nRounds that failed (left out of the figures):\n\n")
		for _, e := range errs {
			fmt.Fprintf(b, "- %s\n", e)
		}
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// machine describes the machine: CPU model and count, memory, kernel.
func machine() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return runtime.GOOS + "/" + runtime.GOARCH
	}
	model := "unknown CPU"
	if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
		model = cpus[0].ModelName
	}
	mem := ""
	if mi, err := fs.Meminfo(); err == nil && mi.MemTotal != nil {
		mem = fmt.Sprintf(", %.1f GiB memory", float64(*mi.MemTotal)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s, %d cores%s, kernel %s, %s", model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}
