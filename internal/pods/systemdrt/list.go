package systemdrt

import (
	"context"
	"errors"
	"fmt"
	stdslices "slices"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// ListContainers lists the runs of the pod's containers, or of every pod's for "", from one
// listing of the container units: a unit without a run in the record (slicelet stopped between
// starting it and recording that, or the state dir was lost) is adopted; a started run whose
// unit is gone ended unobserved (ContainerStatusUnknown). A run whose unit ended is listed
// exited; ContainerStatus records how.
func (r *Runtime) ListContainers(ctx context.Context, podUID string) ([]worker.Container, error) {
	pattern := allUnitsPattern
	if podUID != "" {
		if err := slices.ValidateUID(podUID); err != nil {
			return nil, err
		}
		pattern = podPattern(podUID)
	}
	listedAt := r.listings.Add(1)
	list, err := r.sd.List(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("container units: %w", err)
	}
	byPod := map[string][]units.UnitStatus{}
	for _, u := range list {
		if id, ok := parseUnit(u.Name); ok && u.LoadState != "not-found" && (podUID == "" || id.UID == podUID) {
			byPod[id.UID] = append(byPod[id.UID], u)
		}
	}
	uids := []string{podUID}
	if podUID == "" {
		if uids, err = r.podUIDs(); err != nil {
			return nil, err
		}
		for uid := range byPod {
			if !stdslices.Contains(uids, uid) {
				uids = append(uids, uid)
			}
		}
	}
	var out []worker.Container
	var errs []error
	var ended []string
	for _, uid := range uids {
		err := r.locked(uid, func(e *podEntry) error {
			cs, stop, err := r.listPod(e, uid, byPod[uid], listedAt)
			out = append(out, cs...)
			ended = append(ended, stop...)
			return err
		})
		errs = append(errs, r.skipUnreadable(podUID, uid, err))
	}
	for _, unit := range ended {
		// A run whose end was recorded before its unit was stopped (slicelet stopped in
		// between): what its main process left behind dies now.
		if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			r.log.Debug("killing leftovers of an ended container failed", "unit", unit, "error", err)
		}
		if err := r.sd.Stop(ctx, unit); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// listPod reconciles a pod's record with its loaded units, from listing number listedAt, and lists its
// runs; it returns the units of runs that ended and were recorded but are still active, to be
// stopped. Call with the entry locked.
func (r *Runtime) listPod(e *podEntry, uid string, loadedUnits []units.UnitStatus, listedAt uint64) ([]worker.Container, []string, error) {
	if e.rec == nil && len(loadedUnits) == 0 {
		return nil, nil, nil
	}
	changed := false
	if e.rec == nil {
		e.rec = newPodRecord(uid)
		changed = true
	}
	rec := e.rec
	now := r.clock.Now()
	byName := make(map[string]units.UnitStatus, len(loadedUnits))
	for _, u := range loadedUnits {
		byName[u.Name] = u
		if rec.run(u.Name) != nil {
			continue
		}
		id, _ := parseUnit(u.Name)
		sb := rec.ready()
		if sb == nil {
			sb = &sandbox{ID: sandboxID(uid, uint32(len(rec.Sandboxes))), Attempt: uint32(len(rec.Sandboxes)), Ready: true, CreatedAt: now}
			rec.Sandboxes = append(rec.Sandboxes, sb)
		}
		rec.Runs = append(rec.Runs, &run{ID: u.Name, SandboxID: sb.ID, Name: id.Container, Attempt: uint32(id.N - 1), Started: true})
		changed = true
		r.log.Info("container unit adopted", "pod_uid", uid, "container", id.Container, "unit", u.Name, "state", u.ActiveState+"/"+u.SubState)
	}
	out := make([]worker.Container, 0, len(rec.Runs))
	var stop []string
	for _, rn := range rec.Runs {
		u, ok := byName[rn.ID]
		rn.active, rn.sub, rn.listed = u.ActiveState, u.SubState, true
		state := worker.StateRunning
		switch {
		case rn.Done:
			state = worker.StateExited
			if ok && u.ActiveState == "active" {
				stop = append(stop, rn.ID)
			}
		case !rn.Started:
			state = worker.StateCreated
		case !ok && rn.confirmed >= listedAt:
			// Started after the listing: not in it yet.
		case !ok:
			rn.Done, rn.FinishedAt, rn.ExitCode = true, now, 137
			rn.Reason, rn.Message = lifecycle.ReasonUnknown, "the container's unit was gone before its exit status could be read"
			if rn.StartedAt.IsZero() {
				rn.StartedAt = now
			}
			changed = true
			state = worker.StateExited
			r.log.Warn("container unit vanished", "pod_uid", uid, "container", rn.Name, "unit", rn.ID)
		case unitEnded(u.ActiveState, u.SubState):
			state = worker.StateExited
		}
		out = append(out, worker.Container{
			ID: rn.ID, SandboxID: rn.SandboxID, PodUID: uid, Name: rn.Name, Attempt: rn.Attempt,
			State: state, CreatedAt: createdAt(rn),
		})
	}
	if changed {
		return out, stop, r.saveRecord(rec)
	}
	return out, stop, nil
}

// createdAt is a run's creation time for GC's age: when it was created, or for runs adopted or
// converted from older records when its process started (or ended).
func createdAt(rn *run) time.Time {
	switch {
	case !rn.CreatedAt.IsZero():
		return rn.CreatedAt
	case !rn.StartedAt.IsZero():
		return rn.StartedAt
	}
	return rn.FinishedAt
}

// parseContainerID accepts a unit name or a status container ID ("systemd://<unit>").
func parseContainerID(id string) (string, unitID, error) {
	unit := id
	if len(unit) > len("systemd://") && unit[:len("systemd://")] == "systemd://" {
		unit = unit[len("systemd://"):]
	}
	ref, ok := parseUnit(unit)
	if !ok {
		return "", unitID{}, fmt.Errorf("container %q: not a container unit of the systemd runtime", id)
	}
	return unit, ref, nil
}
