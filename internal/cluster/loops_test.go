package cluster

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/manifest"
)

// lockedInputs are NodeInputs a test changes while the agent's loops read them.
type lockedInputs struct {
	mu sync.Mutex
	in NodeInputs
}

func (l *lockedInputs) get() NodeInputs {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.in
	in.Conditions = append([]v1.NodeCondition(nil), l.in.Conditions...)
	return in
}

func (l *lockedInputs) set(t v1.NodeConditionType, s v1.ConditionStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.in.Conditions {
		if l.in.Conditions[i].Type == t {
			l.in.Conditions[i].Status = s
		}
	}
}

// bubbleAgent is an agent on the real clock, for a synctest bubble (whose clock is fake):
// the clientset is made outside the bubble by the caller.
func bubbleAgent(cs *fake.Clientset, in *lockedInputs, ctrl Controller) *Member {
	return New(Options{Clients: fakeClients(cs), NodeName: "node-1", Node: in.get, Controller: ctrl,
		Validate: manifest.Validate, Clock: clock.RealClock{}})
}

// nodeCondition is the API's Node condition of type ct.
func nodeCondition(t *testing.T, cs *fake.Clientset, ct v1.NodeConditionType) v1.ConditionStatus {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

// TestStatusLoopFastUntilReady: after the registration the node status is computed every
// FastStatusInterval until the node is Ready, then every NodeStatusUpdateFrequency.
func TestStatusLoopFastUntilReady(t *testing.T) {
	cs := fake.NewClientset()
	in := &lockedInputs{in: testInputs()}
	in.set(v1.NodeReady, v1.ConditionFalse)
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		a := bubbleAgent(cs, in, newFakeController())
		if !a.register(ctx) {
			t.Fatal("not registered")
		}
		var wg sync.WaitGroup
		wg.Go(func() { a.statusLoop(ctx) })
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(3*FastStatusInterval + FastStatusInterval/2)
		synctest.Wait()
		if got := nodeCondition(t, cs, v1.NodeReady); got != v1.ConditionFalse {
			t.Fatalf("Ready %q before the node is ready, want False", got)
		}
		in.set(v1.NodeReady, v1.ConditionTrue)
		time.Sleep(FastStatusInterval)
		synctest.Wait()
		if got := nodeCondition(t, cs, v1.NodeReady); got != v1.ConditionTrue {
			t.Fatalf("Ready %q one fast interval after the node became ready, want True", got)
		}
		// Ready: back to the update frequency.
		in.set(v1.NodeMemoryPressure, v1.ConditionTrue)
		time.Sleep(NodeStatusUpdateFrequency / 2)
		synctest.Wait()
		if got := nodeCondition(t, cs, v1.NodeMemoryPressure); got != v1.ConditionFalse {
			t.Fatalf("MemoryPressure %q half an update period later, want still False", got)
		}
		time.Sleep(NodeStatusUpdateFrequency / 2)
		synctest.Wait()
		if got := nodeCondition(t, cs, v1.NodeMemoryPressure); got != v1.ConditionTrue {
			t.Fatalf("MemoryPressure %q at the update period, want True", got)
		}
	})
}

// setPods sets the controller's pods under its lock (the agent's loops read them).
func (c *fakeController) setPods(ps ...v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = ps
}

// lastSnapshot is the number of pods in the last snapshot (-1 for none).
func (c *fakeController) lastSnapshot() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.snapshots) == 0 {
		return -1
	}
	return len(c.snapshots[len(c.snapshots)-1].Pods)
}

// TestPodsSyncedAtOnce: a pod created in the API reaches the controller, and a pod that
// started on the node reaches the API, without waiting for PodSyncPeriod.
func TestPodsSyncedAtOnce(t *testing.T) {
	cs := fake.NewClientset()
	in := &lockedInputs{in: testInputs()}
	ctrl := newFakeController()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		a := bubbleAgent(cs, in, ctrl)
		// client-go's informer on the fake clientset: the agent's own informer wraps the
		// client's list and watch, and the fake's watch does not stream a list.
		inf := informers.NewSharedInformerFactory(cs, 0).Core().V1().Pods().Informer()
		var wg sync.WaitGroup
		wg.Go(func() { inf.RunWithContext(ctx) })
		wg.Go(func() { a.podLoop(ctx, inf) })
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(2 * PodSyncPeriod) // listed, the first (empty) snapshot sent
		synctest.Wait()
		if got := ctrl.lastSnapshot(); got != 0 {
			t.Fatalf("last snapshot of %d pods after the list, want the empty one", got)
		}
		// Half a period from the next periodic sync.
		time.Sleep(PodSyncPeriod / 2)
		synctest.Wait()
		web := apiPod("web")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := ctrl.lastSnapshot(); got != 1 {
			t.Fatalf("last snapshot of %d pods right after the create, want 1", got)
		}
		ctrl.setPods(running(web))
		a.Kick()
		synctest.Wait()
		got, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodRunning {
			t.Fatalf("phase %q right after the kick, want Running", got.Status.Phase)
		}
	})
}

// TestPatchStatusRemembersAnUnchangedStatus: a status that differs from the API's only below
// the second (which the API does not keep) is not patched, and is remembered as written.
func TestPatchStatusRemembersAnUnchangedStatus(t *testing.T) {
	web := apiPod("web")
	f := newFixture(t, web)
	local := running(web)
	started := t0.Add(300 * time.Millisecond)
	local.Status.ContainerStatuses[0].State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}
	ips := f.inputs.InternalIPs
	api := web.DeepCopy()
	api.Status = APIPodStatus(web, local.Status, ips, false, t0)
	api.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0) // as the API keeps it
	for i := range 2 {
		if err := f.agent.patchStatus(context.Background(), api, local.Status, ips, t0); err != nil {
			t.Fatal(err)
		}
		if n := len(f.actions("patch", "pods", "status")); n != 0 {
			t.Fatalf("round %d: %d status patches, want none", i, n)
		}
		if _, ok := f.agent.sent[api.UID]; !ok {
			t.Fatalf("round %d: the status is not remembered as written", i)
		}
	}
}

// TestPodsDifferSemantically: what makes a new version of an API pod another pod to run.
func TestPodsDifferSemantically(t *testing.T) {
	now := metav1.NewTime(t0)
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   bool
	}{
		{name: "status only", mutate: func(p *v1.Pod) { p.Status.Phase = v1.PodRunning; p.ResourceVersion = "9" }},
		{name: "managed fields only", mutate: func(p *v1.Pod) { p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}} }},
		{name: "spec", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox:2" }, want: true},
		{name: "label", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }, want: true},
		{name: "annotation", mutate: func(p *v1.Pod) { p.Annotations = map[string]string{"a": "b"} }, want: true},
		{name: "deletion", mutate: func(p *v1.Pod) { p.DeletionTimestamp = &now }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := apiPod("web")
			b := a.DeepCopy()
			tc.mutate(b)
			if got := PodsDifferSemantically(a, b); got != tc.want {
				t.Errorf("PodsDifferSemantically = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestSyncPodsSnapshotOnSemanticChange: the node's own status patch (a new resourceVersion)
// sends the controller no new snapshot; a changed spec does.
func TestSyncPodsSnapshotOnSemanticChange(t *testing.T) {
	web := apiPod("web")
	f := newFixture(t, web)
	ctx := context.Background()
	sync := func(p *v1.Pod) int {
		t.Helper()
		if err := f.agent.SyncPods(ctx, []*v1.Pod{p}); err != nil {
			t.Fatal(err)
		}
		return len(f.ctrl.snapshots)
	}
	if n := sync(web); n != 1 {
		t.Fatalf("%d snapshots after the first sync, want 1", n)
	}
	patched := web.DeepCopy()
	patched.ResourceVersion, patched.Status.Phase = "2", v1.PodRunning
	if n := sync(patched); n != 1 {
		t.Fatalf("%d snapshots after a status-only version, want still 1", n)
	}
	changed := patched.DeepCopy()
	changed.ResourceVersion, changed.Labels = "3", map[string]string{"app": "web"}
	if n := sync(changed); n != 2 {
		t.Fatalf("%d snapshots after a new label, want 2", n)
	}
}
