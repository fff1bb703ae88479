package clusterdemo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// Deployment is the demo's Deployment: web, its pods labelled app=web.
const (
	Deployment = "web"
	AppLabel   = "app=web"
)

// Deploy creates the Deployment with replicas pods (Burstable: 10m CPU and 16Mi requested, a
// shell that exits at SIGTERM, a 5 s grace period) and waits until they all run on the node.
func (c *Cluster) Deploy(ctx context.Context, replicas int32) (map[string]*v1.Pod, error) {
	labels := map[string]string{"app": Deployment}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: Deployment, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
						Env:     []v1.EnvVar{{Name: "VERSION", Value: "1"}},
						Command: []string{"/bin/sh", "-c", "echo \"web version $VERSION on $(hostname)\"; trap 'echo stopping; exit 0' TERM; while true; do sleep 1; done"},
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("16Mi")}}}},
				},
			},
		},
	}
	fmt.Fprintf(c.out, "creating Deployment %s: %d replicas of %s (requests cpu 10m, memory 16Mi)\n", Deployment, replicas, peerrun.TestImage)
	if _, err := c.Admin.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := c.Kubectl(ctx, "rollout", "status", "deployment/"+Deployment, "--timeout=3m"); err != nil {
		return nil, err
	}
	var got map[string]*v1.Pod
	err := poll(ctx, "the Deployment's pods Running and Ready on the node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.NodePods(ctx, AppLabel)
		if err != nil {
			return false, err
		}
		n := int32(0)
		for _, p := range got {
			if ready(p) {
				n++
			}
		}
		return n == replicas && len(got) == int(replicas), nil
	})
	if err != nil {
		return nil, err
	}
	_, err = c.Kubectl(ctx, "get", "pods", "-o", "wide", "-l", AppLabel)
	return got, err
}

// Slices prints the pods' systemd slices on the node: kubepods.slice and its QoS and pod slices
// with the containers' scopes (systemd-cgls), and each pod slice's limits.
func (c *Cluster) Slices(ctx context.Context, pods map[string]*v1.Pod) error {
	if err := c.Shell(ctx, "systemctl", "list-units", "--no-pager", "--no-legend", "--type=slice", "kubepods*"); err != nil {
		return err
	}
	if err := c.Shell(ctx, "systemd-cgls", "--no-pager", "--xattr=no", "--cgroup-id=no", "-u", "kubepods.slice"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		p := pods[name]
		unit := fmt.Sprintf("kubepods-%s-pod%s.slice", strings.ToLower(string(p.Status.QOSClass)), strings.ReplaceAll(string(p.UID), "-", "_"))
		if err := c.Shell(ctx, "systemctl", "show", "--no-pager", "-p", "Id,Description,CPUShares,CPUWeight,MemoryLimit,MemoryMax", unit); err != nil {
			return err
		}
	}
	return nil
}

// RollingUpdate changes the Deployment's environment (VERSION=2): a new ReplicaSet takes
// over, one pod at a time, and the old pods are stopped.
func (c *Cluster) RollingUpdate(ctx context.Context, old map[string]*v1.Pod) error {
	if _, err := c.Kubectl(ctx, "set", "env", "deployment/"+Deployment, "VERSION=2"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "rollout", "status", "deployment/"+Deployment, "--timeout=3m"); err != nil {
		return err
	}
	err := poll(ctx, "the old pods gone and 3 new ones Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		now, err := c.NodePods(ctx, AppLabel)
		if err != nil {
			return false, err
		}
		for name, p := range now {
			if old[name] != nil || !ready(p) {
				return false, nil
			}
		}
		return len(now) == len(old), nil
	})
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "get", "replicasets", "-l", AppLabel); err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, "get", "pods", "-o", "wide", "-l", AppLabel)
	return err
}

// Logs shows `kubectl logs` of a pod: the API server streams it from the node's kubelet API
// (/containerLogs); it must hold the container's first line.
func (c *Cluster) Logs(ctx context.Context, pod string) error {
	out, err := c.Kubectl(ctx, "logs", pod, "--request-timeout=20s")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "web version 2 on ") {
		return fmt.Errorf("kubectl logs %s: %q, want the container's output", pod, out)
	}
	return nil
}

// Drained is what a drain of the node showed.
type Drained struct {
	// Graceful are the pods the Eviction API deleted with their grace period (a
	// deletionTimestamp and deletionGracePeriodSeconds > 0 seen) and that the node then
	// removed, with the grace period seen.
	Graceful map[string]int64
	// DisruptionTarget are the pods that carried the API server's DisruptionTarget condition
	// (reason EvictionByEvictionAPI) while they stopped.
	DisruptionTarget map[string]bool
	// Pending are the Deployment's replacement pods, left unscheduled.
	Pending []string
}

// Drain drains the node (kubectl drain: cordon, then the Eviction API for each pod), watching
// the node's pods: each must be deleted gracefully, stopped by the node and removed; the node
// is then unschedulable and the Deployment's replacement pods stay Pending (the only node is
// cordoned).
func (c *Cluster) Drain(ctx context.Context, before map[string]*v1.Pod) (Drained, error) {
	got := Drained{Graceful: map[string]int64{}, DisruptionTarget: map[string]bool{}}
	list, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: AppLabel})
	if err != nil {
		return got, err
	}
	w, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{LabelSelector: AppLabel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return got, err
	}
	defer w.Stop()
	seen := map[string]int64{}
	gone := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || before[p.Name] == nil {
				continue
			}
			// The first deletion is the Eviction API's, with the grace period; the node's
			// final one has grace 0.
			if _, ok := seen[p.Name]; !ok && p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil {
				seen[p.Name] = *p.DeletionGracePeriodSeconds
			}
			if dt := PodCondition(p, v1.DisruptionTarget); dt != nil && dt.Reason == "EvictionByEvictionAPI" {
				got.DisruptionTarget[p.Name] = true
			}
			if ev.Type == watch.Deleted {
				gone[p.Name] = true
			}
			if len(gone) == len(before) {
				return
			}
		}
	}()
	if _, err := c.Kubectl(ctx, "drain", NodeName, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2m"); err != nil {
		return got, err
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		w.Stop()
		<-done
	}
	for name := range before {
		if g, ok := seen[name]; ok && g > 0 && gone[name] {
			got.Graceful[name] = g
		}
	}
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return got, err
	}
	if !n.Spec.Unschedulable {
		return got, errors.New("the drained node is schedulable")
	}
	err = poll(ctx, "the replacement pods Pending", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: AppLabel})
		if err != nil {
			return false, err
		}
		got.Pending = nil
		for _, p := range l.Items {
			if p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending {
				return false, nil
			}
			got.Pending = append(got.Pending, p.Name)
		}
		return len(got.Pending) == len(before), nil
	})
	if err != nil {
		return got, err
	}
	if _, err := c.Kubectl(ctx, "get", "nodes"); err != nil {
		return got, err
	}
	_, err = c.Kubectl(ctx, "get", "pods", "-o", "wide", "-l", AppLabel)
	return got, err
}

// Uncordon makes the node schedulable again and waits for the Deployment's pods to run.
func (c *Cluster) Uncordon(ctx context.Context, replicas int) error {
	if _, err := c.Kubectl(ctx, "uncordon", NodeName); err != nil {
		return err
	}
	return poll(ctx, "the Deployment's pods back on the node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := c.NodePods(ctx, AppLabel)
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range got {
			if ready(p) {
				n++
			}
		}
		return n == replicas, nil
	})
}

// Evicted is what an eviction under memory pressure showed.
type Evicted struct {
	// Pod is the evicted pod as the API shows it.
	Pod *v1.Pod
	// Event is the node's Evicted event about it.
	Event *v1.Event
	// Node is the node once it reports MemoryPressure.
	Node *v1.Node
}

// Evict runs the hog, a pod that fills HogMemory of kubepods.slice (limited to PodsMemory,
// threshold memory.available < EvictionThreshold): slicelet's eviction manager evicts it, the
// API shows it Failed/Evicted with the kubelet's message and DisruptionTarget condition, the
// node's Evicted event, the node's MemoryPressure condition and its taint.
func (c *Cluster) Evict(ctx context.Context, name string) (Evicted, error) {
	var got Evicted
	fmt.Fprintf(c.out, "kubepods.slice holds %dMi; the hard threshold is memory.available<%s; pod %s fills %s of it against a request of 10Mi\n",
		PodsMemory>>20, EvictionThreshold, name, HogMemory)
	if _, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, hog(name), metav1.CreateOptions{}); err != nil {
		return got, err
	}
	err := poll(ctx, "the hog evicted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got.Pod = p
		if p.Status.Phase == v1.PodFailed && p.Status.Reason != "Evicted" {
			return false, fmt.Errorf("pod %s failed: %s: %s", name, p.Status.Reason, p.Status.Message)
		}
		return p.Status.Phase == v1.PodFailed, nil
	})
	if err != nil {
		return got, err
	}
	err = poll(ctx, "the node's Evicted event", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=Evicted"})
		if err != nil {
			return false, err
		}
		for i := range l.Items {
			if l.Items[i].Source.Host == NodeName {
				got.Event = &l.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return got, err
	}
	err = poll(ctx, "the node's MemoryPressure", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got.Node = n
		mp := NodeCondition(n, v1.NodeMemoryPressure)
		return mp != nil && mp.Status == v1.ConditionTrue, nil
	})
	if err != nil {
		return got, err
	}
	// The node lifecycle controller taints the node from the condition (TaintNodesByCondition).
	err = poll(ctx, "the node's memory-pressure taint", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got.Node = n
		return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
			return t.Key == v1.TaintNodeMemoryPressure && t.Effect == v1.TaintEffectNoSchedule
		}), nil
	})
	if err != nil {
		return got, err
	}
	// STATUS is the container's reason (Error: killed, exit code 137) as for a pod a kubelet
	// evicted (kubectl's printPod); the pod's phase and reason are in the columns after it.
	if _, err := c.Kubectl(ctx, "get", "pods", "-o", "wide"); err != nil {
		return got, err
	}
	if _, err := c.Kubectl(ctx, "get", "pods", "-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase,REASON:.status.reason,NODE:.spec.nodeName"); err != nil {
		return got, err
	}
	if _, err := c.Kubectl(ctx, "get", "pod", name, "-o",
		`jsonpath=phase={.status.phase} reason={.status.reason}{"\n"}message={.status.message}{"\n"}{range .status.conditions[?(@.type=="DisruptionTarget")]}condition {.type}={.status} reason={.reason}{"\n"}{end}`); err != nil {
		return got, err
	}
	if _, err := c.Kubectl(ctx, "get", "events", "--field-selector", "reason=Evicted"); err != nil {
		return got, err
	}
	_, err = c.Kubectl(ctx, "get", "node", NodeName, "-o",
		`jsonpath={range .status.conditions[?(@.type=="MemoryPressure")]}{.type}={.status} reason={.reason} message={.message}{"\n"}{end}{range .spec.taints[*]}taint {.key}:{.effect}{"\n"}{end}`)
	return got, err
}
