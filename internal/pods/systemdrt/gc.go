package systemdrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	stdslices "slices"
	"strings"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/units"
)

// Container GC (gc.ContainerRuntime). A container instance is one unit; its ID is the unit
// name (ContainerID without "systemd://"; both are accepted). What GC frees here is systemd's:
// a dead instance whose main process failed stays loaded as a failed unit until it is reset.
// Its output stays in the journal, which slicelet cannot delete (journald rotates it by its
// own limits, journald.conf SystemMaxUse=/MaxRetentionSec=), so `slicectl logs --previous`
// keeps working for an instance GC removed. There are no per-instance files: the pod's
// state.json holds at most the current and the previous instance of each container, and
// emptyDir volumes belong to the pod. The runtime has no images and no sandboxes.

var _ gc.ContainerRuntime = (*Runtime)(nil)

// ErrInstanceRunning is returned when container GC asks to remove or stop the instance a
// container is running as; only the pod's own lifecycle (SyncPod, KillPod) ends it.
var ErrInstanceRunning = errors.New("container instance is running")

// ListContainers lists every container instance of every pod, running or dead: the current
// and previous instance of each container in the pods' records (minus those GC removed and
// those recorded but never started), plus any other container unit systemd still has loaded
// (older failed instances not reset yet, units of pods without a record). A pod whose SyncPod
// or KillPod is in progress is skipped this time, rather than waiting for its grace period.
func (r *Runtime) ListContainers(ctx context.Context) ([]gc.Container, error) {
	list, err := r.sd.List(ctx, allUnitsPattern)
	if err != nil {
		return nil, fmt.Errorf("container units: %w", err)
	}
	byPod := map[string][]units.UnitStatus{}
	for _, u := range list {
		if id, ok := parseUnit(u.Name); ok && u.LoadState != "not-found" {
			byPod[id.UID] = append(byPod[id.UID], u)
		}
	}
	uids, err := r.stateDirUIDs()
	if err != nil {
		return nil, err
	}
	for uid := range byPod {
		uids[uid] = true
	}
	var out []gc.Container
	for _, uid := range stdslices.Sorted(maps.Keys(uids)) {
		cs, ok := r.podContainers(ctx, uid, byPod[uid])
		if !ok {
			r.log.Debug("pod busy, its containers are not listed for gc this time", "pod_uid", uid)
			continue
		}
		out = append(out, cs...)
	}
	return out, nil
}

// podContainers lists one pod's instances; ok is false when the pod is busy. A pod whose
// record cannot be read is left out (and logged): without it the running instance is unknown.
func (r *Runtime) podContainers(ctx context.Context, uid string, loadedUnits []units.UnitStatus) ([]gc.Container, bool) {
	e := r.entry(uid)
	if !e.mu.TryLock() {
		return nil, false
	}
	rec, err := r.record(e, uid)
	var out []gc.Container
	listed := map[string]bool{}
	if err == nil {
		for name, cr := range rec.Containers {
			for _, in := range []*instance{cr.Previous, cr.Current} {
				if in == nil || in.GCRemoved || !in.Created && !in.Done {
					continue
				}
				state := gc.StateRunning
				if in.Done {
					state = gc.StateExited
				}
				out = append(out, gc.Container{ID: in.Unit, PodUID: uid, Name: name, State: state, CreatedAt: createdAt(in)})
				listed[in.Unit] = true
			}
		}
	}
	e.mu.Unlock()
	if err != nil {
		// RemoveContainer could not read it either; the node's other pods are not held up by
		// it, and SyncPod reports the same error for the pod.
		r.log.Warn("pod state unreadable, its containers are not listed for gc", "pod_uid", uid, "error", err)
		return nil, true
	}
	for _, u := range loadedUnits {
		if listed[u.Name] {
			continue
		}
		id, _ := parseUnit(u.Name)
		c := gc.Container{ID: u.Name, PodUID: uid, Name: id.Container, State: gc.StateRunning}
		if unitEnded(u) {
			c.State = gc.StateExited
			// Not in the record: its age comes from systemd, or it counts as oldest.
			if info, err := r.sd.Properties(ctx, u.Name); err == nil {
				c.CreatedAt = info.ExecMainStartTimestamp
			}
		}
		out = append(out, c)
	}
	stdslices.SortFunc(out, func(a, b gc.Container) int {
		ai, _ := parseUnit(a.ID)
		bi, _ := parseUnit(b.ID)
		return cmp.Or(cmp.Compare(ai.Container, bi.Container), cmp.Compare(ai.N, bi.N))
	})
	return out, true
}

// createdAt is an instance's creation time for GC's age: when systemd accepted the unit, or
// for older records when its process started (or ended).
func createdAt(in *instance) time.Time {
	switch {
	case !in.CreatedAt.IsZero():
		return in.CreatedAt
	case !in.StartedAt.IsZero():
		return in.StartedAt
	}
	return in.FinishedAt
}

// unitEnded reports whether a container unit's main process has ended: failed, inactive, or
// active/exited (RemainAfterExit) awaiting its stop.
func unitEnded(u units.UnitStatus) bool {
	switch u.ActiveState {
	case "failed", "inactive":
		return true
	case "active":
		return u.SubState == "exited"
	}
	return false
}

// parseContainerID accepts a unit name or a ContainerID ("systemd://<unit>").
func parseContainerID(id string) (string, unitID, error) {
	unit := strings.TrimPrefix(id, "systemd://")
	ref, ok := parseUnit(unit)
	if !ok {
		return "", unitID{}, fmt.Errorf("container %q: not a container unit of the systemd runtime", id)
	}
	return unit, ref, nil
}

// withInstance parses a container ID, locks its pod's entry, reads the pod's record and runs f
// with them (the lock held).
func (r *Runtime) withInstance(id string, f func(unit string, ref unitID, rec *podRecord) error) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	e := r.entry(ref.UID)
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := r.record(e, ref.UID)
	if err != nil {
		return err
	}
	return f(unit, ref, rec)
}

// RemoveContainer removes a dead instance: its unit is stopped if still loaded and active
// (exited, awaiting its stop), reset if failed, and the instance is marked removed in the
// pod's record (see instance.GCRemoved) so it is no longer listed. An instance that is running
// (or recorded and about to start) is refused with ErrInstanceRunning. A unit that is gone
// already is success. Journal entries are not deleted (see the package comment above).
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	return r.withInstance(id, func(unit string, ref unitID, rec *podRecord) error {
		return r.removeInstance(ctx, unit, ref, rec)
	})
}

// removeInstance is RemoveContainer with the pod's entry locked and its record read.
func (r *Runtime) removeInstance(ctx context.Context, unit string, ref unitID, rec *podRecord) error {
	var in *instance
	if cr := rec.Containers[ref.Container]; cr != nil {
		for _, x := range []*instance{cr.Current, cr.Previous} {
			if x != nil && x.N == ref.N {
				in = x
			}
		}
	}
	if in != nil && !in.Done {
		return fmt.Errorf("container %s: instance %d (%s): %w", ref.Container, ref.N, unit, ErrInstanceRunning)
	}
	list, err := r.sd.List(ctx, unit)
	if err != nil {
		return fmt.Errorf("container %s: unit %s: %w", ref.Container, unit, err)
	}
	for _, u := range list {
		if u.Name != unit || u.LoadState == "not-found" {
			continue
		}
		if !unitEnded(u) {
			// Not in the record as running, yet its process runs (a unit adopted after the
			// record was read, or of a pod without a record): never GC's to end.
			return fmt.Errorf("container %s: unit %s is %s/%s: %w", ref.Container, unit, u.ActiveState, u.SubState, ErrInstanceRunning)
		}
		if u.ActiveState == "active" {
			// RemainAfterExit keeps an ended unit active until stopped; stopping it also
			// kills what its main process left behind.
			if err := r.sd.Stop(ctx, unit); err != nil {
				return fmt.Errorf("container %s: %w", ref.Container, err)
			}
		}
		// systemd keeps a failed unit loaded until it is reset; a stopped one may end failed
		// too (a stop timeout), so the reset follows the stop.
		if err := r.sd.ResetFailed(ctx, unit); err != nil {
			return fmt.Errorf("container %s: %w", ref.Container, err)
		}
	}
	if in != nil && !in.GCRemoved {
		rec.locked(func() { in.GCRemoved = true })
		if err := r.saveRecord(rec); err != nil {
			return err
		}
	}
	r.log.Info("dead container instance removed", "pod_uid", ref.UID, "container", ref.Container, "unit", unit, "instance", ref.N)
	return nil
}

// StopContainer stops a container unit that is not the running instance of a container (GC
// asks only for instances in unknown state, which this runtime does not report): its
// processes are killed and the unit stopped. The running instance is refused with
// ErrInstanceRunning; the pod's lifecycle stops it with its grace period.
func (r *Runtime) StopContainer(ctx context.Context, id string) error {
	return r.withInstance(id, func(unit string, ref unitID, rec *podRecord) error {
		return r.stopInstance(ctx, unit, ref, rec)
	})
}

// stopInstance is StopContainer with the pod's entry locked and its record read.
func (r *Runtime) stopInstance(ctx context.Context, unit string, ref unitID, rec *podRecord) error {
	if cr := rec.Containers[ref.Container]; cr != nil && cr.Current != nil && cr.Current.N == ref.N && !cr.Current.Done {
		return fmt.Errorf("container %s: instance %d (%s): %w", ref.Container, ref.N, unit, ErrInstanceRunning)
	}
	if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", ref.Container, err)
	}
	if err := r.sd.Stop(ctx, unit); err != nil {
		return fmt.Errorf("container %s: %w", ref.Container, err)
	}
	return nil
}

// ListSandboxes returns nil, nil: the systemd runtime has no sandboxes (a pod is its slice).
func (r *Runtime) ListSandboxes(context.Context) ([]gc.Sandbox, error) { return nil, nil }

// errNoSandboxes is what the sandbox calls return: ListSandboxes never lists one.
var errNoSandboxes = fmt.Errorf("systemd runtime: no sandboxes: %w", errors.ErrUnsupported)

// StopSandbox fails: the systemd runtime has no sandboxes.
func (r *Runtime) StopSandbox(_ context.Context, id string) error {
	return fmt.Errorf("sandbox %q: %w", id, errNoSandboxes)
}

// RemoveSandbox fails: the systemd runtime has no sandboxes.
func (r *Runtime) RemoveSandbox(_ context.Context, id string) error {
	return fmt.Errorf("sandbox %q: %w", id, errNoSandboxes)
}
