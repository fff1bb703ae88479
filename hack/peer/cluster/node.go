package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// nodeEnv carries a node's configuration (JSON) to the program [Start] runs inside the node's
// sandbox; [RunNodeIfInside] reads it.
const nodeEnv = "PEER_CLUSTER_NODE"

// readyLine is what the program inside a node prints once its agent runs.
const readyLine = "peer-cluster-node-ready"

// CNIConfDir is the nodes' CNI configuration directory, as on any node: containerd reads it,
// the pod network's DaemonSet writes it.
const CNIConfDir = "/etc/cni/net.d"

// nodeConfig is what the program inside a node's sandbox needs.
type nodeConfig struct {
	Name string       `json:"name"`
	Kind peerrun.Kind `json:"kind"`
	IP   string       `json:"ip"`
	// Dir is the node's directory (under the run directory, bound into its sandbox).
	Dir string `json:"dir"`
	// Agent is the agent's binary; Kubeconfig and CAFile its credentials and the cluster CA.
	Agent, Kubeconfig, CAFile string
	// Images are the OCI archives of the add-ons' images and the tools image ([WriteImages]).
	Images []string `json:"images"`
	// SliceletDNS gives slicelet the cluster DNS keys ([cluster] dns_servers and domain).
	SliceletDNS bool `json:"slicelet_dns"`
	// Mirrors are containerd's registry mirrors (the cluster's registry, [Registry]).
	Mirrors map[string]string `json:"mirrors"`
}

// RunNodeIfInside runs a node and exits when this program was started by [Start] inside a
// node's sandbox; otherwise it returns at once. A program that starts a cluster calls it first
// thing in main (or TestMain): Start runs a copy of the running executable in each node.
func RunNodeIfInside() {
	spec := os.Getenv(nodeEnv)
	if spec == "" || !systemdtest.Inside() {
		return
	}
	var c nodeConfig
	err := json.Unmarshal([]byte(spec), &c)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = runNode(ctx, c, os.Stdin, os.Stdout)
		stop()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runNode starts containerd (its CNI configuration in CNIConfDir), imports the images, starts
// the agent registered as the node, prints readyLine and runs until stdin closes or ctx ends;
// then it stops the agent (and every pod it left) and containerd.
func runNode(ctx context.Context, c nodeConfig, stdin io.Reader, stdout io.Writer) (err error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	node, err := peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: c.Dir, Logf: logf, CNIConfDir: CNIConfDir, RegistryMirrors: c.Mirrors})
	if err != nil {
		return err
	}
	stopCtx := context.WithoutCancel(ctx)
	defer func() { err = errors.Join(err, node.Close()) }()
	for _, img := range c.Images {
		if _, err := node.Containerd.Ctr(ctx, "images", "import", img); err != nil {
			return err
		}
	}
	manifests := filepath.Join(c.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	ao := peerrun.AgentOptions{Kind: c.Kind, Binary: c.Agent, ManifestDir: manifests, NodeName: c.Name}
	switch c.Kind {
	case peerrun.Kubelet:
		// After peerrun's own flags, so these win: the node's address for its API (the API
		// server reaches it there for logs and exec) and its Node, and the cluster DNS.
		ao.ExtraArgs = []string{"--kubeconfig=" + c.Kubeconfig, "--node-ip=" + c.IP, "--address=" + c.IP,
			"--cluster-dns=" + DNSServiceIP, "--cluster-domain=" + Domain}
	case peerrun.Slicelet:
		ao.SliceletTOML = sliceletCluster(c)
		ao.SliceletDropIn = "[runtime]\nnetwork = \"cni\"\n"
	default:
		return fmt.Errorf("node %s: agent %q: want kubelet or slicelet", c.Name, c.Kind)
	}
	agent, err := node.StartAgent(ctx, ao)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logf("%s's journal:\n%s", agent.Unit, agent.Journal(stopCtx, 40))
		}
		err = errors.Join(err, agent.Stop(stopCtx))
	}()
	fmt.Fprintln(stdout, readyLine)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return nil
		case <-tick.C:
			if ok, journal := agent.Active(ctx); !ok {
				return fmt.Errorf("node %s: %s stopped: %s", c.Name, agent.Unit, journal)
			}
		}
	}
}

// sliceletCluster is slicelet's [cluster] table for node c: its credentials, name, address
// (the kubelet API on it, verifying the API server's client certificate against the cluster
// CA) and, when it has them, the cluster DNS keys.
func sliceletCluster(c nodeConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = %q\nnode_ip = %q\nclient_ca_file = %q\n",
		c.Kubeconfig, c.Name, c.IP, c.CAFile)
	if c.SliceletDNS {
		fmt.Fprintf(&b, "dns_servers = [%q]\ndomain = %q\n", DNSServiceIP, Domain)
	}
	return b.String()
}

// waitReadyLine reads r until readyLine (true) or its end (false), copying every other line to
// log.
func waitReadyLine(r io.Reader, log io.Writer) bool {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == readyLine {
			return true
		}
		fmt.Fprintln(log, sc.Text())
	}
	return false
}
