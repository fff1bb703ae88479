package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// demoManifest is the demo's workloads, for nodes first and last: a web server pinned to the
// first node behind the Service "web"; a client pinned to the last; a StatefulSet of two behind
// the headless Service "db", one pod a node; a DaemonSet. Every server answers with its pod's
// hostname (busybox httpd serving a file it wrote at start).
const demoManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {kubernetes.io/hostname: %[1]s}
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 2
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  nodeSelector: {kubernetes.io/hostname: %[2]s}
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %[3]s
    imagePullPolicy: IfNotPresent
    command: [sleep, infinity]
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels: {app: db}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: db
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 2
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hello
spec:
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: hello
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'echo "hello from $(hostname) on $NODE"; exec sleep infinity']
        env:
        - name: NODE
          valueFrom:
            fieldRef: {fieldPath: spec.nodeName}
`

// Demo runs the demo's steps on a cluster of at least two nodes, printing each: the nodes and
// their pod CIDRs, the add-ons on them, a Service reached by name from a pod on another node
// than its endpoint's, a StatefulSet's stable DNS names, a DaemonSet on every node, kubectl
// run -it, kubectl top nodes and pods, a StatefulSet on local persistent volumes. It returns an
// error when the cluster does not do what a kubeadm cluster of kubelet nodes does.
func (c *Cluster) Demo(ctx context.Context, out io.Writer) error {
	if len(c.Nodes) < 2 {
		return fmt.Errorf("demo: %d nodes, want at least 2", len(c.Nodes))
	}
	first, last := c.Nodes[0], c.Nodes[len(c.Nodes)-1]
	step := func(format string, args ...any) { c.logf(format, args...) }
	k := func(args ...string) (string, error) { return c.Kubectl(ctx, out, args...) }

	step("the nodes, each with the pod CIDR kube-controller-manager gave it")
	if _, err := k("get", "nodes", "-o", "custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status,"+
		"AGENT:.status.nodeInfo.kubeletVersion,ADDRESS:.status.addresses[?(@.type==\"InternalIP\")].address,POD-CIDR:.spec.podCIDR"); err != nil {
		return err
	}
	step("the add-ons, running as workloads on the nodes: kube-proxy and flannel on each, CoreDNS behind kube-dns")
	if _, err := k("get", "pods", "-A", "-o", "wide"); err != nil {
		return err
	}
	if _, err := k("-n", "kube-system", "get", "service", "kube-dns"); err != nil {
		return err
	}

	path := filepath.Join(c.o.Work, "demo.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, demoManifest, first.Spec.Name, last.Spec.Name, ToolsImage), 0o644); err != nil {
		return err
	}
	step("the workloads: web on %s behind the Service web, a client on %s, the StatefulSet db, the DaemonSet hello", first.Spec.Name, last.Spec.Name)
	if _, err := k("apply", "-f", path); err != nil {
		return err
	}
	for _, w := range []string{"deployment/web", "statefulset/db", "daemonset/hello"} {
		if _, err := k("rollout", "status", "--timeout=5m", w); err != nil {
			return err
		}
	}
	if _, err := k("wait", "--for=condition=Ready", "--timeout=3m", "pod/client"); err != nil {
		return err
	}
	if _, err := k("get", "pods", "-o", "wide"); err != nil {
		return err
	}
	webPod, err := k("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return err
	}
	fmt.Fprintln(out)

	step("the client on %s reaches the Service web by name (its endpoint is on %s): cluster DNS, kube-proxy, the pod network", last.Spec.Name, first.Spec.Name)
	if _, err := k("exec", "client", "--", "cat", "/etc/resolv.conf"); err != nil {
		return err
	}
	if err := c.ExpectServiceByName(ctx, out, "client", "web", webPod); err != nil {
		return err
	}

	step("the StatefulSet's stable names: db-0.db and db-1.db, one pod on each node")
	if _, err := k("get", "pods", "-l", "app=db", "-o", "custom-columns=NAME:.metadata.name,HOSTNAME:.spec.hostname,SUBDOMAIN:.spec.subdomain,NODE:.spec.nodeName,IP:.status.podIP"); err != nil {
		return err
	}
	for _, p := range []string{"db-0", "db-1"} {
		if err := c.expect(ctx, out, "Address", "exec", "client", "--", "nslookup", p+".db.default.svc."+Domain); err != nil {
			return err
		}
		if err := c.expect(ctx, out, p, fetch("client", "http://"+p+".db:8080")...); err != nil {
			return err
		}
	}

	step("the DaemonSet hello: one pod on every node")
	ds, err := k("get", "pods", "-l", "app=hello", "-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}")
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	for _, n := range c.Nodes {
		if strings.Count(ds, n.Spec.Name+"\n") != 1 {
			return fmt.Errorf("demo: DaemonSet hello: nodes %q, want one pod on %s", strings.Fields(ds), n.Spec.Name)
		}
	}
	if err := c.expect(ctx, out, "hello from", "logs", "-l", "app=hello", "--prefix"); err != nil {
		return err
	}

	step("kubectl run -it and -i --rm on %s: a shell on a terminal, and a container's standard input", last.Spec.Name)
	if err := c.ExpectRunInteractive(ctx, out, last.Spec.Name); err != nil {
		return err
	}

	step("kubectl top: metrics-server scrapes every node's /metrics/resource with its service account's token")
	if err := c.ExpectTop(ctx, out); err != nil {
		return err
	}

	step("a StatefulSet on local persistent volumes, one on each node: each pod on its volume's node, its data kept when it is deleted and recreated")
	return c.ExpectStatefulSetLocalVolumes(ctx, out)
}

// ExpectServiceByName checks that pod client (namespace default) reaches the HTTP Service
// service (port 80) by its short name and by its fully qualified one, and that the answer
// holds want.
func (c *Cluster) ExpectServiceByName(ctx context.Context, out io.Writer, client, service, want string) error {
	for _, url := range []string{"http://" + service, "http://" + service + ".default.svc." + Domain} {
		if err := c.ExpectFetch(ctx, out, client, url, want); err != nil {
			return err
		}
	}
	return nil
}

// ExpectFetch checks that pod client (namespace default) GETs url and the answer holds want.
func (c *Cluster) ExpectFetch(ctx context.Context, out io.Writer, client, url, want string) error {
	return c.expect(ctx, out, want, fetch(client, url)...)
}

// ExpectRunInteractive checks kubectl run with the container's standard input on node, both
// ways a user does it: -it (on a terminal: a shell answers what is typed) and -i without a
// terminal (the input reaches the container, whose stdin closes at its end: stdinOnce), each
// with --rm (the pod deleted once the session ends).
func (c *Cluster) ExpectRunInteractive(ctx context.Context, out io.Writer, node string) error {
	overrides := fmt.Sprintf(`{"apiVersion":"v1","spec":{"nodeName":%q,"terminationGracePeriodSeconds":1}}`, node)
	run := func(name string, mode string, cmd ...string) []string {
		return append([]string{"run", name, "--image", ToolsImage, "--image-pull-policy", "IfNotPresent", "--restart", "Never",
			"--rm", mode, "--overrides", overrides, "--"}, cmd...)
	}
	tty := "it-" + node
	got, err := c.KubectlTerminal(ctx, out, "echo answer-$((6*7)) from $(hostname)\nexit\n", run(tty, "-it", "sh")...)
	if err != nil || !strings.Contains(got, "answer-42 from "+tty) {
		return fmt.Errorf("kubectl run -it on %s: %q, want the shell's answer-42 from %s (%v)", node, got, tty, err)
	}
	in := filepath.Join(c.o.Work, "stdin-"+node)
	if err := os.WriteFile(in, []byte("abcd1234"), 0o644); err != nil {
		return err
	}
	got, err = c.KubectlStdin(ctx, out, in, run("i-"+node, "-i", "sh", "-c", "cat && echo ' stdin closed'")...)
	if err != nil || !strings.Contains(got, "abcd1234 stdin closed") {
		return fmt.Errorf("kubectl run -i on %s: %q, want the input and its end (%v)", node, got, err)
	}
	for _, p := range []string{tty, "i-" + node} {
		if _, err := c.Admin.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("kubectl run --rm on %s: pod %s still there (%v)", node, p, err)
		}
	}
	return nil
}

// fetch is kubectl's arguments to GET url from pod client, five seconds at most. The limit is
// busybox's timeout, not wget -T: Debian's static busybox 1.35 wget dies of SIGSEGV with -T
// once the transfer is done.
func fetch(client, url string) []string {
	return []string{"exec", client, "--", "timeout", "5", "wget", "-q", "-O-", url}
}

// expect runs kubectl with args until its output contains want, a minute at most (a Service's
// endpoints and DNS records follow the pods by a moment).
func (c *Cluster) expect(ctx context.Context, out io.Writer, want string, args ...string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := c.Kubectl(ctx, out, args...)
		if err == nil && strings.Contains(got, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: kubectl %s: %q, want %q (%v)", strings.Join(args, " "), got, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}
