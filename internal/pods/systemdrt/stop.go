package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/units"
)

// StopContainer stops a running run gracefully within grace: its stop signal to every process
// of the unit, SIGKILL after grace, then the final state is recorded and the unit stopped. A
// run that was created but never started is marked ended. The unit's own Stop (KillSignal=,
// TimeoutStopSec=) is not used for the signal because a unit stopped by systemd after a clean
// SIGTERM is garbage-collected at once, with its exit status; signalling it leaves it "exited"
// (RemainAfterExit) until read.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var sig syscall.Signal
	var name string
	live := false
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := (*run)(nil)
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil || rn.Done {
			return nil
		}
		name, sig = rn.Name, signalOf(rn.StopSignal)
		rn.Stopping = true
		if !rn.Started {
			// Created but never started: nothing runs. Mark it so nothing starts it.
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.StartedAt, rn.ExitCode, rn.Reason = true, now, now, 0, lifecycle.ReasonCompleted
			rn.Message = "stopped before it started"
		} else {
			live = true
		}
		return r.saveRecord(e.rec)
	})
	if err != nil || !live {
		return err
	}
	r.log.Info("stopping container", "pod_uid", ref.UID, "container", name, "unit", unit, "signal", sig.String(), "grace", grace)
	if err := r.sd.Kill(ctx, unit, sig, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", name, err)
	}
	ended, err := r.waitEnded(ctx, unit, grace)
	if err != nil {
		return fmt.Errorf("container %s: %w", name, err)
	}
	if !ended {
		r.log.Info("container outlived its grace period, killing it", "pod_uid", ref.UID, "container", name, "unit", unit, "grace", grace)
		if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			return fmt.Errorf("container %s: %w", name, err)
		}
		if _, err := r.waitEnded(ctx, unit, r.opts.KillWait); err != nil {
			return fmt.Errorf("container %s: %w", name, err)
		}
	}
	info, ierr := r.sd.Properties(ctx, unit)
	if ierr != nil && !errors.Is(ierr, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", name, ierr)
	}
	var code, signal int32
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return nil
		}
		if ierr != nil {
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.ExitCode, rn.Signal = true, now, 128+int32(sig), int32(sig)
			rn.Reason, rn.Message = lifecycle.ReasonError, "stopped; the unit was gone before its exit status could be read"
		} else {
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			finish(rn, info, r.sd.Mode(), false, r.clock.Now())
		}
		code, signal = rn.ExitCode, rn.Signal
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return err
	}
	if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		r.log.Debug("killing leftovers of a stopped container failed", "unit", unit, "error", err)
	}
	if err := r.sd.Stop(ctx, unit); err != nil {
		return fmt.Errorf("container %s: %w", name, err)
	}
	r.log.Info("container stopped", "pod_uid", ref.UID, "container", name, "unit", unit, "exit_code", code, "signal", signal)
	return nil
}

// waitEnded polls the unit until its main process has ended (exited, failed, inactive or
// gone) or d passes; it reports whether it ended.
func (r *Runtime) waitEnded(ctx context.Context, unit string, d time.Duration) (bool, error) {
	deadline := r.clock.NewTimer(d)
	defer deadline.Stop()
	tick := r.clock.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for {
		list, err := r.sd.List(ctx, unit)
		if err != nil {
			return false, err
		}
		ended := true
		for _, u := range list {
			if u.Name == unit && u.LoadState != "not-found" {
				ended = unitEnded(u.ActiveState, u.SubState)
			}
		}
		if ended {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C():
			return false, nil
		case <-tick.C():
		}
	}
}

// ErrInstanceRunning is returned when a running run is to be removed: only the pod's own
// lifecycle ends it.
var ErrInstanceRunning = errors.New("container instance is running")

// RemoveContainer removes a run that is not running: its unit is stopped if still loaded and
// active (exited, awaiting its stop) and reset if failed, and the run leaves the record. The
// journal keeps its output: journald rotates it by its own limits (journald.conf
// SystemMaxUse=, MaxRetentionSec=), so `slicectl logs --previous` keeps working for a run
// container GC removed.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var rn *run
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn != nil && rn.Started && !rn.Done {
			return fmt.Errorf("container %s: run %d (%s): %w", ref.Container, ref.N, unit, ErrInstanceRunning)
		}
		return nil
	})
	if err != nil {
		return err
	}
	list, err := r.sd.List(ctx, unit)
	if err != nil {
		return fmt.Errorf("container %s: unit %s: %w", ref.Container, unit, err)
	}
	for _, u := range list {
		if u.Name != unit || u.LoadState == "not-found" {
			continue
		}
		if !unitEnded(u.ActiveState, u.SubState) {
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
	if rn == nil {
		return nil
	}
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec == nil {
			return nil
		}
		e.rec.Runs = slices.DeleteFunc(e.rec.Runs, func(x *run) bool { return x.ID == unit })
		return r.saveRecord(e.rec)
	})
	if err == nil {
		r.log.Info("dead container instance removed", "pod_uid", ref.UID, "container", ref.Container, "unit", unit, "instance", ref.N)
	}
	return err
}
