// Package clusterdemo is a one-node cluster with slicelet as its node, and the steps the
// cluster demo (make cluster-demo, hack/peer/cmd/clusterdemo) shows and the cluster tests
// (hack/peer/clustertest) check: the local control plane (hack/peer/controlplane: etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager on 127.0.0.1) and a slicelet node on
// a private containerd (hack/peer/peerrun), inside the systemd sandbox. Each step prints what
// it does (the kubectl commands and their output) and returns an error when the cluster does
// not do what a kubelet node does.
package clusterdemo

import (
	"bufio"
	"bytes"
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

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// NodeName is the slicelet node's name; its credentials are system:node:slicelet-node.
const NodeName = "slicelet-node"

// The node's memory: kubepods.slice is limited to PodsMemory (the machine's memory less a
// system reservation that leaves that much), and the hard threshold memory.available <
// EvictionThreshold also applies to kubepods.slice (allocatableMemory.available): a pod that
// fills HogMemory of it is evicted, whatever the machine's size.
const (
	PodsMemory        = 800 << 20
	EvictionThreshold = "250Mi"
	HogMemory         = "600M"
	kubeReserved      = 50 << 20
)

// Options configure [Start].
type Options struct {
	// Work is the run directory (absolute, writable).
	Work string
	// BinDir holds the control plane's binaries and kubectl (build/peer/v1.37.2).
	BinDir string
	// Slicelet is bin/slicelet.
	Slicelet string
	// Out receives the steps' output.
	Out io.Writer
	// Log receives the control plane's progress; discarded when nil.
	Log *slog.Logger
	// Logf receives the node's progress lines; discarded when nil.
	Logf func(format string, args ...any)
	// NodeIP is the node's address (its node_ip: the kubelet API's, and the podIP of its
	// host-network pods); 127.0.0.1 when empty. The API server refuses loopback addresses in
	// EndpointSlices, so a test of Service endpoints gives the node another address.
	NodeIP string
	// Kind is the node's agent: slicelet (when empty) or the kubelet, registered with the
	// same name, credentials, address and node configuration (peerrun decodes both agents'
	// configurations to the same numbers), so that the two can be compared.
	Kind peerrun.Kind
	// Kubelet is the kubelet's binary; BinDir's kubelet when empty.
	Kubelet string
	// PodNetwork runs slicelet's pods in containerd's CNI network (runtime.network = "cni"),
	// as the kubelet runs them, instead of the node's network (docs/cluster.md, Networking).
	PodNetwork bool
	// KubeletRootDir, when set, is the kubelet's --root-dir in every turn of the kubelet and
	// slicelet's [pods] kubelet_root_dir: the node can change agent in place, each finding the
	// pods' volumes where the other left them.
	KubeletRootDir string
}

// Cluster is the running control plane and slicelet node.
type Cluster struct {
	// Admin is a cluster admin's client.
	Admin kubernetes.Interface
	// CP is the control plane.
	CP *controlplane.ControlPlane
	// Agent is slicelet's service.
	Agent *peerrun.Agent

	out       io.Writer
	node      *peerrun.Node
	kubectl   string
	o         Options
	total     int64
	manifests string
}

// Start starts containerd, the control plane and slicelet in cluster mode with the node's
// credentials; only inside the sandbox (peerrun.StartNode). Close stops them.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	total, err := memTotal()
	if err != nil {
		return nil, err
	}
	c = &Cluster{out: o.Out, kubectl: filepath.Join(o.BinDir, "kubectl"), o: o, total: total}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
		}
	}()
	if c.node, err = peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: filepath.Join(o.Work, "node"), Logf: o.Logf}); err != nil {
		return c, err
	}
	// The kubelet's cAdvisor reads the containers' labels (pod, namespace, container, image on
	// /metrics/cadvisor) from containerd at its default address, which it has no flag for: the
	// address links to the node's containerd, as on a node where containerd is installed.
	if err := linkContainerd(c.node.Containerd.Socket); err != nil {
		return c, err
	}
	if c.CP, err = controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(o.Work, "cp"), BinDir: o.BinDir, Nodes: []string{NodeName},
		Scheduler: true, ControllerManager: true, Log: o.Log}); err != nil {
		return c, err
	}
	if c.Admin, err = c.CP.Client(c.CP.AdminKubeconfig()); err != nil {
		return c, err
	}
	c.manifests = filepath.Join(c.node.Dir, "manifests")
	if err := os.MkdirAll(c.manifests, 0o755); err != nil {
		return c, err
	}
	return c, c.StartAgent(ctx, cmp.Or(o.Kind, peerrun.Slicelet))
}

// StartAgent starts the node's agent of kind k (slicelet or the kubelet) on the cluster's
// containerd: the node NodeName with its credentials, on the node address, kubepods.slice
// limited to PodsMemory and the hard threshold memory.available < EvictionThreshold. Only one
// agent runs at a time: [Cluster.StopAgent] first.
func (c *Cluster) StartAgent(ctx context.Context, k peerrun.Kind) (err error) {
	nc := peerrun.DefaultNodeConfig()
	nc.SystemReserved = map[string]string{"cpu": "100m", "memory": strconv.FormatInt(c.total-PodsMemory-kubeReserved, 10)}
	nc.KubeReserved = map[string]string{"cpu": "50m", "memory": strconv.FormatInt(kubeReserved, 10)}
	nc.EvictionHard = map[string]string{"memory.available": EvictionThreshold, "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"}
	nodeIP := cmp.Or(c.o.NodeIP, "127.0.0.1")
	ao := peerrun.AgentOptions{Kind: k, ManifestDir: c.manifests, Config: nc, NodeName: NodeName}
	switch k {
	case peerrun.Slicelet:
		ao.Binary = c.o.Slicelet
		// The kubelet API on the node's address (127.0.0.1 by default), verifying the API
		// server's kubelet client certificate against the control plane's CA: kubectl logs works.
		ao.SliceletTOML = fmt.Sprintf("[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = %q\nnode_ip = %q\nclient_ca_file = %q\n",
			c.CP.NodeKubeconfig(NodeName), NodeName, nodeIP, c.CP.CAFile())
		ao.SliceletDropIn = "[eviction]\nmonitoring_interval = \"2s\"\n"
		if c.o.PodNetwork {
			ao.SliceletDropIn += "[runtime]\nnetwork = \"cni\"\n"
		}
		if c.o.KubeletRootDir != "" {
			ao.SliceletDropIn += fmt.Sprintf("[pods]\nkubelet_root_dir = %q\n", c.o.KubeletRootDir)
		}
	case peerrun.Kubelet:
		ao.Binary = cmp.Or(c.o.Kubelet, filepath.Join(c.o.BinDir, "kubelet"))
		// The same credentials and address (a later --node-ip wins over peerrun's 127.0.0.1);
		// peerrun's kubelet serves its API on 127.0.0.1:10250.
		ao.ExtraArgs = []string{"--kubeconfig=" + c.CP.NodeKubeconfig(NodeName), "--node-ip=" + nodeIP}
		if c.o.KubeletRootDir != "" {
			ao.ExtraArgs = append(ao.ExtraArgs, "--root-dir="+c.o.KubeletRootDir)
		}
	default:
		return fmt.Errorf("clusterdemo: agent kind %q: want slicelet or kubelet", k)
	}
	c.Agent, err = c.node.StartAgent(ctx, ao)
	return err
}

// MainPIDs maps the ID of every running container of the node to its main PID.
func (c *Cluster) MainPIDs(ctx context.Context) (map[string]int, error) { return c.node.MainPIDs(ctx) }

// ManifestDir is the node's static pod directory, both agents'.
func (c *Cluster) ManifestDir() string { return c.manifests }

// HandOver stops the node's agent without touching its pods, its Node or its Lease, and starts
// the agent of kind k in its place: the node changing agent in place.
func (c *Cluster) HandOver(ctx context.Context, k peerrun.Kind) error {
	if c.Agent != nil {
		if err := c.Agent.Halt(ctx); err != nil {
			return err
		}
		c.Agent = nil
	}
	return c.StartAgent(ctx, k)
}

// StopAgent stops the node's agent (removing every pod it left on containerd) and deletes
// the Node object and the pods bound to it, so that the next agent registers afresh.
func (c *Cluster) StopAgent(ctx context.Context) error {
	if c.Agent == nil {
		return nil
	}
	err := c.Agent.Stop(ctx)
	c.Agent = nil
	zero := int64(0)
	pods, lerr := c.Admin.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + NodeName})
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, p := range pods.Items {
		if derr := c.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, derr)
		}
	}
	if derr := c.Admin.CoreV1().Nodes().Delete(ctx, NodeName, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
		err = errors.Join(err, derr)
	}
	if derr := c.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, NodeName, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
		err = errors.Join(err, derr)
	}
	return err
}

// defaultContainerd is containerd's default address, where cAdvisor looks for it
// (github.com/google/cadvisor/lib/container/containerd, flag -containerd).
const defaultContainerd = "/run/containerd/containerd.sock"

// linkContainerd links defaultContainerd to socket unless something is there already.
func linkContainerd(socket string) error {
	if _, err := os.Lstat(defaultContainerd); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(defaultContainerd), 0o711); err != nil {
		return fmt.Errorf("clusterdemo: %w", err)
	}
	if err := os.Symlink(socket, defaultContainerd); err != nil {
		return fmt.Errorf("clusterdemo: %w", err)
	}
	return nil
}

// memTotal is MemTotal of /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemTotal %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo: no MemTotal")
}

// Close stops slicelet, the control plane and containerd.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	if c.Agent != nil {
		errs = append(errs, c.Agent.Stop(ctx))
	}
	if c.CP != nil {
		errs = append(errs, c.CP.Stop(ctx))
	}
	if c.node != nil {
		errs = append(errs, c.node.Close())
	}
	return errors.Join(errs...)
}

// Journal is the last n lines of the agent's journal.
func (c *Cluster) Journal(ctx context.Context, n int) string {
	if c.Agent == nil {
		return ""
	}
	return c.Agent.Journal(ctx, n)
}

// Step prints a step's title.
func (c *Cluster) Step(format string, args ...any) {
	fmt.Fprintf(c.out, "\n== %s\n", fmt.Sprintf(format, args...))
}

// Kubectl runs kubectl as the cluster admin, printing the command and its output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	fmt.Fprintf(c.out, "$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.CP.AdminKubeconfig()}, args...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, c.out), io.MultiWriter(&buf, c.out)
	if err := cmd.Run(); err != nil {
		return buf.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return buf.String(), nil
}

// Shell runs a command on the node (inside the sandbox), printing it and its output.
func (c *Cluster) Shell(ctx context.Context, name string, args ...string) error {
	fmt.Fprintf(c.out, "$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = c.out, c.out
	return cmd.Run()
}

// poll waits for cond, at most limit.
func poll(ctx context.Context, what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) error {
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, limit, true, cond); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// NodeCondition is the node's condition of type ct; nil when it has none.
func NodeCondition(n *v1.Node, ct v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// PodCondition is the pod's condition of type ct; nil when it has none.
func PodCondition(p *v1.Pod, ct v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// WaitNodeReady waits until the node is registered and Ready.
func (c *Cluster) WaitNodeReady(ctx context.Context) (*v1.Node, error) {
	var n *v1.Node
	err := poll(ctx, "node Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		n, err = c.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		r := NodeCondition(n, v1.NodeReady)
		return r != nil && r.Status == v1.ConditionTrue, nil
	})
	return n, err
}

// NodePods are the pods bound to the node, by name.
func (c *Cluster) NodePods(ctx context.Context, selector string) (map[string]*v1.Pod, error) {
	l, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + NodeName})
	if err != nil {
		return nil, err
	}
	out := map[string]*v1.Pod{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out, nil
}

// ready reports whether a pod is Running and Ready.
func ready(p *v1.Pod) bool {
	r := PodCondition(p, v1.PodReady)
	return p.Status.Phase == v1.PodRunning && r != nil && r.Status == v1.ConditionTrue
}

// hog is a Burstable pod that fills HogMemory of memory (dd's buffer, every page touched,
// held while dd blocks writing it to a pipe nobody reads) against a request of 10Mi.
func hog(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			RestartPolicy:                 v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: name, Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command:   []string{"/bin/sh", "-c", "dd if=/dev/zero bs=" + HogMemory + " count=1 iflag=fullblock 2>/dev/null | sleep 100000"},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}}}},
		},
	}
}
