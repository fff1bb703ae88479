// Package cluster is slicelet's cluster mode: the node registers a Node with a Kubernetes API
// server and keeps its status (capacity, allocatable, conditions) and its Lease current, the
// pods the scheduler binds to it become one more source of the pod controller, their status
// goes back to the API, pods deleted there are stopped within their grace period and then
// deleted for good, and the manifest directory's pods appear there as mirror pods. It speaks to
// the API through client-go (informers, typed clients) and keeps the kubelet's timing
// (pkg/kubelet/kubelet.go, kubelet_node_status.go, nodelease). Decisions are pure functions
// (nodestatus.go, podstatus.go, pods.go); this file runs them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
)

// The kubelet's defaults (pkg/kubelet/apis/config/v1beta1/defaults.go and
// pkg/kubelet/kubelet.go).
const (
	// NodeStatusUpdateFrequency is how often the node status is computed; a change is sent
	// at once.
	NodeStatusUpdateFrequency = 10 * time.Second
	// NodeStatusReportFrequency is how often an unchanged node status is sent anyway.
	NodeStatusReportFrequency = 5 * time.Minute
	// StartupStatusHold bounds how long after the start a Node the API shows Ready keeps that
	// status while the node's state is not known yet (NodeInputs.Settling): the kubelet's
	// first status update waits for its runtime's first status check (fastStatusUpdateOnce,
	// then every nodeStatusUpdateFrequency), so a node changing agent, or an agent restarting,
	// is not NotReady for a moment.
	StartupStatusHold = 30 * time.Second
	// LeaseDuration is the node Lease's leaseDurationSeconds.
	LeaseDuration = 40 * time.Second
	// LeaseRenewInterval is a quarter of the duration (the kubelet's renewIntervalFraction).
	LeaseRenewInterval = LeaseDuration / 4
	// PodSyncPeriod is how often the pods' statuses, deletions and mirror pods are compared
	// with the API's anyway (the kubelet status manager's syncPeriod,
	// pkg/kubelet/status/status_manager.go): a pod added, changed or deleted in the API, a
	// pod's status changing on the node (Kick) and the adoption after a restart start a
	// comparison at once, as the kubelet's pod config and status manager act on each change.
	PodSyncPeriod = 10 * time.Second
	// PodRetryPeriod is how soon a comparison that failed (an API call) is tried again.
	PodRetryPeriod = time.Second
	// FastStatusInterval is how often the node status is computed after the registration
	// until the node is Ready, and FastStatusPeriod how long at most (pkg/kubelet/kubelet.go
	// fastStatusUpdateOnce: every 100 ms, for at most nodeReadyGracePeriod, 2 min): a node
	// that becomes Ready a moment after it registered says so then, not one
	// NodeStatusUpdateFrequency later.
	FastStatusInterval = 100 * time.Millisecond
	FastStatusPeriod   = 2 * time.Minute
	// minBackoff and maxBackoff bound the waits between failed registrations and lease
	// renewals (registerWithAPIServer and the lease controller's backoffEnsureLease: from
	// 100 ms, doubling, at most 7 s).
	minBackoff = 100 * time.Millisecond
	maxBackoff = 7 * time.Second
	// callTimeout bounds one round of calls (a registration, a lease renewal, a status
	// report, a pod sync): an API server that hangs fails them instead of stopping the loops
	// (the kubelet's heartbeat client has the node status update frequency as its timeout).
	callTimeout = NodeStatusUpdateFrequency
)

// Warnable is cluster mode's one health component: the API server reachable, the node
// registered, its Lease renewed, its status and its pods' statuses written, the pod watch
// working. While it is not healthy the pods keep running (as the kubelet's do); STATUS=,
// `slicectl node` and slicelet_health* show it.
var Warnable = &health.Warnable{Code: "cluster", Title: "cluster API server", Severity: health.SeverityWarning,
	FailuresToUnhealthy: 3}

// Controller is what cluster mode needs of the pod controller (*pods.Controller).
type Controller interface {
	// Update takes the cluster source's snapshot.
	Update(s pods.Snapshot)
	// Pods are every pod the controller knows, with their status.
	Pods() []v1.Pod
	// SetDeletionGrace sets the grace period of the next deletion of namespace/name.
	SetDeletionGrace(namespace, name string, grace time.Duration) bool
	// Adopted is closed once the pods that kept running were adopted.
	Adopted() <-chan struct{}
}

// Options are a Member's dependencies.
type Options struct {
	Clients  Clients
	NodeName string
	// Node gathers the Node's inputs at the time of the call.
	Node func() NodeInputs
	// Controller is the pod controller the cluster's pods go to.
	Controller Controller
	// Validate is the manifest path's validation (internal/manifest.Validate); the agent
	// applies it through ValidateAPIPod.
	Validate func(*v1.Pod) field.ErrorList
	// HostNetwork says every pod shares the host's network (runtime.network = "host"): their
	// podIPs are the node's.
	HostNetwork bool
	// AllocatableEnforced: the pods' slice is limited to the node's allocatable
	// (enforce_node_allocatable has "pods"); the Node's events say so at the start.
	AllocatableEnforced bool
	// Objects and Events are the cluster's objects and event forwarder, made before the pod
	// worker that uses them (NewObjects over Clients, NewEvents); New makes them when nil.
	Objects *Objects
	Events  *Events
	Health  *health.Tracker
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Member is this node as a member of a cluster: it registers the Node, keeps its status and
// Lease current, runs the pods bound to it and sends their statuses back (cluster mode).
type Member struct {
	o        Options
	validate func(*v1.Pod) field.ErrorList
	log      *slog.Logger
	clock    clock.WithTicker

	started time.Time // when New made it: StartupStatusHold counts from there

	mu         sync.Mutex
	node       *v1.Node // the Node as last read or written; nil until registered
	lastReport time.Time
	lease      *coordinationv1.Lease
	errs       map[string]error // by part: register, lease, status, pods, watch
	lastSnap   string           // the pods of the last snapshot sent (uid@version)
	graced     map[types.UID]bool
	sent       map[types.UID]v1.PodStatus // the status last patched, by UID
	// stopping is, by UID, the controller's last status of each pod being deleted: the
	// pod's final status is made from it once the controller forgot the pod.
	stopping map[types.UID]v1.PodStatus
	watchRV  string // the informer's resource version at the last watch error
	events   *Events
	// verdicts caches validate's verdict by UID, for the pod's resourceVersion: the pods are
	// compared every second, a pod is validated once per version.
	verdicts map[types.UID]verdict
	// versions is, by UID, the last version of each API pod that differed semantically from
	// the one before (PodsDifferSemantically): a version that changed only the status (after
	// each of the node's own status patches) is no new snapshot for the controller and no
	// new validation.
	versions map[types.UID]podVersion
	// objects serves the cluster pods' ConfigMaps, Secrets, tokens and service variables.
	objects *Objects
	// kick asks podLoop for a sync now (Kick, the pod informer's events); one pending at most.
	kick chan struct{}
	// nodeStore is the node informer's store (this node's Node), once Run started it.
	nodeStore cache.Store
}

// verdict is validate's result for one version of a pod.
type verdict struct {
	resourceVersion string
	errs            field.ErrorList
}

// podVersion is an API pod as last seen and the resourceVersion of its last semantic change.
type podVersion struct {
	pod     *v1.Pod
	version string
}

// version records p and returns the resourceVersion of its last semantic change.
func (a *Member) version(p *v1.Pod) string {
	prev, ok := a.versions[p.UID]
	if !ok || prev.pod.ResourceVersion != p.ResourceVersion && PodsDifferSemantically(prev.pod, p) {
		prev.version = p.ResourceVersion
	}
	prev.pod = p
	a.versions[p.UID] = prev
	return prev.version
}

// validateCached is validate, once per semantic version of the pod.
func (a *Member) validateCached(p *v1.Pod) field.ErrorList {
	version := a.versions[p.UID].version
	if v, ok := a.verdicts[p.UID]; ok && v.resourceVersion == version && version != "" {
		return v.errs
	}
	errs := a.validate(p)
	a.verdicts[p.UID] = verdict{resourceVersion: version, errs: errs}
	return errs
}

// New returns a Member.
func New(o Options) *Member {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Health != nil {
		o.Health.Register(Warnable)
	}
	if o.Objects == nil {
		o.Objects = NewObjects(o.Clients, o.Clock)
	}
	if o.Events == nil {
		o.Events = NewEvents()
	}
	return &Member{o: o, validate: ValidateAPIPod(o.Validate), log: o.Logger, clock: o.Clock, started: o.Clock.Now(),
		errs: map[string]error{}, graced: map[types.UID]bool{}, sent: map[types.UID]v1.PodStatus{}, stopping: map[types.UID]v1.PodStatus{}, verdicts: map[types.UID]verdict{}, versions: map[types.UID]podVersion{},
		objects: o.Objects, events: o.Events, kick: make(chan struct{}, 1)}
}

// Kick makes the pods' sync run now rather than at the next PodSyncPeriod: the pod
// controller's pods changed (a pod got its slice, changed phase or was deleted). It never
// blocks; kicks that come while one is pending are one.
func (a *Member) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Objects serves the cluster pods' ConfigMaps, Secrets, service-account tokens and service
// variables (internal/pods/worker's ClusterObjects); its services are known once Run runs.
func (a *Member) Objects() *Objects { return a.objects }

// Eventf records an event about a pod (a *v1.Pod, or the *v1.ObjectReference of one of its
// containers) with the API server when the pod came from it (the Eventf of client-go's
// record.EventRecorder). Before Run, and for other pods, it does nothing.
func (a *Member) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	a.events.Eventf(object, eventtype, reason, messageFmt, args...)
}

// report records the outcome of one part and reports the whole to the health tracker:
// healthy (for one lease duration, renewed by every success) while no part fails.
func (a *Member) report(part string, err error) {
	a.mu.Lock()
	if err == nil {
		delete(a.errs, part)
	} else {
		a.errs[part] = fmt.Errorf("%s: %w", part, err)
		a.log.Debug("cluster API call failed", "part", part, "error", err)
	}
	var all []string
	for _, k := range slices.Sorted(maps.Keys(a.errs)) {
		all = append(all, a.errs[k].Error())
	}
	a.mu.Unlock()
	if a.o.Health == nil {
		return
	}
	if len(all) > 0 {
		a.o.Health.SetUnhealthy(Warnable, strings.Join(all, "; "))
		return
	}
	a.o.Health.Renew(Warnable, LeaseDuration)
}

// Run runs cluster mode until ctx ends: the pod informer at once, the registration (retried
// with back-off while the API server cannot be reached), then the Lease, the node status and
// the pods' sync. Nothing it does stops a running pod because the API server is away.
func (a *Member) Run(ctx context.Context) {
	// client-go logs through klog: into slicelet's logger (its verbose levels below debug).
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(a.log.Handler()))
	inf := a.podInformer()
	if c := a.o.Clients; c.Events != nil && c.Scheme != nil {
		a.events.start(ctx, eventSink{events: c.Events}, c.Scheme, a.o.NodeName, a.log)
	}
	var wg sync.WaitGroup
	wg.Go(func() { inf.RunWithContext(ctx) })
	nodeInf := a.nodeInformer()
	a.mu.Lock()
	a.nodeStore = nodeInf.GetStore()
	a.mu.Unlock()
	wg.Go(func() { nodeInf.RunWithContext(ctx) })
	if a.o.Clients.Services != nil {
		svc := a.objects.services.informer(a.o.Clients.Services(metav1.NamespaceAll))
		wg.Go(func() { svc.RunWithContext(ctx) })
	}
	if a.register(ctx) {
		// The kubelet's events at its start (pkg/kubelet/kubelet.go, Run;
		// pkg/kubelet/cm/node_container_manager_linux.go, enforceNodeAllocatableCgroups).
		a.events.nodeEventf(a.o.NodeName, EventStarting, "Starting slicelet.")
		if a.o.AllocatableEnforced {
			a.events.nodeEventf(a.o.NodeName, EventNodeAllocatableEnforced, "Updated Node Allocatable limit across pods")
		}
		wg.Go(func() { a.leaseLoop(ctx) })
		wg.Go(func() { a.statusLoop(ctx) })
	}
	wg.Go(func() { a.podLoop(ctx, inf) })
	wg.Wait()
}

// selectedListWatch lists and watches with the field selector sel.
func selectedListWatch[L runtime.Object](sel string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return watchFn(ctx, opts)
		},
	}
}

// nodeInformer watches this node's Node (a field selector on its name, as the kubelet's node
// informer): admission matches pods against its labels and taints as others change them
// (a label the scheduler placed a pod by, a NoExecute taint).
func (a *Member) nodeInformer() cache.SharedIndexInformer {
	client := a.o.Clients.Nodes
	lw := selectedListWatch(fields.OneTermEqualSelector("metadata.name", a.o.NodeName).String(), client.List, client.Watch)
	inf := newInformer(lw, &v1.Node{}, "node "+a.o.NodeName, stripNode)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		a.log.Debug("node watch failed", "error", err)
	})
	return inf
}

// podInformer watches the pods bound to this node (spec.nodeName, a field selector, as the
// kubelet's config.NewSourceApiserver). The reflector relists after a 410 Gone and backs off
// while the API server is down; its errors go to the health tracker, not to the log.
func (a *Member) podInformer() cache.SharedIndexInformer {
	client := a.o.Clients.Pods(metav1.NamespaceAll)
	lw := selectedListWatch(fields.OneTermEqualSelector("spec.nodeName", a.o.NodeName).String(), client.List, client.Watch)
	inf := newInformer(lw, &v1.Pod{}, "pods bound to "+a.o.NodeName, stripPod)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		a.mu.Lock()
		a.watchRV = r.LastSyncResourceVersion()
		a.mu.Unlock()
		a.report("watch", err)
	})
	return inf
}

// backoff doubles d, from minBackoff, at most maxBackoff.
func backoff(d time.Duration) time.Duration { return min(max(2*d, minBackoff), maxBackoff) }

// sleep waits d on the agent's clock; false when ctx ended first.
func (a *Member) sleep(ctx context.Context, d time.Duration) bool {
	t := a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// register creates the Node, or adopts the one registered before, retrying with back-off
// until it succeeds or ctx ends (pkg/kubelet/kubelet_node_status.go, registerWithAPIServer).
func (a *Member) register(ctx context.Context) bool {
	var wait time.Duration
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.tryRegister(cctx)
		cancel()
		a.report("register", err)
		if err == nil {
			return true
		}
		wait = backoff(wait)
		if !a.sleep(ctx, wait) {
			return false
		}
	}
}

// tryRegister is one registration attempt: create the Node; if it exists, read it and add the
// labels it lacks (the kubelet's updateDefaultLabels; its taints are left alone: a node may
// not change them).
func (a *Member) tryRegister(ctx context.Context) error {
	in := a.o.Node()
	now := a.clock.Now()
	nodes := a.o.Clients.Nodes
	created, err := nodes.Create(ctx, InitialNode(in, now), metav1.CreateOptions{})
	if err == nil {
		a.log.Info("node registered", "node", in.Name, "node_uid", created.UID)
		a.setNode(created, now)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("node %s: create: %w", in.Name, err)
	}
	existing, err := nodes.Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: get: %w", in.Name, err)
	}
	if missing := missingLabels(in, existing.Labels); missing != nil {
		patch, err := mergePatchLabels(missing)
		if err != nil {
			return err
		}
		if existing, err = nodes.Patch(ctx, in.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("node %s: labels: %w", in.Name, err)
		}
	}
	a.log.Info("node was registered before; adopted", "node", in.Name, "node_uid", existing.UID)
	a.mu.Lock()
	a.node = existing
	a.mu.Unlock()
	return nil
}

// setNode records the node and when its status was last reported.
func (a *Member) setNode(n *v1.Node, reported time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node = n
	if !reported.IsZero() {
		a.lastReport = reported
	}
}

// currentNode is the Node as last known; nil before registration or after a failed write.
func (a *Member) currentNode() *v1.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.node
}

// Node is the Node admission matches the pods' node selectors, affinity and taints against
// (the kubelet's predicate handler's node, pkg/kubelet/kubelet_getters.go getNodeAnyWay): as
// the node informer has it (its name, labels and spec: stripNode), else as last read or
// written, else the Node as it registers.
func (a *Member) Node() *v1.Node {
	a.mu.Lock()
	store := a.nodeStore
	a.mu.Unlock()
	if store != nil {
		if o, ok, _ := store.GetByKey(a.o.NodeName); ok {
			return o.(*v1.Node)
		}
	}
	if n := a.currentNode(); n != nil {
		return n
	}
	return InitialNode(a.o.Node(), a.clock.Now())
}

// leaseLoop renews the Lease every LeaseRenewInterval, and after a failure again after a
// back-off (the lease lapses after LeaseDuration).
func (a *Member) leaseLoop(ctx context.Context) {
	var wait time.Duration
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.renewLease(cctx)
		cancel()
		a.report("lease", err)
		if err == nil {
			wait = 0
			if !a.sleep(ctx, LeaseRenewInterval) {
				return
			}
			continue
		}
		wait = backoff(wait)
		if !a.sleep(ctx, wait) {
			return
		}
	}
}

// renewLease renews the node's Lease in kube-node-lease, created when missing, owned by the
// Node (component-helpers/apimachinery/lease/controller.go and the kubelet's
// setNodeOwnerFunc): the last written lease is updated without a read; a failure (a conflict
// included) reads it again next time.
func (a *Member) renewLease(ctx context.Context) error {
	leases := a.o.Clients.Leases(v1.NamespaceNodeLease)
	name := a.o.NodeName
	a.mu.Lock()
	base := a.lease
	a.lease = nil
	a.mu.Unlock()
	if base == nil {
		got, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, err := leases.Create(ctx, a.newLease(nil), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("lease %s/%s: create: %w", v1.NamespaceNodeLease, name, err)
			}
			a.setLease(l)
			return nil
		case err != nil:
			return fmt.Errorf("lease %s/%s: get: %w", v1.NamespaceNodeLease, name, err)
		}
		base = got
	}
	l, err := leases.Update(ctx, a.newLease(base), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("lease %s/%s: renew: %w", v1.NamespaceNodeLease, name, err)
	}
	a.setLease(l)
	return nil
}

func (a *Member) setLease(l *coordinationv1.Lease) {
	a.mu.Lock()
	a.lease = l
	a.mu.Unlock()
}

// newLease is base (or a new Lease) with the holder, duration, renew time now and the Node as
// owner.
func (a *Member) newLease(base *coordinationv1.Lease) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.o.NodeName, Namespace: v1.NamespaceNodeLease}}
	if base != nil {
		l = base.DeepCopy()
	}
	l.Spec.HolderIdentity = ptr.To(a.o.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(LeaseDuration / time.Second))
	l.Spec.RenewTime = &metav1.MicroTime{Time: a.clock.Now()}
	if n := a.currentNode(); n != nil && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	return l
}

// statusLoop computes the node status every NodeStatusUpdateFrequency and sends it when it
// changed or NodeStatusReportFrequency passed since the last report; from its start until the
// node is Ready (at most FastStatusPeriod), every FastStatusInterval.
func (a *Member) statusLoop(ctx context.Context) {
	t := a.clock.NewTicker(NodeStatusUpdateFrequency)
	defer t.Stop()
	start := a.clock.Now()
	fast := true
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		a.report("status", a.syncNodeStatus(cctx))
		cancel()
		fast = fast && !a.nodeReady() && a.clock.Since(start) < FastStatusPeriod
		var soon <-chan time.Time
		if fast {
			soon = a.clock.After(FastStatusInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-soon:
		}
	}
}

// HoldStatus reports whether a node status round is skipped: the node's state is not known yet
// (settling: a critical component has not reported since the start) while the API shows the
// Node Ready, for at most StartupStatusHold after the start (since). Writing it would show a
// node that changed agent, or whose agent restarted, NotReady for a moment, pods and all.
func HoldStatus(settling bool, api *v1.NodeStatus, since time.Duration) bool {
	if !settling || since >= StartupStatusHold {
		return false
	}
	for _, c := range api.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// nodeReady reports whether the Node as last read or written is Ready.
func (a *Member) nodeReady() bool {
	n := a.currentNode()
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// syncNodeStatus is one round of statusLoop (the kubelet's tryUpdateNodeStatus).
func (a *Member) syncNodeStatus(ctx context.Context) error {
	node := a.currentNode()
	if node == nil {
		got, err := a.o.Clients.Nodes.Get(ctx, a.o.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: get: %w", a.o.NodeName, err)
		}
		a.setNode(got, time.Time{})
		node = got
	}
	now := a.clock.Now()
	in := a.o.Node()
	if HoldStatus(in.Settling, &node.Status, now.Sub(a.started)) {
		return nil
	}
	status := NodeStatus(in, &node.Status, now)
	a.events.nodeConditionEvents(a.o.NodeName, status.Conditions)
	a.mu.Lock()
	due := now.Sub(a.lastReport) >= NodeStatusReportFrequency
	a.mu.Unlock()
	if !NodeStatusChanged(node.Status, status) && !due {
		return nil
	}
	patch, err := NodeStatusPatch(node.UID, node.Status, status)
	if err != nil {
		return err
	}
	updated, err := a.o.Clients.Nodes.Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		// Read it again next time: it may have changed under us.
		a.setNode(nil, time.Time{})
		return fmt.Errorf("node %s: status: %w", node.Name, err)
	}
	a.setNode(updated, now)
	return nil
}

// mergePatchLabels is a patch adding labels to an object's metadata.
func mergePatchLabels(labels map[string]string) ([]byte, error) {
	return jsonMarshal(map[string]any{"metadata": map[string]any{"labels": labels}})
}

// podLoop syncs the pods at each Kick, at the adoption, every PodSyncPeriod and
// PodRetryPeriod after a failed sync, once the informer listed them.
func (a *Member) podLoop(ctx context.Context, inf cache.SharedIndexInformer) {
	kick := func(any) { a.Kick() }
	if reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, _ any) { a.Kick() }, DeleteFunc: kick}); err == nil {
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	// The first sync right after the first list (the cluster source's first snapshot, which
	// the controller waits for before the adoption and the orphans' cleanup).
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	a.Kick()
	t := a.clock.NewTicker(PodSyncPeriod)
	defer t.Stop()
	adopted := a.o.Controller.Adopted()
	failed := false
	for {
		var retry <-chan time.Time
		if failed {
			retry = a.clock.After(PodRetryPeriod)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-retry:
		case <-a.kick:
		case <-adopted:
			adopted = nil
		}
		if !inf.HasSynced() {
			continue
		}
		a.mu.Lock()
		if _, failing := a.errs["watch"]; failing && inf.LastSyncResourceVersion() != a.watchRV {
			delete(a.errs, "watch") // listed or watched again since the error
		}
		a.mu.Unlock()
		var apiPods []*v1.Pod
		for _, o := range inf.GetStore().List() {
			apiPods = append(apiPods, o.(*v1.Pod))
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.SyncPods(cctx, apiPods)
		cancel()
		a.report("pods", err)
		failed = err != nil
	}
}

// SyncPods is one round of the pods' sync against the API's pods bound to this node:
// the cluster source's snapshot (sent when it changed), the grace periods of pods being
// deleted, their final deletion once stopped, the statuses that changed, and the mirror pods.
func (a *Member) SyncPods(ctx context.Context, apiPods []*v1.Pod) error {
	for _, p := range apiPods {
		a.version(p)
	}
	ctrl := a.o.Controller
	known := map[types.UID]bool{}
	for _, p := range ctrl.Pods() {
		known[p.UID] = true
	}
	plan := PlanPods(apiPods, known, a.validateCached)
	for _, p := range plan.Deleting {
		if !a.graced[p.UID] {
			ctrl.SetDeletionGrace(p.Namespace, p.Name, DeletionGrace(p))
			a.graced[p.UID] = true
		}
	}
	ours := map[types.UID]bool{}
	for _, p := range plan.Deleting {
		ours[p.UID] = true
	}
	for uid := range plan.Refused {
		ours[uid] = true
	}
	var snap []string
	for _, d := range plan.Run {
		ours[d.Pod.UID] = true
		snap = append(snap, string(d.Pod.UID)+"@"+a.versions[d.Pod.UID].version)
	}
	if s := strings.Join(snap, ","); s != a.lastSnap || a.lastSnap == "" {
		a.objects.register(plan.Run)
		ctrl.Update(pods.Snapshot{Source: pods.SourceCluster, Pods: plan.Run})
		a.lastSnap = s
		if a.lastSnap == "" {
			a.lastSnap = "-" // the empty snapshot was sent
		}
	}

	a.events.setPods(ours)
	local := ctrl.Pods()
	byUID := make(map[types.UID]*v1.Pod, len(local))
	running := map[types.UID]bool{}
	var static []v1.Pod
	for i := range local {
		p := &local[i]
		byUID[p.UID] = p
		running[p.UID] = true
		if p.Annotations[pods.AnnotationSource] == pods.SourceFile {
			static = append(static, *p)
		}
	}
	adopted := false
	select {
	case <-ctrl.Adopted():
		adopted = true
	default:
	}
	var errs []error
	ips := a.o.Node().InternalIPs
	now := a.clock.Now()
	for _, p := range plan.Deleting {
		if lp, ok := byUID[p.UID]; ok {
			a.stopping[p.UID] = lp.Status
		}
	}
	for _, p := range FinalDeletes(plan.Deleting, running, adopted) {
		// The status manager writes a terminated pod's final status before it deletes the
		// pod (TerminatePod, then syncPod's delete): a pod a finalizer keeps (a Job's) must
		// show its terminal phase to the controller that would remove the finalizer.
		if !IsMirrorPod(p) && !isTerminal(p.Status.Phase) {
			last, ok := a.stopping[p.UID]
			if !ok {
				last = p.Status
			}
			if err := a.patchStatus(ctx, p, TerminatedPodStatus(p, last), ips, now); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := a.deletePod(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	live := map[types.UID]bool{}
	taken := map[string]bool{}
	for _, api := range apiPods {
		live[api.UID] = true
		if IsMirrorPod(api) {
			continue
		}
		taken[api.Namespace+"/"+api.Name] = true
		var want v1.PodStatus
		if msg, ok := plan.Refused[api.UID]; ok {
			want = RefusedStatus(pods.ReasonUnsupported, msg)
		} else if lp, ok := byUID[api.UID]; ok && adopted {
			want = lp.Status
		} else {
			// Not seen by the controller yet; or seen, but before the adoption a pod that kept
			// running through a restart of slicelet is Pending there for a moment: the API
			// must not see it regress.
			continue
		}
		if err := a.patchStatus(ctx, api, want, ips, now); err != nil {
			errs = append(errs, err)
		}
	}
	if node := a.currentNode(); node != nil && adopted {
		errs = append(errs, a.syncMirrors(ctx, static, plan.Mirrors, taken, node, ips, now)...)
	}
	for uid := range a.sent {
		if !live[uid] {
			delete(a.sent, uid)
		}
	}
	for uid := range a.graced {
		if !live[uid] {
			delete(a.graced, uid)
		}
	}
	for uid := range a.stopping {
		if !live[uid] {
			delete(a.stopping, uid)
		}
	}
	for uid := range a.verdicts {
		if !live[uid] {
			delete(a.verdicts, uid)
		}
	}
	for uid := range a.versions {
		if !live[uid] {
			delete(a.versions, uid)
		}
	}
	return errors.Join(errs...)
}

// HoldPodStatus reports whether local, the node's status of a pod, is held back rather than
// written over the API's (api), since (how long ago this agent started) being
// StartupStatusHold at most for the second rule. The kubelet's status manager writes a pod's
// status only once the pod's sync generated one from the runtime's complete view of the pod
// (pkg/kubelet/status/status_manager.go, SetPodStatus; the PLEG cache), and it carries what
// the old status knew of a container the runtime does not show (kubelet_pods.go,
// convertToAPIContainerStatuses): a node that took over running pods must not write a status
// that knows less of them than the API shows, so a Running pod does not turn Pending, not
// Ready, for a moment. It is held when:
//   - local is Pending without container statuses (the controller's status of an admitted pod
//     before its first sync, or of a sync that stopped before the runtime was read; a synced
//     status has one per container) while the API shows the pod started on the node;
//   - while the agent is starting, local shows a container never run (no container ID, no
//     last termination) that the API shows with a container ID: the runtime's listing did not
//     show the pod's containers yet (those another agent created, on a node that changed
//     agent). Past StartupStatusHold it is written: the containers are gone.
func HoldPodStatus(local, api v1.PodStatus, since time.Duration) bool {
	if local.Phase == v1.PodPending && len(local.ContainerStatuses) == 0 && len(local.InitContainerStatuses) == 0 &&
		api.StartTime != nil {
		return true
	}
	if since >= StartupStatusHold || isTerminal(local.Phase) {
		return false
	}
	return forgetsContainer(local.InitContainerStatuses, api.InitContainerStatuses) ||
		forgetsContainer(local.ContainerStatuses, api.ContainerStatuses)
}

// forgetsContainer reports whether a container of local shows no run (no container ID, no
// last termination) while the same container of api has a container ID.
func forgetsContainer(local, api []v1.ContainerStatus) bool {
	known := make(map[string]bool, len(api))
	for _, s := range api {
		if s.ContainerID != "" {
			known[s.Name] = true
		}
	}
	for _, s := range local {
		if known[s.Name] && s.ContainerID == "" && s.LastTerminationState.Terminated == nil {
			return true
		}
	}
	return false
}

// patchStatus writes the pod's status when it differs from the API's and from what was last
// written (pkg/kubelet/status/status_manager.go, syncPod: only on change).
func (a *Member) patchStatus(ctx context.Context, api *v1.Pod, local v1.PodStatus, ips []string, now time.Time) error {
	if HoldPodStatus(local, api.Status, now.Sub(a.started)) {
		return nil
	}
	want := APIPodStatus(api, local, ips, a.o.HostNetwork || api.Spec.HostNetwork, now)
	uid := string(api.UID)
	if IsMirrorPod(api) {
		uid = api.Annotations[v1.MirrorPodAnnotationKey] // the static pod's
	}
	want = TerminalStatus(api, local, want, a.couldHaveRunningContainers(uid, local), now)
	if PodStatusEqual(api.Status, want) {
		return nil
	}
	if prev, ok := a.sent[api.UID]; ok && PodStatusEqual(prev, want) {
		return nil // written; the watch has not brought it back yet
	}
	patch, unchanged, err := PodStatusPatch(api.UID, api.Status, want)
	if err != nil {
		return err
	}
	if unchanged {
		// The same to the API, which keeps times to the second: a container's startedAt in
		// nanoseconds is never equal to the API's. Remembered as written, so that the next
		// comparisons stop at the check above instead of computing this patch every time.
		a.sent[api.UID] = want
		return nil
	}
	if _, err := a.o.Clients.Pods(api.Namespace).Patch(ctx, api.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s/%s: status: %w", api.Namespace, api.Name, err)
	}
	// The kubelet's status manager logs each patch at V(3) ("Patch status for pod").
	a.log.Debug("pod status patched", "pod", api.Namespace+"/"+api.Name, "pod_uid", api.UID, "phase", string(want.Phase),
		"resource_version", api.ResourceVersion, "patch", string(patch))
	a.sent[api.UID] = want
	return nil
}

// deletePod deletes a pod for good: grace 0, its UID as a precondition; a pod already gone
// or replaced is not an error (the kubelet's status manager, and mirror_client.go's
// DeleteMirrorPod).
func (a *Member) deletePod(ctx context.Context, p *v1.Pod) error {
	err := a.o.Clients.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: ptr.To(p.UID)}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("pod %s/%s: delete: %w", p.Namespace, p.Name, err)
	}
	if err == nil {
		a.log.Info("pod deleted from the API server", "pod", p.Namespace+"/"+p.Name, "pod_uid", p.UID, "mirror", IsMirrorPod(p))
	}
	return nil
}

// syncMirrors creates and deletes mirror pods (PlanMirrors) and writes the static pods'
// statuses on their mirrors.
func (a *Member) syncMirrors(ctx context.Context, static []v1.Pod, mirrors map[string]*v1.Pod, taken map[string]bool, node *v1.Node, ips []string, now time.Time) []error {
	var errs []error
	act := PlanMirrors(static, mirrors, taken, node.Name, node.UID)
	for _, m := range act.Create {
		if _, err := a.o.Clients.Pods(m.Namespace).Create(ctx, m, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("mirror pod %s/%s: create: %w", m.Namespace, m.Name, err))
		}
	}
	for _, m := range act.Delete {
		if err := a.deletePod(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range static {
		s := &static[i]
		m, ok := mirrors[s.Namespace+"/"+s.Name]
		if !ok || m.DeletionTimestamp != nil || m.Annotations[v1.MirrorPodAnnotationKey] != string(s.UID) {
			continue
		}
		if err := a.patchStatus(ctx, m, s.Status, ips, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
