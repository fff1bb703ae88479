package clustertest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/hack/peer/cluster"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// addonsEnv names the directory of the add-ons' binaries (make peer-addons-build);
// nodesEnv the nodes' agents of TestTwoNodesServiceByName (cluster.ParseNodes); prefixEnv,
// when set, starts its sandboxes' names (clustertest-<pid> otherwise).
const (
	addonsEnv = "PEER_ADDONS_DIR"
	nodesEnv  = "PEER_CLUSTER_NODES"
	prefixEnv = "PEER_CLUSTER_PREFIX"
)

// TestMain lets this test binary be a node of the clusters the multi-node tests start: a copy
// of it runs inside each node's sandbox (cluster.RunNodeIfInside).
func TestMain(m *testing.M) {
	cluster.RunNodeIfInside()
	os.Exit(m.Run())
}

// TestTwoNodesServiceByName starts a cluster of two nodes (a kubelet node and a slicelet node
// by default, PEER_CLUSTER_NODES otherwise), each in its own sandbox with its own containerd
// and network namespace on a shared bridge, with kube-proxy, flannel and CoreDNS running as
// workloads on them, and checks both ways that a pod on one node reaches by name a Service
// whose only endpoint is on the other: cluster DNS, kube-proxy's rules and the routed pod
// network, all three run by the nodes themselves. Then kubectl run -it (a terminal) and -i
// --rm (a container's stdin) on each node: attach through the API server's proxy to the node.
// Then kubectl top nodes and pods through metrics-server, which scrapes every node's
// /metrics/resource with its service account's token (the nodes' delegated authorization),
// and a StatefulSet whose claims bind to local persistent volumes, one on each node, its data
// kept across a pod's deletion.
func TestTwoNodesServiceByName(t *testing.T) {
	bin, slicelet := prerequisites(t)
	addons := os.Getenv(addonsEnv)
	if addons == "" {
		addons = filepath.Join("..", "..", "..", "build", "addons")
	}
	addons, err := filepath.Abs(addons)
	if err == nil {
		addons, err = filepath.EvalSymlinks(addons)
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(addons, cluster.CoreDNSBinary))
	}
	if err != nil {
		if systemdtest.CI() && os.Getenv("PEER_REQUIRED") == "1" {
			t.Fatalf("add-ons missing (%v) with CI=true and PEER_REQUIRED=1: run make peer-addons-build", err)
		}
		t.Skipf("SKIP (add-ons missing: %v): run make peer-addons-build", err)
	}
	list := os.Getenv(nodesEnv)
	if list == "" {
		list = "kubelet,slicelet"
	}
	nodes, err := cluster.ParseNodes(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("%s=%q: want two nodes", nodesEnv, list)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Work: t.TempDir(), BinDir: bin, Slicelet: slicelet, AddonsDir: addons,
		Nodes: nodes, Prefix: cmp.Or(os.Getenv(prefixEnv), fmt.Sprintf("clustertest-%d", os.Getpid())), Log: t.Output(), SliceletDNS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()
	a, b := c.Nodes[0].Spec.Name, c.Nodes[1].Spec.Name
	manifest := filepath.Join(t.TempDir(), "pods.yaml")
	var docs []string
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		docs = append(docs, serverAndClient(pair[0], pair[1]))
	}
	if err := os.WriteFile(manifest, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The manifest lives in the test's temporary directory, which the control plane's sandbox
	// does not see: kubectl reads it from standard input instead.
	if _, err := c.KubectlStdin(ctx, t.Output(), manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		server, client := "web-"+pair[0], "client-"+pair[1]
		if _, err := c.Kubectl(ctx, t.Output(), "wait", "--for=condition=Ready", "--timeout=5m", "pod/"+server, "pod/"+client); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s to %s", pair[1], pair[0]), func(t *testing.T) {
			if err := c.ExpectServiceByName(ctx, t.Output(), client, server, server); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(fmt.Sprintf("%s to the hostPort on %s", pair[1], pair[0]), func(t *testing.T) {
			ip := ""
			for _, n := range c.Nodes {
				if n.Spec.Name == pair[0] {
					ip = n.IP
				}
			}
			if err := c.ExpectFetch(ctx, t.Output(), client, fmt.Sprintf("http://%s:%d", ip, hostPort), server); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, n := range c.Nodes {
		t.Run("kubectl run -it and -i on "+n.Spec.Name, func(t *testing.T) {
			if err := c.ExpectRunInteractive(ctx, t.Output(), n.Spec.Name); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("kubectl top on every node", func(t *testing.T) {
		if err := c.ExpectTop(ctx, t.Output()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a StatefulSet on local persistent volumes", func(t *testing.T) {
		if err := c.ExpectStatefulSetLocalVolumes(ctx, t.Output()); err != nil {
			t.Fatal(err)
		}
	})
}

// hostPort is the servers' host port (the CNI portmap plugin after flannel's bridge).
const hostPort = 18080

// serverAndClient is an HTTP server answering with its hostname on node server (pod and
// Service web-<server>, its port 8080 also on the node's hostPort) and a client pod on node
// client (client-<client>).
func serverAndClient(server, client string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web-%[1]s
  labels: {app: web-%[1]s}
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %[3]s
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080, hostPort: %[4]d}]
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 2
---
apiVersion: v1
kind: Service
metadata:
  name: web-%[1]s
spec:
  selector: {app: web-%[1]s}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: client-%[2]s
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %[3]s
    imagePullPolicy: IfNotPresent
    command: [sleep, infinity]
`, server, client, cluster.ToolsImage, hostPort)
}
