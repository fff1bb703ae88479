package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/hack/peer/cluster"
	"github.com/slicelet/slicelet/hack/peer/conformance"
	"github.com/slicelet/slicelet/hack/peer/markdown"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// ShardHeading is docs/cluster.md's section the shard report is written to.
const ShardHeading = "## Conformance on several nodes"

// shardOptions are the shard mode's flags.
type shardOptions struct {
	shard, nodes, addons, imagesSrc, results, commit, prefix string
	// only narrows the shard to the specs it matches (a re-run of chosen specs).
	only string
	// part, with only, makes the run a part i/n of the shard (conformance.ShardRun.Part).
	part string
	// focusName, when set, makes the run a focus run of that name (conformance.FocusSection):
	// options' Focus and Skip chosen, not a SIG's [Conformance] specs.
	focusName string
	// sampleAPIServer is k8s.io/sample-apiserver's binary (the aggregator spec's image), none
	// when empty.
	sampleAPIServer string
}

// runShard starts a cluster of the nodes listed (hack/peer/cluster: the add-ons as workloads,
// the e2e images imported into every node), runs the shard's [Conformance] specs with ginkgo
// in the control plane's sandbox, stops the cluster, and records the results in the results
// directory.
func runShard(ctx context.Context, o options, s shardOptions) (err error) {
	var focus string
	var sigs []string
	if s.focusName != "" {
		if s.part != "" {
			return fmt.Errorf("-part %s: a focus run has no parts (name each its own run)", s.part)
		}
		if focus, err = conformance.FocusRunFocus(s.focusName, o.Focus, o.Skip, s.only); err != nil {
			return err
		}
		s.results = filepath.Join(s.results, conformance.FocusSubdir)
	} else if focus, sigs, err = shardFocus(s); err != nil {
		return err
	}
	specs, err := cluster.ParseNodes(s.nodes)
	if err != nil {
		return err
	}
	if len(specs) < 2 {
		return fmt.Errorf("-nodes %q: the Conformance suite needs at least two nodes", s.nodes)
	}
	for _, p := range []*string{&o.BinDir, &o.Agnhost, &o.Nonewprivs, &o.Slicelet, &o.Work, &s.addons, &s.results} {
		if *p == "" {
			return errors.New("-bin, -agnhost, -nonewprivs, -slicelet, -addons, -results and -work are required")
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	for _, p := range []*string{&o.BinDir, &o.Agnhost, &o.Nonewprivs, &o.Slicelet, &s.addons} {
		if *p, err = filepath.EvalSymlinks(*p); err != nil {
			return fmt.Errorf("%w (make build peer-build peer-addons-build)", err)
		}
	}
	for _, f := range []string{"e2e.test", "ginkgo", "kubectl"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, f)); err != nil {
			return fmt.Errorf("%w (make peer-build)", err)
		}
	}
	if err := os.RemoveAll(o.Work); err != nil {
		return err
	}
	applets, err := conformance.BusyboxApplets(ctx, o.Busybox)
	if err != nil {
		return err
	}
	tools, err := hostTools(s.addons, filepath.Join(o.BinDir, "etcd"), s.sampleAPIServer)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Printf("== %s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	logf("%s on nodes %s (focus %s, skip %s)", cmp.Or(s.focusName, "shard "+strings.Join(sigs, ",")), s.nodes, focus, cmp.Or(o.Skip, "none"))
	c, err := cluster.Start(ctx, cluster.Options{Work: o.Work, BinDir: o.BinDir, Slicelet: o.Slicelet, AddonsDir: s.addons,
		Nodes: specs, Prefix: s.prefix, Log: os.Stdout, SliceletDNS: true,
		ExtraImages: conformance.ClusterImages(o.Busybox, o.Agnhost, o.Nonewprivs, applets, s.imagesSrc, tools)})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the cluster (nodes, control plane, sandboxes %s-*)", s.prefix)
		err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
	}()
	run := conformance.ShardRun{SIGs: sigs, Focus: focus, Skip: o.Skip, Procs: o.Procs, Commit: s.commit, NodeVersions: map[string]string{}, Only: s.only, Part: s.part, Name: s.focusName}
	if s.focusName != "" {
		// The focus asked for, the re-run's specs in Only (ginkgo's focus joins them).
		run.Focus = o.Focus
	}
	for _, n := range specs {
		run.Nodes = append(run.Nodes, string(n.Kind))
		if node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			run.NodeVersions[n.Name] = node.Status.NodeInfo.KubeletVersion
		}
	}
	reports := filepath.Join(o.Work, "reports")
	if err := os.MkdirAll(reports, 0o755); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(reports, "e2e.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"-p", "--procs=" + strconv.Itoa(o.Procs), "--timeout=" + o.Timeout.String(), "--no-color", "--silence-skips", "--poll-progress-after=10m",
		"--focus=" + focus}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	args = append(args, filepath.Join(o.BinDir, "e2e.test"), "--",
		"--kubeconfig="+c.CP.AdminKubeconfig(), "--provider=skeleton", "--kubectl-path="+filepath.Join(o.BinDir, "kubectl"),
		"--report-dir="+reports, "--e2e-verify-service-account=false", "--dump-logs-on-failure=false", "--disable-log-dump")
	logf("every node Ready; ginkgo %s (output in %s)", strings.Join(args, " "), log.Name())
	// The suite's own --timeout bounds it; the context (ginkgo's timeout and a margin for its
	// reports) bounds it if ginkgo itself hangs.
	runCtx, cancel := context.WithTimeout(ctx, o.Timeout+10*time.Minute)
	defer cancel()
	cmd := c.Command(runCtx, filepath.Join(o.BinDir, "ginkgo"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = time.Minute
	run.Started = time.Now().UTC()
	runErr := cmd.Run()
	run.Duration = time.Since(run.Started).Round(time.Second).String()
	logf("the suite took %s (%v)", run.Duration, cmp.Or[any](runErr, "all passed"))
	focusRe, err := regexp.Compile(run.Focus)
	if err != nil {
		return err
	}
	rs, err := conformance.ReadJUnit(filepath.Join(reports, "junit_01.xml"), focusRe)
	if err != nil {
		return fmt.Errorf("no JUnit report after ginkgo (%v): %w; see %s", runErr, err, log.Name())
	}
	if s.focusName != "" {
		// ginkgo's report lists the specs --skip left out as skipped: not the run's.
		rs = conformance.FocusKept(rs, o.Skip, s.only)
	}
	run.Specs = rs
	if runErr != nil && rs.SuiteFailed() {
		run.Error = runErr.Error()
	}
	cnt := conformance.Count(rs)
	logf("%s cluster, %s: %d selected, %d ran, %d passed, %d failed, %d skipped", run.Kind(), cmp.Or(s.focusName, strings.Join(sigs, ",")), cnt.Selected, cnt.Ran, cnt.Passed, cnt.Failed, cnt.Skipped)
	path, err := conformance.WriteRun(s.results, run)
	if err != nil {
		return err
	}
	logf("results: %s", path)
	return nil
}

// shardFocus is a shard's ginkgo --focus (narrowed to -specs) and SIGs; -part needs -specs.
func shardFocus(s shardOptions) (string, []string, error) {
	focus, sigs, err := conformance.ShardFocus(s.shard)
	if err != nil {
		return "", nil, err
	}
	if s.only != "" {
		if focus, err = conformance.NarrowFocus(focus, s.only); err != nil {
			return "", nil, err
		}
	}
	if s.part != "" {
		if s.only == "" {
			return "", nil, fmt.Errorf("-part %s: a part names its specs with -specs", s.part)
		}
		if _, _, err := conformance.ParsePart(s.part); err != nil {
			return "", nil, err
		}
	}
	return focus, sigs, nil
}

// toolBinaries are the machine's programs the images get (apt-get install curl netcat-openbsd
// bind9-dnsutils dash; getent is libc-bin's).
var toolBinaries = []string{"/usr/bin/curl", "/usr/bin/nc", "/usr/bin/dig", "/usr/bin/getent", shell}

// shell is Debian's dash, the images' /bin/sh (conformance.ClusterTools.Shell).
const shell = "/usr/bin/dash"

// hostTools are toolBinaries with their libraries, coredns from the add-ons directory, and the
// aggregator spec's etcd (with its libraries) and sample API server (when not empty).
func hostTools(addons, etcd, sampleAPIServer string) (*conformance.ClusterTools, error) {
	var paths []string
	for _, b := range toolBinaries {
		p, err := filepath.EvalSymlinks(b)
		if err != nil {
			return nil, fmt.Errorf("%w (apt-get install curl netcat-openbsd bind9-dnsutils dash)", err)
		}
		paths = append(paths, p)
	}
	files, err := cluster.ELFFiles(paths)
	if err != nil {
		return nil, err
	}
	for i, b := range toolBinaries {
		if paths[i] != b {
			files = append(files, critest.File{Path: strings.TrimPrefix(b, "/"), Link: paths[i]})
		}
	}
	tools := &conformance.ClusterTools{Files: files, CoreDNS: filepath.Join(addons, cluster.CoreDNSBinary), Shell: shell}
	if sampleAPIServer != "" {
		if tools.SampleAPIServer, err = filepath.EvalSymlinks(sampleAPIServer); err != nil {
			return nil, fmt.Errorf("%w (make peer-conformance builds it)", err)
		}
		if tools.Etcd, err = filepath.EvalSymlinks(etcd); err != nil {
			return nil, fmt.Errorf("%w (make peer-build)", err)
		}
		etcdFiles, err := cluster.ELFFiles([]string{tools.Etcd})
		if err != nil {
			return nil, err
		}
		tools.EtcdFiles = etcdFiles[1:]
	}
	return tools, nil
}

// shardIntro opens the docs section.
const shardIntro = "`make peer-conformance SHARD=<SIGs> NODES=<agents>` (hack/peer/cmd/conformance, hack/peer/conformance/shard.go) " +
	"starts a cluster as `make cluster-demo` does (hack/peer/cluster: the control plane in a throwaway systemd sandbox, each node in " +
	"its own with its own containerd and network namespace on a shared bridge; flannel host-gw, kube-proxy iptables and CoreDNS " +
	"as workloads; every image built locally) with the e2e suite's images imported into every node, and runs e2e.test " +
	"(`k8s.io/kubernetes/test/e2e` v1.37.2) with ginkgo in the control plane's namespace: `--focus='\\[(SIGs)\\].*\\[Conformance\\]'`, " +
	"nothing skipped, `--provider=skeleton`. Each run's results are recorded in docs/conformance/<cluster>_<SIGs>.json " +
	"(every spec's status and first failure line, the nodes' versions, start, duration, the tree's commit: slicelet's and the harness's); this section is " +
	"rendered from those files (`make conformance-report`), the newest run of each SIG and cluster kind counting. A kubelet " +
	"cluster has only kubelet v1.37.2 nodes, a slicelet cluster only slicelet nodes. sig-node's specs run on one node in " +
	"`make peer-conformance` without SHARD (\"Node conformance\" above). The machine: 2 cores shared with other work, " +
	"cgroup v1 hybrid, Debian's containerd 1.6.\n"

// FocusHeading is docs/cluster.md's section the focus runs' report is written to.
const FocusHeading = "## Chosen e2e specs on several nodes"

// focusIntro opens the focus runs' section.
const focusIntro = "`make peer-conformance FOCUS=<regexp> [SKIP=<regexp>] FOCUS_NAME=<name> NODES=<agents>` runs the e2e specs " +
	"the focus matches and the skip does not, any (not a SIG's [Conformance] ones), on a multi-node cluster started as for the " +
	"shards above, with the same images and flags. Each run's results are recorded in docs/conformance/focus/<cluster>_<name>.json " +
	"(`SPECS=<regexp>`: a re-run of the run's specs it matches, <cluster>_<name>_rerun.json, listed apart); this section is " +
	"rendered from those files (`make conformance-report`), the newest run of each name and cluster kind counting. Skipped specs " +
	"are those the suite skipped itself at run time (a driver or a volume type without the capability a test pattern needs); " +
	"the specs the skip expression matches are not counted. Why each focus and skip, and every difference's cause: " +
	"\"Storage\" above.\n"

// renderShards rewrites docs' shard section from the results directory, and the focus runs'
// section from its focus subdirectory when it holds runs.
func renderShards(results, docs string) error {
	runs, err := conformance.ReadRuns(results)
	if err != nil {
		return err
	}
	focusRuns, err := conformance.ReadRuns(filepath.Join(results, conformance.FocusSubdir))
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(docs)
	if err != nil {
		return err
	}
	text := placeSection(string(doc), ShardHeading)
	text = markdown.ReplaceSection(text, ShardHeading, conformance.ShardSection(runs, conformance.ShardNotes, shardIntro))
	if len(focusRuns) > 0 {
		text = placeSection(text, FocusHeading)
		text = markdown.ReplaceSection(text, FocusHeading, conformance.FocusSection(focusRuns, conformance.ShardNotes, focusIntro))
	}
	return os.WriteFile(docs, []byte(text), 0o644)
}

// placeSection adds an empty section heading to text when it has none: before the benchmarks'
// section (after the conformance sections' reading notes), or at the end.
func placeSection(text, heading string) string {
	if strings.Contains(text, "\n"+heading+"\n") {
		return text
	}
	anchor := "\n## Benchmarks\n"
	if i := strings.Index(text, anchor); i >= 0 {
		return text[:i+1] + heading + "\n\n" + text[i+1:]
	}
	return text + "\n" + heading + "\n\n"
}
