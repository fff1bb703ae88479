package pods

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	stdslices "slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// Admitter decides whether a pod may run. It is pure; ok=false carries the reason and message
// shown on the pod.
type Admitter interface {
	// AdmitSecurity checks the pod against its source's policy (Pod Security at the level
	// configured for the source). It comes first, before the runtime's validation and Admit,
	// as the API server's admission comes before the kubelet's.
	AdmitSecurity(pod *v1.Pod, source string) (ok bool, reason, message string)
	// Admit decides whether the pod may run next to the pods already admitted (node
	// allocatable, max pods, node conditions), with the kubelet's reasons and messages.
	Admit(pod *v1.Pod, admitted []*v1.Pod) (ok bool, reason, message string)
}

// Allocator gives an admitted pod the node's devices, after every other check admitted it, as
// the kubelet's resource allocation admit handler runs after its predicate handler. It may call
// out (device plugins); it is called with the controller's lock held, one pod at a time.
type Allocator interface {
	// Allocate gives pod its devices, or refuses it with the reason and message shown on the
	// pod. active are the other admitted pods; ready reports whether every source has sent
	// its pods (only then are the devices of pods not among active freed).
	Allocate(pod *v1.Pod, active []*v1.Pod, ready bool) (ok bool, reason, message string)
}

// ReasonRuntimeUnavailable is the status reason of a pod whose phase is Unknown because the
// container runtime cannot be reached (see ErrRuntimeUnavailable).
const ReasonRuntimeUnavailable = "RuntimeUnavailable"

// ReasonUnsupported is the status reason of a pod the runtime cannot run (e.g. an image with the
// built-in systemd runtime); the message lists every field path and value.
const ReasonUnsupported = "UnsupportedPodSpec"

// ReasonUnreadable is the status reason of a pod whose stored record does not load
// (Problem.Hold): it keeps running, unmanaged, until an apply or delete of it resolves it.
const ReasonUnreadable = "StoredPodUnreadable"

// Timing of the controller.
const (
	// DefaultTick is how often the controller looks for pods due for a sync.
	DefaultTick = time.Second
	// busyResync is the resync interval of a pod that is starting, restarting or stopping.
	busyResync = time.Second
	// steadyResync is the resync interval of a pod whose containers are all in a steady state:
	// the kubelet's syncFrequency (1 min). The relist every tick makes a pod whose containers
	// change state due at once, and the runtime's NextSync brings back-offs and probes.
	steadyResync = time.Minute
	// objectVolumeResync is steadyResync for a pod with volumes made from ConfigMaps, Secrets
	// or the pod itself (configMap, secret, projected, downwardAPI): a resync rewrites them,
	// and a changed ConfigMap reaches the pod's files within it (docs/operations.md).
	objectVolumeResync = 10 * time.Second
	// syncWorkers bounds how many pods are synced at once.
	syncWorkers = 8
)

// podState is the controller's record of one pod.
type podState struct {
	desired  Desired
	admitted bool
	reason   string // rejection reason ("OutOfcpu", …) when not admitted
	message  string
	slice    slices.PodSlice
	status   v1.PodStatus
	syncErr  string
	// observed is set once the status came from the runtime (a relist or a sync), not from
	// admission alone.
	observed  bool
	syncing   bool // a sync of the pod is in flight
	nextSync  time.Time
	deleting  bool
	createdAt time.Time
	// grace, when set, replaces the pod's termination grace period when it is deleted
	// (kubectl delete --grace-period).
	grace *time.Duration
	// resize is the PodResizePending condition of a resize that is not allocated (desired
	// keeps the resources allocated before it); nil when none is pending.
	resize *v1.PodCondition
	// finished: the pod ended for good (Succeeded or Failed by its containers) and what it
	// held on the node was released (finishPod); it is not synced again, its status stays.
	finished bool
}

// key is namespace/name.
func key(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// ControllerOptions are a Controller's dependencies, all given at construction.
type ControllerOptions struct {
	// Slices gives admitted pods their slices. Required.
	Slices Slices
	// Runtime runs the pods' containers. Required.
	Runtime Runtime
	// Admitter admits pods. Required.
	Admitter Admitter
	// Allocator gives admitted pods their devices; nil gives none.
	Allocator Allocator
	// Logger; discarded when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.WithTicker
	// WantSources are the sources that must each send one snapshot before anything is deleted
	// as an orphan (the kubelet's allSourcesReady) and before the pods are adopted.
	WantSources []string
	// OnReject, when set, is called with the reason of every pod admission rejects (metrics).
	OnReject func(reason string)
	// Recorder, when set, receives the pods' events: the admission verdict (the kubelet's
	// rejection events: Warning with the reason; Normal "Admitted" for an admitted pod) and
	// evictions (Warning "Evicted", as the kubelet's eviction manager records it).
	Recorder EventRecorder
	// OnChange, when set, is called whenever the set of running pods changes: a pod got its
	// slice, changed phase, or was deleted (the eviction manager re-arms its thresholds then).
	// It is called with the controller's lock held: it must not block and must not call the
	// controller.
	OnChange func()
	// OnStatus, when set, is called whenever a pod's status changes: admitted, refused,
	// observed, synced to a different status (the containers' states, readiness, restarts),
	// evicted, Unknown (cluster mode sends the statuses to the API server then). It is called
	// with the controller's lock held: it must not block and must not call the controller.
	OnStatus func()
	// Tick is how often the controller looks for pods due for a sync; DefaultTick when zero.
	Tick time.Duration
	// Evictions, when set, keeps evictions on disk: EvictPod records one before it stops the
	// pod, and a pod with a record is never started again by itself (it is shown evicted)
	// until no source wants it any more.
	Evictions *EvictionRecords
}

// Controller keeps the running pods equal to what the sources want.
type Controller struct {
	slices   Slices
	rt       Runtime
	admit    Admitter
	alloc    Allocator
	log      *slog.Logger
	clock    clock.WithTicker
	tick     time.Duration
	onReject func(reason string)
	onChange func()
	onStatus func()
	events   EventRecorder

	evictions *EvictionRecords

	mu        sync.Mutex
	evicted   map[string]EvictionRecord // by UID: the evictions on disk
	snapshots map[string]Snapshot
	problems  []Problem
	pods      map[string]*podState // by UID
	sources   map[string]bool      // sources that reported at least once
	want      []string             // sources that must report before orphans are cleaned
	cleaned   bool
	kick      chan struct{}
	done      chan struct{} // a sync ended
	running   int           // syncs in flight
	syncs     sync.WaitGroup
	adopted   chan struct{} // closed by the first relist after every wanted source reported
}

// statusLocked calls the OnStatus hook.
func (c *Controller) statusLocked() {
	if c.onStatus != nil {
		c.onStatus()
	}
}

// changedLocked calls the OnChange hook.
func (c *Controller) changedLocked() {
	if c.onChange != nil {
		c.onChange()
	}
}

// NewController returns a controller.
func NewController(opts ControllerOptions) *Controller {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	evicted := map[string]EvictionRecord{}
	if opts.Evictions != nil {
		var err error
		if evicted, err = opts.Evictions.Load(); err != nil {
			opts.Logger.Error("eviction records do not all load", "error", err)
		}
	}
	return &Controller{
		slices: opts.Slices, rt: opts.Runtime, admit: opts.Admitter, alloc: opts.Allocator, log: opts.Logger, clock: opts.Clock, tick: opts.Tick,
		onReject: opts.OnReject, onChange: opts.OnChange, onStatus: opts.OnStatus, events: opts.Recorder,
		evictions: opts.Evictions, evicted: evicted,
		snapshots: map[string]Snapshot{},
		pods:      map[string]*podState{},
		sources:   map[string]bool{},
		want:      opts.WantSources,
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}, 1),
		adopted:   make(chan struct{}),
	}
}

// Hooks are what the controller tells other components, each optional: OnReject, OnChange and
// OnStatus as in ControllerOptions.
type Hooks struct {
	OnReject func(reason string)
	OnChange func()
	OnStatus func()
}

// SetHooks replaces the hooks of ControllerOptions. It is for a wiring whose hooks reach
// components built after the controller: call it once they all exist, before Run.
func (c *Controller) SetHooks(h Hooks) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onReject, c.onChange, c.onStatus = h.OnReject, h.OnChange, h.OnStatus
}

// Adopted is closed once every wanted source has sent its first snapshot and the relist that
// followed gave every pod admitted by then its status from the runtime (Running for a pod that
// kept running while slicelet was down; Unknown for all while the runtime cannot be reached).
// The daemon reports READY and serves its API after it, so that no client sees a running pod
// Pending because slicelet restarted.
func (c *Controller) Adopted() <-chan struct{} { return c.adopted }

// Update takes a source's complete snapshot. It returns at once; the work happens in Run.
func (c *Controller) Update(s Snapshot) {
	c.mu.Lock()
	c.snapshots[s.Source] = s
	c.sources[s.Source] = true
	stale := c.reconcileDesiredLocked()
	c.mu.Unlock()
	c.forgetEvictions(stale)
	c.wake()
}

// forgetEvictions removes the eviction records of pods no source wants any more.
func (c *Controller) forgetEvictions(uids []string) {
	for _, uid := range uids {
		if err := c.evictions.Remove(uid); err != nil {
			c.log.Warn("eviction record not removed", "pod_uid", uid, "error", err)
			continue
		}
		c.mu.Lock()
		delete(c.evicted, uid)
		c.mu.Unlock()
	}
}

func (c *Controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// oneOwnerPerUIDLocked maps UIDs to the pods that own them. The controller tells pods apart by
// UID, so two pods that claim one (an API pod exported and dropped into the manifest directory
// under another name) cannot both run: the one already running keeps it, else the first in
// source order; the other is refused with a problem naming both. The decision is the same at
// every reconcile.
func (c *Controller) oneOwnerPerUIDLocked(named []Desired, problems *[]Problem) map[string]Desired {
	wanted := map[string]Desired{}
	same := func(a, b Desired) bool { return a.Source == b.Source && key(a.Pod) == key(b.Pod) }
	for _, d := range named {
		uid := string(d.Pod.UID)
		prev, dup := wanted[uid]
		if !dup {
			wanted[uid] = d
			continue
		}
		keep, refuse := prev, d
		if ps, ok := c.pods[uid]; ok && same(ps.desired, d) && !same(ps.desired, prev) {
			keep, refuse = d, prev
		}
		wanted[uid] = keep
		*problems = append(*problems, Problem{Origin: refuse.Origin, Source: refuse.Source, Error: fmt.Sprintf(
			"pod %s from %s (%s source) refused: metadata.uid %q is already used by pod %s from %s (%s source); two pods cannot share a UID: remove metadata.uid from one of them",
			key(refuse.Pod), refuse.Origin, refuse.Source, uid, key(keep.Pod), keep.Origin, keep.Source)})
	}
	return wanted
}

// reconcileDesiredLocked merges the snapshots (the API source wins a name clash, reported as a
// problem naming both), admits new pods in a deterministic order and marks pods no source wants for
// deletion. A new pod with an eviction record is shown evicted, never started. It returns the
// UIDs of eviction records no source wants any more (once every source reported).
func (c *Controller) reconcileDesiredLocked() (staleEvictions []string) {
	var problems []Problem
	byName := map[string]Desired{}
	var named []Desired // byName's pods in source order
	// API pods first: an API pod was accepted only while no manifest file defined its name
	// (the API refuses such an apply), so a clash means the file came later, and an API pod is
	// never displaced by a file. The cluster's pods (cluster mode) come next: the scheduler
	// bound them, and a manifest file may not take their name either.
	for _, src := range []string{SourceAPI, SourceCluster, SourceFile} {
		s, ok := c.snapshots[src]
		if !ok {
			continue
		}
		for _, p := range s.Problems {
			p.Source = src
			problems = append(problems, p)
		}
		for _, d := range s.Pods {
			k := key(d.Pod)
			if prev, dup := byName[k]; dup {
				problems = append(problems, Problem{Origin: d.Origin, Source: d.Source, Error: fmt.Sprintf("pod %s from %s (%s source) refused: the same namespace/name is already defined by %s (%s source); rename one of them", k, d.Origin, d.Source, prev.Origin, prev.Source)})
				continue
			}
			byName[k] = d
			named = append(named, d)
		}
	}
	wanted := c.oneOwnerPerUIDLocked(named, &problems)
	c.problems = problems
	now := c.clock.Now()
	for uid, ps := range c.pods {
		if _, ok := wanted[uid]; !ok && !ps.deleting {
			ps.deleting = true
			ps.nextSync = time.Time{}
			c.log.Info("pod removed from its source, deleting", "pod", key(ps.desired.Pod), "pod_uid", uid, "source", ps.desired.Source)
		}
	}
	// Admit new pods in a stable order: the file source first, then by namespace/name.
	order := stdslices.SortedFunc(maps.Keys(wanted), func(a, b string) int {
		da, db := wanted[a], wanted[b]
		return cmp.Or(cmp.Compare(sourceRank(da.Source), sourceRank(db.Source)), cmp.Compare(key(da.Pod), key(db.Pod)), cmp.Compare(a, b))
	})
	for _, uid := range order {
		if ps, ok := c.pods[uid]; ok {
			if ps.deleting {
				// Came back (e.g. the manifest was restored) before the delete ran.
				ps.deleting, ps.grace = false, nil
			}
			if !ps.admitted && ps.status.Reason == ReasonEvicted {
				// Keep the evicted pod's record (annotations, status) until its source changes it.
				continue
			}
			d := wanted[uid]
			pending := ps.resize
			ps.resize = nil
			if ps.admitted && lifecycle.ResizeRequested(ps.desired.Pod, d.Pod) {
				d.Pod, ps.resize = c.allocateResizeLocked(uid, ps.desired.Pod, d.Pod)
			}
			if (pending == nil) != (ps.resize == nil) || (pending != nil && (pending.Reason != ps.resize.Reason || pending.Message != ps.resize.Message)) {
				// The status shows the resize's verdict at the next sync.
				ps.nextSync = time.Time{}
			}
			if !apiequality.Semantic.DeepEqual(ps.desired.Pod.Spec, d.Pod.Spec) {
				// An API pod's spec changed (an active deadline set, an image, a resize):
				// synced now, as the kubelet's pod workers sync an updated pod.
				ps.nextSync = time.Time{}
			}
			ps.desired = d
			continue
		}
		d := wanted[uid]
		ps := &podState{desired: d, createdAt: now}
		if rec, ok := c.evicted[uid]; ok {
			// Evicted before slicelet restarted: it stays evicted.
			ps.reason, ps.message = ReasonEvicted, rec.Message
			ps.desired.Pod = withEvictionAnnotations(d.Pod, rec.Annotations)
			ps.status = evictedStatus(v1.PodStatus{}, rec.Message, rec.Time)
			c.statusLocked()
			c.pods[uid] = ps
			c.log.Info("pod was evicted before a restart, not started", "pod", key(d.Pod), "pod_uid", uid, "message", rec.Message)
			continue
		}
		ok, reason, msg := c.admit.AdmitSecurity(d.Pod, d.Source)
		if ok {
			if errs := c.rt.Validate(d.Pod); len(errs) > 0 {
				ok, reason, msg = false, ReasonUnsupported, fmt.Sprintf("the %s runtime cannot run this pod: %s", c.rt.Name(), errs.ToAggregate())
			} else {
				ok, reason, msg = c.admit.Admit(d.Pod, c.admittedLocked())
			}
			if ok && c.alloc != nil {
				ok, reason, msg = c.alloc.Allocate(d.Pod, c.admittedLocked(), c.allSourcesReadyLocked())
			}
		}
		ps.admitted = ok
		if !ok {
			if c.onReject != nil {
				c.onReject(reason)
			}
			ps.reason, ps.message = reason, msg
			ps.status = v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: msg, ObservedGeneration: d.Pod.Generation}
			c.log.Warn("pod rejected", "pod", key(d.Pod), "pod_uid", uid, "reason", reason, "message", msg)
			c.event(d.Pod, v1.EventTypeWarning, reason, "%s", msg)
		} else {
			ps.status = v1.PodStatus{Phase: v1.PodPending, ObservedGeneration: d.Pod.Generation}
			c.log.Info("pod admitted", "pod", key(d.Pod), "pod_uid", uid, "source", d.Source, "origin", d.Origin)
			c.event(d.Pod, v1.EventTypeNormal, EventAdmitted, "Admitted from %s", d.Origin)
		}
		c.statusLocked()
		c.pods[uid] = ps
	}
	if c.evictions != nil && c.allSourcesReadyLocked() {
		for uid := range c.evicted {
			if _, ok := wanted[uid]; !ok {
				staleEvictions = append(staleEvictions, uid)
			}
		}
	}
	return staleEvictions
}

// allocateResizeLocked is the kubelet's allocation manager's verdict on an in-place resize of
// the admitted pod uid from allocated to want (pkg/kubelet/allocation): the pod to run (want,
// or want with the allocated resources while the resize is pending) and the PodResizePending
// condition, Infeasible when the pod alone does not fit the node (or a container would need
// the restart its resizePolicy asks for, which slicelet does not do), Deferred when it does
// not fit next to the other admitted pods now (asked again at the next change of the pods).
func (c *Controller) allocateResizeLocked(uid string, allocated, want *v1.Pod) (*v1.Pod, *v1.PodCondition) {
	pending := func(reason, message string) (*v1.Pod, *v1.PodCondition) {
		return lifecycle.WithAllocatedResources(want, allocated), &v1.PodCondition{Type: v1.PodResizePending,
			Status: v1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	}
	if r := lifecycle.ResizeRestarts(allocated, want); len(r) > 0 {
		return pending(lifecycle.ReasonResizeInfeasible, lifecycle.ResizeRestartMessage(r))
	}
	if ok, _, msg := c.admit.Admit(want, nil); !ok {
		return pending(lifecycle.ReasonResizeInfeasible, msg)
	}
	var others []*v1.Pod
	for _, p := range c.admittedLocked() {
		if string(p.UID) != uid {
			others = append(others, p)
		}
	}
	if ok, _, msg := c.admit.Admit(want, others); !ok {
		return pending(lifecycle.ReasonResizeDeferred, msg)
	}
	c.log.Info("pod resize allocated", "pod", key(want), "pod_uid", uid)
	return want, nil
}

// WouldAdmit is the admission a pod from source would get now, without admitting it: the same
// steps as a new pod's (Pod Security, the runtime's validation, then the node's resources and
// conditions against the admitted pods). A pod of the same namespace and name that is admitted
// already is left out of the count, as its replacement would replace it.
func (c *Controller) WouldAdmit(pod *v1.Pod, source string) (ok bool, reason, message string) {
	if ok, reason, message = c.admit.AdmitSecurity(pod, source); !ok {
		return ok, reason, message
	}
	if errs := c.rt.Validate(pod); len(errs) > 0 {
		return false, ReasonUnsupported, fmt.Sprintf("the %s runtime cannot run this pod: %s", c.rt.Name(), errs.ToAggregate())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var others []*v1.Pod
	for _, p := range c.admittedLocked() {
		if key(p) != key(pod) {
			others = append(others, p)
		}
	}
	return c.admit.Admit(pod, others)
}

// sourceRank orders sources for admission: manifest files before API pods.
func sourceRank(source string) int {
	if source == SourceFile {
		return 0
	}
	return 1
}

// admittedLocked returns the pods that count against the node at admission, as the kubelet's
// filterOutInactivePods (pkg/kubelet/kubelet_pods.go): every admitted pod whose containers may
// still run. A pod being deleted counts until its containers are stopped and it is gone (the
// kubelet's pod worker has not reached IsPodKnownTerminated), whatever its phase; a pod that
// completed (Succeeded or Failed) and is not being deleted no longer counts: it stays only for
// its status and logs.
func (c *Controller) admittedLocked() []*v1.Pod {
	var out []*v1.Pod
	for _, uid := range stdslices.Sorted(maps.Keys(c.pods)) {
		if ps := c.pods[uid]; ps.admitted && !ps.finished && (ps.deleting || !terminalPhase(ps.status.Phase)) {
			out = append(out, ps.desired.Pod)
		}
	}
	return out
}

// Problems returns what the sources could not use, and the pods refused for a name another
// source defines, each with its Source.
func (c *Controller) Problems() []Problem {
	c.mu.Lock()
	defer c.mu.Unlock()
	return stdslices.Clone(c.problems)
}

// Run syncs pods until ctx ends: a relist and the due pods' syncs at once after every
// snapshot and every tick, and further due pods whenever a sync ends. Syncs run on their own,
// at most syncWorkers at a time, so a slow sync never holds back the relist that adopts the
// pods of a source that reported later. Run returns once the syncs in flight have ended.
func (c *Controller) Run(ctx context.Context) {
	t := c.clock.NewTicker(c.tick)
	defer t.Stop()
	defer c.syncs.Wait()
	relist := true
	for {
		if relist {
			c.relist(ctx)
		}
		c.dispatch(ctx)
		c.maybeCleanupOrphans(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			relist = true
		case <-t.C():
			relist = true
		case <-c.done:
			relist = false
		}
	}
}

// relist lists the runtime once: pods whose containers changed become due at once, and pods
// not observed yet (all of them after slicelet started) get their status from that listing.
func (c *Controller) relist(ctx context.Context) {
	c.mu.Lock()
	allReady := c.allSourcesReadyLocked()
	var fresh []*v1.Pod
	for _, ps := range c.pods {
		if ps.admitted && !ps.deleting && !ps.observed {
			fresh = append(fresh, ps.desired.Pod)
		}
	}
	c.mu.Unlock()
	res, err := c.rt.Relist(ctx, fresh)
	if err != nil {
		c.log.Debug("relist failed", "error", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, uid := range res.Due {
		if ps, ok := c.pods[uid]; ok {
			ps.nextSync = time.Time{}
		}
	}
	for uid, status := range res.Statuses {
		ps, ok := c.pods[uid]
		if !ok || !ps.admitted || ps.deleting || ps.observed {
			continue
		}
		ps.observed = true
		if ps.status.Phase != status.Phase {
			c.log.Info("pod phase observed", "pod", key(ps.desired.Pod), "pod_uid", uid, "phase", string(status.Phase))
			c.changedLocked()
		}
		status.ObservedGeneration = ps.desired.Pod.Generation
		ps.status = status
		c.statusLocked()
	}
	if errors.Is(err, ErrRuntimeUnavailable) {
		// The runtime went away: sync every pod not yet known to be Unknown now, so its status
		// says so within a tick rather than at its steady resync; a pod never observed is
		// Unknown at once.
		for _, ps := range c.pods {
			if !ps.admitted || ps.deleting || ps.status.Phase == v1.PodUnknown {
				continue
			}
			ps.nextSync = time.Time{}
			if !ps.observed {
				ps.status = unknownStatus(ps.status, err)
				c.statusLocked()
			}
		}
	}
	if allReady {
		select {
		case <-c.adopted:
		default:
			close(c.adopted)
		}
	}
}

// unknownStatus is status with the phase Unknown because the runtime cannot be reached: the
// runtime cannot tell how the containers are (what the API server shows for a pod on a node
// that stopped reporting).
func unknownStatus(status v1.PodStatus, err error) v1.PodStatus {
	status.Phase = v1.PodUnknown
	status.Reason = ReasonRuntimeUnavailable
	status.Message = err.Error()
	return status
}

// dispatch starts the syncs of pods whose next sync is due and that are not being synced, as
// many as there are free sync workers, the longest due first: a pod that was never synced (due
// since it was admitted) goes before the resyncs of running pods that came due meanwhile, as it
// would in a round that syncs every pod due at its start.
func (c *Controller) dispatch(ctx context.Context) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	free := syncWorkers - c.running
	if free <= 0 {
		return
	}
	type duePod struct {
		uid string
		ps  *podState
	}
	var due []duePod
	for uid, ps := range c.pods {
		if !ps.syncing && !ps.nextSync.After(now) && ((ps.admitted && !ps.finished) || ps.deleting) {
			due = append(due, duePod{uid, ps})
		}
	}
	stdslices.SortFunc(due, func(a, b duePod) int {
		return cmp.Or(a.ps.nextSync.Compare(b.ps.nextSync), cmp.Compare(a.uid, b.uid))
	})
	for _, d := range due[:min(free, len(due))] {
		ps, uid := d.ps, d.uid
		ps.syncing = true
		c.running++
		c.syncs.Go(func() {
			c.syncPod(ctx, uid)
			c.mu.Lock()
			ps.syncing = false
			c.running--
			c.mu.Unlock()
			select {
			case c.done <- struct{}{}:
			default:
			}
		})
	}
}

// maybeCleanupOrphans cleans orphans once every source reported and every admitted pod has its
// slice, so nothing live is ever taken for an orphan.
func (c *Controller) maybeCleanupOrphans(ctx context.Context) {
	c.mu.Lock()
	ready := c.allSourcesReadyLocked() && !c.cleaned && !c.holdingLocked()
	for _, ps := range c.pods {
		if !ready {
			break
		}
		if ps.admitted && !ps.deleting && !ps.finished && ps.slice.Unit == "" {
			ready = false
		}
	}
	c.mu.Unlock()
	if ready && ctx.Err() == nil {
		c.cleanupOrphans(ctx)
	}
}

// holdingLocked reports whether a source reports a problem that may stand for a running pod
// (Problem.Hold): orphans are not judged while it does, since that pod's units would look
// orphaned.
func (c *Controller) holdingLocked() bool {
	for _, p := range c.problems {
		if p.Hold {
			return true
		}
	}
	return false
}

// heldLocked are the pods held problems stand for that no source provides (sorted by
// namespace/name as Pods is): phase Unknown, reason ReasonUnreadable, the problem as message.
func (c *Controller) heldLocked() []v1.Pod {
	known := map[string]bool{}
	for _, ps := range c.pods {
		known[key(ps.desired.Pod)] = true
	}
	var out []v1.Pod
	for _, p := range c.problems {
		ns, name, ok := strings.Cut(p.Pod, "/")
		if !p.Hold || !ok || known[p.Pod] {
			continue
		}
		known[p.Pod] = true
		out = append(out, v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{AnnotationSource: SourceAPI}},
			Status:     v1.PodStatus{Phase: v1.PodUnknown, Reason: ReasonUnreadable, Message: p.Error},
		})
	}
	return out
}

// syncPod brings one pod to its desired state.
func (c *Controller) syncPod(ctx context.Context, uid string) {
	c.mu.Lock()
	ps, ok := c.pods[uid]
	if !ok {
		c.mu.Unlock()
		return
	}
	pod, deleting, grace := ps.desired.Pod, ps.deleting, lifecycle.GracePeriod(ps.desired.Pod)
	if ps.grace != nil {
		grace = *ps.grace
	}
	started := ps.status.StartTime
	// A pod whose containers ended for good, as the runtime showed it before its first sync
	// (slicelet restarted after it finished): finished without a slice of its own again.
	restartedFinished := !deleting && ps.observed && ps.slice.Unit == "" && terminalPhase(ps.status.Phase)
	if ps.finished && !deleting {
		c.mu.Unlock()
		return
	}
	if deleting && !ps.admitted {
		// A rejected pod never got a slice or containers: nothing to stop.
		delete(c.pods, uid)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()

	if deleting {
		err := c.deletePod(ctx, pod, grace)
		c.mu.Lock()
		if err != nil {
			ps.syncErr = err.Error()
			ps.nextSync = c.clock.Now().Add(busyResync)
			c.log.Warn("pod delete failed, retrying", "pod", key(pod), "pod_uid", uid, "error", err)
			c.mu.Unlock()
			return
		}
		var stale []string
		if ps.deleting { // not re-added meanwhile
			delete(c.pods, uid)
			c.changedLocked()
			stale = c.retryResizesLocked()
		}
		c.mu.Unlock()
		c.forgetEvictions(stale)
		return
	}

	if restartedFinished {
		c.finishPod(ctx, ps, pod, grace, true)
		return
	}

	if lifecycle.PastActiveDeadline(pod, started, c.clock.Now()) {
		c.failPod(ctx, ps, pod, grace, lifecycle.ReasonDeadlineExceeded, lifecycle.MessageDeadlineExceeded)
		return
	}

	slice, err := c.slices.EnsurePod(ctx, pod)
	var status v1.PodStatus
	if err == nil {
		status, err = c.rt.SyncPod(ctx, pod, slice)
	}
	if err == nil && terminalPhase(status.Phase) {
		defer c.finishPod(ctx, ps, pod, grace, false)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ps.admitted || ps.deleting {
		// Evicted or deleted while this sync ran: its result must not overwrite that status.
		return
	}
	if ps.slice.Unit == "" && slice.Unit != "" {
		c.changedLocked()
	}
	ps.slice = slice
	if err != nil {
		if ps.syncErr != err.Error() {
			c.log.Warn("pod sync failed", "pod", key(pod), "pod_uid", uid, "error", err)
		}
		ps.syncErr = err.Error()
		ps.nextSync = c.clock.Now().Add(busyResync)
		if errors.Is(err, ErrRuntimeUnavailable) {
			// Nothing is deleted; the next sync after the runtime returns resyncs the pod.
			ps.status = unknownStatus(ps.status, err)
			c.statusLocked()
		}
		return
	}
	if ps.syncErr != "" {
		c.log.Info("pod sync recovered", "pod", key(pod), "pod_uid", uid)
	}
	ps.syncErr = ""
	if ps.status.Phase != status.Phase {
		c.log.Info("pod phase changed", "pod", key(pod), "pod_uid", uid, "phase", string(status.Phase), "slice", slice.Unit)
		c.changedLocked()
	}
	if ps.resize != nil {
		status.Conditions = append(status.Conditions, *ps.resize)
	}
	// The status is the synced pod's: the generation it shows is that pod's, not a newer one
	// that came meanwhile (the kubelet's generateAPIPodStatus, CalculatePodStatusObservedGeneration
	// of the pod its worker synced), so a resize or a spec change shows as observed only with
	// the status that reflects it.
	status.ObservedGeneration = pod.Generation
	if !apiequality.Semantic.DeepEqual(ps.status, status) {
		c.statusLocked()
	}
	ps.status, ps.observed = status, true
	ps.nextSync = c.clock.Now().Add(resyncAfter(pod, status))
	if at := c.rt.NextSync(uid); !at.IsZero() && at.Before(ps.nextSync) {
		ps.nextSync = at
	}
	if at, ok := lifecycle.ActiveDeadline(pod, status.StartTime); ok && at.Before(ps.nextSync) {
		ps.nextSync = at
	}
}

// terminalPhase reports whether a pod in that phase has ended for good.
func terminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}

// finishPod releases what a pod whose containers ended for good still holds on the node, as
// the kubelet's pod workers do once its phase is terminal: SyncTerminatingPod stops whatever
// still runs and its sandboxes (kill: here the runtime's KillPod, needed only when no sync
// of the runtime has done so since slicelet started), and SyncTerminatedPod removes its pod
// cgroup (pkg/kubelet/kubelet.go: pcm.Destroy), so its slice is destroyed. The pod stays,
// with its status, its exited containers and their logs, until it is deleted; it is not
// synced again, and no longer counts for admission or eviction (it is terminal). A failure is
// retried at the next sync.
func (c *Controller) finishPod(ctx context.Context, ps *podState, pod *v1.Pod, grace time.Duration, kill bool) {
	uid := string(pod.UID)
	var err error
	if kill {
		if _, err = c.rt.KillPod(ctx, pod, grace); err != nil {
			err = fmt.Errorf("pod %s: stop containers: %w", key(pod), err)
		}
	}
	if err == nil {
		if err = c.slices.DestroyPod(ctx, uid); err != nil {
			err = fmt.Errorf("pod %s: destroy slice: %w", key(pod), err)
		}
	}
	var stale []string
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.forgetEvictions(stale)
	}()
	if cur, ok := c.pods[uid]; !ok || cur != ps || !ps.admitted || ps.deleting {
		return
	}
	if err != nil {
		c.log.Warn("finished pod not released, retrying", "pod", key(pod), "pod_uid", uid, "error", err)
		ps.nextSync = c.clock.Now().Add(busyResync)
		return
	}
	ps.finished, ps.slice = true, slices.PodSlice{}
	c.changedLocked()
	c.log.Info("pod finished, its slice destroyed", "pod", key(pod), "pod_uid", uid, "phase", string(ps.status.Phase))
	stale = c.retryResizesLocked()
}

// retryResizesLocked allocates the pending resizes again once a pod's resources are free (its
// containers stopped: deleted, or finished), as the kubelet's allocation manager retries them
// when a pod terminated (pkg/kubelet/allocation RetryPendingResizes, TriggerReasonPodTerminated).
// It returns the eviction records reconciling found stale.
func (c *Controller) retryResizesLocked() (staleEvictions []string) {
	for _, ps := range c.pods {
		if ps.resize != nil {
			return c.reconcileDesiredLocked()
		}
	}
	return nil
}

// resyncAfter is how soon a pod needs another sync: soon while anything is in motion, then
// at objectVolumeResync for a pod with object volumes, at steadyResync for the others.
func resyncAfter(pod *v1.Pod, s v1.PodStatus) time.Duration {
	if s.Phase == v1.PodPending {
		return busyResync
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Waiting != nil || (cs.State.Terminated != nil && s.Phase == v1.PodRunning) {
				return busyResync
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil {
			return objectVolumeResync
		}
	}
	return steadyResync
}

// deletePod stops the containers within grace, destroys the slice and forgets the pod.
func (c *Controller) deletePod(ctx context.Context, pod *v1.Pod, grace time.Duration) error {
	uid := string(pod.UID)
	if _, err := c.rt.KillPod(ctx, pod, grace); err != nil {
		return fmt.Errorf("pod %s: stop containers: %w", key(pod), err)
	}
	if err := c.slices.DestroyPod(ctx, uid); err != nil {
		return fmt.Errorf("pod %s: destroy slice: %w", key(pod), err)
	}
	if err := c.rt.Forget(ctx, uid); err != nil {
		return fmt.Errorf("pod %s: forget: %w", key(pod), err)
	}
	c.log.Info("pod deleted", "pod", key(pod), "pod_uid", uid)
	return nil
}

// cleanupOrphans removes pod slices and runtime records that belong to no pod, once every
// source has reported (so a slow source never makes live pods look orphaned).
func (c *Controller) cleanupOrphans(ctx context.Context) {
	c.mu.Lock()
	known := map[string]bool{}
	for uid, ps := range c.pods {
		// A pod that is not admitted (rejected, evicted) has no units: any found are left
		// over (e.g. slicelet was killed between an eviction's record and its stop).
		if ps.admitted || ps.deleting {
			known[uid] = true
		}
	}
	c.mu.Unlock()

	var errs []error
	uids, err := c.rt.PodUIDs(ctx)
	if errors.Is(err, ErrRuntimeUnavailable) {
		// A runtime that is down lists nothing; judging orphans now could destroy the slices
		// of pods whose containers still run. Retry at the next tick.
		c.log.Debug("orphan cleanup postponed: container runtime unavailable", "error", err)
		return
	}
	if err != nil {
		errs = append(errs, err)
	}
	for _, uid := range uids {
		if known[uid] {
			continue
		}
		c.log.Warn("orphan pod containers found, removing them", "pod_uid", uid)
		orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		if _, err := c.rt.KillPod(ctx, orphan, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.rt.Forget(ctx, uid); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.slices.CleanupOrphans(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		c.log.Warn("orphan cleanup incomplete, retrying", "error", err)
		return
	}
	c.mu.Lock()
	c.cleaned = true
	c.mu.Unlock()
}

// view is a pod as the API shows it at now: the manifest with its source annotations and
// status, a deep copy the caller owns.
func (ps *podState) view(now time.Time) v1.Pod {
	return *ps.sharedView(now).DeepCopy()
}

// sharedView is view without the deep copy: the pod's spec, metadata and status share their
// slices, maps and pointers with the controller's record (only the annotations map is the
// view's own), so the caller must not modify it. The record's desired pod and status are
// never changed in place (a change replaces them), so the view stays as it was made.
func (ps *podState) sharedView(now time.Time) *v1.Pod {
	pod := *ps.desired.Pod
	pod.Annotations = make(map[string]string, len(pod.Annotations)+2)
	maps.Copy(pod.Annotations, ps.desired.Pod.Annotations)
	pod.Annotations[AnnotationSource] = ps.desired.Source
	if ps.desired.Source == SourceFile {
		pod.Annotations[AnnotationOrigin] = ps.desired.Origin
	}
	pod.Status = ps.status
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = slices.QOSClass(ps.desired.Pod)
	}
	if ps.deleting {
		t := metav1.NewTime(now)
		pod.DeletionTimestamp = &t
	}
	if ps.syncErr != "" && pod.Status.Message == "" {
		pod.Status.Message = ps.syncErr
	}
	if pod.CreationTimestamp.IsZero() {
		pod.CreationTimestamp = metav1.NewTime(ps.createdAt)
	}
	return &pod
}

// Pods returns every pod the controller knows, sorted by namespace/name: deep copies the
// caller owns.
func (c *Controller) Pods() []v1.Pod {
	out := c.ViewPods()
	for i := range out {
		out[i] = *out[i].DeepCopy()
	}
	return out
}

// ViewPods is Pods without the deep copies: each pod shares its spec, metadata and status with
// the controller's record (the annotations map excepted), so the caller must not modify
// anything below the top-level fields of the pod and its ObjectMeta, Spec and Status. It is
// for readers that list or count every pod often (the API's lists and watches, STATUS=),
// which would otherwise deep-copy every pod each time.
func (c *Controller) ViewPods() []v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]v1.Pod, 0, len(c.pods))
	now := c.clock.Now()
	for _, ps := range c.pods {
		out = append(out, *ps.sharedView(now))
	}
	out = append(out, c.heldLocked()...)
	stdslices.SortFunc(out, func(a, b v1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Pod returns one pod by namespace and name; a pod being replaced (same name, new UID) is
// reported as its newest version.
func (c *Controller) Pod(namespace, name string) (v1.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *podState
	for _, ps := range c.pods {
		if ps.desired.Pod.Namespace == namespace && ps.desired.Pod.Name == name {
			if best == nil || (best.deleting && !ps.deleting) {
				best = ps
			}
		}
	}
	if best == nil {
		for _, p := range c.heldLocked() {
			if p.Namespace == namespace && p.Name == name {
				return p, true
			}
		}
		return v1.Pod{}, false
	}
	return best.view(c.clock.Now()), true
}

// Counts returns the number of pods per QoS class and per phase (admitted and rejected alike).
func (c *Controller) Counts() (byQOS map[v1.PodQOSClass]int, byPhase map[v1.PodPhase]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byQOS, byPhase = map[v1.PodQOSClass]int{}, map[v1.PodPhase]int{}
	for _, ps := range c.pods {
		byQOS[slices.QOSClass(ps.desired.Pod)]++
		byPhase[ps.status.Phase]++
	}
	return byQOS, byPhase
}

// EventRecorder receives the controller's pod events: the Eventf of client-go's
// record.EventRecorder (the worker's recorder, internal/pods/events.Store, satisfies it).
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// EventAdmitted is the reason of the event of a pod admission admitted.
const EventAdmitted = "Admitted"

// event records an event about pod when a recorder is set.
func (c *Controller) event(pod *v1.Pod, eventType, reason, format string, args ...any) {
	if c.events != nil {
		c.events.Eventf(pod, eventType, reason, format, args...)
	}
}

// SetDeletionGrace makes the next deletion of the pod namespace/name stop its containers within
// grace instead of its terminationGracePeriodSeconds (kubectl delete --grace-period); call it
// before the pod's source deletes it. It reports whether there is such a pod.
func (c *Controller) SetDeletionGrace(namespace, name string, grace time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	found := false
	for _, ps := range c.pods {
		if p := ps.desired.Pod; p.Namespace == namespace && p.Name == name {
			ps.grace, found = &grace, true
		}
	}
	return found
}
