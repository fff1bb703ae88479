package worker

import (
	"context"
	"errors"
	"fmt"
	stdslices "slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// SyncPod makes the pod's containers match its spec inside slice (see pods.Runtime), as the
// kubelet's SyncPod does with computePodActions: it loops observe → decide → act until nothing
// more can start now, so one call starts a pod's sidecars and all its regular containers; a
// regular init container that is still running ends the call (the pod is Pending), and the
// next call continues. Live containers that are not in the spec, or whose sandbox is no longer
// ready, are stopped first; a pod that needs to start a container and has no ready sandbox gets
// a new one (attempt = the highest so far + 1) and starts over in it. Back-offs end at
// NextSync. The pod passed Validate at admission; what depends on the host at start time (a
// command removed since) fails that container (StartError), not the whole pod.
func (w *Worker) SyncPod(ctx context.Context, pod *v1.Pod, slice slices.PodSlice) (v1.PodStatus, error) {
	if err := checkPod(pod); err != nil {
		return v1.PodStatus{}, err
	}
	if slice.Unit == "" {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: no pod slice", pod.Namespace, pod.Name)
	}
	uid := string(pod.UID)
	e := w.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	w.mu.Lock()
	e.probeDue = false
	w.mu.Unlock()
	// Object volumes are written at every sync, so a changed ConfigMap or Secret reaches the
	// running containers (the kubelet's periodic remount).
	var (
		objVols map[string]string
		volErr  error
	)
	if !e.finished {
		objVols, volErr = w.syncObjectVolumes(pod, e)
	}
	var (
		o    *observed
		p    lifecycle.Plan
		vols map[string]string // every volume's host path, once set up for this sync
	)
	for i := 0; ; i++ {
		var err error
		if o, err = w.observe(ctx, pod, e, true, false); err != nil {
			return v1.PodStatus{}, err
		}
		if len(o.stray) > 0 && i == 0 {
			if err := w.stopStray(ctx, pod, o.stray); err != nil {
				return v1.PodStatus{}, err
			}
			if o, err = w.observe(ctx, pod, e, true, false); err != nil {
				return v1.PodStatus{}, err
			}
		}
		if i == 0 {
			w.resizeContainers(ctx, pod, e, o)
			stopped, err := w.restartChanged(ctx, pod, e, o)
			if err != nil {
				return v1.PodStatus{}, err
			}
			if stopped {
				if o, err = w.observe(ctx, pod, e, true, false); err != nil {
					return v1.PodStatus{}, err
				}
			}
		}
		if kills := w.syncProbes(ctx, pod, o); len(kills) > 0 {
			var errs []error
			for _, k := range kills {
				errs = append(errs, w.killContainer(ctx, pod, k.st, k.grace, k.msg))
			}
			if err := errors.Join(errs...); err != nil {
				return v1.PodStatus{}, err
			}
			if o, err = w.observe(ctx, pod, e, true, false); err != nil {
				return v1.PodStatus{}, err
			}
			w.syncProbes(ctx, pod, o)
		}
		p = w.decide(o, false)
		if p.Initialized && o.sandbox != nil && o.rec.InitializedIn != o.sandbox.ID {
			if err := w.setInitialized(e, uid, o.sandbox.ID); err != nil {
				return w.podStatus(o, p), err
			}
		}
		if (len(p.Start) == 0 && len(p.StopSidecars) == 0) || i > len(pod.Spec.InitContainers)+2 {
			break
		}
		var errs []error
		for _, name := range p.StopSidecars {
			if v := o.byName[name]; v != nil && !v.current.fromRecord {
				errs = append(errs, w.stopContainer(ctx, pod, v.current.ContainerStatus, lifecycle.GracePeriod(pod), ""))
			}
		}
		if len(p.Start) > 0 && volErr == nil && vols == nil {
			vols, volErr = w.setUpVolumes(pod, e, objVols)
		}
		if len(p.Start) > 0 && volErr != nil {
			// The kubelet makes no sandbox and starts no container until every volume is
			// mounted: the pod waits in ContainerCreating (FailedMount was reported).
			w.log.Info("containers wait for their volumes", "pod_uid", uid, "error", volErr)
			break
		}
		if len(p.Start) > 0 {
			errs = append(errs, w.startAll(ctx, pod, slice, e, o, p.Start, vols)...)
		}
		if err := errors.Join(errs...); err != nil {
			return w.podStatus(o, p), err
		}
	}
	if p.Done {
		var err error
		if o, err = w.releaseFinished(ctx, pod, e, o); err != nil {
			return w.podStatus(o, p), err
		}
		p = w.decide(o, false)
	}
	w.reportBackOff(pod, e, p)
	w.mu.Lock()
	e.nextSync = p.NextSync
	e.seen = o.seen
	w.mu.Unlock()
	return w.podStatus(o, p), nil
}

// releaseFinished releases what a finished pod (no container of it will run again) still
// holds, as the kubelet does: computePodActions kills a pod with nothing to keep running and
// nothing to start (pkg/kubelet/kuberuntime/kuberuntime_manager.go: KillPod when keepCount and
// ContainersToStart are both zero, or when an init container failed under restartPolicy
// Never), so killPodWithSyncResult stops what still runs (an ephemeral container) and every
// ready sandbox — its pause process, network namespace and IP; and once the pod terminated,
// its volume manager tears its volumes down (an emptyDir's content is removed, a memory-backed
// one's tmpfs unmounted). The exited containers stay, with their logs and exit codes, for the
// status, until the pod is deleted or container GC takes them. The next syncs create no new
// sandbox (startsOver). It returns the pod observed afterwards.
func (w *Worker) releaseFinished(ctx context.Context, pod *v1.Pod, e *entry, o *observed) (*observed, error) {
	uid := string(pod.UID)
	if e.finished {
		return o, nil
	}
	live := 0
	for _, v := range o.byName {
		if !v.current.fromRecord && v.current.State != StateExited {
			live++
		}
	}
	ready := 0
	for _, sb := range o.sandboxes {
		if sb.Ready {
			ready++
		}
	}
	if live > 0 || ready > 0 {
		if _, errs := w.killLocked(ctx, pod, lifecycle.GracePeriod(pod)); len(errs) > 0 {
			return o, errors.Join(errs...)
		}
		w.log.Info("pod finished, its sandbox stopped", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "containers_stopped", live, "sandboxes", ready)
		var err error
		if o, err = w.observe(ctx, pod, e, false, false); err != nil {
			return o, err
		}
	}
	if err := w.releaseVolumes(uid); err != nil {
		return o, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e.finished = true
	return o, nil
}

// setInitialized records the sandbox in which the pod's init containers are done.
func (w *Worker) setInitialized(e *entry, uid, sandboxID string) error {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	e.rec.InitializedIn = sandboxID
	return w.saveRecord(uid, e.rec)
}

// reportBackOff records a BackOff event for every container that starts waiting for its restart
// back-off, once per run (the kubelet reports it at each sync; the pod is synced every second
// while it waits), and the image back-off's events once per back-off.
func (w *Worker) reportBackOff(pod *v1.Pod, e *entry, p lifecycle.Plan) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	for name, wt := range p.Waiting {
		if h := e.waits[name]; wt.Reason == lifecycle.ReasonImagePullBackOff && h != nil && !h.reported {
			// The kubelet's image manager while a pull backs off, and its startContainer
			// (pkg/kubelet/images/image_manager.go, EnsureImageExists; kuberuntime_container.go):
			// once per back-off here.
			h.reported = true
			if c, _ := lifecycle.ContainerByName(pod, name); c != nil {
				w.containerEvent(pod, name, v1.EventTypeNormal, EventBackOff, "Back-off pulling image %q", c.Image)
			}
			w.containerEvent(pod, name, v1.EventTypeWarning, EventFailed, "Error: %s", lifecycle.ReasonImagePullBackOff)
		}
		if wt.Reason != lifecycle.ReasonCrashLoopBackOff {
			delete(e.backOffSeen, name)
			continue
		}
		var attempt uint32
		if cr := e.rec.Containers[name]; cr != nil && cr.Last != nil {
			attempt = cr.Last.Attempt
		}
		if seen, ok := e.backOffSeen[name]; ok && seen == attempt {
			continue
		}
		e.backOffSeen[name] = attempt
		w.containerEvent(pod, name, v1.EventTypeWarning, EventBackOff, "Back-off restarting failed container %s in pod %s", name, podName(pod))
	}
}

// podName is the kubelet's format.Pod: name_namespace(uid).
func podName(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// stopStray stops live containers that are not in the pod's spec (the kubelet kills them) or
// whose sandbox is no longer ready (the kubelet kills the pod and starts it in a new sandbox).
func (w *Worker) stopStray(ctx context.Context, pod *v1.Pod, stray []ContainerStatus) error {
	var errs []error
	for _, st := range stray {
		why := "its sandbox is gone"
		if !inSpec(pod, st.Name) {
			why = "not in the pod's spec"
		}
		errs = append(errs, w.stopContainer(ctx, pod, st, lifecycle.GracePeriod(pod), why))
	}
	return errors.Join(errs...)
}

// stopContainer stops one container within grace (the runtime sends the stop signal, then
// SIGKILL), reporting it as the kubelet's killContainer does: with no message of its caller's,
// the event says "Stopping container NAME" (pkg/kubelet/kuberuntime/kuberuntime_container.go);
// why, when given, is logged. A container that is gone already is not an error.
func (w *Worker) stopContainer(ctx context.Context, pod *v1.Pod, st ContainerStatus, grace time.Duration, why string) error {
	if why != "" {
		w.log.Info("stopping a container: "+why, "pod_uid", string(pod.UID), "container", st.Name, "container_id", st.ID)
	}
	return w.killContainer(ctx, pod, st, grace, "Stopping container "+st.Name)
}

// killContainer is the kubelet's killContainer: a Killing event with msg, then the stop.
func (w *Worker) killContainer(ctx context.Context, pod *v1.Pod, st ContainerStatus, grace time.Duration, msg string) error {
	w.containerEvent(pod, st.Name, v1.EventTypeNormal, EventKilling, "%s", msg)
	grace = w.preStop(ctx, pod, st, grace)
	w.log.Info("stopping container", "pod_uid", string(pod.UID), "container", st.Name, "container_id", st.ID, "grace", grace)
	if err := w.rt.StopContainer(ctx, st.ID, grace); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("pod %s/%s: container %s: stop: %w", pod.Namespace, pod.Name, st.Name, err)
	}
	return nil
}

// runSandbox creates the pod's sandbox in its slice, attempt = the highest so far + 1.
func (w *Worker) runSandbox(ctx context.Context, pod *v1.Pod, slice string, o *observed) (string, *runtimeapi.PodSandboxConfig, error) {
	attempt := uint32(0)
	for _, sb := range o.sandboxes {
		attempt = max(attempt, sb.Attempt+1)
	}
	if len(o.sandboxes) > 0 {
		w.log.Info("pod sandbox changed, the pod starts over in a new one", "pod_uid", string(pod.UID), "pod", pod.Namespace+"/"+pod.Name)
		w.podEvent(pod, v1.EventTypeNormal, EventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	}
	cfg, err := w.SandboxConfig(pod, slice, attempt)
	var handler string
	if err == nil {
		handler, err = w.runtimeHandler(pod)
	}
	if err == nil {
		var id string
		if id, err = w.rt.RunPodSandbox(ctx, cfg, handler); err == nil {
			w.log.Info("pod sandbox started", "pod_uid", string(pod.UID), "pod", pod.Namespace+"/"+pod.Name, "slice", slice, "sandbox_id", id, "attempt", attempt, "runtime_handler", handler)
			return id, cfg, nil
		}
	}
	if !errors.Is(err, pods.ErrRuntimeUnavailable) {
		w.podEvent(pod, v1.EventTypeWarning, EventFailedCreatePodSandBox, "Failed to create pod sandbox: %v", err)
	}
	return "", nil, fmt.Errorf("pod %s/%s: run pod sandbox in %s: %w", pod.Namespace, pod.Name, slice, err)
}

// runtimeHandler is the CRI runtime handler of the pod's RuntimeClass: "" without one; for a
// pod of cluster mode the RuntimeClass's handler from the API server (the kubelet's
// LookupRuntimeHandler); the other pods cannot name one (validation refuses the field).
func (w *Worker) runtimeHandler(pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	switch {
	case name == nil || *name == "":
		return "", nil
	case !fromCluster(pod) || w.opts.Cluster == nil:
		return "", fmt.Errorf("runtimeClassName %q: no API server to look it up", *name)
	}
	return w.opts.Cluster.RuntimeHandler(*name)
}

// startAll starts the containers of one plan step (the kubelet's startContainer for each):
// several at once, as nothing orders the containers of one step, with vols the host paths of
// the pod's volumes (setUpVolumes). An image that cannot be pulled or a container that cannot
// be created holds the container back with back-off (ErrImagePull, CreateContainerError); a
// start failure leaves an exited container (StartError) to which the restart policy applies.
func (w *Worker) startAll(ctx context.Context, pod *v1.Pod, slice slices.PodSlice, e *entry, o *observed, acts []lifecycle.StartAction, vols map[string]string) []error {
	var sbID string
	var sbCfg *runtimeapi.PodSandboxConfig
	if o.sandbox != nil {
		var err error
		sbID = o.sandbox.ID
		if sbCfg, err = w.SandboxConfig(pod, slice.Unit, o.sandbox.Attempt); err != nil {
			return []error{fmt.Errorf("pod %s/%s: sandbox configuration: %w", pod.Namespace, pod.Name, err)}
		}
	} else {
		var err error
		if sbID, sbCfg, err = w.runSandbox(ctx, pod, slice.Unit, o); err != nil {
			return []error{err}
		}
	}
	if !w.hostNetwork(pod) {
		// The Downward API's status.podIP(s) of the containers about to start (the kubelet
		// reads them from the sandbox's status before it creates them).
		ips := o.podIPs
		if o.sandbox == nil {
			ips = w.sandboxIPs(ctx, pod, sbID)
		}
		e.recMu.Lock()
		e.podIPs = ips
		e.recMu.Unlock()
	}
	// The restart back-off advances for every container that restarts (kubelet: the back-off
	// entry is updated when the restart is attempted).
	if err := w.advanceBackoff(e, pod, o, acts); err != nil {
		return []error{err}
	}
	errs := make([]error, len(acts))
	var wg sync.WaitGroup
	for i, a := range acts {
		wg.Go(func() {
			errs[i] = w.startContainer(ctx, pod, e, sbID, sbCfg, a, vols)
		})
	}
	wg.Wait()
	return errs
}

// advanceBackoff moves the back-off of every restarting container on (flowcontrol.Backoff.Next).
func (w *Worker) advanceBackoff(e *entry, pod *v1.Pod, o *observed, acts []lifecycle.StartAction) error {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	changed := false
	for _, a := range acts {
		v := o.byName[a.Container]
		if v == nil || v.stale || v.current.State != StateExited {
			continue
		}
		cr := e.rec.container(a.Container)
		delay, updated := w.backoffEntry(cr, v.current)
		cr.Backoff, cr.BackoffUpdated = w.backoff.Next(delay, updated, v.current.FinishedAt)
		cr.BackoffAttempt = v.current.Attempt + 1
		changed = true
	}
	if !changed {
		return nil
	}
	return w.saveRecord(string(pod.UID), e.rec)
}

// startContainer creates and starts run a.N of a container: its image first (with images),
// then CreateContainer and StartContainer, each reported as the kubelet reports it.
func (w *Worker) startContainer(ctx context.Context, pod *v1.Pod, e *entry, sbID string, sbCfg *runtimeapi.PodSandboxConfig, a lifecycle.StartAction, vols map[string]string) error {
	uid := string(pod.UID)
	c, _ := lifecycle.ContainerByName(pod, a.Container)
	if msg := ephemeralHold(pod, c.Name); msg != "" {
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %s", msg)
		w.hold(e, c.Name, lifecycle.ReasonCreateContainerConfigError, msg)
		w.log.Warn("ephemeral container refused", "pod_uid", uid, "container", c.Name, "error", msg)
		return nil
	}
	imageRef := ""
	if w.opts.Images != nil {
		ref, reason, err := w.ensureImage(ctx, pod, c, sbCfg)
		if errors.Is(err, pods.ErrRuntimeUnavailable) {
			return err
		}
		if err != nil {
			// The kubelet's startContainer records the image manager's error by its name
			// (kuberuntime_container.go: "Error: ErrImagePull").
			w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %s", reason)
			w.hold(e, c.Name, reason, holdMessage(reason, err))
			w.log.Warn("container image not available", "pod_uid", uid, "container", c.Name, "image", c.Image, "reason", reason, "error", err)
			return nil
		}
		imageRef = ref
		// The kubelet verifies runAsNonRoot against the image's user before it creates the
		// container (kuberuntime_container.go, generateContainerConfig).
		uid, user, err := w.opts.Images.ImageUser(ctx, &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image})
		if errors.Is(err, pods.ErrRuntimeUnavailable) {
			return err
		}
		if err == nil {
			err = lifecycle.VerifyRunAsNonRoot(pod, c, uid, user)
		}
		if err != nil {
			w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %v", err)
			w.hold(e, c.Name, lifecycle.ReasonCreateContainerConfigError, err.Error())
			w.log.Warn("container configuration refused", "pod_uid", string(pod.UID), "container", c.Name, "error", err)
			return nil
		}
	}
	cfg, err := w.ContainerConfig(pod, c, uint32(a.N-1), imageRef, vols)
	if err == nil {
		err = w.applyDevices(ctx, pod, c, cfg)
	}
	if cerr := (configError{}); errors.As(err, &cerr) {
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %v", cerr)
		w.hold(e, c.Name, lifecycle.ReasonCreateContainerConfigError, cerr.Error())
		w.log.Warn("container configuration not available", "pod_uid", uid, "container", c.Name, "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	id, err := w.rt.CreateContainer(ctx, sbID, cfg, sbCfg)
	if errors.Is(err, pods.ErrRuntimeUnavailable) {
		return fmt.Errorf("pod %s/%s: container %s: create: %w", pod.Namespace, pod.Name, c.Name, err)
	}
	if err != nil {
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %v", err)
		w.hold(e, c.Name, lifecycle.ReasonCreateContainerError, err.Error())
		w.log.Warn("container could not be created", "pod_uid", uid, "container", c.Name, "error", err)
		return nil
	}
	w.unhold(e, c.Name)
	w.noteCreated(e, c, id, cfg.GetLinux().GetResources())
	w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventCreated, messageCreated)
	if err := w.rt.StartContainer(ctx, id); err != nil {
		if errors.Is(err, pods.ErrRuntimeUnavailable) {
			return fmt.Errorf("pod %s/%s: container %s: start: %w", pod.Namespace, pod.Name, c.Name, err)
		}
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: %v", err)
		w.log.Warn("container could not be started", "pod_uid", uid, "container", c.Name, "container_id", id, "error", err)
		return nil
	}
	w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventStarted, messageStarted)
	w.log.Info("container started", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "container_id", id, "instance", a.N)
	w.postStart(ctx, pod, c, id, sbID)
	return nil
}

// hold records a failed pull or create: the container waits with back-off (Initial, doubling,
// at most Max) before the next attempt.
func (w *Worker) hold(e *entry, name, reason, msg string) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	d := w.backoff.Initial
	if h := e.waits[name]; h != nil {
		d = min(2*h.delay, w.backoff.Max)
	}
	e.waits[name] = &hold{reason: reason, message: msg, delay: d, until: w.clock.Now().Add(d)}
}

func (w *Worker) unhold(e *entry, name string) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	delete(e.waits, name)
}

// KillPod stops every container of the pod within grace (see pods.Runtime): the regular and
// init containers (and any container that is not in the spec) concurrently, then the sidecars
// with what is left of grace, each with its stop signal and SIGKILL when its time is up; then
// the pod's sandboxes; then, when all of that succeeded, its volumes (releaseVolumes). It
// returns the final status. Nothing restarts a killed pod's containers.
func (w *Worker) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error) {
	if err := checkPod(pod); err != nil {
		return v1.PodStatus{}, err
	}
	uid := string(pod.UID)
	e := w.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	w.probes.Keep(uid, nil)
	stopped, errs := w.killLocked(ctx, pod, grace)
	if err := errors.Join(errs...); errors.Is(err, pods.ErrRuntimeUnavailable) {
		return v1.PodStatus{}, err
	}
	o, err := w.observe(ctx, pod, e, false, true)
	if err != nil {
		return v1.PodStatus{}, errors.Join(append(errs, err)...)
	}
	if len(errs) == 0 {
		// Nothing of the pod runs any more: its volumes are torn down, as the kubelet's
		// volume manager does once a pod terminated.
		if err := w.releaseVolumes(uid); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	w.mu.Lock()
	e.nextSync = time.Time{}
	e.seen = o.seen
	w.mu.Unlock()
	w.log.Info("pod stopped", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "containers", stopped)
	return w.podStatus(o, w.decide(o, true)), errors.Join(errs...)
}

// killLocked is the kubelet's killPodWithSyncResult: every live container of the pod stopped
// within grace — the regular, init and ephemeral ones (and any not in the spec) concurrently,
// then the sidecars with what is left of grace — then every ready sandbox stopped. It returns
// the number of containers stopped. Call with e.mu held.
func (w *Worker) killLocked(ctx context.Context, pod *v1.Pod, grace time.Duration) (int, []error) {
	uid := string(pod.UID)
	ctrs, err := w.rt.ListContainers(ctx, uid)
	if err != nil {
		return 0, []error{fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)}
	}
	var first, last []ContainerStatus
	for _, c := range ctrs {
		if c.State == StateExited {
			continue
		}
		st := ContainerStatus{Container: c}
		if spec, init := lifecycle.ContainerByName(pod, c.Name); init && lifecycle.IsSidecar(spec) {
			last = append(last, st)
		} else {
			first = append(first, st)
		}
	}
	deadline := w.clock.Now().Add(grace)
	var errs []error
	for _, group := range [][]ContainerStatus{first, last} {
		left := max(deadline.Sub(w.clock.Now()), 0)
		gerrs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, st := range group {
			why := ""
			if !inSpec(pod, st.Name) {
				why = "not in the pod's spec"
			}
			wg.Go(func() { gerrs[i] = w.stopContainer(ctx, pod, st, left, why) })
		}
		wg.Wait()
		errs = append(errs, gerrs...)
	}
	stopped := len(first) + len(last)
	if err := errors.Join(errs...); errors.Is(err, pods.ErrRuntimeUnavailable) {
		return stopped, []error{err}
	}
	sbs, err := w.rt.ListPodSandbox(ctx, uid)
	if err != nil {
		return stopped, append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	for _, sb := range sbs {
		if !sb.Ready {
			continue
		}
		if err := w.rt.StopPodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: stop sandbox %s: %w", pod.Namespace, pod.Name, sb.ID, err))
		}
	}
	return stopped, stdslices.DeleteFunc(errs, func(err error) bool { return err == nil })
}
