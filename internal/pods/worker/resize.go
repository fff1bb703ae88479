package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// resourcesKey is a run's cgroup configuration, as compared across syncs.
func resourcesKey(r *runtimeapi.LinuxContainerResources) string {
	s := fmt.Sprintf("shares=%d quota=%d period=%d memory=%d", r.GetCpuShares(), r.GetCpuQuota(), r.GetCpuPeriod(), r.GetMemoryLimitInBytes())
	for _, k := range slices.Sorted(maps.Keys(r.GetUnified())) {
		s += " " + k + "=" + r.GetUnified()[k]
	}
	return s
}

// noteResources records the cgroup configuration of run id of a container and writes the
// record (after a resize).
func (w *Worker) noteResources(e *entry, uid, name, id string, r *runtimeapi.LinuxContainerResources) error {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	cr := e.rec.container(name)
	cr.ResourcesOf, cr.Resources = id, resourcesKey(r)
	return w.saveRecord(uid, e.rec)
}

// noteCreated records what a new run id of container c was created with: its cgroup
// configuration and image. The record is written with its next write: lost with a crash
// before it, the run is taken as it is.
func (w *Worker) noteCreated(e *entry, c *v1.Container, id string, r *runtimeapi.LinuxContainerResources) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	cr := e.rec.container(c.Name)
	cr.ResourcesOf, cr.Resources = id, resourcesKey(r)
	cr.ImageOf, cr.Image = id, c.Image
}

// liveContainer is a container of the spec with the view of its current run.
type liveContainer struct {
	name string
	spec *v1.Container
	view *containerView
}

// liveResizable are the resizable containers of pod (regular containers and sidecars) whose
// current run the runtime has, created or running, by name.
func liveResizable(pod *v1.Pod, o *observed) []liveContainer {
	var out []liveContainer
	for _, name := range slices.Sorted(maps.Keys(o.byName)) {
		v := o.byName[name]
		c, _ := lifecycle.ContainerByName(pod, name)
		if c == nil || v.stale || v.current.fromRecord || !lifecycle.Resizable(pod, name) ||
			(v.current.State != StateRunning && v.current.State != StateCreated) {
			continue
		}
		out = append(out, liveContainer{name: name, spec: c, view: v})
	}
	return out
}

// resizeContainers brings the cgroup configuration of every live resizable container (regular
// containers and sidecars) to what its spec asks for now, in place (UpdateContainerResources,
// as the kubelet's doPodResizeAction; the pod slice was resized by the slice manager before
// the sync, from the same allocated pod). A run created before its configuration was recorded
// is taken as it is. A failed update is tried again at the next sync.
func (w *Worker) resizeContainers(ctx context.Context, pod *v1.Pod, e *entry, o *observed) {
	uid := string(pod.UID)
	for _, lc := range liveResizable(pod, o) {
		name, c, v := lc.name, lc.spec, lc.view
		want := w.containerResources(pod, c)
		e.recMu.Lock()
		cr := e.rec.container(name)
		of, have := cr.ResourcesOf, cr.Resources
		e.recMu.Unlock()
		if of == v.current.ID && have == resourcesKey(want) {
			continue
		}
		if of == v.current.ID {
			if err := w.rt.UpdateContainerResources(ctx, v.current.ID, want); err != nil {
				w.log.Warn("container resize failed, retrying", "pod_uid", uid, "container", name, "error", err)
				continue
			}
			w.log.Info("container resized", "pod_uid", uid, "container", name, "container_id", v.current.ID, "resources", resourcesKey(want))
		}
		if err := w.noteResources(e, uid, name, v.current.ID, want); err != nil {
			w.log.Warn("container resources not recorded", "pod_uid", uid, "container", name, "error", err)
		}
	}
}

// restartChanged stops every live resizable container (regular containers and sidecars) whose
// run was created from another image than the spec names now, to be started again whatever
// the restart policy, as the kubelet's computePodActions does when a container's hash (its
// name and image, kubecontainer.HashContainer) changed. It reports whether it stopped any.
func (w *Worker) restartChanged(ctx context.Context, pod *v1.Pod, e *entry, o *observed) (bool, error) {
	uid := string(pod.UID)
	var errs []error
	stopped := false
	for _, lc := range liveResizable(pod, o) {
		name, c, v := lc.name, lc.spec, lc.view
		e.recMu.Lock()
		cr := e.rec.container(name)
		changed := cr.ImageOf == v.current.ID && cr.Image != c.Image
		if cr.ImageOf != v.current.ID && v.current.Hash != "" {
			// A run this worker has no record of (the kubelet's, adopted): its hash decides,
			// as the kubelet's containerChanged compares it.
			changed = v.current.Hash != strconv.FormatUint(ContainerHash(c), 16)
		}
		if changed {
			cr.RestartOf = v.current.ID
			errs = append(errs, w.saveRecord(uid, e.rec))
		}
		e.recMu.Unlock()
		if !changed {
			continue
		}
		stopped = true
		w.log.Info("container definition changed, restarting it", "pod_uid", uid, "container", name, "image", c.Image)
		errs = append(errs, w.killContainer(ctx, pod, v.current.ContainerStatus, lifecycle.GracePeriod(pod),
			fmt.Sprintf("Container %s definition changed, will be restarted", name)))
	}
	return stopped, errors.Join(errs...)
}
