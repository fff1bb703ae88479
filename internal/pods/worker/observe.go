package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// instance is one run of a container as the worker sees it.
type instance struct {
	ContainerStatus
	// fromRecord: the runtime no longer has it (container GC removed it); it is the worker's
	// record of its end.
	fromRecord bool
}

// containerView is what was observed of one container of the pod's spec.
type containerView struct {
	current, previous *instance
	// stale marks an init container whose current run ended in a sandbox other than the one
	// the pod runs in (or gets) now: the pod starts over in a new sandbox, so the container
	// runs again, as the next run, without back-off (the kubelet purges the init containers of
	// the old sandbox, so none is found to back off from).
	stale bool
}

// observed is a pod as the runtime shows it (the kubelet's kubecontainer.PodStatus) with the
// worker's own record.
type observed struct {
	pod *v1.Pod
	rec *podRecord
	// sandbox is the current sandbox: the ready one with the highest attempt; nil when none.
	sandbox   *Sandbox
	sandboxes []Sandbox
	startTime time.Time
	byName    map[string]*containerView
	// stray are live containers to stop: not in the spec, or in a sandbox that is not ready.
	stray []ContainerStatus
	// created are containers of the spec created in the current sandbox but never started.
	created []ContainerStatus
	seen    map[string]State
	// initialized: the pod's regular init containers are done in the current sandbox.
	initialized bool
	// startOver: there is no ready sandbox and the pod gets a new one, in which it starts over;
	// when false without a ready sandbox, nothing starts.
	startOver bool
	holds     map[string]*lifecycle.Hold
	// podIPs are the current sandbox's IPs for a pod with a network of its own (none on the
	// host's network, where the status gives the node's).
	podIPs []string
}

// inspect returns the status of each listed container: from the cache while the container's
// state has not changed since it was read (and its start time is known), else from the runtime,
// a few at a time. A container gone meanwhile is left out.
func (w *Worker) inspect(ctx context.Context, ctrs []Container) ([]ContainerStatus, error) {
	out := make([]ContainerStatus, len(ctrs))
	found := make([]bool, len(ctrs))
	var todo []int
	w.mu.Lock()
	for i, c := range ctrs {
		if st, ok := w.status[c.ID]; ok && st.State == c.State && !(st.State == StateRunning && st.StartedAt.IsZero()) {
			out[i], found[i] = st, true
			continue
		}
		todo = append(todo, i)
	}
	w.mu.Unlock()
	errs := make([]error, len(ctrs))
	sem := make(chan struct{}, inspectWorkers)
	var wg sync.WaitGroup
	for _, i := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st, err := w.rt.ContainerStatus(ctx, ctrs[i].ID)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				errs[i] = fmt.Errorf("container %s (%s): status: %w", ctrs[i].Name, ctrs[i].ID, err)
			default:
				// What the listing knows and a status may not carry (the CRI's has no sandbox).
				st.Container = mergeContainer(st.Container, ctrs[i])
				if st.State == StateExited {
					if st.FinishedAt.IsZero() {
						st.FinishedAt = w.clock.Now()
					}
					if st.StartedAt.IsZero() {
						st.StartedAt = st.FinishedAt
					}
					if st.Reason == "" {
						st.Reason = lifecycle.ReasonCompleted
						if st.ExitCode != 0 {
							st.Reason = lifecycle.ReasonError
						}
					}
				}
				out[i], found[i] = st, true
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := out[:0]
	w.mu.Lock()
	for i := range ctrs {
		if found[i] {
			w.status[out[i].ID] = out[i]
			res = append(res, out[i])
		}
	}
	w.mu.Unlock()
	return res, nil
}

// mergeContainer fills what c lacks from the listing l of the same container.
func mergeContainer(c, l Container) Container {
	c.SandboxID = cmp.Or(c.SandboxID, l.SandboxID)
	c.PodUID = cmp.Or(c.PodUID, l.PodUID)
	c.Name = cmp.Or(c.Name, l.Name)
	c.ImageRef = cmp.Or(c.ImageRef, l.ImageRef)
	c.Foreign = c.Foreign || l.Foreign
	if c.CreatedAt.IsZero() {
		c.CreatedAt = l.CreatedAt
	}
	return c
}

// inspectWorkers bounds the concurrent ContainerStatus calls of one inspection.
const inspectWorkers = 16

// inSpec reports whether the pod has a container (init or regular) of that name.
func inSpec(pod *v1.Pod, name string) bool {
	c, _ := lifecycle.ContainerByName(pod, name)
	return c != nil
}

// list lists the containers, then the sandboxes, of the pod with that UID (of every pod for
// ""). Containers first: a runtime that adopts a container it finds without a sandbox (the
// systemd runtime after its state was lost) has the sandbox by the time it is listed.
func (w *Worker) list(ctx context.Context, uid string) ([]Sandbox, []Container, error) {
	ctrs, err := w.rt.ListContainers(ctx, uid)
	if err != nil {
		return nil, nil, err
	}
	sbs, err := w.rt.ListPodSandbox(ctx, uid)
	if err != nil {
		return nil, nil, err
	}
	return sbs, ctrs, nil
}

// observe lists the pod's sandboxes and containers and builds what was observed. With act,
// containers of the spec that were created in the current sandbox but never started (slicelet
// stopped between CreateContainer and StartContainer) are started, so adoption never creates a
// second run. killed is set for a pod being stopped for good: it gets no new sandbox. Call with
// e.mu held.
func (w *Worker) observe(ctx context.Context, pod *v1.Pod, e *entry, act, killed bool) (*observed, error) {
	uid := string(pod.UID)
	sbs, ctrs, err := w.listPod(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	o, err := w.observeFrom(ctx, pod, e, sbs, ctrs, killed)
	if err != nil || !act || len(o.created) == 0 {
		return o, err
	}
	for _, c := range o.created {
		w.log.Info("starting a container that was created but not started", "pod_uid", uid, "container", c.Name, "container_id", c.ID)
		if err := w.rt.StartContainer(ctx, c.ID); err != nil {
			if errors.Is(err, pods.ErrRuntimeUnavailable) {
				return nil, err
			}
			w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %v", err)
			w.log.Warn("container could not be started", "pod_uid", uid, "container", c.Name, "container_id", c.ID, "error", err)
			continue
		}
		w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventStarted, messageStarted)
	}
	ctrs, err = w.rt.ListContainers(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return w.observeFrom(ctx, pod, e, sbs, ctrs, killed)
}

// observeFrom builds what was observed of the pod from listings of its sandboxes and
// containers: per container of the spec its current run (the highest attempt) and the one
// before, completed from the worker's record where the runtime no longer has them; whether the
// pod is initialized and which init containers must run again. Runs that ended since the record
// last saw them are recorded (and reported as events).
func (w *Worker) observeFrom(ctx context.Context, pod *v1.Pod, e *entry, sbs []Sandbox, ctrs []Container, killed bool) (*observed, error) {
	statuses, err := w.inspect(ctx, ctrs)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	w.withTerminationMessages(ctx, pod, statuses)
	o := &observed{pod: pod, sandboxes: sbs, byName: map[string]*containerView{}, seen: map[string]State{}, holds: map[string]*lifecycle.Hold{}}
	ready := map[string]bool{}
	for i := range sbs {
		sb := &sbs[i]
		if !sb.CreatedAt.IsZero() && (o.startTime.IsZero() || sb.CreatedAt.Before(o.startTime)) {
			o.startTime = sb.CreatedAt
		}
		if !sb.Ready {
			continue
		}
		ready[sb.ID] = true
		if o.sandbox == nil || sb.Attempt > o.sandbox.Attempt || (sb.Attempt == o.sandbox.Attempt && sb.CreatedAt.After(o.sandbox.CreatedAt)) {
			o.sandbox = sb
		}
	}
	if o.sandbox != nil && !w.hostNetwork(pod) {
		o.podIPs = w.sandboxIPs(ctx, pod, o.sandbox.ID)
	}
	for _, c := range ctrs {
		o.seen[c.ID] = c.State
	}
	byName := map[string][]*instance{}
	for _, st := range statuses {
		live := st.State != StateExited
		if live && (!inSpec(pod, st.Name) || !ready[st.SandboxID]) {
			o.stray = append(o.stray, st)
		}
		if !inSpec(pod, st.Name) {
			continue
		}
		if st.State == StateCreated && o.sandbox != nil && st.SandboxID == o.sandbox.ID {
			o.created = append(o.created, st)
		}
		byName[st.Name] = append(byName[st.Name], &instance{ContainerStatus: st})
	}

	e.recMu.Lock()
	defer e.recMu.Unlock()
	rec, err := w.record(e, string(pod.UID))
	if err != nil {
		return nil, err
	}
	o.rec = rec
	changed := false
	for name, list := range byName {
		slices.SortFunc(list, func(a, b *instance) int {
			return cmp.Or(cmp.Compare(b.Attempt, a.Attempt), b.CreatedAt.Compare(a.CreatedAt))
		})
		v := &containerView{current: list[0]}
		if len(list) > 1 {
			v.previous = list[1]
		}
		o.byName[name] = v
		// The newest run that ended is the container's last one for the record.
		for _, in := range list {
			if in.State == StateExited {
				changed = w.noteEnded(pod, rec, in) || changed
				break
			}
		}
	}
	for name, cr := range rec.Containers {
		if !inSpec(pod, name) || cr.Last == nil {
			continue
		}
		last := &instance{ContainerStatus: cr.Last.status(name), fromRecord: true}
		v := o.byName[name]
		switch {
		case v == nil:
			// Every run is gone from the runtime: the record tells how the last one ended.
			o.byName[name] = &containerView{current: last}
		case last.Attempt > v.current.Attempt:
			// The newest run is gone from the runtime (container GC removed it).
			v.previous, v.current = v.current, last
		case v.previous == nil && last.Attempt < v.current.Attempt:
			v.previous = last
		}
	}
	if changed {
		if err := w.saveRecord(string(pod.UID), rec); err != nil {
			return nil, err
		}
	}
	for name, h := range e.waits {
		if inSpec(pod, name) {
			o.holds[name] = &lifecycle.Hold{Reason: h.reason, Message: h.message, Until: h.until}
		}
	}
	w.initProgress(o, killed)
	return o, nil
}

// noteEnded records in as the container's last ended run if it is newer than the one recorded,
// and logs its end. No event: the kubelet records none for a container that exited (its status
// says how; a restart brings BackOff). It reports whether rec changed. Call with recMu held.
func (w *Worker) noteEnded(pod *v1.Pod, rec *podRecord, in *instance) bool {
	cr := rec.container(in.Name)
	if l := cr.Last; l != nil && (l.ID == in.ID || l.Attempt > in.Attempt) {
		return false
	}
	cr.Last = lastOf(in.ContainerStatus)
	w.log.Info("container ended", "pod_uid", string(pod.UID), "container", in.Name, "container_id", in.ID,
		"exit_code", in.ExitCode, "signal", in.Signal, "reason", in.Reason)
	return true
}

// lastOf is the record of a run that ended.
func lastOf(st ContainerStatus) *lastInstance {
	return &lastInstance{
		ID: st.ID, SandboxID: st.SandboxID, Attempt: st.Attempt, ImageRef: st.ImageRef,
		StartedAt: st.StartedAt, FinishedAt: st.FinishedAt,
		ExitCode: st.ExitCode, Signal: st.Signal, Reason: st.Reason, Message: st.Message,
	}
}

// status is the recorded run as a container status.
func (l *lastInstance) status(name string) ContainerStatus {
	return ContainerStatus{
		Container: Container{ID: l.ID, SandboxID: l.SandboxID, Name: name, Attempt: l.Attempt, State: StateExited, ImageRef: l.ImageRef},
		StartedAt: l.StartedAt, FinishedAt: l.FinishedAt,
		ExitCode: l.ExitCode, Signal: l.Signal, Reason: l.Reason, Message: l.Message,
	}
}

// initProgress sets whether the pod is initialized and which init containers must run again,
// as the kubelet's computePodActions does: within a sandbox, init containers never run again
// once they all succeeded or a regular container was created in it; a pod that gets a new
// sandbox (the old one died) starts over, its init containers run again, in order, as their
// next runs. Runs of other sandboxes do not count (the kubelet purges the old sandbox's init
// containers and looks only at the active sandbox's regular containers). A killed pod gets no
// new sandbox.
func (w *Worker) initProgress(o *observed, killed bool) {
	pod := o.pod
	createdIn := func(sbID string) bool {
		for i := range pod.Spec.Containers {
			if v := o.byName[pod.Spec.Containers[i].Name]; v != nil {
				for _, in := range []*instance{v.current, v.previous} {
					if in != nil && (sbID == "" || in.SandboxID == sbID) {
						return true
					}
				}
			}
		}
		return false
	}
	sbID := ""
	switch {
	case o.sandbox != nil:
		sbID = o.sandbox.ID
		o.initialized = o.rec.InitializedIn == sbID || createdIn(sbID)
	case !killed && startsOver(pod, o, len(o.sandboxes) > 0):
		o.startOver = true
	default:
		// No new sandbox: nothing will run again; report what was.
		o.initialized = o.rec.InitializedIn != "" || createdIn("")
		return
	}
	for i := range pod.Spec.InitContainers {
		v := o.byName[pod.Spec.InitContainers[i].Name]
		if v != nil && v.current.State == StateExited && (sbID == "" || v.current.SandboxID != sbID) {
			v.stale = true
		}
	}
}

// startsOver is the kubelet's computePodActions for a pod without a ready sandbox: whether it
// gets a new one (hadSandbox: it had one before), in which it starts over — every init
// container runs again, in order, before the regular containers. It gets none under
// restartPolicy Never once it had a sandbox and a container was created, nor when no regular
// container would start again (under OnFailure, those that succeeded are not) and
// initialization was done (a regular container was created).
func startsOver(pod *v1.Pod, o *observed, hadSandbox bool) bool {
	policy := lifecycle.RestartPolicy(pod)
	if hadSandbox && policy == v1.RestartPolicyNever && len(o.byName) > 0 {
		return false
	}
	for i := range pod.Spec.Containers {
		v := o.byName[pod.Spec.Containers[i].Name]
		succeeded := v != nil && v.current.State == StateExited && v.current.ExitCode == 0
		if policy != v1.RestartPolicyOnFailure || !succeeded {
			return true
		}
	}
	// Every regular container succeeded under OnFailure: they were created, so initialization
	// was done, and none starts again.
	return len(pod.Spec.Containers) == 0
}

// state is where a run stands for the decisions.
func (in *instance) state() lifecycle.State {
	switch in.State {
	case StateExited:
		return lifecycle.StateExited
	case StateRunning:
		if !in.StartedAt.IsZero() {
			return lifecycle.StateRunning
		}
	}
	return lifecycle.StateStarting // created (or unknown), not seen running
}

// view is a run as lifecycle sees it.
func (w *Worker) instanceView(in *instance) *lifecycle.Instance {
	return &lifecycle.Instance{
		N:           int(in.Attempt) + 1,
		ContainerID: w.rt.Type() + "://" + in.ID,
		ImageID:     in.ImageRef,
		StartedAt:   in.StartedAt,
		FinishedAt:  in.FinishedAt,
		ExitCode:    in.ExitCode,
		Signal:      in.Signal,
		Reason:      in.Reason,
		Message:     in.Message,
	}
}

// backoffEntry is the restart back-off entry of a container whose current run is cur: the
// record's, or, when the record has none or cur is a later run than the record's entry was
// advanced for, and cur ended, the one the kubelet would hold for it (lifecycle.Backoff.Adopted:
// its runs were another agent's, the kubelet's while the node had changed agent, or the record
// was lost), so a crash loop taken over keeps its back-off; a run this worker stopped for a
// changed definition has none.
func (w *Worker) backoffEntry(cr *containerRecord, cur *instance) (time.Duration, time.Time) {
	if cr != nil && !cr.BackoffUpdated.IsZero() && (cur == nil || cr.BackoffAttempt == 0 || cur.Attempt <= cr.BackoffAttempt) {
		return cr.Backoff, cr.BackoffUpdated
	}
	if cur == nil || cur.State != StateExited {
		return 0, time.Time{}
	}
	if cr != nil && cr.RestartOf != "" && cr.RestartOf == cur.ID {
		// This worker stopped the run for a changed definition: the kubelet starts the new
		// run in the same sync, with no back-off (computePodActions).
		return 0, time.Time{}
	}
	return w.backoff.Adopted(cur.Attempt, cur.StartedAt)
}

// view is the observed pod as lifecycle sees it. For the decisions (decisions set), a stale
// init container shows as its next run, not created yet, so that Decide starts it in order
// under the next number; for the status it shows its last run, as the kubelet keeps showing the
// terminated state of a purged init container until it runs again.
func (w *Worker) view(o *observed, decisions bool) *lifecycle.Pod {
	obs := &lifecycle.Pod{StartTime: o.startTime, Initialized: o.initialized, Images: w.opts.Images != nil, SandboxReady: o.sandbox != nil,
		Containers: make(map[string]*lifecycle.Container, len(o.byName))}
	for name, v := range o.byName {
		c := &lifecycle.Container{State: v.current.state(), Current: w.instanceView(v.current), Hold: o.holds[name]}
		cr := o.rec.Containers[name]
		c.Backoff, c.BackoffUpdated = w.backoffEntry(cr, v.current)
		if cr != nil {
			c.DefinitionChanged = cr.RestartOf != "" && cr.RestartOf == v.current.ID
		}
		if p := v.previous; p != nil && p.State == StateExited {
			c.Previous = w.instanceView(p)
		}
		if v.stale && decisions {
			c.State, c.Current, c.Previous = lifecycle.StateNone, &lifecycle.Instance{N: int(v.current.Attempt) + 2}, w.instanceView(v.current)
		}
		spec, init := lifecycle.ContainerByName(o.pod, name)
		w.probeVerdicts(spec, v.current, c)
		if decisions && init && c.NotStarted && lifecycle.IsSidecar(spec) {
			// A sidecar holds the next init container back until its startup probe succeeded
			// (the kubelet's computeInitContainerActions).
			c.State = lifecycle.StateStarting
		}
		obs.Containers[name] = c
	}
	for name, h := range o.holds {
		if obs.Containers[name] == nil {
			obs.Containers[name] = &lifecycle.Container{Hold: h}
		}
	}
	return obs
}

// decide is lifecycle.Decide on what was observed; a pod without a ready sandbox that gets no
// new one starts nothing.
func (w *Worker) decide(o *observed, killed bool) lifecycle.Plan {
	p := lifecycle.Decide(o.pod, w.view(o, true), w.clock.Now(), w.backoff, killed)
	if o.sandbox == nil && !o.startOver {
		p.Start = nil
	}
	return p
}

// podStatus is lifecycle.PodStatus on what was observed, with the pod's IPs as the kubelet's
// generateAPIPodStatus gives them (pkg/kubelet/kubelet_pods.go): the node's IPs for a pod on the
// host's network, else its sandbox's (PodSandboxStatus.network), none while it has no sandbox.
func (w *Worker) podStatus(o *observed, p lifecycle.Plan) v1.PodStatus {
	st := lifecycle.PodStatus(o.pod, w.view(o, false), p)
	ips := o.podIPs
	if w.hostNetwork(o.pod) {
		ips = w.opts.NodeIPs
	}
	for i, ip := range ips {
		if i == 0 {
			st.PodIP = ip
		}
		st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
	}
	return st
}
