package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// runInSandbox boots the sandbox with the control plane's binaries and slicelet's, and runs
// the test named by the pattern run inside it (this test binary, copied into the work
// directory), with the environment naming them; 8 minutes at most.
func runInSandbox(t *testing.T, run string) {
	t.Helper()
	runInSandboxFor(t, run, 8*time.Minute)
}

// runInSandboxFor is runInSandbox with a limit of its own; it returns the work directory
// (the test's, removed when it ends), where the run inside may leave what it made.
// CLUSTERTEST_SANDBOX_PREFIX prefixes the sandbox's name (one per person sharing a machine).
func runInSandboxFor(t *testing.T, run string, limit time.Duration) string {
	t.Helper()
	bin, slicelet := prerequisites(t)
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	err := peerrun.RunTest(ctx, peerrun.SandboxOptions{Name: fmt.Sprintf("%sclustertest-%d", os.Getenv("CLUSTERTEST_SANDBOX_PREFIX"), os.Getpid()), WorkDir: work,
		Binds: []string{bin, filepath.Dir(slicelet)}, Log: t.Output()},
		run, []string{workEnv + "=" + work, binEnv + "=" + bin, sliceletEnv + "=" + slicelet}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	return work
}

// runInVMFor runs the test named by the pattern run in the throwaway cgroup v2 VM
// (peerrun.RunVM) when SLICELET_VM=1, with the control plane's binaries, kubectl, the kubelet
// and slicelet copied in and a work directory of the guest's own (containerd's snapshots need
// a local filesystem); limit bounds the whole run, boot included. It returns the host directory
// that was the guest's working directory (shared with it, where it leaves what the host reads).
// Without SLICELET_VM=1 it does nothing and returns "".
func runInVMFor(t *testing.T, run string, limit time.Duration) string {
	t.Helper()
	if os.Getenv(systemdtest.VMEnv) != "1" {
		return ""
	}
	bin, slicelet := prerequisites(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"slicelet": slicelet}
	for _, name := range []string{controlplane.Etcd, controlplane.APIServer, controlplane.Scheduler, controlplane.ControllerManager, "kubelet", "kubectl"} {
		files[filepath.Join("bin", name)] = filepath.Join(bin, name)
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	start := time.Now()
	dir := t.TempDir()
	res, err := peerrun.RunVM(ctx, peerrun.VMOptions{Binary: self, Args: []string{"-test.run", run, "-test.v"},
		Env:   []string{workEnv + "=/var/lib/clustertest", binEnv + "=/mnt/io/bin", sliceletEnv + "=/mnt/io/slicelet"},
		Files: files, Dir: dir, MemMiB: 3072, Timeout: limit - time.Minute})
	t.Logf("in the cgroup v2 VM (%s):\n%s", time.Since(start).Round(time.Second), res.Output)
	if err != nil {
		t.Fatalf("cgroup v2 VM: %v; console:\n%s", err, res.Console)
	}
	if res.ExitCode != 0 {
		t.Fatalf("cgroup v2 VM: exit %d", res.ExitCode)
	}
	return dir
}

// clusterNode is a slicelet node in cluster mode beside a fresh control plane, inside the
// sandbox: the private containerd (node), the control plane (cp), slicelet (agent, its
// manifest directory manifests) and an admin client.
type clusterNode struct {
	node      *peerrun.Node
	cp        *controlplane.ControlPlane
	agent     *peerrun.Agent
	admin     kubernetes.Interface
	manifests string
}

// startClusterNode starts the control plane of cpc (Dir, BinDir and Log filled in) and
// slicelet with the [cluster] table of clusterTOML (given the control plane; the table's first
// lines are clusterHead's). Everything stops when the test ends; slicelet's journal is
// logged if the test failed.
func startClusterNode(t *testing.T, ctx context.Context, work, bin, slicelet string, cpc controlplane.Config, clusterTOML func(*controlplane.ControlPlane) string) *clusterNode {
	t.Helper()
	stopCtx := context.WithoutCancel(ctx)
	node, err := peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: "/var/lib/peer-node", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	cpc.Dir, cpc.BinDir, cpc.Log = filepath.Join(work, "cp"), bin, slog.New(slog.NewTextHandler(t.Output(), nil))
	cp, err := controlplane.Start(ctx, cpc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop(stopCtx) })
	manifests := filepath.Join(node.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	agent, err := node.StartAgent(ctx, peerrun.AgentOptions{Kind: peerrun.Slicelet, Binary: slicelet, ManifestDir: manifests,
		SliceletTOML: clusterTOML(cp)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("slicelet's journal:\n%s", agent.Journal(stopCtx, 80))
		}
		_ = agent.Stop(stopCtx)
	})
	admin, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	return &clusterNode{node: node, cp: cp, agent: agent, admin: admin, manifests: manifests}
}

// poll fails the test when cond is not true within limit (an error from cond ends it too).
func poll(t *testing.T, ctx context.Context, what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, limit, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clusterHead is the start of slicelet's [cluster] table for the node nodeName on cp.
func clusterHead(cp *controlplane.ControlPlane) string {
	return fmt.Sprintf("[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = %q\n", cp.NodeKubeconfig(nodeName), nodeName)
}

// startDemoCluster starts the cluster demo's control plane and slicelet node (clusterdemo,
// with opts' Work, BinDir, Slicelet and output filled in from the environment and t) and waits
// until the node is Ready. It is closed when the test ends; slicelet's journal (its last
// journalLines lines) is logged if the test failed.
func startDemoCluster(t *testing.T, ctx context.Context, opts clusterdemo.Options, journalLines int) *clusterdemo.Cluster {
	t.Helper()
	opts.Work, opts.BinDir, opts.Slicelet = os.Getenv(workEnv), os.Getenv(binEnv), os.Getenv(sliceletEnv)
	opts.Out, opts.Log, opts.Logf = t.Output(), slog.New(slog.NewTextHandler(t.Output(), nil)), t.Logf
	c, err := clusterdemo.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx := context.WithoutCancel(ctx)
		if t.Failed() {
			t.Logf("slicelet's journal:\n%s", c.Journal(stopCtx, journalLines))
		}
		if err := c.Close(stopCtx); err != nil {
			t.Error(err)
		}
	})
	if _, err := c.WaitNodeReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
