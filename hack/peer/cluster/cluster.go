// Package cluster runs a Kubernetes cluster of several nodes on one machine, for demos and
// tests (make cluster-demo, hack/peer/clustertest): the control plane (hack/peer/controlplane)
// in a throwaway systemd sandbox of its own, and each node in its own sandbox
// (hack/peer/peerrun: its own systemd, containerd, network namespace and agent, the kubelet or
// slicelet, chosen per node). The nodes' network namespaces are joined by a bridge that the
// harness creates in the control plane's namespace (network.go): every address lives in
// namespaces the harness made, and nothing reaches the machine's own network.
//
// The cluster is as kubeadm builds one: kube-controller-manager allocates each node a pod CIDR,
// and the add-ons run as workloads on the nodes (addons/*.yaml): kube-proxy (iptables) and the
// flannel pod network (host-gw) as DaemonSets, CoreDNS as a Deployment behind the kube-dns
// Service. Their images are built locally from the binaries make peer-addons-build compiles
// from their Go modules (images.go) and imported into every node's containerd. The same
// images (and the caller's, Options.ExtraImages) are served by the cluster's own registry in the
// control plane's namespace (registry.go), to which every node's containerd mirrors their
// registries: a pod that pulls its image (imagePullPolicy Always) is pulled through CRI from
// there, and nothing reaches a registry outside.
//
// A program that calls [Start] must call [RunNodeIfInside] first thing: Start runs a copy of
// the running executable inside each node's sandbox, where it becomes the node.
package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// NodeSpec is one node: its name (its system:node credentials) and its agent.
type NodeSpec struct {
	Name string
	Kind peerrun.Kind
}

// ParseNodes reads a comma-separated list of agents ("kubelet,slicelet"): node i is named
// "<agent>-<i+1>" ("kubelet-1", "slicelet-2").
func ParseNodes(list string) ([]NodeSpec, error) {
	var out []NodeSpec
	for i, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		switch peerrun.Kind(k) {
		case peerrun.Kubelet, peerrun.Slicelet:
		default:
			return nil, fmt.Errorf("node %d: agent %q: want kubelet or slicelet", i+1, k)
		}
		out = append(out, NodeSpec{Name: fmt.Sprintf("%s-%d", k, i+1), Kind: peerrun.Kind(k)})
	}
	if len(out) > MaxNodes {
		return nil, fmt.Errorf("%d nodes: at most %d", len(out), MaxNodes)
	}
	return out, nil
}

// Options configure [Start].
type Options struct {
	// Work is the run directory (absolute, writable): the control plane's files, the nodes'
	// directories and logs. It is bound into every sandbox at the same path.
	Work string
	// BinDir holds the control plane's binaries, kubectl and the kubelet (build/peer/v1.37.2).
	BinDir string
	// Slicelet is bin/slicelet (needed when a node runs it).
	Slicelet string
	// AddonsDir holds the add-ons' binaries (AddonBinaries; make peer-addons-build).
	AddonsDir string
	// Nodes are the nodes, at least one.
	Nodes []NodeSpec
	// Prefix starts the sandboxes' names (<Prefix>-cp, <Prefix>-<node>): unique to the caller.
	Prefix string
	// Log receives progress lines; discarded when nil.
	Log io.Writer
	// SliceletDNS gives slicelet nodes the cluster DNS configuration ([cluster] dns_servers and
	// domain), for a slicelet that has those keys.
	SliceletDNS bool
	// NoAddons leaves the add-ons out (the nodes then stay NotReady: no pod network).
	NoAddons bool
	// ExtraImages are imported into every node beside the add-ons' (the e2e suite's images,
	// built locally).
	ExtraImages []critest.Image
	// Binds are more host paths bound into the control plane's sandbox (what runs there:
	// e2e.test, the ginkgo CLI).
	Binds []string
	// OnFailure, when set, is called with Start's error before Start stops what it started
	// (a demo holds the cluster there to be looked at).
	OnFailure func(error)
}

// Cluster is a running cluster.
type Cluster struct {
	// CP is the control plane; Admin a cluster admin's client (dialing into its namespace).
	CP    *controlplane.ControlPlane
	Admin kubernetes.Interface
	// Nodes are the nodes, in Options.Nodes' order.
	Nodes []*Node

	// Registry holds every image the nodes import; their containerd mirror the images'
	// registries to it.
	Registry *Registry

	o      Options
	cpBox  *peerrun.Sandbox
	regLog *os.File
	began  time.Time
}

// Node is one running node.
type Node struct {
	Spec NodeSpec
	// IP is its address on the bridge.
	IP string
	// LogFile has what the program inside it printed (containerd's and the agent's start,
	// the agent's journal when it failed).
	LogFile string

	box     *peerrun.Sandbox
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	started chan bool
	done    chan error
}

// Start boots the control plane's sandbox with the bridge and the control plane on it, then a
// sandbox per node joined to the bridge, with its containerd and agent, applies the add-ons and
// waits until every node is Ready and the add-ons run. On failure it stops what it started.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	c = &Cluster{o: o, began: time.Now()}
	defer func() {
		if err != nil {
			if o.OnFailure != nil {
				o.OnFailure(err)
			}
			err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
		}
	}()
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		return c, err
	}
	self, err := peerrun.CopySelf(o.Work, "peer-cluster-node")
	if err != nil {
		return c, err
	}
	c.logf("booting the control plane's sandbox %s-cp: a network namespace with the bridge %s (%s)", o.Prefix, BridgeName, NodeNetwork)
	if c.cpBox, err = peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: o.Prefix + "-cp", WorkDir: o.Work, Binds: append([]string{o.BinDir}, o.Binds...)}); err != nil {
		return c, err
	}
	if err := c.runNet(ctx, bridgeSteps(), nil); err != nil {
		return c, err
	}
	names := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		names[i] = n.Name
	}
	pid := c.cpBox.Instance().InitPID()
	c.logf("starting the control plane on %s (etcd, kube-apiserver, kube-scheduler, kube-controller-manager allocating pod CIDRs of %s)", ControlPlaneIP, ClusterCIDR)
	if c.CP, err = controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(o.Work, "cp"), BinDir: o.BinDir,
		Runner: c.cpBox.Instance(), Dial: controlplane.NetnsDialer(pid), Nodes: names, Scheduler: true, ControllerManager: true,
		Address: ControlPlaneIP, ClusterCIDR: ClusterCIDR, ServiceCIDR: ServiceCIDR,
		Log: slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))}); err != nil {
		return c, err
	}
	if c.Admin, err = c.CP.Client(c.CP.AdminKubeconfig()); err != nil {
		return c, err
	}
	inputs, err := imageInputs(ctx, o.AddonsDir)
	if err != nil {
		return c, err
	}
	inputs.Extra = o.ExtraImages
	c.logf("building the add-ons' images from %s (kube-proxy, flannel, coredns, metrics-server; never pulled)", o.AddonsDir)
	images, err := WriteImages(ctx, inputs, filepath.Join(o.Work, "images"))
	if err != nil {
		return c, err
	}
	if err := c.startRegistry(ctx, images); err != nil {
		return c, err
	}
	for i, spec := range o.Nodes {
		n, err := c.startNode(ctx, i, spec, self, images)
		if n != nil {
			c.Nodes = append(c.Nodes, n)
		}
		if err != nil {
			return c, err
		}
	}
	for _, n := range c.Nodes {
		if err := n.waitStarted(ctx); err != nil {
			return c, err
		}
	}
	c.logf("every node's agent runs; waiting for the Nodes to register")
	if err := c.waitRegistered(ctx); err != nil {
		return c, err
	}
	if err := c.routePodCIDRs(ctx); err != nil {
		return c, err
	}
	if o.NoAddons {
		return c, nil
	}
	for _, a := range Addons {
		if err := c.ApplyAddon(ctx, a); err != nil {
			return c, err
		}
	}
	c.logf("waiting for every node Ready, kube-proxy and flannel on every node, CoreDNS and metrics-server available")
	if err := c.WaitAddons(ctx); err != nil {
		return c, err
	}
	c.logf("every node Ready, the add-ons running")
	return c, nil
}

// startRegistry serves the cluster's registry at RegistryURL in the control plane's network
// namespace (its request log in registry.log of the run directory) and pushes the images to it.
func (c *Cluster) startRegistry(ctx context.Context, images []string) error {
	pid := c.cpBox.Instance().InitPID()
	ln, err := controlplane.NetnsListen(pid, "tcp", net.JoinHostPort(ControlPlaneIP, strconv.Itoa(RegistryPort)))
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	if c.regLog, err = os.Create(filepath.Join(c.o.Work, "registry.log")); err != nil {
		ln.Close()
		return err
	}
	if c.Registry, err = startRegistry(ln, RegistryURL, filepath.Join(c.o.Work, "registry"), c.regLog, controlplane.NetnsDialer(pid)); err != nil {
		return err
	}
	c.logf("pushing the %d images to the registry at %s (the nodes' containerd mirror their registries to it)", len(images), RegistryURL)
	return c.Registry.Push(ctx, images)
}

// validate checks the options; errors name the field.
func (o Options) validate() error {
	if len(o.Nodes) == 0 {
		return errors.New("cluster: no nodes")
	}
	if len(o.Nodes) > MaxNodes {
		return fmt.Errorf("cluster: %d nodes, at most %d", len(o.Nodes), MaxNodes)
	}
	if o.Prefix == "" {
		return errors.New("cluster: no sandbox name prefix")
	}
	for _, p := range []string{o.Work, o.BinDir, o.AddonsDir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("cluster: %q: want an absolute path", p)
		}
	}
	need := []string{filepath.Join(o.BinDir, "kubectl")}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if seen[n.Name] {
			return fmt.Errorf("cluster: node %s twice", n.Name)
		}
		seen[n.Name] = true
		switch n.Kind {
		case peerrun.Kubelet:
			need = append(need, filepath.Join(o.BinDir, "kubelet"))
		case peerrun.Slicelet:
			if !filepath.IsAbs(o.Slicelet) {
				return fmt.Errorf("cluster: slicelet %q: want an absolute path", o.Slicelet)
			}
			need = append(need, o.Slicelet)
		default:
			return fmt.Errorf("cluster: node %s: agent %q: want kubelet or slicelet", n.Name, n.Kind)
		}
	}
	for _, b := range AddonBinaries {
		need = append(need, filepath.Join(o.AddonsDir, b))
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("cluster: %w (make peer-build peer-addons-build)", err)
		}
	}
	return nil
}

// logf prints a progress line with the time since the start.
func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.o.Log, "== [%4.0fs] %s\n", time.Since(c.began).Seconds(), fmt.Sprintf(format, args...))
}

// runNet runs network set-up steps, each in the network namespace of its sandbox: the
// control plane's, or that of the node whose init's pid nodes maps its name to.
func (c *Cluster) runNet(ctx context.Context, steps []netStep, nodes map[string]int) error {
	for _, s := range steps {
		pid := c.cpBox.Instance().InitPID()
		if s.In != "" {
			var ok bool
			if pid, ok = nodes[s.In]; !ok {
				return fmt.Errorf("cluster network: no node %s", s.In)
			}
		}
		args := append([]string{"--target", strconv.Itoa(pid), "--net", "--"}, s.Argv...)
		if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("cluster network: %s (in %s): %w: %s", strings.Join(s.Argv, " "), cmp.Or(s.In, "the control plane"), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// startNode boots node i's sandbox, joins it to the bridge and starts the program inside
// (runNode), without waiting for it.
func (c *Cluster) startNode(ctx context.Context, i int, spec NodeSpec, self string, images []string) (*Node, error) {
	ip, err := NodeIP(i)
	if err != nil {
		return nil, err
	}
	n := &Node{Spec: spec, IP: ip, LogFile: filepath.Join(c.o.Work, "nodes", spec.Name+".log"), done: make(chan error, 1)}
	c.logf("booting node %s (%s) in sandbox %s-%s at %s", spec.Name, spec.Kind, c.o.Prefix, spec.Name, ip)
	binds := []string{c.o.BinDir, c.o.AddonsDir}
	agent := filepath.Join(c.o.BinDir, "kubelet")
	if spec.Kind == peerrun.Slicelet {
		agent = c.o.Slicelet
		binds = append(binds, filepath.Dir(c.o.Slicelet))
	}
	// The node's own network settings writable, as on any node: the CNI plugins set some
	// (portmap: route_localnet on the pods' bridge, for hostPort).
	if n.box, err = peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: c.o.Prefix + "-" + spec.Name, WorkDir: c.o.Work, Binds: binds, NetSysctls: true}); err != nil {
		return nil, err
	}
	pid := n.box.Instance().InitPID()
	steps, err := nodeSteps(spec.Name, i, pid)
	if err == nil {
		err = c.runNet(ctx, steps, map[string]int{spec.Name: pid})
	}
	if err != nil {
		return n, err
	}
	cfg := nodeConfig{Name: spec.Name, Kind: spec.Kind, IP: ip, Dir: filepath.Join(c.o.Work, "nodes", spec.Name),
		Agent: agent, Kubeconfig: c.CP.NodeKubeconfig(spec.Name), CAFile: c.CP.CAFile(), Images: images, SliceletDNS: c.o.SliceletDNS,
		Mirrors: c.Registry.Mirrors}
	data, err := json.Marshal(cfg)
	if err != nil {
		return n, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return n, err
	}
	logFile, err := os.Create(n.LogFile)
	if err != nil {
		return n, err
	}
	n.cmd = n.box.Command(ctx, "/", self)
	n.cmd.Env = append(n.cmd.Env, nodeEnv+"="+string(data))
	n.cmd.Stderr = logFile
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return n, err
	}
	if n.stdin, err = n.cmd.StdinPipe(); err != nil {
		logFile.Close()
		return n, err
	}
	if err := n.cmd.Start(); err != nil {
		logFile.Close()
		return n, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	n.started = make(chan bool, 1)
	go func() {
		n.started <- waitReadyLine(stdout, logFile)
		_, _ = io.Copy(logFile, stdout)
		n.done <- n.cmd.Wait()
		logFile.Close()
	}()
	return n, nil
}

// waitStarted waits until the node's program reports its agent running.
func (n *Node) waitStarted(ctx context.Context) error {
	select {
	case ok := <-n.started:
		if ok {
			return nil
		}
		err := <-n.done
		n.done <- err
		return fmt.Errorf("node %s did not start (%v):\n%s", n.Spec.Name, err, tail(n.LogFile, 30))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitRegistered waits until every node has its Node object.
func (c *Cluster) waitRegistered(ctx context.Context) error {
	return c.poll(ctx, "nodes registered", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			if _, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Spec.Name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// routePodCIDRs routes each node's pod CIDR (kube-controller-manager allocates it when the Node
// registers) to the node's address in the control plane's namespace, as the pod network's agent
// does on a kubeadm control-plane node: the API server reaches pods for pods/proxy,
// services/proxy, admission webhooks and aggregated APIs.
func (c *Cluster) routePodCIDRs(ctx context.Context) error {
	cidrs := map[string]string{}
	err := c.poll(ctx, "pod CIDRs allocated", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Spec.Name, metav1.GetOptions{})
			if err != nil || node.Spec.PodCIDR == "" {
				return false, nil
			}
			cidrs[n.Spec.Name] = node.Spec.PodCIDR
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	var steps []netStep
	for _, n := range c.Nodes {
		steps = append(steps, podRouteStep(cidrs[n.Spec.Name], n.IP))
	}
	c.logf("pod CIDRs routed to their nodes in the control plane's namespace: %v", cidrs)
	return c.runNet(ctx, steps, nil)
}

// poll waits for cond, at most limit, failing early when a node's program ended.
func (c *Cluster) poll(ctx context.Context, what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			select {
			case err := <-n.done:
				n.done <- err
				return false, fmt.Errorf("node %s stopped (%v):\n%s", n.Spec.Name, err, tail(n.LogFile, 40))
			default:
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ApplyAddon applies add-on name's manifest with kubectl (in the control plane's sandbox),
// printing what kubectl prints.
func (c *Cluster) ApplyAddon(ctx context.Context, name string) error {
	data, err := RenderAddon(name)
	if err != nil {
		return err
	}
	path := filepath.Join(c.o.Work, "addons", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	c.logf("add-on %s", name)
	_, err = c.Kubectl(ctx, c.o.Log, "apply", "-f", path)
	return err
}

// WaitAddons waits until every node is Ready, the kube-proxy and flannel DaemonSets have a
// ready pod on every node and CoreDNS and metrics-server have every replica available.
func (c *Cluster) WaitAddons(ctx context.Context) error {
	want := int32(len(c.Nodes))
	var last string
	err := c.poll(ctx, "add-ons", 8*time.Minute, func(ctx context.Context) (bool, error) {
		var notReady []string
		for _, n := range c.Nodes {
			node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Spec.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, n.Spec.Name)
			}
		}
		var ds []string
		for _, d := range [][2]string{{"kube-system", "kube-proxy"}, {"kube-flannel", "kube-flannel-ds"}} {
			got, err := c.Admin.AppsV1().DaemonSets(d[0]).Get(ctx, d[1], metav1.GetOptions{})
			if err != nil || got.Status.NumberReady < want {
				ds = append(ds, d[1])
			}
		}
		for _, name := range []string{"coredns", "metrics-server"} {
			dep, err := c.Admin.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil || !deploymentAvailable(dep) {
				ds = append(ds, name)
			}
		}
		last = fmt.Sprintf("nodes not Ready: %v; add-ons not ready: %v", notReady, ds)
		return len(notReady) == 0 && len(ds) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)%s", err, last, c.describeNotRunning(context.WithoutCancel(ctx)))
	}
	return nil
}

// describeNotRunning lists the pods of the add-ons' namespaces that are not running, for an
// error message.
func (c *Cluster) describeNotRunning(ctx context.Context) string {
	var b strings.Builder
	for _, ns := range []string{"kube-system", "kube-flannel"} {
		pods, err := c.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Status.Phase == v1.PodRunning && podReady(&p) {
				continue
			}
			fmt.Fprintf(&b, "\n  %s/%s on %s: %s", ns, p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				switch {
				case cs.State.Waiting != nil:
					fmt.Fprintf(&b, "; %s waiting %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				case cs.State.Terminated != nil:
					fmt.Fprintf(&b, "; %s terminated %s (%d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
				case !cs.Ready:
					fmt.Fprintf(&b, "; %s not ready", cs.Name)
				}
			}
		}
	}
	return b.String()
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// deploymentAvailable reports whether every replica of the deployment is available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.AvailableReplicas >= want
}

// Kubectl runs kubectl as the cluster admin inside the control plane's sandbox (the API
// server's address is reachable only there and on the nodes), printing the command and its
// output to out.
func (c *Cluster) Kubectl(ctx context.Context, out io.Writer, args ...string) (string, error) {
	fmt.Fprintf(out, "$ kubectl %s\n", strings.Join(args, " "))
	return c.kubectl(ctx, out, nil, args)
}

// KubectlStdin is [Cluster.Kubectl] with the file at path (a host path, which the sandbox
// need not see) as kubectl's standard input.
func (c *Cluster) KubectlStdin(ctx context.Context, out io.Writer, path string, args ...string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fmt.Fprintf(out, "$ kubectl %s < %s\n", strings.Join(args, " "), filepath.Base(path))
	return c.kubectl(ctx, out, f, args)
}

// KubectlTerminal is [Cluster.Kubectl] on a terminal, as a user types kubectl run -it or
// kubectl attach -it: kubectl runs under script(1), whose pseudo-terminal is its standard
// input and output, and input is what is typed there.
func (c *Cluster) KubectlTerminal(ctx context.Context, out io.Writer, input string, args ...string) (string, error) {
	fmt.Fprintf(out, "$ kubectl %s  # on a terminal, typing %q\n", strings.Join(args, " "), input)
	line := []string{shellQuote(filepath.Join(c.o.BinDir, "kubectl")), "--kubeconfig", shellQuote(c.CP.AdminKubeconfig())}
	for _, a := range args {
		line = append(line, shellQuote(a))
	}
	cmd := c.cpBox.Instance().Command(ctx, "script", "--quiet", "--return", "--command", strings.Join(line, " "), "/dev/null")
	var buf bytes.Buffer
	cmd.Stdin = strings.NewReader(input)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, out), io.MultiWriter(&buf, out)
	if err := cmd.Run(); err != nil {
		return buf.String(), fmt.Errorf("kubectl %s (on a terminal): %w", strings.Join(args, " "), err)
	}
	return buf.String(), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (c *Cluster) kubectl(ctx context.Context, out io.Writer, stdin io.Reader, args []string) (string, error) {
	cmd := c.cpBox.Instance().Command(ctx, filepath.Join(c.o.BinDir, "kubectl"), append([]string{"--kubeconfig", c.CP.AdminKubeconfig()}, args...)...)
	var buf bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, out), io.MultiWriter(&buf, out)
	if err := cmd.Run(); err != nil {
		return buf.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return buf.String(), nil
}

// Command runs name in the control plane's sandbox (its network namespace: the API server's
// address, the nodes and their pods are reachable there).
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return c.cpBox.Instance().Command(ctx, name, args...)
}

// Close stops every node (its agent, the pods it left and containerd, then its sandbox), the
// control plane and its sandbox.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for _, n := range slices.Backward(c.Nodes) {
		errs = append(errs, n.stop())
	}
	c.Nodes = nil
	if c.CP != nil {
		errs = append(errs, c.CP.Stop(ctx))
		c.CP = nil
	}
	if c.Registry != nil {
		errs = append(errs, c.Registry.Close())
		c.Registry = nil
	}
	if c.regLog != nil {
		errs = append(errs, c.regLog.Close())
		c.regLog = nil
	}
	if c.cpBox != nil {
		errs = append(errs, c.cpBox.Stop())
		c.cpBox = nil
	}
	return errors.Join(errs...)
}

// stop ends the node's program (its stdin closed: it stops the agent, the pods and
// containerd), two minutes at most before it is killed, then stops the sandbox.
func (n *Node) stop() error {
	var errs []error
	if n.cmd != nil && n.cmd.Process != nil {
		n.stdin.Close()
		select {
		case err := <-n.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w:\n%s", n.Spec.Name, err, tail(n.LogFile, 20)))
			}
		case <-time.After(2 * time.Minute):
			_ = n.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("node %s: still stopping after 2m; killed", n.Spec.Name))
		}
	}
	if n.box != nil {
		errs = append(errs, n.box.Stop())
	}
	return errors.Join(errs...)
}
