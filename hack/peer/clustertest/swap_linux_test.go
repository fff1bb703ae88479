package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// swapStatic is the node's static pod; its mirror is named "<name>-<node>" by either agent.
const swapStatic = `apiVersion: v1
kind: Pod
metadata: {name: static-web, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: main, image: ` + peerrun.TestImage + `, imagePullPolicy: Never, command: [/bin/sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]}
`

// TestSwapUnderControlPlane: a node of a real control plane, run by the kubelet with a
// Deployment of 2, a DaemonSet and a static pod, changes agent in place — the kubelet stopped
// without stopping its pods, slicelet started as the same node (name, credentials, address,
// containerd, manifest directory, the kubelet's root directory) — and back. Through both swaps
// the API sees the same pods (UIDs), the same containers (IDs) and restart counts, the same
// mirror pod object, every pod Running and Ready and the Node Ready at every look (every
// 500 ms), and the Node's Ready condition written by the new agent. A look that finds a pod
// not Running or not Ready notes what the pod's status was and which agent wrote it. On the
// host it boots the sandbox (cgroup v1, hybrid) and runs itself inside, then, with
// SLICELET_VM=1, in the cgroup v2 VM.
func TestSwapUnderControlPlane(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandboxFor(t, "^TestSwapUnderControlPlane$", 30*time.Minute)
		runInVMFor(t, "^TestSwapUnderControlPlane$", 40*time.Minute)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 28*time.Minute)
	defer cancel()
	c := startSideBySide(t, ctx, filepath.Join(os.Getenv(workEnv), "kubelet-root"))
	if _, err := c.WaitNodeReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.ManifestDir(), "static.yaml"), []byte(swapStatic), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
						Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}}},
				},
			},
		},
	}
	if _, err := c.Admin.AppsV1().DaemonSets(metav1.NamespaceDefault).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before map[string]string
	poll(t, ctx, "the Deployment's 2 pods, the DaemonSet's and the static pod's mirror Running and Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		before, err = swapPods(ctx, c)
		return err == nil && len(before) == 4, nil
	})
	t.Logf("under the kubelet: %v", before)

	mon := watchSwap(ctx, c, before)
	for _, to := range []struct {
		kind   peerrun.Kind
		reason string
	}{{peerrun.Slicelet, "SliceletReady"}, {peerrun.Kubelet, "KubeletReady"}} {
		began := time.Now()
		if prev := c.Agent; prev != nil {
			// The journal of an agent handed over from, when the test fails (the node's, logged
			// then, is the last agent's).
			defer func() {
				if t.Failed() {
					t.Logf("%s's journal:\n%s", prev.Kind, prev.Journal(context.WithoutCancel(ctx), 200))
				}
			}()
		}
		if err := c.HandOver(ctx, to.kind); err != nil {
			t.Fatal(err)
		}
		// The new agent has taken over once it has written the Node's Ready condition (its
		// reason names the agent); the look goes on while it renews the node's Lease twice more
		// (10 s apart), so that its first syncs of the pods are seen.
		poll(t, ctx, string(to.kind)+" writing the Node's Ready condition", 3*time.Minute, func(ctx context.Context) (bool, error) {
			n, err := c.Admin.CoreV1().Nodes().Get(ctx, clusterdemo.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cond := clusterdemo.NodeCondition(n, v1.NodeReady)
			return cond != nil && cond.Reason == to.reason, nil
		})
		var renewals []time.Time
		poll(t, ctx, string(to.kind)+" renewing the node's Lease twice", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, clusterdemo.NodeName, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false, nil
			}
			if len(renewals) == 0 || !renewals[len(renewals)-1].Equal(l.Spec.RenewTime.Time) {
				renewals = append(renewals, l.Spec.RenewTime.Time)
			}
			return len(renewals) >= 3, nil
		})
		after, err := swapPods(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("under %s (%s after the hand-over): %v", to.kind, time.Since(began).Round(time.Millisecond), after)
		if !reflect.DeepEqual(after, before) {
			t.Errorf("under %s the pods are\n%v\nwere\n%v", to.kind, after, before)
		}
	}
	if problems := mon.stop(); len(problems) > 0 {
		t.Errorf("seen during the swaps (%d looks):\n%s", mon.looks, strings.Join(problems, "\n"))
	} else {
		t.Logf("every look of %d during the swaps: the Node Ready, every pod Running and Ready", mon.looks)
	}
}

// swapPods maps the node's pods (the Deployment's, the DaemonSet's and the static pod's
// mirror) to "<uid> <phase> <container>=<id>#<restarts> ..."; an error while one is not
// Running and Ready.
func swapPods(ctx context.Context, c *clusterdemo.Cluster) (map[string]string, error) {
	list, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + clusterdemo.NodeName})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if cond := clusterdemo.PodCondition(p, v1.PodReady); p.Status.Phase != v1.PodRunning || cond == nil || cond.Status != v1.ConditionTrue {
			return nil, fmt.Errorf("pod %s: %s, not Ready", p.Name, p.Status.Phase)
		}
		var cs []string
		for _, s := range p.Status.ContainerStatuses {
			cs = append(cs, fmt.Sprintf("%s=%s#%d", s.Name, s.ContainerID, s.RestartCount))
		}
		slices.Sort(cs)
		if len(cs) == 0 {
			return nil, fmt.Errorf("pod %s: no container statuses", p.Name)
		}
		out[p.Name] = fmt.Sprintf("%s %s", p.UID, strings.Join(cs, " "))
	}
	if _, ok := out["static-web-"+clusterdemo.NodeName]; !ok {
		return nil, fmt.Errorf("no mirror pod static-web-%s", clusterdemo.NodeName)
	}
	return out, nil
}

// swapMonitor looks at the Node and the pods every 500 ms until stopped.
type swapMonitor struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	looks    int
	problems []string
}

// watchSwap starts a swapMonitor of the pods of want (by name): each look notes the Node not
// Ready, and each of those pods gone, replaced (another UID), not Running or not Ready.
func watchSwap(ctx context.Context, c *clusterdemo.Cluster, want map[string]string) *swapMonitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &swapMonitor{cancel: cancel}
	m.wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		seen := map[string]bool{}
		note := func(p string) {
			if !seen[p] {
				seen[p] = true
				m.problems = append(m.problems, time.Now().Format("15:04:05.000")+" "+p)
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n, err := c.Admin.CoreV1().Nodes().Get(ctx, clusterdemo.NodeName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			list, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + clusterdemo.NodeName})
			if err != nil {
				continue
			}
			m.looks++
			if cond := clusterdemo.NodeCondition(n, v1.NodeReady); cond == nil || cond.Status != v1.ConditionTrue {
				note(fmt.Sprintf("node not Ready: %+v", cond))
			}
			byName := map[string]*v1.Pod{}
			for i := range list.Items {
				byName[list.Items[i].Name] = &list.Items[i]
			}
			for name, was := range want {
				p := byName[name]
				uid, _, _ := strings.Cut(was, " ")
				if p == nil {
					note("pod " + name + " gone")
					continue
				}
				ready := clusterdemo.PodCondition(p, v1.PodReady)
				switch {
				case string(p.UID) != uid:
					note("pod " + name + " replaced")
				case p.Status.Phase != v1.PodRunning:
					note(fmt.Sprintf("pod %s %s: %s", name, p.Status.Phase, describePod(p)))
				case ready == nil || ready.Status != v1.ConditionTrue:
					note(fmt.Sprintf("pod %s not Ready: %+v: %s", name, ready, describePod(p)))
				}
			}
		}
	})
	return m
}

// describePod is what a look noted of a pod: its resourceVersion, conditions, container
// states and who wrote its status last (managedFields), so that a failure tells which agent
// wrote what.
func describePod(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rv %s;", p.ResourceVersion)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, s := range p.Status.ContainerStatuses {
		state := "waiting"
		switch {
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = "terminated"
		case s.State.Waiting != nil:
			state = "waiting " + s.State.Waiting.Reason
		}
		fmt.Fprintf(&b, "; %s %s ready=%t id=%s", s.Name, state, s.Ready, s.ContainerID)
	}
	for _, m := range p.ManagedFields {
		if m.Subresource == "status" {
			fmt.Fprintf(&b, "; status by %s at %s", m.Manager, m.Time)
		}
	}
	return b.String()
}

// stop ends the monitor and returns what it noted.
func (m *swapMonitor) stop() []string {
	m.cancel()
	m.wg.Wait()
	return m.problems
}
