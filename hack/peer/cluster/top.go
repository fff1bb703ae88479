package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// topRow is one row of kubectl top nodes (Name a node) or kubectl top pods -A (Name
// namespace/pod): the CPU and memory metrics-server read from the node's /metrics/resource.
type topRow struct {
	Name        string
	CPU, Memory resource.Quantity
}

// parseTop reads kubectl top's table without headers: for nodes name, CPU cores, CPU%,
// memory bytes, memory% (the node's capacity); for pods -A namespace, name, CPU cores, memory
// bytes. A node metrics-server has no metrics for is listed with <unknown>: it has no row here.
func parseTop(out string, pods bool) ([]topRow, error) {
	var rows []topRow
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		name, cpuAt, memAt := f[0], 1, 3
		if pods {
			cpuAt, memAt = 2, 3
		}
		if len(f) <= memAt {
			return nil, fmt.Errorf("kubectl top: row %q: want at least %d columns", strings.TrimSpace(line), memAt+1)
		}
		if pods {
			name = f[0] + "/" + f[1]
		}
		if f[cpuAt] == "<unknown>" || f[memAt] == "<unknown>" {
			continue
		}
		cpu, err := resource.ParseQuantity(f[cpuAt])
		if err != nil {
			return nil, fmt.Errorf("kubectl top: %s: CPU %q: %w", name, f[cpuAt], err)
		}
		mem, err := resource.ParseQuantity(f[memAt])
		if err != nil {
			return nil, fmt.Errorf("kubectl top: %s: memory %q: %w", name, f[memAt], err)
		}
		rows = append(rows, topRow{Name: name, CPU: cpu, Memory: mem})
	}
	return rows, nil
}

// fillMiB is what each node's fill pod writes to its memory-backed emptyDir: tmpfs pages are
// charged to the container's memory cgroup and never reclaimed as file cache, so its working
// set, and kubectl top's memory for it, is at least that; fillSlackMiB bounds the rest (a
// shell, sleep and the page tables).
const (
	fillMiB      = 48
	fillSlackMiB = 24
)

// fillPod is node's fill pod's name (namespace default).
func fillPod(node string) string { return "top-fill-" + node }

// fillManifest is node's fill pod.
func fillManifest(node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: fill
    image: %[3]s
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'dd if=/dev/zero of=/mem/fill bs=1M count=%[4]d && exec sleep infinity']
    resources:
      limits: {memory: 256Mi}
    volumeMounts:
    - {name: mem, mountPath: /mem}
  volumes:
  - name: mem
    emptyDir: {medium: Memory}
`, fillPod(node), node, ToolsImage, fillMiB)
}

// topProblems is what kubectl top's rows lack for the cluster's nodes: a node without its row
// or without memory in use, a node none of whose running pods has a row (its pods are
// namespace/name → node), a node whose fill pod's memory is not what it wrote. Empty: kubectl
// top works on every node and agrees with the memory its pods' cgroups were charged.
func topProblems(nodes []string, nodeRows, podRows []topRow, pods map[string]string) []string {
	var problems []string
	byNode := map[string]topRow{}
	for _, r := range nodeRows {
		byNode[r.Name] = r
	}
	withPods := map[string][]string{}
	byPod := map[string]topRow{}
	for _, r := range podRows {
		byPod[r.Name] = r
		if n, ok := pods[r.Name]; ok {
			withPods[n] = append(withPods[n], r.Name)
		}
	}
	for _, n := range nodes {
		r, ok := byNode[n]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("node %s: no metrics in kubectl top nodes", n))
		case r.Memory.IsZero():
			problems = append(problems, fmt.Sprintf("node %s: no memory in use", n))
		}
		if len(withPods[n]) == 0 {
			var running []string
			for p, on := range pods {
				if on == n {
					running = append(running, p)
				}
			}
			slices.Sort(running)
			problems = append(problems, fmt.Sprintf("node %s: none of its running pods %v in kubectl top pods", n, running))
		}
		fill := "default/" + fillPod(n)
		if f, ok := byPod[fill]; !ok {
			problems = append(problems, fmt.Sprintf("node %s: no row for %s in kubectl top pods", n, fill))
		} else if mib := f.Memory.Value() >> 20; mib < fillMiB || mib > fillMiB+fillSlackMiB {
			problems = append(problems, fmt.Sprintf("node %s: %s uses %dMi, want %d to %dMi (it wrote %dMi to tmpfs)", n, fill, mib, fillMiB, fillMiB+fillSlackMiB, fillMiB))
		}
	}
	return problems
}

// ExpectTop checks kubectl top nodes and kubectl top pods -A, as a user runs them, through
// the metrics API that metrics-server serves from each node's /metrics/resource (scraped with
// its service account's token): every node has its row with memory in use, every node has a
// row for at least one of its running pods (the DaemonSets' are on every node), and a pod on
// each node that filled a memory-backed emptyDir shows that memory. Three minutes at most
// once the fill pods run: metrics-server reports a pod once it has scraped it twice.
func (c *Cluster) ExpectTop(ctx context.Context, out io.Writer) error {
	var nodes, manifest, names []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Spec.Name)
		manifest = append(manifest, fillManifest(n.Spec.Name))
		names = append(names, "pod/"+fillPod(n.Spec.Name))
	}
	path := filepath.Join(c.o.Work, "top-fill.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(manifest, "---\n")), 0o644); err != nil {
		return err
	}
	if _, err := c.KubectlStdin(ctx, out, path, "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, out, append([]string{"wait", "--for=condition=Ready", "--timeout=3m"}, names...)...); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		problems, err := c.topOnce(ctx, out, nodes)
		if err == nil && len(problems) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("kubectl top: %w", err)
			}
			return fmt.Errorf("kubectl top: %s", strings.Join(problems, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// topOnce runs kubectl top nodes and pods once and returns what they lack.
func (c *Cluster) topOnce(ctx context.Context, out io.Writer, nodes []string) ([]string, error) {
	got, err := c.Kubectl(ctx, out, "top", "nodes", "--no-headers")
	if err != nil {
		return nil, err
	}
	nodeRows, err := parseTop(got, false)
	if err != nil {
		return nil, err
	}
	if got, err = c.Kubectl(ctx, out, "top", "pods", "-A", "--no-headers"); err != nil {
		return nil, err
	}
	podRows, err := parseTop(got, true)
	if err != nil {
		return nil, err
	}
	list, err := c.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods := map[string]string{}
	for _, p := range list.Items {
		if p.Status.Phase == v1.PodRunning && p.Spec.NodeName != "" {
			pods[p.Namespace+"/"+p.Name] = p.Spec.NodeName
		}
	}
	return topProblems(nodes, nodeRows, podRows, pods), nil
}
