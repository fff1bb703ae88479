// Command clusterdemo is make cluster-demo: a Kubernetes cluster of several nodes on this
// machine (package hack/peer/cluster), shown step by step: the control plane in a throwaway
// systemd sandbox of its own, each node (slicelet or the kubelet, -nodes) in its own sandbox
// with its own containerd and network namespace on a bridge they share, the add-ons as
// workloads on the nodes (kube-proxy, flannel, CoreDNS; images built locally), then a Service
// reached by name from a pod on another node, a StatefulSet's stable DNS names and a DaemonSet
// on every node.
//
//	go run ./cmd/clusterdemo -bin DIR -slicelet FILE -addons DIR -work DIR [-nodes slicelet,slicelet]
//
// With -single it is the one-node demo (make cluster-demo-node, package hack/peer/clusterdemo):
// the control plane and one slicelet node on 127.0.0.1 inside one sandbox; the node Ready; a
// Deployment of 3 replicas in kubepods slices; a rolling update; kubectl logs; kubectl drain;
// an eviction under memory pressure. On the machine it boots the sandbox and runs itself inside
// it; inside it runs the steps.
//
// The sandboxes and the run directory are removed at the end, on failure and on SIGINT or
// SIGTERM too. Root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/hack/peer/cluster"
	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

func main() {
	cluster.RunNodeIfInside()
	var o clusterdemo.Options
	var single, sliceletDNS bool
	var nodes, addons, prefix string
	var hold bool
	flag.StringVar(&o.BinDir, "bin", "", "the control plane's binaries, kubectl and the kubelet (build/peer/v1.37.2)")
	flag.StringVar(&o.Slicelet, "slicelet", "", "slicelet's binary (bin/slicelet)")
	flag.StringVar(&o.Work, "work", "", "the run directory (removed at the end)")
	flag.StringVar(&nodes, "nodes", "slicelet,slicelet", "the nodes' agents, one a node (kubelet or slicelet)")
	flag.StringVar(&addons, "addons", "", "the add-ons' binaries: kube-proxy, flanneld, coredns, metrics-server (make peer-addons-build)")
	flag.BoolVar(&sliceletDNS, "slicelet-dns", true, "give slicelet nodes the cluster DNS ([cluster] dns_servers, domain)")
	flag.StringVar(&prefix, "prefix", fmt.Sprintf("cluster-demo-%d", os.Getpid()), "the start of the sandboxes' names (<prefix>-cp, <prefix>-<node>)")
	flag.BoolVar(&hold, "hold", false, "on failure, keep the cluster running until SIGINT or SIGTERM, to look at it (kubectl in <prefix>-cp, the nodes' journals)")
	flag.BoolVar(&single, "single", false, "the one-node demo (slicelet and the control plane in one sandbox)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case systemdtest.Inside():
		err = inside(ctx, o)
	case single:
		err = outside(ctx, o)
	default:
		err = multi(ctx, o, multiOptions{nodes: nodes, addons: addons, prefix: prefix, sliceletDNS: sliceletDNS, hold: hold})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster-demo: %v\n", err)
		os.Exit(1)
	}
}

// multiOptions are the multi-node demo's flags.
type multiOptions struct {
	nodes, addons, prefix string
	sliceletDNS, hold     bool
}

// multi runs the demo on a cluster of the nodes listed.
func multi(ctx context.Context, o clusterdemo.Options, m multiOptions) (err error) {
	began := time.Now()
	addons := m.addons
	specs, err := cluster.ParseNodes(m.nodes)
	if err != nil {
		return err
	}
	for _, p := range []*string{&o.BinDir, &o.Slicelet, &o.Work, &addons} {
		if *p == "" {
			return errors.New("-bin, -slicelet, -addons and -work are required")
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	// The binds into the sandboxes are of the real paths (build/peer/v1.37.2 may be a symlink).
	for _, p := range []*string{&o.BinDir, &o.Slicelet, &addons} {
		if *p, err = filepath.EvalSymlinks(*p); err != nil {
			return fmt.Errorf("%w (make build peer-build peer-addons-build)", err)
		}
	}
	if err := os.RemoveAll(o.Work); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, os.RemoveAll(o.Work))
		fmt.Printf("cluster-demo took %s\n", time.Since(began).Round(time.Second))
	}()
	c, err := cluster.Start(ctx, cluster.Options{Work: o.Work, BinDir: o.BinDir, Slicelet: o.Slicelet, AddonsDir: addons,
		Nodes: specs, Prefix: m.prefix, Log: os.Stdout, SliceletDNS: m.sliceletDNS, OnFailure: holder(ctx, m)})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Printf("\n== stopping the nodes (agents, pods, containerd), the control plane and their sandboxes\n")
		err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
	}()
	if err := c.Demo(ctx, os.Stdout); err != nil {
		if hold := holder(ctx, m); hold != nil {
			hold(err)
		}
		return err
	}
	fmt.Printf("\n== done: %d nodes ran the pod network, kube-proxy and CoreDNS as workloads; a pod reached a Service by name on another node\n", len(specs))
	return nil
}

// holder is what -hold does on a failure: print it and how to look at the cluster, then wait
// for SIGINT or SIGTERM (ctx's end) before the cluster is stopped. Nil without -hold.
func holder(ctx context.Context, m multiOptions) func(error) {
	if !m.hold {
		return nil
	}
	return func(err error) {
		fmt.Printf("\n== failed: %v\n== holding the cluster until SIGINT or SIGTERM: go run ./hack/sandbox exec %s-cp (kubectl: the control plane's directory), %s-<node> (journalctl)\n",
			err, m.prefix, m.prefix)
		<-ctx.Done()
	}
}

// outside checks the inputs, boots the sandbox and runs this program inside it.
func outside(ctx context.Context, o clusterdemo.Options) (err error) {
	began := time.Now()
	for _, p := range []*string{&o.BinDir, &o.Slicelet, &o.Work} {
		if *p == "" {
			return errors.New("-bin, -slicelet and -work are required")
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	// The binds into the sandbox are of the real paths (build/peer/v1.37.2 may be a symlink).
	for _, p := range []*string{&o.BinDir, &o.Slicelet} {
		if *p, err = filepath.EvalSymlinks(*p); err != nil {
			return fmt.Errorf("%w (make build peer-build)", err)
		}
	}
	for _, f := range []string{filepath.Join(o.BinDir, "kube-apiserver"), filepath.Join(o.BinDir, "kubectl"), o.Slicelet} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w (make build peer-build)", err)
		}
	}
	if err := os.RemoveAll(o.Work); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(o.Work)) }()
	fmt.Printf("== booting a throwaway systemd sandbox (its own network namespace: 127.0.0.1 is the cluster's)\n")
	sb, err := peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: fmt.Sprintf("cluster-demo-%d", os.Getpid()), WorkDir: o.Work,
		Binds: []string{o.BinDir, filepath.Dir(o.Slicelet)}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Printf("\n== stopping the sandbox (the control plane, slicelet and containerd with it)\n")
		err = errors.Join(err, sb.Stop())
		fmt.Printf("cluster-demo took %s\n", time.Since(began).Round(time.Second))
	}()
	inner, err := peerrun.CopySelf(o.Work, "clusterdemo")
	if err != nil {
		return err
	}
	cmd := sb.Command(ctx, "/", inner, "-bin", o.BinDir, "-slicelet", o.Slicelet, "-work", o.Work)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("inside the sandbox: %w", err)
	}
	return nil
}

// inside runs the steps.
func inside(ctx context.Context, o clusterdemo.Options) (err error) {
	o.Out = os.Stdout
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	began := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("\n== [%4.0fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	step("starting containerd, the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) and slicelet (cluster mode, system:node:%s credentials)", clusterdemo.NodeName)
	c, err := clusterdemo.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fmt.Printf("\n== slicelet's journal (last lines)\n%s", c.Journal(context.WithoutCancel(ctx), 40))
		}
		err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
	}()
	step("the node registers and turns Ready")
	if _, err := c.WaitNodeReady(ctx); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "get", "nodes", "-o", "wide"); err != nil {
		return err
	}
	step("a Deployment of 3 replicas, scheduled to the slicelet node")
	pods, err := c.Deploy(ctx, 3)
	if err != nil {
		return err
	}
	step("the pods' systemd slices on the node (systemctl inside the sandbox)")
	if err := c.Slices(ctx, pods); err != nil {
		return err
	}
	step("a rolling update (VERSION=2): a new ReplicaSet, the old pods stopped")
	if err := c.RollingUpdate(ctx, pods); err != nil {
		return err
	}
	if pods, err = c.NodePods(ctx, clusterdemo.AppLabel); err != nil {
		return err
	}
	step("kubectl logs")
	for name := range pods {
		if err := c.Logs(ctx, name); err != nil {
			return err
		}
		break
	}
	step("kubectl drain %s: cordoned, each pod evicted through the Eviction API and stopped gracefully by the node", clusterdemo.NodeName)
	drained, err := c.Drain(ctx, pods)
	if err != nil {
		return err
	}
	fmt.Printf("stopped gracefully (deletion grace seconds): %v; replacements Pending on the cordoned node: %v\n", drained.Graceful, drained.Pending)
	if len(drained.Graceful) != len(pods) {
		return fmt.Errorf("drain: %d of %d pods deleted gracefully", len(drained.Graceful), len(pods))
	}
	step("kubectl uncordon: the replacements run")
	if err := c.Uncordon(ctx, len(pods)); err != nil {
		return err
	}
	step("an eviction under memory pressure")
	ev, err := c.Evict(ctx, "hog")
	if err != nil {
		return err
	}
	if ev.Pod.Status.Reason != "Evicted" {
		return fmt.Errorf("the hog: %s %s, want Failed/Evicted", ev.Pod.Status.Phase, ev.Pod.Status.Reason)
	}
	step("done: the node ran a Deployment, rolled it, drained and evicted as a kubelet node does")
	return nil
}
