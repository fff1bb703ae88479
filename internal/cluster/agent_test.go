package cluster

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// fakeController is the pod controller as cluster mode sees it.
type fakeController struct {
	mu        sync.Mutex
	snapshots []pods.Snapshot
	pods      []v1.Pod
	grace     map[string]time.Duration
	adopted   chan struct{}
}

func newFakeController() *fakeController {
	c := &fakeController{grace: map[string]time.Duration{}, adopted: make(chan struct{})}
	close(c.adopted)
	return c
}

func (c *fakeController) Update(s pods.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snapshots = append(c.snapshots, s)
}
func (c *fakeController) Pods() []v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]v1.Pod, len(c.pods))
	for i := range c.pods {
		out[i] = *c.pods[i].DeepCopy()
	}
	return out
}
func (c *fakeController) SetDeletionGrace(ns, name string, grace time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grace[ns+"/"+name] = grace
	return true
}
func (c *fakeController) Adopted() <-chan struct{} { return c.adopted }

func fakeClients(cs *fake.Clientset) Clients {
	return Clients{
		Nodes:  cs.CoreV1().Nodes(),
		Pods:   func(ns string) PodClient { return cs.CoreV1().Pods(ns) },
		Leases: func(ns string) LeaseClient { return cs.CoordinationV1().Leases(ns) },
	}
}

type fixture struct {
	cs     *fake.Clientset
	clock  *clocktesting.FakeClock
	ctrl   *fakeController
	health *health.Tracker
	agent  *Member
	inputs NodeInputs
}

func newFixture(t *testing.T, objects ...k8sruntime.Object) *fixture {
	t.Helper()
	f := &fixture{cs: fake.NewClientset(objects...), clock: clocktesting.NewFakeClock(t0), ctrl: newFakeController(), inputs: testInputs()}
	// The tracker's own clock: its lease timers are not the agent's waits.
	f.health = health.New(health.Options{Clock: clocktesting.NewFakeClock(t0)})
	f.agent = New(Options{Clients: fakeClients(f.cs), NodeName: "node-1", Node: func() NodeInputs { return f.inputs },
		Controller: f.ctrl, Validate: manifest.Validate, Health: f.health, Clock: f.clock})
	return f
}

// actions are the client's actions of verb on resource (and subresource).
func (f *fixture) actions(verb, resource, sub string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range f.cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == sub {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) healthStatus(t *testing.T) health.WarnableState {
	t.Helper()
	ws, ok := f.health.State().Get(Warnable)
	if !ok {
		t.Fatal("no cluster warnable")
	}
	return ws
}

// stepWhenWaiting advances the fake clock by d once a goroutine waits on it.
func stepWhenWaiting(t *testing.T, c *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	for !c.HasWaiters() {
		runtime.Gosched()
	}
	c.Step(d)
}

func TestRegisterCreatesTheNode(t *testing.T) {
	f := newFixture(t)
	if !f.agent.register(context.Background()) {
		t.Fatal("not registered")
	}
	n, err := f.cs.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[LabelHostname] != "node-1" || n.Labels["example.com/rack"] != "r1" || len(n.Spec.Taints) != 1 {
		t.Errorf("node %+v %+v", n.Labels, n.Spec.Taints)
	}
	if q := n.Status.Capacity[v1.ResourceMemory]; q.String() != "8Gi" || len(n.Status.Conditions) != 4 {
		t.Errorf("status %+v", n.Status)
	}
	if ws := f.healthStatus(t); ws.Status != health.StatusHealthy {
		t.Errorf("health %+v", ws)
	}
}

func TestRegisterAdoptsAnExistingNode(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "old-uid", Labels: map[string]string{LabelHostname: "node-1", "kept": "yes"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "admin", Effect: v1.TaintEffectNoExecute}}}}
	f := newFixture(t, existing)
	if !f.agent.register(context.Background()) {
		t.Fatal("not registered")
	}
	n, _ := f.cs.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if n.UID != "old-uid" || n.Labels["kept"] != "yes" || n.Labels[LabelArch] != "amd64" || n.Labels["example.com/rack"] != "r1" {
		t.Errorf("labels %v uid %s", n.Labels, n.UID)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "admin" {
		t.Errorf("taints changed: %v (a node may not change its own)", n.Spec.Taints)
	}
	if got := f.agent.currentNode(); got == nil || got.UID != "old-uid" {
		t.Errorf("adopted node %v", got)
	}
}

// TestNodeForAdmission: before registration admission sees the Node as it registers (its
// name and labels), then the API's Node, labels others added included.
func TestNodeForAdmission(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "old-uid", Labels: map[string]string{"kept": "yes"}}}
	f := newFixture(t, existing)
	if n := f.agent.Node(); n.Name != "node-1" || n.Labels["example.com/rack"] != "r1" || n.Labels["kept"] != "" {
		t.Errorf("before registration: %s %v", n.Name, n.Labels)
	}
	if !f.agent.register(context.Background()) {
		t.Fatal("not registered")
	}
	if n := f.agent.Node(); n.Labels["kept"] != "yes" || n.Labels["example.com/rack"] != "r1" {
		t.Errorf("after registration: %v", n.Labels)
	}
}

// TestNodeFollowsTheAPI: once running, admission sees the Node as others change it (a label
// the scheduler placed a pod by, a NoExecute taint) through the node informer, without
// waiting for the node's next status report.
func TestNodeFollowsTheAPI(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-1", Labels: map[string]string{LabelHostname: "node-1"}}}
	f := newFixture(t, existing)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.agent.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	n, err := f.cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n = n.DeepCopy()
	n.Labels["e2e-label"] = "yes"
	n.Spec.Taints = []v1.Taint{{Key: "evict", Effect: v1.TaintEffectNoExecute}}
	if _, err := f.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got := f.agent.Node()
		return got.Labels["e2e-label"] == "yes" && len(got.Spec.Taints) == 1, nil
	}); err != nil {
		t.Errorf("Node() never showed the API's change: %v (%v)", err, f.agent.Node().Labels)
	}
}

func TestRegisterBacksOffWhileTheAPIServerIsDown(t *testing.T) {
	f := newFixture(t)
	failures := 4
	f.cs.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	done := make(chan bool)
	go func() { done <- f.agent.register(context.Background()) }()
	for _, wait := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		stepWhenWaiting(t, f.clock, wait-time.Nanosecond)
		if f.clock.HasWaiters() != true {
			t.Fatalf("retried before %v", wait)
		}
		if ws := f.healthStatus(t); ws.Failures == 0 {
			t.Errorf("failure not reported: %+v", ws)
		}
		f.clock.Step(time.Nanosecond)
	}
	if !<-done {
		t.Fatal("not registered")
	}
	if n := len(f.actions("create", "nodes", "")); n != 5 {
		t.Errorf("%d creates, want 5", n)
	}
	if ws := f.healthStatus(t); ws.Status != health.StatusHealthy {
		t.Errorf("health after recovery %+v", ws)
	}
}

func TestBackoff(t *testing.T) {
	d := time.Duration(0)
	var got []time.Duration
	for range 8 {
		d = backoff(d)
		got = append(got, d)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 7 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestLeaseCreatedThenRenewedEveryTenSeconds(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.agent.register(ctx)
	done := make(chan struct{})
	go func() { f.agent.leaseLoop(ctx); close(done) }()
	for range 3 {
		stepWhenWaiting(t, f.clock, LeaseRenewInterval)
	}
	stepWhenWaiting(t, f.clock, 0) // the fourth renewal has run when the loop waits again
	cancel()
	<-done
	if c, u, g := len(f.actions("create", "leases", "")), len(f.actions("update", "leases", "")), len(f.actions("get", "leases", "")); c != 1 || u != 3 || g != 1 {
		t.Errorf("%d creates, %d updates, %d gets; want 1, 3 (no read before a renewal), 1", c, u, g)
	}
	l, err := f.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "node-1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0.Add(30*time.Second)) {
		t.Errorf("lease %+v renewed at %v", l.Spec, l.Spec.RenewTime)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].Name != "node-1" {
		t.Errorf("owner %v", l.OwnerReferences)
	}
}

func TestLeaseConflictReadsAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.agent.register(ctx)
	if err := f.agent.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	f.cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "node-1", errors.New("changed"))
		}
		return false, nil, nil
	})
	f.clock.Step(LeaseRenewInterval)
	if err := f.agent.renewLease(ctx); err == nil {
		t.Fatal("conflict not reported")
	}
	if err := f.agent.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if g := len(f.actions("get", "leases", "")); g != 2 {
		t.Errorf("%d gets, want 2 (the lease is read again after the conflict)", g)
	}
	var l *coordinationv1.Lease
	l, _ = f.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
	if !l.Spec.RenewTime.Time.Equal(t0.Add(LeaseRenewInterval)) {
		t.Errorf("renewed at %v", l.Spec.RenewTime)
	}
}

func TestNodeStatusSentOnChangeAndEveryReportPeriod(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.agent.register(ctx)
	patches := func() int { return len(f.actions("patch", "nodes", "status")) }
	steps := []struct {
		name   string
		after  time.Duration
		mutate func()
		want   int
	}{
		{name: "unchanged right after registration", after: NodeStatusUpdateFrequency, want: 0},
		{name: "memory pressure: sent at once", after: NodeStatusUpdateFrequency, mutate: func() { f.inputs.Conditions[0].Status = v1.ConditionTrue }, want: 1},
		{name: "unchanged again", after: NodeStatusUpdateFrequency, want: 1},
		{name: "unchanged, report period not over", after: NodeStatusReportFrequency - 2*NodeStatusUpdateFrequency, want: 1},
		{name: "unchanged, report period over", after: NodeStatusUpdateFrequency, want: 2},
	}
	for _, s := range steps {
		f.clock.Step(s.after)
		if s.mutate != nil {
			s.mutate()
		}
		if err := f.agent.syncNodeStatus(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := patches(); got != s.want {
			t.Fatalf("%s: %d status patches, want %d", s.name, got, s.want)
		}
	}
	n, _ := f.cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeMemoryPressure && (c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0.Add(2*NodeStatusUpdateFrequency))) {
			t.Errorf("memory pressure %+v", c)
		}
		if c.Type == v1.NodeReady && !c.LastHeartbeatTime.Time.Equal(f.clock.Now()) {
			t.Errorf("Ready heartbeat %v, want the last report's", c.LastHeartbeatTime)
		}
	}
}

// running is the controller's view of an API pod that runs.
func running(p *v1.Pod) v1.Pod {
	lp := *p.DeepCopy()
	lp.Status = v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort,
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 1, ContainerID: "systemd://x"}}}
	return lp
}

func listPods(t *testing.T, cs *fake.Clientset) []*v1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1.Pod
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out
}

func TestSyncPodsStatusOnlyOnChange(t *testing.T) {
	web := apiPod("web")
	f := newFixture(t, web)
	ctx := context.Background()
	f.ctrl.pods = []v1.Pod{running(web)}
	for i := range 2 {
		if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
			t.Fatal(err)
		}
		if n := len(f.actions("patch", "pods", "status")); n != 1 {
			t.Fatalf("round %d: %d status patches, want 1", i, n)
		}
	}
	if len(f.ctrl.snapshots) != 1 || len(f.ctrl.snapshots[0].Pods) != 1 || f.ctrl.snapshots[0].Source != pods.SourceCluster {
		t.Errorf("snapshots %+v, want one with web", f.ctrl.snapshots)
	}
	got, _ := f.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if got.Status.Phase != v1.PodRunning || got.Status.HostIP != "10.0.0.5" || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("status %+v", got.Status)
	}
	// A restart: patched again.
	f.ctrl.pods[0].Status.ContainerStatuses[0].RestartCount = 2
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods", "status")); n != 2 {
		t.Errorf("%d status patches after a restart, want 2", n)
	}
}

func TestSyncPodsRejectionsWrittenToStatus(t *testing.T) {
	token := apiPod("token", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "ca-bundle:1"}}}}
	})
	big := apiPod("big")
	f := newFixture(t, token, big)
	ctx := context.Background()
	lp := *big.DeepCopy()
	lp.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", Message: "Pod was rejected: Node didn't have enough resource: cpu"}
	f.ctrl.pods = []v1.Pod{lp}
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, reason, message string }{
		{"big", "OutOfcpu", "Node didn't have enough resource: cpu"},
		{"token", pods.ReasonUnsupported, "spec.volumes[0].image"},
	}
	for _, tc := range tests {
		got, _ := f.cs.CoreV1().Pods("default").Get(ctx, tc.name, metav1.GetOptions{})
		if got.Status.Phase != v1.PodFailed || got.Status.Reason != tc.reason || !strings.Contains(got.Status.Message, tc.message) {
			t.Errorf("%s: status %+v", tc.name, got.Status)
		}
	}
	if s := f.ctrl.snapshots[0]; len(s.Pods) != 1 || s.Pods[0].Pod.Name != "big" {
		t.Errorf("snapshot %+v, want big alone (token is refused before admission)", s.Pods)
	}
}

func TestSyncPodsGracefulDeletion(t *testing.T) {
	now := metav1.NewTime(t0)
	web := apiPod("web", func(p *v1.Pod) { p.DeletionTimestamp = &now; p.DeletionGracePeriodSeconds = new(int64(7)) })
	f := newFixture(t, web)
	ctx := context.Background()
	f.ctrl.pods = []v1.Pod{running(web)}
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	if g := f.ctrl.grace["default/web"]; g != 7*time.Second {
		t.Errorf("deletion grace %v, want 7s", g)
	}
	if s := f.ctrl.snapshots[0]; len(s.Pods) != 0 {
		t.Errorf("a pod being deleted is still in the snapshot: %+v", s.Pods)
	}
	if n := len(f.actions("delete", "pods", "")); n != 0 {
		t.Fatalf("deleted while its containers run (%d deletes)", n)
	}
	f.ctrl.pods = nil // stopped
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	dels := f.actions("delete", "pods", "")
	if len(dels) != 1 {
		t.Fatalf("%d deletes, want 1", len(dels))
	}
	opts := dels[0].(k8stesting.DeleteActionImpl).DeleteOptions
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != web.UID {
		t.Errorf("delete options %+v", opts)
	}
	// The final status went first: Failed, its container terminated (a finalizer, a Job's,
	// keeps the pod until its controller sees it terminal).
	all := f.cs.Actions()
	last := all[len(all)-2]
	if last.GetVerb() != "patch" || last.GetSubresource() != "status" {
		t.Fatalf("before the delete: %s %s/%s, want the final status patch", last.GetVerb(), last.GetResource().Resource, last.GetSubresource())
	}
	if patch := string(last.(k8stesting.PatchActionImpl).GetPatch()); !strings.Contains(patch, `"phase":"Failed"`) || !strings.Contains(patch, "ContainerStatusUnknown") {
		t.Errorf("final status patch %s", patch)
	}
}

func TestTerminatedPodStatus(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}
	exited := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}
	}
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
		Message: "The container could not be located when the pod was terminated"}}
	cs := func(name string, st v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: st}
	}
	tests := []struct {
		name            string
		init            []v1.Container
		phase           v1.PodPhase
		inits, conts    []v1.ContainerStatus
		wantPhase       v1.PodPhase
		wantInits, want []v1.ContainerState
	}{
		{"running pod", nil, v1.PodRunning, nil, []v1.ContainerStatus{cs("a", running), cs("b", exited(1))},
			v1.PodFailed, nil, []v1.ContainerState{unknown, exited(1)}},
		{"succeeded stays", nil, v1.PodSucceeded, nil, []v1.ContainerStatus{cs("a", exited(0))},
			v1.PodSucceeded, nil, []v1.ContainerState{exited(0)}},
		{"pending, init container running", []v1.Container{{Name: "i1"}, {Name: "i2"}}, v1.PodPending,
			[]v1.ContainerStatus{cs("i1", running), cs("i2", waiting)}, []v1.ContainerStatus{cs("a", waiting)},
			v1.PodFailed, []v1.ContainerState{unknown, waiting}, []v1.ContainerState{waiting}},
		{"pending, all init containers waiting: the first", []v1.Container{{Name: "i1"}, {Name: "i2"}}, v1.PodPending,
			[]v1.ContainerStatus{cs("i1", waiting), cs("i2", waiting)}, []v1.ContainerStatus{cs("a", waiting)},
			v1.PodFailed, []v1.ContainerState{unknown, waiting}, []v1.ContainerState{waiting}},
		{"initialized by a started sidecar", []v1.Container{{Name: "s", RestartPolicy: &always}}, v1.PodPending,
			[]v1.ContainerStatus{{Name: "s", State: running, Started: ptr.To(true)}}, []v1.ContainerStatus{cs("a", waiting)},
			v1.PodFailed, []v1.ContainerState{unknown}, []v1.ContainerState{unknown}},
		{"initialized: a container ran", []v1.Container{{Name: "i1"}}, v1.PodRunning,
			[]v1.ContainerStatus{cs("i1", exited(0))}, []v1.ContainerStatus{cs("a", running)},
			v1.PodFailed, []v1.ContainerState{exited(0)}, []v1.ContainerState{unknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tc.init}}
			last := v1.PodStatus{Phase: tc.phase, InitContainerStatuses: tc.inits, ContainerStatuses: tc.conts}
			got := TerminatedPodStatus(pod, last)
			if got.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", got.Phase, tc.wantPhase)
			}
			for i, w := range tc.wantInits {
				if !apiequality.Semantic.DeepEqual(got.InitContainerStatuses[i].State, w) {
					t.Errorf("init container %d: %+v, want %+v", i, got.InitContainerStatuses[i].State, w)
				}
			}
			for i, w := range tc.want {
				if !apiequality.Semantic.DeepEqual(got.ContainerStatuses[i].State, w) {
					t.Errorf("container %d: %+v, want %+v", i, got.ContainerStatuses[i].State, w)
				}
			}
			if len(tc.conts) > 0 && tc.conts[0].State.Running != nil && last.ContainerStatuses[0].State.Terminated != nil {
				t.Error("the last status was changed")
			}
		})
	}
}

func TestSyncPodsMirrorPods(t *testing.T) {
	stale := mirrorOf("old", "h0")
	f := newFixture(t, stale)
	ctx := context.Background()
	f.agent.register(ctx)
	static := staticPod("web", "h1")
	static.Status = v1.PodStatus{Phase: v1.PodRunning}
	f.ctrl.pods = []v1.Pod{static}
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	m, err := f.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no mirror pod: %v", err)
	}
	node := f.agent.currentNode()
	if m.Annotations[v1.MirrorPodAnnotationKey] != "h1" || m.OwnerReferences[0].UID != node.UID || m.Spec.NodeName != "node-1" {
		t.Errorf("mirror %+v", m.ObjectMeta)
	}
	if _, err := f.cs.CoreV1().Pods("default").Get(ctx, "old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale mirror pod is still there: %v", err)
	}
	// The next round writes the static pod's status on its mirror.
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	m, _ = f.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if m.Status.Phase != v1.PodRunning {
		t.Errorf("mirror status %+v", m.Status)
	}
	// The manifest goes: its mirror goes.
	f.ctrl.pods = nil
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the mirror pod outlived its manifest: %v", err)
	}
}

// TestSyncPodsNoStatusBeforeAdoption: after a restart of slicelet, the controller shows a pod
// that kept running Pending until its first relist; nothing of that reaches the API.
func TestSyncPodsNoStatusBeforeAdoption(t *testing.T) {
	web := apiPod("web", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning })
	f := newFixture(t, web)
	ctx := context.Background()
	f.ctrl.adopted = make(chan struct{})
	lp := *web.DeepCopy()
	lp.Status = v1.PodStatus{Phase: v1.PodPending}
	f.ctrl.pods = []v1.Pod{lp}
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods", "status")); n != 0 {
		t.Fatalf("%d status patches before the adoption, want 0", n)
	}
	if len(f.ctrl.snapshots) != 1 {
		t.Errorf("the snapshot waits for nothing: %d sent", len(f.ctrl.snapshots))
	}
	close(f.ctrl.adopted)
	f.ctrl.pods = []v1.Pod{running(web)}
	if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	got, _ := f.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if got.Status.Phase != v1.PodRunning || len(got.Status.ContainerStatuses) != 1 {
		t.Errorf("status after the adoption %+v", got.Status)
	}
}

// TestSyncPodsValidatesOncePerVersion: the pods are compared every second; each version of a
// pod is validated once.
func TestSyncPodsValidatesOncePerVersion(t *testing.T) {
	web := apiPod("web")
	f := newFixture(t, web)
	calls := 0
	f.agent.validate = func(*v1.Pod) field.ErrorList { calls++; return nil }
	ctx := context.Background()
	for range 3 {
		if err := f.agent.SyncPods(ctx, listPods(t, f.cs)); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("validated %d times, want once", calls)
	}
	// A new version that changed only the status (the node's own patch) is the same pod.
	statusOnly := web.DeepCopy()
	statusOnly.ResourceVersion = "2"
	statusOnly.Status.Phase = v1.PodRunning
	if err := f.agent.SyncPods(ctx, []*v1.Pod{statusOnly}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("a status-only version validated again: %d times in all, want once", calls)
	}
	changed := statusOnly.DeepCopy()
	changed.ResourceVersion = "3"
	changed.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	if err := f.agent.SyncPods(ctx, []*v1.Pod{changed}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("a new version of the spec validated %d times in all, want twice", calls)
	}
	if err := f.agent.SyncPods(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.agent.verdicts) != 0 {
		t.Errorf("verdicts of gone pods kept: %v", f.agent.verdicts)
	}
}
