package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// Environment of the run inside the sandbox: the work directory (bound read-write), the
// control plane's binaries and slicelet's.
const (
	workEnv     = "CLUSTERTEST_WORK"
	binEnv      = "PEER_BIN_DIR"
	sliceletEnv = "SLICELET_BINARY"
)

// nodeName is the slicelet node's name; its credentials are system:node:slicelet-node.
const nodeName = "slicelet-node"

// prerequisites are the control plane's binaries (build/peer/v1.37.2, make peer-build) and
// bin/slicelet (make build); without them the test skips, or fails with CI=true and
// PEER_REQUIRED=1.
func prerequisites(t *testing.T) (bin, slicelet string) {
	t.Helper()
	bin = os.Getenv(binEnv)
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "build", "peer", "v1.37.2")
	}
	slicelet = os.Getenv(sliceletEnv)
	if slicelet == "" {
		slicelet = filepath.Join("..", "..", "..", "bin", "slicelet")
	}
	var err error
	for _, p := range []*string{&bin, &slicelet} {
		if r, e := filepath.EvalSymlinks(*p); e == nil {
			*p, _ = filepath.Abs(r)
		} else {
			err = e
		}
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(bin, controlplane.APIServer))
	}
	if err != nil {
		if systemdtest.CI() && os.Getenv("PEER_REQUIRED") == "1" {
			t.Fatalf("prerequisites missing (%v) with CI=true and PEER_REQUIRED=1: run make build peer-build", err)
		}
		t.Skipf("SKIP (prerequisites missing: %v): run make build and make peer-build", err)
	}
	return bin, slicelet
}

// TestSliceletNode registers a slicelet node with a real API server using node credentials,
// runs a pod the scheduler binds to it, deletes it gracefully, and mirrors a manifest pod.
// On the host it boots the sandbox and runs itself inside.
func TestSliceletNode(t *testing.T) {
	if work, bin, slicelet, ok := inSandbox(t, "TestSliceletNode"); ok {
		inside(t, work, bin, slicelet)
	}
}

func inside(t *testing.T, work, bin, slicelet string) {
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	c := startClusterNode(t, ctx, work, bin, slicelet, controlplane.Config{Nodes: []string{nodeName}, Scheduler: true, ControllerManager: true},
		func(cp *controlplane.ControlPlane) string {
			return clusterHead(cp) + "labels = { \"example.com/agent\" = \"slicelet\" }\n"
		})
	cp, agent, admin, manifests := c.cp, c.agent, c.admin, c.manifests

	var n *v1.Node
	var err error
	poll(t, ctx, "node Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err = admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if n.Labels["example.com/agent"] != "slicelet" || n.Labels[v1.LabelHostname] != nodeName || n.Status.Allocatable.Cpu().IsZero() {
		t.Errorf("node %v allocatable %v", n.Labels, n.Status.Allocatable)
	}
	t.Logf("node %s Ready: kubelet version %s, runtime %s, allocatable %v", nodeName, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.Allocatable)
	// The runtime's version as the kubelet reports it: the CRI Version call's name://version.
	if rv := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rv, "containerd://") || strings.HasSuffix(rv, "unknown") {
		t.Errorf("nodeInfo.containerRuntimeVersion %q, want containerd://<version>", rv)
	}
	var lease *coordinationv1.Lease
	poll(t, ctx, "node lease", time.Minute, func(ctx context.Context) (bool, error) {
		lease, err = admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil, nil
	})
	if ptr.Deref(lease.Spec.HolderIdentity, "") != nodeName || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 40 {
		t.Errorf("lease %+v", lease.Spec)
	}

	// An API pod: the scheduler binds it to the only node; slicelet runs it and reports it.
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"}}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "API pod Running and Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == v1.PodReady && c.Status == v1.ConditionTrue
		}
		if p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("pod failed: %s: %s", p.Status.Reason, p.Status.Message)
		}
		return p.Spec.NodeName == nodeName && p.Status.Phase == v1.PodRunning && ready &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != "", nil
	})

	// The pod's events reach the API server, from the node.
	poll(t, ctx, "the pod's Started event", time.Minute, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "Started" && e.Source.Host == nodeName {
				return true, nil
			}
		}
		return false, nil
	})

	// Graceful deletion: stopped, then deleted for good by the node.
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "API pod gone after its deletion", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	// A manifest pod appears as a mirror pod, created with the node's credentials, named as the
	// kubelet names a static pod: "<name>-<node>".
	mirrorName := "static-web-" + nodeName
	static := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: static-web, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: [/bin/sleep, infinity]
`, peerrun.TestImage)
	if err := os.WriteFile(filepath.Join(manifests, "static.yaml"), []byte(static), 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "mirror pod Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, mirror := p.Annotations[v1.MirrorPodAnnotationKey]
		return mirror && p.Status.Phase == v1.PodRunning, nil
	})
	if err := os.Remove(filepath.Join(manifests, "static.yaml")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "mirror pod gone with its manifest", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The API server hangs (SIGSTOP) for a while: the pods keep running, slicelet says so in
	// its health (`slicectl node`, STATUS=) without flooding its log, and once the API server
	// is back the Lease is renewed again and the pod was never restarted.
	steady := pod.DeepCopy()
	steady.Name = "steady"
	if _, err := admin.CoreV1().Pods("default").Create(ctx, steady, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before *v1.Pod
	poll(t, ctx, "steady pod Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		before, err = admin.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
		return err == nil && before.Status.Phase == v1.PodRunning && len(before.Status.ContainerStatuses) == 1 && before.Status.ContainerStatuses[0].Ready, nil
	})
	apiserver := "peer-cp-kube-apiserver.service"
	local := api.NewClient(filepath.Join(agent.Dir, "api.sock"))
	journalBefore := journalLines(t, ctx, agent.Unit)
	if out, err := exec.CommandContext(ctx, "systemctl", "kill", "--signal=SIGSTOP", apiserver).CombinedOutput(); err != nil {
		t.Fatalf("stop the API server: %v: %s", err, out)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = exec.CommandContext(context.WithoutCancel(ctx), "systemctl", "kill", "--signal=SIGCONT", apiserver).Run()
		}
	}
	defer resume()
	poll(t, ctx, "slicelet reports the API server away", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := local.Node(ctx)
		if err != nil {
			return false, nil
		}
		for _, ws := range n.Health {
			if ws.Code == "cluster" && ws.Status == health.StatusUnhealthy {
				t.Logf("during the outage: %s: %s", ws.Status, ws.Message)
				return true, nil
			}
		}
		return false, nil
	})
	n2, err := local.Node(ctx)
	if err != nil || n2.Pods.Phases[v1.PodRunning] != 1 {
		t.Errorf("during the outage: %+v, %v; want the steady pod running", n2.Pods, err)
	}
	during := journalLines(t, ctx, agent.Unit) - journalBefore
	resume()
	leaseBefore := lease.Spec.RenewTime.Time
	poll(t, ctx, "lease renewed after the outage", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(leaseBefore.Add(30*time.Second)), nil
	})
	poll(t, ctx, "slicelet reports the API server back", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := local.Node(ctx)
		if err != nil {
			return false, nil
		}
		for _, ws := range n.Health {
			if ws.Code == "cluster" {
				return ws.Status == health.StatusHealthy, nil
			}
		}
		return false, nil
	})
	after, err := admin.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.Phase != v1.PodRunning || after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID ||
		after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the steady pod after the outage: %+v, before: %+v", after.Status.ContainerStatuses, before.Status.ContainerStatuses)
	}
	t.Logf("slicelet wrote %d journal lines during the outage; its VmRSS in cluster mode with one pod: %s", during, vmRSS(t, ctx, agent.Unit))
	if during > 10 {
		t.Errorf("%d journal lines during the outage: a flood", during)
	}

	// A restart of slicelet: the pod keeps running and its status in the API never leaves
	// Running (the adoption comes before any status is written).
	w, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=steady", ResourceVersion: after.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if out, err := exec.CommandContext(ctx, "systemctl", "restart", agent.Unit).CombinedOutput(); err != nil {
		t.Fatalf("restart slicelet: %v: %s", err, out)
	}
	restarted := time.Now()
	poll(t, ctx, "slicelet back after its restart", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := local.Node(ctx)
		if err != nil {
			return false, nil
		}
		for _, ws := range n.Health {
			if ws.Code == "cluster" {
				return ws.Status == health.StatusHealthy && ws.Since.After(restarted.Add(-time.Second)), nil
			}
		}
		return false, nil
	})
	// One more lease renewal period: whatever the restarted slicelet writes has been written.
	poll(t, ctx, "lease renewed by the restarted slicelet", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(restarted.Add(10*time.Second)), nil
	})
	w.Stop()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*v1.Pod); ok && (p.Status.Phase != v1.PodRunning || p.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID) {
			t.Errorf("after the restart the API saw %s %s, container %s", ev.Type, p.Status.Phase, p.Status.ContainerStatuses[0].ContainerID)
		}
	}

	// The node's credentials are a node's: it cannot list secrets.
	nodeClient, err := cp.Client(cp.NodeKubeconfig(nodeName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodeClient.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the node's credentials list secrets: %v", err)
	}
}

// journalLines counts the lines unit wrote to the journal so far.
func journalLines(t *testing.T, ctx context.Context, unit string) int {
	t.Helper()
	out, err := exec.CommandContext(ctx, "journalctl", "--no-pager", "-q", "-o", "cat", "-u", unit).Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	return strings.Count(string(out), "\n")
}

// vmRSS is the VmRSS line of unit's main process.
func vmRSS(t *testing.T, ctx context.Context, unit string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "systemctl", "show", "-p", "MainPID", "--value", unit).Output()
	if err != nil {
		return err.Error()
	}
	status, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(out)), "status"))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
