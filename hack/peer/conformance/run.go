// Package conformance runs the Kubernetes e2e suite's sig-node Conformance specs (e2e.test of
// k8s.io/kubernetes/test/e2e, built by make peer-build) against a kubelet node and then a
// slicelet node, one after the other on the same local control plane and the same private
// containerd, inside the systemd sandbox (make peer-conformance, hack/peer/cmd/conformance), and
// compares their JUnit reports (report.go). The images the specs run are built locally
// (images.go); nothing is pulled.
package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// Focus selects the specs: every sig-node Conformance spec (104 in
// test/conformance/testdata/conformance.yaml of v1.37.2).
const Focus = `\[sig-node\].*\[Conformance\]`

// Skip is a spec (a regular expression of its full text) that is not run, and why.
type Skip struct {
	Pattern, Why string
}

// Skips are the sig-node Conformance specs that this one-node cluster cannot run, on either
// node.
var Skips = []Skip{
	{`\[sig-node\] ImageVolume`, "image volumes need containerd ≥ 2.1 (this node runs Debian's containerd 1.6, whose CRI has no image volumes on either agent) and the kitten image, which is not built here"},
	{`\[sig-node\] (ConfigMap|Secrets) should be consumable (as environment variable names|via the environment)`,
		"the local busybox image's sh is Debian's busybox 1.35, whose ash drops variables whose names are not shell identifiers (data-1, p-data-1) from the environment it passes on, so `sh -c env` cannot show them on either node (the e2e image's busybox 1.37 keeps them)"},
}

// SkipRegexp is the ginkgo --skip expression of skips.
func SkipRegexp(skips []Skip) string {
	parts := make([]string, len(skips))
	for i, s := range skips {
		parts[i] = s.Pattern
	}
	return strings.Join(parts, "|")
}

// Node names: each agent registers under its own, with its own system:node credentials.
const (
	KubeletNode  = peerrun.NodeName
	SliceletNode = "slicelet-node"
)

// NodeIP is both nodes' address: a private one on lo of the sandbox's network namespace. The
// kubelet refuses a loopback node IP (its Node then has no addresses and pods no hostIP), and
// the API server refuses loopback addresses in EndpointSlices. Pods on the CNI bridge reach it
// through their gateway, the bridge in the same namespace.
const NodeIP = "10.251.0.1"

// Options configure [Run].
type Options struct {
	// Work is the run directory (absolute, writable, visible at the same path inside): the
	// control plane's files and Reports.
	Work string
	// BinDir holds the kubelet, the control plane's binaries, kubectl and e2e.test
	// (build/peer/v1.37.2).
	BinDir string
	// Ginkgo is the ginkgo CLI that runs e2e.test's specs in parallel; Agnhost and Nonewprivs
	// the static agnhost and nnp binaries the images hold; Busybox the static busybox
	// (critest.DefaultBusybox).
	Ginkgo, Agnhost, Nonewprivs, Busybox string
	// Slicelet is bin/slicelet.
	Slicelet string
	// Agents are run in order (kubelet, slicelet by default).
	Agents []peerrun.Kind
	// Focus and Skip select the specs (ginkgo --focus, --skip).
	Focus, Skip string
	// Procs is ginkgo's number of parallel processes.
	Procs int
	// Timeout bounds each agent's suite (ginkgo --timeout).
	Timeout time.Duration
	// Out receives progress and ginkgo's output.
	Out io.Writer
}

// VersionFile, in an agent's ReportDir, holds the version its Node reported
// (nodeInfo.kubeletVersion).
const VersionFile = "version"

// DurationFile, in an agent's ReportDir, holds how long its suite took.
const DurationFile = "duration"

// ReportDir is where agent's JUnit report (junit_01.xml) and ginkgo's output (e2e.log) are
// written under the run directory.
func ReportDir(work string, agent peerrun.Kind) string {
	return filepath.Join(work, "reports", string(agent))
}

// Run starts containerd with a CNI bridge and the e2e images, the control plane, then for each
// agent: the agent registered as its node, e2e.test's specs against it, the agent stopped and
// its Node deleted. Only inside the sandbox (peerrun.StartNode). A failing spec is no error; a
// suite that could not run is.
func Run(ctx context.Context, o Options) (err error) {
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "== [%5.0fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	stop := context.WithoutCancel(ctx)
	if out, err := exec.CommandContext(ctx, "ip", "address", "add", NodeIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip address add %s: %w: %s", NodeIP, err, out)
	}
	// The node's directory (the agents' root and state, with their volumes) is not under
	// /var/lib: containerd with a CNI bridge sees a tmpfs there (critest.Options.CNIBridge),
	// in a mount namespace of its own that is the sandbox's slave. The directory is a shared
	// mount, so what the agents mount in it later (subPath binds, tmpfs volumes) reaches
	// containerd, as on a node whose /var/lib/kubelet is shared.
	nodeDir := filepath.Join(o.Work, "node")
	if err := sharedMount(nodeDir); err != nil {
		return err
	}
	node, err := peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: nodeDir, CNIBridge: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, node.Close()) }()
	applets, err := BusyboxApplets(ctx, o.Busybox)
	if err != nil {
		return err
	}
	for _, img := range Images(o.Busybox, o.Agnhost, o.Nonewprivs, applets) {
		if err := node.Containerd.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	logf("containerd with a CNI bridge (%s) and the e2e images", critest.CNISubnet)
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(o.Work, "cp"), BinDir: o.BinDir,
		Nodes: []string{KubeletNode, SliceletNode}, Scheduler: true, ControllerManager: true,
		Log: slog.New(slog.NewTextHandler(o.Out, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop(stop)) }()
	admin, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	logf("control plane up")
	manifests := filepath.Join(node.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	for _, k := range o.Agents {
		if err := runAgent(ctx, o, logf, node, cp, admin, k, manifests); err != nil {
			return fmt.Errorf("%s node: %w", k, err)
		}
	}
	return nil
}

// runAgent runs the suite against agent k's node.
func runAgent(ctx context.Context, o Options, logf func(string, ...any), node *peerrun.Node, cp *controlplane.ControlPlane,
	admin kubernetes.Interface, k peerrun.Kind, manifests string) (err error) {
	stop := context.WithoutCancel(ctx)
	ao := peerrun.AgentOptions{Kind: k, ManifestDir: manifests}
	name := KubeletNode
	switch k {
	case peerrun.Kubelet:
		ao.Binary = filepath.Join(o.BinDir, "kubelet")
		// After peerrun's own flags, so these win: the node's address, the kubelet API on it
		// (the API server reaches the kubelet at the node's InternalIP).
		ao.ExtraArgs = []string{"--kubeconfig=" + cp.NodeKubeconfig(KubeletNode), "--node-ip=" + NodeIP, "--address=" + NodeIP}
	case peerrun.Slicelet:
		name = SliceletNode
		ao.Binary = o.Slicelet
		// The kubelet API on the node's address verifying the API server's kubelet client
		// certificate (the specs' log reads), pods on containerd's CNI bridge.
		ao.SliceletTOML = fmt.Sprintf("[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = %q\nnode_ip = %q\nclient_ca_file = %q\n",
			cp.NodeKubeconfig(SliceletNode), SliceletNode, NodeIP, cp.CAFile())
		ao.SliceletDropIn = "[runtime]\nnetwork = \"cni\"\n"
	default:
		return fmt.Errorf("agent %q: want kubelet or slicelet", k)
	}
	a, err := node.StartAgent(ctx, ao)
	if err != nil {
		return err
	}
	dir := ReportDir(o.Work, k)
	defer func() {
		if j := a.Journal(stop, 20000); j != "" {
			err = errors.Join(err, os.WriteFile(filepath.Join(dir, "agent.log"), []byte(j), 0o644))
		}
		err = errors.Join(err, a.Stop(stop))
		// The next node is the only one: the e2e suite waits for every node to be schedulable.
		if e := admin.CoreV1().Nodes().Delete(stop, name, metav1.DeleteOptions{}); e != nil && !apierrors.IsNotFound(e) {
			err = errors.Join(err, e)
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	version, err := waitReady(ctx, admin, name, a)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, VersionFile), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	logf("%s node %s Ready; running the specs (ginkgo -p --procs=%d, output in %s)", k, name, o.Procs, filepath.Join(dir, "e2e.log"))
	t0 := time.Now()
	log, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, o.Ginkgo, ginkgoArgs(o, cp.AdminKubeconfig(), dir)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = time.Minute
	runErr := cmd.Run()
	took := time.Since(t0).Round(time.Second)
	logf("%s node: the suite took %s (%v)", k, took, cmp.Or[any](runErr, "all passed"))
	if err := os.WriteFile(filepath.Join(dir, DurationFile), []byte(took.String()+"\n"), 0o644); err != nil {
		return err
	}
	if _, statErr := os.Stat(filepath.Join(dir, "junit_01.xml")); statErr != nil {
		return fmt.Errorf("no JUnit report after ginkgo (%v): %w; see %s", runErr, statErr, log.Name())
	}
	return nil
}

// ginkgoArgs is the ginkgo command line: the specs in parallel, e2e.test's flags for this
// one-node cluster (the admin's kubeconfig, the skeleton provider, kubectl from BinDir, the
// JUnit report in dir, no service-account wait and no log dumps on failure).
func ginkgoArgs(o Options, kubeconfig, dir string) []string {
	args := []string{"-p", "--procs=" + strconv.Itoa(o.Procs), "--timeout=" + o.Timeout.String(), "--no-color", "--silence-skips", "--poll-progress-after=10m",
		"--focus=" + o.Focus}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	return append(args, filepath.Join(o.BinDir, "e2e.test"), "--",
		"--kubeconfig="+kubeconfig, "--provider=skeleton", "--kubectl-path="+filepath.Join(o.BinDir, "kubectl"),
		"--report-dir="+dir, "--e2e-verify-service-account=false", "--dump-logs-on-failure=false", "--disable-log-dump")
}

// waitReady waits until the node reports Ready (10 minutes at most: a loaded machine), failing
// early when the agent stopped, and returns its nodeInfo.kubeletVersion.
func waitReady(ctx context.Context, admin kubernetes.Interface, name string, a *peerrun.Agent) (string, error) {
	var version string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if ok, journal := a.Active(ctx); !ok {
			return false, fmt.Errorf("%s stopped: %s", a.Unit, journal)
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		version = n.Status.NodeInfo.KubeletVersion
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	return version, err
}

// sharedMount makes dir (created when missing) a mount point of its own with shared
// propagation, in this (the sandbox's) mount namespace.
func sharedMount(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}
