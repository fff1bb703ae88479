package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/slices"
)

// ErrContainerRunning is returned when container GC asks to stop or remove a container that
// runs: only the pod's own lifecycle (SyncPod, KillPod) ends it.
var ErrContainerRunning = errors.New("container is running")

// ContainerGC is what container GC needs of the runtime (gc.ContainerRuntime), through the
// worker: a dead container that GC removes is first recorded as its container's last run when
// it is the newest, so the pod's restart counts, last termination states and restart decisions
// survive the removal.
func (w *Worker) ContainerGC() gc.ContainerRuntime { return containerGC{w} }

// SandboxGC is what sandbox GC needs (gc.SandboxRuntime); wired only for a runtime whose pods
// have sandboxes of their own (the CRI runtime).
func (w *Worker) SandboxGC() gc.SandboxRuntime { return sandboxGC{w} }

type containerGC struct{ w *Worker }

// gcState maps a container state to gc's.
func gcState(s State) string {
	switch s {
	case StateRunning:
		return gc.StateRunning
	case StateExited:
		return gc.StateExited
	case StateCreated:
		return gc.StateCreated
	}
	return gc.StateUnknown
}

// ListContainers lists every container slicelet created (not another agent's: Foreign), in
// every state, with its pod UID, name, image, sandbox and creation time. It never waits for a
// pod's sync.
func (g containerGC) ListContainers(ctx context.Context) ([]gc.Container, error) {
	ctrs, err := g.w.rt.ListContainers(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]gc.Container, 0, len(ctrs))
	for _, c := range ctrs {
		if c.Foreign {
			continue
		}
		out = append(out, gc.Container{
			ID: c.ID, PodUID: c.PodUID, Name: c.Name, ImageID: c.ImageRef,
			SandboxID: c.SandboxID, State: gcState(c.State), CreatedAt: c.CreatedAt,
		})
	}
	return out, nil
}

// StopContainer stops a container in unknown state within its pod's grace period (30 s when
// the container does not tell); one that runs is refused (ErrContainerRunning), one already
// gone is not an error.
func (g containerGC) StopContainer(ctx context.Context, id string) error {
	st, err := g.w.rt.ContainerStatus(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %s: stop: %w", id, err)
	}
	if st.State == StateRunning {
		return fmt.Errorf("container %s (%s): %w", id, st.Name, ErrContainerRunning)
	}
	grace := st.Grace
	if grace <= 0 {
		grace = defaultGCGrace
	}
	if err := g.w.rt.StopContainer(ctx, id, grace); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("container %s: stop: %w", id, err)
	}
	return nil
}

// defaultGCGrace is the grace period of a container whose pod's is unknown.
const defaultGCGrace = 30 * time.Second

// RemoveContainer removes a container that does not run; one already gone is not an error.
// Its end is recorded first (see ContainerGC). One the runtime cannot inspect is left to the
// runtime's own removal, which refuses what still runs.
func (g containerGC) RemoveContainer(ctx context.Context, id string) error {
	w := g.w
	st, err := w.rt.ContainerStatus(ctx, id)
	if errors.Is(err, ErrNotFound) {
		if err := w.rt.RemoveContainer(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("container %s: remove: %w", id, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %s: remove: %w", id, err)
	}
	if st.State == StateRunning {
		return fmt.Errorf("container %s (%s): %w", id, st.Name, ErrContainerRunning)
	}
	if st.State == StateExited && st.PodUID != "" {
		if ctrs, err := w.rt.ListContainers(ctx, st.PodUID); err == nil {
			for _, c := range ctrs {
				if c.ID == id {
					st.Container = mergeContainer(st.Container, c)
				}
			}
		}
		if err := w.noteRemoved(st); err != nil {
			return fmt.Errorf("container %s: remove: %w", id, err)
		}
	}
	if err := w.rt.RemoveContainer(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("container %s: remove: %w", id, err)
	}
	w.mu.Lock()
	delete(w.status, id)
	delete(w.termination, id)
	w.mu.Unlock()
	return nil
}

// noteRemoved records st as its container's last run if it is newer than the recorded one.
func (w *Worker) noteRemoved(st ContainerStatus) error {
	if err := slices.ValidateUID(st.PodUID); err != nil {
		return err
	}
	e := w.entry(st.PodUID)
	e.recMu.Lock()
	defer e.recMu.Unlock()
	rec, err := w.record(e, st.PodUID)
	if err != nil {
		return err
	}
	cr := rec.container(st.Name)
	if l := cr.Last; l != nil && (l.ID == st.ID || l.Attempt > st.Attempt) {
		return nil
	}
	cr.Last = lastOf(st)
	return w.saveRecord(st.PodUID, rec)
}

type sandboxGC struct{ w *Worker }

// ListSandboxes lists every pod sandbox slicelet created (not another agent's: Foreign), ready
// or not.
func (g sandboxGC) ListSandboxes(ctx context.Context) ([]gc.Sandbox, error) {
	sbs, err := g.w.rt.ListPodSandbox(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]gc.Sandbox, 0, len(sbs))
	for _, sb := range sbs {
		if sb.Foreign {
			continue
		}
		out = append(out, gc.Sandbox{ID: sb.ID, PodUID: sb.PodUID, Ready: sb.Ready, CreatedAt: sb.CreatedAt})
	}
	return out, nil
}

// StopSandbox stops a sandbox; one already gone is not an error.
func (g sandboxGC) StopSandbox(ctx context.Context, id string) error {
	if err := g.w.rt.StopPodSandbox(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("pod sandbox %s: stop: %w", id, err)
	}
	return nil
}

// RemoveSandbox removes a stopped sandbox; one already gone is not an error.
func (g sandboxGC) RemoveSandbox(ctx context.Context, id string) error {
	if err := g.w.rt.RemovePodSandbox(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("pod sandbox %s: remove: %w", id, err)
	}
	return nil
}
