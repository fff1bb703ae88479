package clustertest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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

// The API pods of the swap besides the Deployment's and the DaemonSet's: one with an init
// container and a sidecar, a crash loop and one whose readiness probe always fails.
const (
	swapInitSidecar = "init-sidecar"
	swapCrash       = "crash"
	swapUnready     = "unready"
)

// swapAPIPods are those pods.
func swapAPIPods() []*v1.Pod {
	loop := []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}
	pod := func(name string, spec v1.PodSpec) *v1.Pod {
		spec.AutomountServiceAccountToken = ptr.To(false)
		spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}, Spec: spec}
	}
	ctr := func(name string, cmd []string) v1.Container {
		return v1.Container{Name: name, Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever, Command: cmd}
	}
	sidecar := ctr("sidecar", loop)
	sidecar.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	unready := ctr("main", loop)
	unready.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/false"}}}, PeriodSeconds: 2}
	return []*v1.Pod{
		pod(swapInitSidecar, v1.PodSpec{InitContainers: []v1.Container{ctr("init", []string{"/bin/true"}), sidecar}, Containers: []v1.Container{ctr("main", loop)}}),
		pod(swapCrash, v1.PodSpec{Containers: []v1.Container{ctr("main", []string{"/bin/sh", "-c", "sleep 1; exit 1"})}}),
		pod(swapUnready, v1.PodSpec{Containers: []v1.Container{unready}}),
	}
}

// TestSwapUnderControlPlane: a node of a real control plane, run by the kubelet with a
// Deployment of 2, a DaemonSet, a static pod, a pod with an init container and a sidecar, a
// crash loop and a pod whose readiness probe fails, changes agent in place — the kubelet
// stopped without stopping its pods, slicelet started as the same node (name, credentials,
// address, containerd, manifest directory, the kubelet's root directory) — and back. Through
// both swaps the API sees the same pods (UIDs), the same containers (IDs) and restart counts
// (the crash loop's going on), the same mirror pod object, and the node keeps the same main
// PID in every container but the crash loop's; at every look (every 500 ms) every pod is
// Running with the readiness it had (Ready but for the failing probe's; the crash loop's
// changes with its runs), no restart count goes back, and the Node is Ready; the Node's Ready condition is written by
// the new agent. A look that finds a pod otherwise notes what the pod's status was and which
// agent wrote it. On the host it boots the sandbox (cgroup v1, hybrid) and runs itself
// inside, then, with SLICELET_VM=1, in the cgroup v2 VM.
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
	for _, p := range swapAPIPods() {
		if _, err := c.Admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var before map[string]podLook
	poll(t, ctx, "the Deployment's 2 pods, the DaemonSet's, the static pod's mirror and the init/sidecar pod Running and Ready, the crash loop restarted, the failing probe's pod Running", 4*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		before, err = lookPods(ctx, c)
		return err == nil && swapSettled(before), nil
	})
	pids, err := c.MainPIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("under the kubelet: %v; main PIDs %v", before, pids)

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
		after, err := lookPods(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("under %s (%s after the hand-over): %v", to.kind, time.Since(began).Round(time.Millisecond), after)
		for _, p := range swapChanged(before, after) {
			t.Errorf("under %s: %s", to.kind, p)
		}
		now, err := c.MainPIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name, l := range before {
			if name == swapCrash {
				continue
			}
			for _, id := range l.running {
				if now[id] != pids[id] {
					t.Errorf("under %s: pod %s's container %s has main PID %d, had %d", to.kind, name, id, now[id], pids[id])
				}
			}
		}
	}
	if problems := mon.stop(); len(problems) > 0 {
		t.Errorf("seen during the swaps (%d looks):\n%s", mon.looks, strings.Join(problems, "\n"))
	} else {
		t.Logf("every look of %d during the swaps: the Node Ready, every pod Running with its readiness, no restart count back", mon.looks)
	}
}

// podLook is what a look sees of a pod: its UID, phase, readiness, its containers (init and
// regular: "<name>=<id>#<restarts>", sorted), the sum of their restart counts and the IDs of
// those running.
type podLook struct {
	uid        string
	phase      v1.PodPhase
	ready      bool
	containers string
	restarts   int32
	running    []string
}

func (l podLook) String() string {
	return fmt.Sprintf("%s %s ready=%t %s", l.uid, l.phase, l.ready, l.containers)
}

// lookPods looks at the node's pods (the static pod's mirror included), by name.
func lookPods(ctx context.Context, c *clusterdemo.Cluster) (map[string]podLook, error) {
	list, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + clusterdemo.NodeName})
	if err != nil {
		return nil, err
	}
	out := map[string]podLook{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		ready := clusterdemo.PodCondition(p, v1.PodReady)
		l := podLook{uid: string(p.UID), phase: p.Status.Phase, ready: ready != nil && ready.Status == v1.ConditionTrue}
		var cs []string
		for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			cs = append(cs, fmt.Sprintf("%s=%s#%d", s.Name, s.ContainerID, s.RestartCount))
			l.restarts += s.RestartCount
			if s.State.Running != nil {
				l.running = append(l.running, strings.TrimPrefix(s.ContainerID, "containerd://"))
			}
		}
		slices.Sort(cs)
		l.containers = strings.Join(cs, " ")
		out[p.Name] = l
	}
	return out, nil
}

// swapSettled reports whether the pods before the swap are as the test wants them: all seven,
// each Running, the crash loop restarted at least once, the failing probe's pod not Ready with
// its container running, every other pod Ready with every container started.
func swapSettled(pods map[string]podLook) bool {
	if len(pods) != 7 {
		return false
	}
	if _, ok := pods["static-web-"+clusterdemo.NodeName]; !ok {
		return false
	}
	for name, l := range pods {
		if l.phase != v1.PodRunning || (name != swapCrash && strings.Contains(l.containers, "=#")) {
			return false
		}
		switch name {
		case swapCrash:
			if l.restarts < 1 {
				return false
			}
		case swapUnready:
			if l.ready || len(l.running) != 1 {
				return false
			}
		default:
			if !l.ready {
				return false
			}
		}
	}
	return true
}

// swapChanged lists how the pods after a swap differ from before: every pod kept, with its UID,
// phase and readiness (but the crash loop's, Ready while a run lasts); every container but the
// crash loop's the same, with its restart count; the crash loop's restart count not lower.
func swapChanged(before, after map[string]podLook) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(before)) {
		b, a := before[name], after[name]
		switch {
		case a.uid == "":
			out = append(out, "pod "+name+" gone")
		case a.uid != b.uid:
			out = append(out, "pod "+name+" replaced")
		case a.phase != b.phase || (name != swapCrash && a.ready != b.ready):
			out = append(out, fmt.Sprintf("pod %s %s ready=%t, was %s ready=%t", name, a.phase, a.ready, b.phase, b.ready))
		case name == swapCrash && a.restarts < b.restarts:
			out = append(out, fmt.Sprintf("pod %s restarted %d times, had %d", name, a.restarts, b.restarts))
		case name != swapCrash && a.containers != b.containers:
			out = append(out, fmt.Sprintf("pod %s's containers %s, were %s", name, a.containers, b.containers))
		}
	}
	return out
}

// swapMonitor looks at the Node and the pods every 500 ms until stopped.
type swapMonitor struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	looks    int
	problems []string
}

// watchSwap starts a swapMonitor of the pods of want (by name): each look notes the Node not
// Ready, and each of those pods gone, replaced (another UID), not Running, with a readiness
// other than want's (but the crash loop's), or with fewer restarts than a look before saw.
func watchSwap(ctx context.Context, c *clusterdemo.Cluster, want map[string]podLook) *swapMonitor {
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
		restarts := map[string]int32{}
		for name, l := range want {
			restarts[name] = l.restarts
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
			for name, w := range want {
				p := byName[name]
				if p == nil {
					note("pod " + name + " gone")
					continue
				}
				cond := clusterdemo.PodCondition(p, v1.PodReady)
				ready := cond != nil && cond.Status == v1.ConditionTrue
				var n int32
				for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
					n += s.RestartCount
				}
				switch {
				case string(p.UID) != w.uid:
					note("pod " + name + " replaced")
				case p.Status.Phase != v1.PodRunning:
					note(fmt.Sprintf("pod %s %s: %s", name, p.Status.Phase, describePod(p)))
				case name != swapCrash && ready != w.ready: // a crash loop is Ready while a run lasts
					note(fmt.Sprintf("pod %s ready=%t, was %t: %+v: %s", name, ready, w.ready, cond, describePod(p)))
				case n < restarts[name]:
					note(fmt.Sprintf("pod %s restarted %d times, a look before saw %d: %s", name, n, restarts[name], describePod(p)))
				}
				restarts[name] = max(restarts[name], n)
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
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		state := "waiting"
		switch {
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = "terminated"
		case s.State.Waiting != nil:
			state = "waiting " + s.State.Waiting.Reason
		}
		fmt.Fprintf(&b, "; %s %s ready=%t restarts=%d id=%s", s.Name, state, s.Ready, s.RestartCount, s.ContainerID)
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
