// Command conformance is make peer-conformance (package hack/peer/conformance): e2e.test's
// sig-node Conformance specs against a kubelet node, then against a slicelet node, on one local
// control plane and one private containerd with a CNI bridge, inside a throwaway systemd
// sandbox; then the comparison of their JUnit reports, written to -report and as the
// "## Node conformance" section of -docs.
//
//	go run ./cmd/conformance -bin DIR -ginkgo FILE -agnhost FILE -slicelet FILE -work DIR   (from hack/peer, as root)
//
// On the machine it boots the sandbox and runs itself inside it; inside it runs the suites.
// -compare-only skips the runs and rewrites the report from the JUnit reports in -work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/hack/peer/cluster"
	"github.com/slicelet/slicelet/hack/peer/conformance"
	"github.com/slicelet/slicelet/hack/peer/markdown"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// options are the command's flags.
type options struct {
	conformance.Options
	agents, report, docs, status string
	compareOnly                  bool
	shardOptions
	renderOnly bool
}

func main() {
	cluster.RunNodeIfInside()
	var o options
	flag.StringVar(&o.BinDir, "bin", "", "the kubelet, the control plane's binaries, kubectl and e2e.test (build/peer/v1.37.2)")
	flag.StringVar(&o.Ginkgo, "ginkgo", "", "the ginkgo CLI (build/peer/v1.37.2/ginkgo)")
	flag.StringVar(&o.Agnhost, "agnhost", "", "the static agnhost binary (build/peer/v1.37.2/agnhost)")
	flag.StringVar(&o.Nonewprivs, "nonewprivs", "", "the static nonewprivs binary (build/peer/v1.37.2/nonewprivs)")
	flag.StringVar(&o.Busybox, "busybox", critest.DefaultBusybox, "the static busybox the images are built from")
	flag.StringVar(&o.Slicelet, "slicelet", "", "slicelet's binary (bin/slicelet)")
	flag.StringVar(&o.Work, "work", "", "the run directory: the reports and logs stay there")
	flag.StringVar(&o.agents, "agents", "kubelet,slicelet", "the nodes to run the specs against, in order")
	flag.StringVar(&o.Focus, "focus", conformance.Focus, "the specs (ginkgo --focus)")
	flag.StringVar(&o.Skip, "skip", conformance.SkipRegexp(conformance.Skips), "the specs not run (ginkgo --skip)")
	flag.IntVar(&o.Procs, "procs", 4, "ginkgo's parallel processes")
	flag.DurationVar(&o.Timeout, "timeout", 3*time.Hour, "each node's suite at most (ginkgo --timeout)")
	flag.StringVar(&o.report, "report", "", "the comparison's full report (markdown); none when empty")
	flag.StringVar(&o.docs, "docs", "", "the document whose \"## Node conformance\" section is rewritten; none when empty")
	flag.StringVar(&o.status, "status", "", "a file listing the specs failing on the slicelet node; none when empty")
	flag.BoolVar(&o.compareOnly, "compare-only", false, "only compare the reports in -work")
	flag.StringVar(&o.shard, "shard", "", "run these SIGs' [Conformance] specs (comma-separated: sig-network,sig-cli) on a multi-node cluster (-nodes) instead of the one-node sig-node run")
	flag.StringVar(&o.only, "specs", "", "with -shard: only the shard's specs whose text matches this regular expression (a re-run of chosen specs, recorded apart from the shard's runs)")
	flag.StringVar(&o.part, "part", "", "with -shard and -specs: the run is the i-th of n parts (i/n) of the shard, the newest run of each part together counting as the whole shard's")
	flag.StringVar(&o.focusName, "focus-name", "", "run the specs -focus matches and -skip does not (any, not [Conformance] by SIG) on a multi-node cluster (-nodes), recorded under this name apart from the shards")
	flag.StringVar(&o.sampleAPIServer, "sample-apiserver", "", "with -shard: k8s.io/sample-apiserver's static binary, the aggregator spec's image (with etcd's from -bin); not built when empty")
	flag.StringVar(&o.nodes, "nodes", "kubelet,kubelet", "the multi-node cluster's nodes, one agent a node (kubelet or slicelet)")
	flag.StringVar(&o.addons, "addons", "", "the add-ons' binaries: kube-proxy, flanneld, coredns, metrics-server (make peer-addons-build), for -shard")
	flag.StringVar(&o.imagesSrc, "images-src", "", "test/images of the k8s.io/kubernetes module (the Update Demo images' files), for -shard")
	flag.StringVar(&o.results, "results", "", "the directory of the shards' results (docs/conformance), for -shard and -render-only")
	flag.StringVar(&o.commit, "commit", "", "slicelet's commit, recorded with a shard's results")
	flag.StringVar(&o.prefix, "prefix", fmt.Sprintf("conformance-%d", os.Getpid()), "the start of a shard cluster's sandbox names")
	flag.BoolVar(&o.renderOnly, "render-only", false, "only rewrite -docs' shard section from -results")
	flag.Parse()
	if o.shard != "" || o.focusName != "" {
		// A shard runs every spec of its SIGs, a focus run its own focus: the one-node run's
		// focus and skips are not theirs.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["skip"] {
			o.Skip = ""
		}
		if o.focusName != "" && (!set["focus"] || o.shard != "") {
			fmt.Fprintln(os.Stderr, "peer-conformance: -focus-name needs -focus, and no -shard")
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, a := range strings.Split(o.agents, ",") {
		o.Agents = append(o.Agents, peerrun.Kind(strings.TrimSpace(a)))
	}
	var err error
	switch {
	case systemdtest.Inside():
		o.Out = os.Stdout
		err = conformance.Run(ctx, o.Options)
	case o.renderOnly:
		err = renderShards(o.results, o.docs)
	case o.shard != "" || o.focusName != "":
		err = runShard(ctx, o, o.shardOptions)
		if o.docs != "" && o.results != "" {
			err = errors.Join(err, renderShards(o.results, o.docs))
		}
	case o.compareOnly:
		err = compare(o)
	default:
		err = outside(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer-conformance: %v\n", err)
		os.Exit(1)
	}
}

// outside checks the inputs, boots the sandbox, runs this program inside it and compares the
// reports.
func outside(ctx context.Context, o options) (err error) {
	began := time.Now()
	for _, p := range []*string{&o.BinDir, &o.Ginkgo, &o.Agnhost, &o.Nonewprivs, &o.Slicelet, &o.Work} {
		if *p == "" {
			return errors.New("-bin, -ginkgo, -agnhost, -nonewprivs, -slicelet and -work are required")
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	// The binds into the sandbox are of the real paths (build/peer/v1.37.2 may be a symlink).
	for _, p := range []*string{&o.BinDir, &o.Ginkgo, &o.Agnhost, &o.Nonewprivs, &o.Slicelet} {
		if *p, err = filepath.EvalSymlinks(*p); err != nil {
			return fmt.Errorf("%w (make build peer-build)", err)
		}
	}
	for _, f := range []string{"kubelet", "kube-apiserver", "kubectl", "e2e.test"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, f)); err != nil {
			return fmt.Errorf("%w (make peer-build)", err)
		}
	}
	if err := os.RemoveAll(o.Work); err != nil {
		return err
	}
	fmt.Printf("== booting a throwaway systemd sandbox (its own network namespace: 127.0.0.1 is the cluster's)\n")
	sb, err := peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: fmt.Sprintf("conformance-%d", os.Getpid()), WorkDir: o.Work,
		Binds: binds(o.BinDir, filepath.Dir(o.Ginkgo), filepath.Dir(o.Agnhost), filepath.Dir(o.Nonewprivs), filepath.Dir(o.Slicelet))})
	if err != nil {
		return err
	}
	runErr := func() error {
		inner, err := peerrun.CopySelf(o.Work, "conformance")
		if err != nil {
			return err
		}
		cmd := sb.Command(ctx, "/", inner, "-bin", o.BinDir, "-ginkgo", o.Ginkgo, "-agnhost", o.Agnhost, "-nonewprivs", o.Nonewprivs, "-busybox", o.Busybox,
			"-slicelet", o.Slicelet, "-work", o.Work, "-agents", o.agents, "-focus", o.Focus, "-skip", o.Skip,
			"-procs", fmt.Sprint(o.Procs), "-timeout", o.Timeout.String())
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("inside the sandbox: %w", err)
		}
		return nil
	}()
	err = errors.Join(runErr, sb.Stop())
	fmt.Printf("== the sandbox stopped; peer-conformance took %s\n", time.Since(began).Round(time.Second))
	// What ran is compared even when a node's suite could not finish.
	return errors.Join(err, compare(o))
}

// binds are the distinct directories among dirs.
func binds(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if !strings.Contains(strings.Join(out, "\x00")+"\x00", d+"\x00") {
			out = append(out, d)
		}
	}
	return out
}

// intro opens the docs section.
const intro = "`make peer-conformance` (hack/peer/conformance) runs e2e.test (`k8s.io/kubernetes/test/e2e` v1.37.2, " +
	"built by `make peer-build` with the ginkgo CLI, agnhost and nonewprivs) with `--focus='%s'` against a kubelet node, then against a " +
	"slicelet node (cluster mode, `runtime.network = \"cni\"`), on one control plane (etcd, kube-apiserver, kube-scheduler, " +
	"kube-controller-manager on 127.0.0.1) and one private containerd 1.6 whose CNI bridge (Debian's containernetworking-plugins, " +
	"%s) gives pods their own IPs, inside a throwaway systemd sandbox (cgroup v1 hybrid). The specs run in parallel " +
	"(`ginkgo -p --procs=%d`); e2e.test's flags: `--provider=skeleton --e2e-verify-service-account=false " +
	"--dump-logs-on-failure=false`. No registry is reached: the images the specs name are built locally from Debian's " +
	"busybox-static and the agnhost binary (busybox 1.37.0-2 with every applet; agnhost 2.66.1, and 2.55 as the same binary, " +
	"ENTRYPOINT `/agnhost`, CMD `pause`, with the users of its Dockerfile; pause 3.10.2 as `agnhost pause`; nginx 1.27.0-2 " +
	"as busybox httpd on port 80; nonewprivs 1.4 with its nnp binary setuid root) and imported into containerd. agnhost's image has " +
	"curl (lifecycle hook specs run it): a script running busybox's wget stands in. The report with every spec's result is written to " +
	"build/conformance/report.md; the JUnit reports and both agents' logs stay in build/conformance/run/reports/.\n\n" +
	"Both nodes have the address 10.251.0.1 (on the sandbox's lo: the kubelet refuses a loopback node IP, and the API " +
	"server reaches each node's kubelet API there). The node directory is a shared mount and containerd's mount namespace " +
	"its slave, so volumes, subPaths and /etc/hosts the agents mount reach the containers. Only the specs in the skip table " +
	"below are not run: every other sig-node Conformance spec runs on this one-node cluster without cluster networking " +
	"(none needs a Service's ClusterIP to route; the API server reaches pods on the bridge for `pods/proxy`).\n\n" +
	"Specs that run a command in a container through the API server (e2e's ExecCommandInContainer: the ephemeral " +
	"container, /etc/hosts, subPath and in-place resize specs read files and cgroup values that way) go through " +
	"slicelet's kubelet API `/exec`, proxied to containerd's streaming server (see \"Kubelet API\").\n"

// compare reads the JUnit reports in the run directory and writes the report, the docs
// section and the status file.
func compare(o options) error {
	focus, err := regexp.Compile(o.Focus)
	if err != nil {
		return fmt.Errorf("-focus %q: %w", o.Focus, err)
	}
	results := map[peerrun.Kind]conformance.Results{}
	var errs []error
	for _, k := range []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet} {
		rs, err := conformance.ReadJUnit(filepath.Join(conformance.ReportDir(o.Work, k), "junit_01.xml"), focus)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s node: %w", k, err))
			continue
		}
		results[k] = rs
		c := conformance.Count(rs)
		fmt.Printf("peer-conformance: %s node: %d selected, %d ran, %d passed, %d failed, %d skipped\n", k, c.Selected, c.Ran, c.Passed, c.Failed, c.Skipped)
	}
	text := fmt.Sprintf(intro, o.Focus, critest.CNISubnet, o.Procs)
	var versions, durations []string
	for _, k := range []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet} {
		dir := conformance.ReportDir(o.Work, k)
		if v, err := os.ReadFile(filepath.Join(dir, conformance.VersionFile)); err == nil {
			versions = append(versions, fmt.Sprintf("%s node `%s`", k, strings.TrimSpace(string(v))))
		}
		if d, err := os.ReadFile(filepath.Join(dir, conformance.DurationFile)); err == nil {
			durations = append(durations, fmt.Sprintf("%s node %s", k, strings.TrimSpace(string(d))))
		}
	}
	if len(versions) > 0 {
		text += "\nThe nodes reported (nodeInfo.kubeletVersion): " + strings.Join(versions, ", ") + ".\n"
	}
	if len(durations) > 0 {
		text += "The suites took (2 cores shared with other work): " + strings.Join(durations, ", ") + ".\n"
	}
	section := conformance.Section(results[peerrun.Kubelet], results[peerrun.Slicelet], conformance.Skips, text)
	if o.report != "" {
		if err := os.MkdirAll(filepath.Dir(o.report), 0o755); err != nil {
			return err
		}
		full := "# Node conformance\n\n" + section + "\n## Every spec\n\n| spec | kubelet node | slicelet node |\n|---|---|---|\n"
		for _, r := range conformance.All(results[peerrun.Kubelet], results[peerrun.Slicelet]) {
			full += fmt.Sprintf("| %s | %s | %s |\n", r.Spec, r.Kubelet.Status, r.Slicelet.Status)
		}
		errs = append(errs, os.WriteFile(o.report, []byte(full), 0o644))
	}
	if o.docs != "" {
		doc, err := os.ReadFile(o.docs)
		if err != nil {
			return err
		}
		errs = append(errs, os.WriteFile(o.docs, []byte(markdown.ReplaceSection(string(doc), "## Node conformance", section)), 0o644))
	}
	if o.status != "" && results[peerrun.Slicelet] != nil {
		body := fmt.Sprintf("# Node conformance: specs failing on the slicelet node (%s)\n\n%s\n\n", time.Now().UTC().Format(time.RFC3339), strings.Join(versions, ", ")) +
			conformance.Failures(results[peerrun.Slicelet], filepath.Join(conformance.ReportDir(o.Work, peerrun.Slicelet), "e2e.log"))
		errs = append(errs, os.WriteFile(o.status, []byte(body), 0o644))
	}
	return errors.Join(errs...)
}
