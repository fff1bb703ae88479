package crirt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	stdslices "slices"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// observed is a pod as the runtime lists it.
type observed struct {
	rec *podRecord
	// sandbox is the current sandbox: the ready one with the highest attempt; nil when none.
	sandbox   *runtimeapi.PodSandbox
	sandboxes []*runtimeapi.PodSandbox
	// stray are live containers to stop: not in the spec, or in a sandbox that is not ready.
	stray []*instance
	seen  map[string]runtimeapi.ContainerState
	// startOver: there is no ready sandbox and the pod gets a new one, in which it starts over
	// (startsOver); when false without a ready sandbox, nothing starts.
	startOver bool
}

func managedSelector(uid string) map[string]string {
	sel := map[string]string{LabelManaged: "true"}
	if uid != "" {
		sel[LabelPodUID] = uid
	}
	return sel
}

func (r *Runtime) listSandboxes(ctx context.Context, uid string) ([]*runtimeapi.PodSandbox, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListPodSandboxResponse, error) {
		return r.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector(uid)}})
	})
	if err != nil {
		return nil, fmt.Errorf("pod sandboxes: list: %w", err)
	}
	return resp.Items, nil
}

func (r *Runtime) listContainers(ctx context.Context, uid string) ([]*runtimeapi.Container, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managedSelector(uid)}})
	})
	if err != nil {
		return nil, fmt.Errorf("containers: list: %w", err)
	}
	return resp.Containers, nil
}

// inspect returns the instance of a listed container: from the cache when the container's
// state has not changed since it was read, else from ContainerStatus. (nil, nil) when the
// container is gone.
func (r *Runtime) inspect(ctx context.Context, c *runtimeapi.Container) (*instance, error) {
	r.mu.Lock()
	cached := r.final[c.Id]
	r.mu.Unlock()
	if cached != nil && cached.State == c.State {
		in := *cached
		return &in, nil
	}
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("container %s (%s): status: %w", c.Metadata.GetName(), c.Id, err)
	}
	s := resp.Status
	if s == nil {
		return nil, fmt.Errorf("container %s (%s): status: the runtime returned none", c.Metadata.GetName(), c.Id)
	}
	in := &instance{
		N:         int(c.Metadata.GetAttempt()) + 1,
		ID:        c.Id,
		SandboxID: c.PodSandboxId,
		State:     s.State,
		CreatedAt: unixNano(s.CreatedAt),
		StartedAt: unixNano(s.StartedAt),
		ImageRef:  s.ImageRef,
	}
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		in.Done = true
		in.FinishedAt = unixNano(s.FinishedAt)
		in.ExitCode, in.Reason, in.Message = s.ExitCode, s.Reason, s.Message
		if in.FinishedAt.IsZero() {
			in.FinishedAt = r.now()
		}
		if in.StartedAt.IsZero() {
			in.StartedAt = in.FinishedAt
		}
		if in.Reason == "" {
			in.Reason = lifecycle.ReasonCompleted
			if in.ExitCode != 0 {
				in.Reason = lifecycle.ReasonError
			}
		}
	}
	r.mu.Lock()
	cp := *in
	r.final[c.Id] = &cp
	r.mu.Unlock()
	return in, nil
}

func unixNano(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// observe rebuilds the pod's record from the runtime: its sandboxes, and per container the
// instance with the highest attempt (current) and the one before it. Containers of a current
// sandbox that were created but never started (slicelet stopped between Create and Start) are
// started now, so adoption never creates a second instance. killed is set for a pod being
// stopped for good: it gets no new sandbox. Call with e.mu held.
func (r *Runtime) observe(ctx context.Context, pod *v1.Pod, e *podEntry, killed bool) (*observed, error) {
	uid := string(pod.UID)
	sbs, err := r.listSandboxes(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctrs, err := r.listContainers(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	o := &observed{rec: &podRecord{UID: uid, Containers: map[string]*containerRecord{}}, sandboxes: sbs, seen: map[string]runtimeapi.ContainerState{}}
	ready := map[string]bool{}
	for _, sb := range sbs {
		if t := unixNano(sb.CreatedAt); !t.IsZero() && (o.rec.StartTime.IsZero() || t.Before(o.rec.StartTime)) {
			o.rec.StartTime = t
		}
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		ready[sb.Id] = true
		if o.sandbox == nil || sb.Metadata.GetAttempt() > o.sandbox.Metadata.GetAttempt() ||
			(sb.Metadata.GetAttempt() == o.sandbox.Metadata.GetAttempt() && sb.CreatedAt > o.sandbox.CreatedAt) {
			o.sandbox = sb
		}
	}
	byName := map[string][]*instance{}
	for _, c := range ctrs {
		name := c.Labels[LabelContainerName]
		if name == "" {
			name = c.Metadata.GetName()
		}
		o.seen[c.Id] = c.State
		if c.State == runtimeapi.ContainerState_CONTAINER_CREATED && o.sandbox != nil && c.PodSandboxId == o.sandbox.Id && inSpec(pod, name) {
			r.log.Info("starting a container that was created but not started", "pod_uid", uid, "container", name, "container_id", c.Id)
			if _, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StartContainerResponse, error) {
				return r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.Id})
			}); err != nil {
				if errors.Is(err, errRuntimeUnavailable) {
					return nil, err
				}
				r.log.Warn("container could not be started", "pod_uid", uid, "container", name, "container_id", c.Id, "error", err)
			}
			c.State = runtimeapi.ContainerState_CONTAINER_UNKNOWN // read it again
		}
		in, err := r.inspect(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if in == nil {
			continue
		}
		live := !in.Done
		if live && (!inSpec(pod, name) || !ready[c.PodSandboxId]) {
			o.stray = append(o.stray, in)
		}
		if !inSpec(pod, name) {
			continue
		}
		byName[name] = append(byName[name], in)
	}
	for name, list := range byName {
		stdslices.SortFunc(list, func(a, b *instance) int {
			return cmp.Or(cmp.Compare(b.N, a.N), b.CreatedAt.Compare(a.CreatedAt))
		})
		cr := o.rec.container(name)
		cr.Current = list[0]
		if len(list) > 1 {
			cr.Previous = list[1]
		}
		if bo, ok := e.backoff[name]; ok {
			cr.Backoff, cr.BackoffUpdated = bo.Delay, bo.Updated
		}
	}
	for name, w := range e.waits {
		if inSpec(pod, name) {
			o.rec.container(name).Wait = w
		}
	}
	initProgress(pod, e, o, byName, killed)
	return o, nil
}

// initProgress sets whether the pod is initialized and which init containers must run again,
// as the kubelet's computePodActions does: within a sandbox, init containers never run again
// once they all succeeded or a regular container was created in it; a pod that gets a new
// sandbox (the old one died) starts over, its init containers run again, in order, under the
// next instance numbers. Instances of other sandboxes do not count (the kubelet purges the old
// sandbox's init containers and looks only at the active sandbox's regular containers). A
// killed pod gets no new sandbox.
func initProgress(pod *v1.Pod, e *podEntry, o *observed, byName map[string][]*instance, killed bool) {
	createdIn := func(sbID string) bool {
		for i := range pod.Spec.Containers {
			for _, in := range byName[pod.Spec.Containers[i].Name] {
				if sbID == "" || in.SandboxID == sbID {
					return true
				}
			}
		}
		return false
	}
	sbID := ""
	switch {
	case o.sandbox != nil:
		sbID = o.sandbox.Id
		o.rec.Initialized = e.initializedIn == sbID || createdIn(sbID)
	case !killed && startsOver(pod, o.rec, len(o.sandboxes) > 0):
		o.startOver = true
		o.rec.Initialized = false
	default:
		// No new sandbox: nothing will run again; report what was.
		o.rec.Initialized = e.initializedIn != "" || createdIn("")
		return
	}
	for i := range pod.Spec.InitContainers {
		cr := o.rec.Containers[pod.Spec.InitContainers[i].Name]
		if cr != nil && cr.Current != nil && cr.Current.Done && (sbID == "" || cr.Current.SandboxID != sbID) {
			cr.Stale = true
		}
	}
}

// inSpec reports whether the pod has a container (init or regular) of that name.
func inSpec(pod *v1.Pod, name string) bool {
	c, _ := lifecycle.ContainerByName(pod, name)
	return c != nil
}

// SyncPod makes the pod's containers match its spec inside slice (see pods.Runtime): it loops
// observe → decide → act until nothing more can start now. A pod that needs to start a
// container and has no ready sandbox gets a new one (attempt = the highest so far + 1).
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, slice slices.PodSlice) (v1.PodStatus, error) {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if errs := r.Validate(pod); len(errs) > 0 {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, errs.ToAggregate())
	}
	if slice.Unit == "" {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, errNoSlice)
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.conn.ready(); err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := r.loadBackoff(e, uid); err != nil {
		return v1.PodStatus{}, err
	}
	var (
		o *observed
		p lifecycle.Plan
	)
	for i := 0; ; i++ {
		var err error
		o, err = r.observe(ctx, pod, e, false)
		if err != nil {
			return v1.PodStatus{}, err
		}
		if len(o.stray) > 0 && i == 0 {
			if err := r.stopStray(ctx, pod, o.stray); err != nil {
				return v1.PodStatus{}, err
			}
			if o, err = r.observe(ctx, pod, e, false); err != nil {
				return v1.PodStatus{}, err
			}
		}
		p = decide(pod, o.rec, r.now(), r.backoff, false)
		if o.sandbox == nil && !o.startOver {
			// The kubelet makes no new sandbox for this pod (startsOver): nothing starts.
			p.Start = nil
		}
		if p.Initialized && o.sandbox != nil {
			e.initializedIn = o.sandbox.Id
		}
		if (len(p.Start) == 0 && len(p.StopSidecars) == 0) || i > len(pod.Spec.InitContainers)+2 {
			break
		}
		var errs []error
		for _, name := range p.StopSidecars {
			if cur := o.rec.Containers[name].Current; cur != nil {
				c, _ := lifecycle.ContainerByName(pod, name)
				errs = append(errs, r.stopContainer(ctx, pod, c.Name, cur.ID, lifecycle.GracePeriod(pod)))
			}
		}
		if len(p.Start) > 0 {
			errs = append(errs, r.startAll(ctx, pod, slice, e, o, p.Start))
		}
		if err := errors.Join(errs...); err != nil {
			return buildStatus(pod, o.rec, p), err
		}
	}
	r.mu.Lock()
	e.nextSync = p.NextSync
	e.seen = o.seen
	r.mu.Unlock()
	return buildStatus(pod, o.rec, p), nil
}

// stopStray stops live containers that are not in the pod's spec (the kubelet kills them) or
// whose sandbox is no longer ready (the kubelet kills the pod and starts it in a new sandbox).
func (r *Runtime) stopStray(ctx context.Context, pod *v1.Pod, stray []*instance) error {
	var errs []error
	for _, in := range stray {
		r.log.Info("stopping a container that is not in the pod's spec or whose sandbox is gone", "pod_uid", string(pod.UID), "container_id", in.ID)
		errs = append(errs, r.stopContainer(ctx, pod, "", in.ID, lifecycle.GracePeriod(pod)))
	}
	return errors.Join(errs...)
}

// runSandbox creates the pod's sandbox in its slice.
func (r *Runtime) runSandbox(ctx context.Context, pod *v1.Pod, slice string, sbs []*runtimeapi.PodSandbox) (string, error) {
	attempt := uint32(0)
	for _, sb := range sbs {
		attempt = max(attempt, sb.Metadata.GetAttempt()+1)
	}
	if err := os.MkdirAll(r.podLogDir(pod), 0o755); err != nil {
		return "", fmt.Errorf("pod %s/%s: log directory: %w", pod.Namespace, pod.Name, err)
	}
	cfg := r.sandboxConfig(pod, slice, attempt)
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.RunPodSandboxResponse, error) {
		return r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	})
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: run pod sandbox in %s: %w", pod.Namespace, pod.Name, slice, err)
	}
	r.log.Info("pod sandbox started", "pod_uid", string(pod.UID), "pod", pod.Namespace+"/"+pod.Name, "slice", slice, "sandbox_id", resp.PodSandboxId, "attempt", attempt)
	return resp.PodSandboxId, nil
}

// startAll starts the containers of one plan step, one after the other as the kubelet does.
// A pull or create failure holds the container back with back-off (ErrImagePull,
// CreateContainerError); a start failure leaves an exited container (StartError) to which
// the restart policy applies.
func (r *Runtime) startAll(ctx context.Context, pod *v1.Pod, slice slices.PodSlice, e *podEntry, o *observed, acts []lifecycle.StartAction) error {
	uid := string(pod.UID)
	sbID := ""
	if o.sandbox != nil {
		sbID = o.sandbox.Id
	} else {
		if len(o.sandboxes) > 0 {
			r.log.Info("pod sandbox changed, the pod starts over in a new one", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name)
		}
		id, err := r.runSandbox(ctx, pod, slice.Unit, o.sandboxes)
		if err != nil {
			return err
		}
		sbID = id
	}
	attempt := uint32(0)
	if o.sandbox != nil {
		attempt = o.sandbox.Metadata.GetAttempt()
	} else {
		for _, sb := range o.sandboxes {
			attempt = max(attempt, sb.Metadata.GetAttempt()+1)
		}
	}
	sbCfg := r.sandboxConfig(pod, slice.Unit, attempt)
	vols, err := r.prepareVolumes(pod)
	if err != nil {
		return err
	}
	for _, a := range acts {
		c, _ := lifecycle.ContainerByName(pod, a.Container)
		cr := o.rec.container(c.Name)
		if cur := cr.Current; cur != nil && cur.Done && !cr.Stale {
			bo := e.backoff[c.Name]
			delay, updated := r.backoff.Next(bo.Delay, bo.Updated, cur.FinishedAt)
			e.backoff[c.Name] = backoffEntry{Delay: delay, Updated: updated}
			if err := r.saveBackoff(e, uid); err != nil {
				return err
			}
		}
		ref, reason, err := r.ensureImage(ctx, pod, c, sbCfg)
		if errors.Is(err, errRuntimeUnavailable) {
			return err
		}
		if err != nil {
			r.hold(e, c.Name, reason, err.Error())
			r.log.Warn("container image not available", "pod_uid", uid, "container", c.Name, "image", c.Image, "reason", reason, "error", err)
			continue
		}
		cfg, err := r.containerConfig(pod, c, a.N, ref, vols)
		if err != nil {
			return err
		}
		created, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.CreateContainerResponse, error) {
			return r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: cfg, SandboxConfig: sbCfg})
		})
		if errors.Is(err, errRuntimeUnavailable) {
			return fmt.Errorf("pod %s/%s: container %s: create: %w", pod.Namespace, pod.Name, c.Name, err)
		}
		if err != nil {
			r.hold(e, c.Name, lifecycle.ReasonCreateContainerError, err.Error())
			r.log.Warn("container could not be created", "pod_uid", uid, "container", c.Name, "error", err)
			continue
		}
		delete(e.waits, c.Name)
		_, err = call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StartContainerResponse, error) {
			return r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
		})
		if errors.Is(err, errRuntimeUnavailable) {
			return fmt.Errorf("pod %s/%s: container %s: start: %w", pod.Namespace, pod.Name, c.Name, err)
		}
		if err != nil {
			r.log.Warn("container could not be started", "pod_uid", uid, "container", c.Name, "container_id", created.ContainerId, "error", err)
			continue
		}
		r.log.Info("container started", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "container_id", created.ContainerId, "instance", a.N)
	}
	return nil
}

// hold records a failed pull or create: the container waits with back-off (Initial, doubling,
// at most Max) before the next attempt.
func (r *Runtime) hold(e *podEntry, name, reason, msg string) {
	d := r.backoff.Initial
	if w := e.waits[name]; w != nil {
		d = min(2*w.Delay, r.backoff.Max)
	}
	e.waits[name] = &waitErr{Reason: reason, Message: msg, Delay: d, Until: r.now().Add(d)}
}

// ensureImage makes the container's image present per its pull policy (the kubelet's
// EnsureImageExists) and returns its reference; on failure also the waiting reason.
func (r *Runtime) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig) (string, string, error) {
	policy := pullPolicy(c)
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	})
	if err != nil {
		return "", lifecycle.ReasonErrImagePull, fmt.Errorf("image %q: status: %w", c.Image, err)
	}
	present := st.Image != nil && st.Image.Id != ""
	if present && policy != v1.PullAlways {
		return st.Image.Id, "", nil
	}
	if !present && policy == v1.PullNever {
		return "", lifecycle.ReasonErrImageNeverPull, fmt.Errorf("container image %q is not present with pull policy of Never", c.Image)
	}
	r.log.Info("pulling image", "pod_uid", string(pod.UID), "container", c.Name, "image", c.Image, "policy", string(policy))
	pulled, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.PullImageResponse, error) {
		return r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, SandboxConfig: sbCfg})
	})
	if err != nil {
		return "", lifecycle.ReasonErrImagePull, fmt.Errorf("image %q: pull: %w", c.Image, err)
	}
	return pulled.ImageRef, "", nil
}

// stopContainer stops one container within grace (the runtime sends the stop signal, then
// SIGKILL). A container that is already gone is not an error.
func (r *Runtime) stopContainer(ctx context.Context, pod *v1.Pod, name, id string, grace time.Duration) error {
	secs := int64((grace + time.Second - 1) / time.Second)
	_, err := call(ctx, r, grace, func(ctx context.Context) (*runtimeapi.StopContainerResponse, error) {
		return r.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: secs})
	})
	if err != nil && !isNotFound(err) {
		if name == "" {
			name = id
		}
		return fmt.Errorf("pod %s/%s: container %s: stop: %w", pod.Namespace, pod.Name, name, err)
	}
	return nil
}

// KillPod stops every container of the pod within grace (see pods.Runtime): the regular and
// init containers concurrently, then the sidecars; then the pod's sandboxes. It returns the
// final status.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error) {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.conn.ready(); err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctrs, err := r.listContainers(ctx, uid)
	if err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	sidecar := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		if lifecycle.IsSidecar(&pod.Spec.InitContainers[i]) {
			sidecar[pod.Spec.InitContainers[i].Name] = true
		}
	}
	var first, last []*runtimeapi.Container
	for _, c := range ctrs {
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		if sidecar[c.Labels[LabelContainerName]] {
			last = append(last, c)
		} else {
			first = append(first, c)
		}
	}
	deadline := r.now().Add(grace)
	var errs []error
	for _, group := range [][]*runtimeapi.Container{first, last} {
		left := max(deadline.Sub(r.now()), 0)
		gerrs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, c := range group {
			wg.Go(func() { gerrs[i] = r.stopContainer(ctx, pod, c.Labels[LabelContainerName], c.Id, left) })
		}
		wg.Wait()
		errs = append(errs, gerrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return v1.PodStatus{}, err
	}
	sbs, err := r.listSandboxes(ctx, uid)
	if err != nil {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, sb := range sbs {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if err := r.StopSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	o, err := r.observe(ctx, pod, e, true)
	if err != nil {
		errs = append(errs, err)
		return v1.PodStatus{}, errors.Join(errs...)
	}
	r.mu.Lock()
	e.nextSync = time.Time{}
	e.seen = o.seen
	r.mu.Unlock()
	r.log.Info("pod stopped", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "containers", len(first)+len(last))
	return buildStatus(pod, o.rec, decide(pod, o.rec, r.now(), r.backoff, true)), errors.Join(errs...)
}

// Forget drops everything about a deleted pod: its containers and sandboxes in the runtime
// (stopped first if they still run), its log directory, its back-off record and emptyDir
// volumes. hostPath volumes are never touched.
func (r *Runtime) Forget(ctx context.Context, uid string) error {
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.conn.ready(); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	ctrs, err := r.listContainers(ctx, uid)
	if err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	var errs []error
	for _, c := range ctrs {
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			if err := r.StopContainer(ctx, c.Id); err != nil {
				errs = append(errs, err)
			}
		}
		if err := r.RemoveContainer(ctx, c.Id); err != nil {
			errs = append(errs, err)
		}
	}
	sbs, err := r.listSandboxes(ctx, uid)
	if err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	for _, sb := range sbs {
		if err := r.StopSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.RemoveSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	dirs, _ := filepath.Glob(filepath.Join(r.opts.LogRoot, "*_*_"+uid))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("pod %s: log directory: %w", uid, err)
		}
	}
	if err := os.RemoveAll(r.podDir(uid)); err != nil {
		return fmt.Errorf("pod %s: state: %w", uid, err)
	}
	r.mu.Lock()
	delete(r.pods, uid)
	for _, c := range ctrs {
		delete(r.final, c.Id)
	}
	r.mu.Unlock()
	r.log.Info("pod forgotten", "pod_uid", uid)
	return nil
}

// PodUIDs lists, sorted, the pods that have sandboxes or containers slicelet created in the
// runtime, or a record in the state dir.
func (r *Runtime) PodUIDs(ctx context.Context) ([]string, error) {
	set := map[string]bool{}
	sbs, err := r.listSandboxes(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if uid := sb.Labels[LabelPodUID]; uid != "" {
			set[uid] = true
		}
	}
	ctrs, err := r.listContainers(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, c := range ctrs {
		if uid := c.Labels[LabelPodUID]; uid != "" {
			set[uid] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(r.opts.StateDir, "pods"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && slices.ValidateUID(e.Name()) == nil {
			set[e.Name()] = true
		}
	}
	out := make([]string, 0, len(set))
	for uid := range set {
		if slices.ValidateUID(uid) == nil {
			out = append(out, uid)
		}
	}
	sort.Strings(out)
	return out, nil
}

// NextSync returns when SyncPod must run again for the pod at the latest, because a back-off
// ends then; zero when none is pending.
func (r *Runtime) NextSync(uid string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.pods[uid]; e != nil {
		return e.nextSync
	}
	return time.Time{}
}

// Relist is the kubelet's PLEG relist: one ListContainers, compared with what the last sync of
// each known pod saw. It returns, sorted, the UIDs of known pods whose containers changed state,
// appeared or vanished, and of pods whose back-off has ended.
func (r *Runtime) Relist(ctx context.Context) ([]string, error) {
	ctrs, err := r.listContainers(ctx, "")
	if err != nil {
		return nil, err
	}
	current := map[string]map[string]runtimeapi.ContainerState{}
	for _, c := range ctrs {
		uid := c.Labels[LabelPodUID]
		if current[uid] == nil {
			current[uid] = map[string]runtimeapi.ContainerState{}
		}
		current[uid][c.Id] = c.State
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for uid, e := range r.pods {
		due := !e.nextSync.IsZero() && !now.Before(e.nextSync)
		if due || (e.seen != nil && !maps.Equal(e.seen, current[uid])) {
			out = append(out, uid)
		}
	}
	sort.Strings(out)
	return out, nil
}
