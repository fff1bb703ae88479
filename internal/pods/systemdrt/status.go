package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/units"
)

// ContainerStatus inspects a run. The state of its unit at the last listing decides what is
// read from systemd: nothing for a run whose start time is recorded and whose unit still runs
// (a restarted slicelet answers for every running container from its records), the start time
// once its process runs, and for a unit that ended its exit status, which is recorded before the
// unit is stopped (that kills what the main process left behind, as the kernel does for a
// container's PID namespace).
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (worker.ContainerStatus, error) {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return worker.ContainerStatus{}, err
	}
	var (
		st     worker.ContainerStatus
		need   bool // the unit's state must be read
		listed bool
		active string
		sub    string
	)
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := (*run)(nil)
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		st = r.status(ref.UID, rn)
		listed, active, sub = rn.listed, rn.active, rn.sub
		need = rn.Started && !rn.Done && (rn.StartedAt.IsZero() || !listed || unitEnded(active, sub))
		return nil
	})
	if err != nil || !need {
		return st, err
	}
	if !listed {
		list, err := r.sd.List(ctx, unit)
		if err != nil {
			return st, fmt.Errorf("container %s: %w", unit, err)
		}
		active, sub = "", ""
		for _, u := range list {
			if u.Name == unit && u.LoadState != "not-found" {
				active, sub = u.ActiveState, u.SubState
			}
		}
		if active == "" {
			return r.vanished(ref.UID, unit)
		}
	}
	ended := unitEnded(active, sub)
	if !ended && active == "activating" {
		return st, nil // its process is not running yet
	}
	info, err := r.sd.Properties(ctx, unit)
	if errors.Is(err, units.ErrNoSuchUnit) {
		return r.vanished(ref.UID, unit)
	}
	if err != nil {
		return st, fmt.Errorf("container %s: %w", unit, err)
	}
	if !ended && !unitEnded(info.ActiveState, info.SubState) {
		err = r.locked(ref.UID, func(e *podEntry) error {
			rn := e.rec.run(unit)
			if rn == nil || rn.Done {
				return nil
			}
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			rn.StartedAt = info.ExecMainStartTimestamp
			if rn.StartedAt.IsZero() {
				rn.StartedAt = r.clock.Now()
			}
			st = r.status(ref.UID, rn)
			return r.saveRecord(e.rec)
		})
		return st, err
	}
	var stop bool
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if !rn.Done {
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			finish(rn, info, r.sd.Mode(), rn.MemoryLimited, r.clock.Now())
			r.log.Info("container unit ended", "pod_uid", ref.UID, "container", rn.Name, "unit", unit,
				"exit_code", rn.ExitCode, "signal", rn.Signal, "reason", rn.Reason, "result", info.Result)
			if err := r.saveRecord(e.rec); err != nil {
				return err
			}
		}
		st = r.status(ref.UID, rn)
		stop = info.ActiveState != "failed" && info.ActiveState != "inactive"
		return nil
	})
	if err != nil || !stop {
		return st, err
	}
	// What the main process left behind dies with it, as in a container's PID namespace.
	if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		r.log.Debug("killing leftovers of an ended container failed", "unit", unit, "error", err)
	}
	if err := r.sd.Stop(ctx, unit); err != nil {
		return st, fmt.Errorf("container %s: %w", unit, err)
	}
	return st, nil
}

// vanished records that a started run's unit is gone before its exit status was read.
func (r *Runtime) vanished(uid, unit string) (worker.ContainerStatus, error) {
	var st worker.ContainerStatus
	err := r.locked(uid, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if !rn.Done {
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.ExitCode = true, now, 137
			rn.Reason, rn.Message = lifecycle.ReasonUnknown, "the container's unit was gone before its exit status could be read"
			if rn.StartedAt.IsZero() {
				rn.StartedAt = now
			}
			r.log.Warn("container unit vanished", "pod_uid", uid, "container", rn.Name, "unit", unit)
			if err := r.saveRecord(e.rec); err != nil {
				return err
			}
		}
		st = r.status(uid, rn)
		return nil
	})
	return st, err
}

// status is a run as the worker sees it.
func (r *Runtime) status(uid string, rn *run) worker.ContainerStatus {
	state := worker.StateRunning
	switch {
	case rn.Done:
		state = worker.StateExited
	case !rn.Started:
		state = worker.StateCreated
	}
	return worker.ContainerStatus{
		Container: worker.Container{ID: rn.ID, SandboxID: rn.SandboxID, PodUID: uid, Name: rn.Name, Attempt: rn.Attempt, State: state, CreatedAt: createdAt(rn)},
		StartedAt: rn.StartedAt, FinishedAt: rn.FinishedAt,
		ExitCode: rn.ExitCode, Signal: rn.Signal, Reason: rn.Reason, Message: rn.Message, Grace: rn.Grace,
	}
}

// siginfo si_code values of ExecMainCode.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// finish records the final state of a run from its unit's properties.
//
// OOMKilled: systemd reports Result=oom-kill from the cgroup v2 memory.events counter. cgroup
// v1 has no such counter that outlives the unit (systemd 252 only watches memory.events), so on
// v1 a main process killed by SIGKILL (Result=signal: not systemd's stop timeout) that slicelet
// did not stop, in a container or pod with a memory limit, is taken for an OOM kill; the
// Message says it was inferred. A `kill -9` from outside looks the same there.
func finish(rn *run, info units.UnitInfo, mode units.Mode, memLimited bool, now time.Time) {
	rn.Done = true
	if !info.ExecMainStartTimestamp.IsZero() {
		rn.StartedAt = info.ExecMainStartTimestamp
	}
	rn.FinishedAt = info.ExecMainExitTimestamp
	if rn.FinishedAt.IsZero() {
		rn.FinishedAt = now
	}
	if rn.StartedAt.IsZero() {
		rn.StartedAt = rn.FinishedAt
	}
	rn.Signal, rn.Message = 0, ""
	switch info.ExecMainCode {
	case cldExited:
		rn.ExitCode = info.ExecMainStatus
	case cldKilled, cldDumped:
		rn.Signal = info.ExecMainStatus
		rn.ExitCode = 128 + info.ExecMainStatus
	default:
		// The main process never ran (or systemd lost it): the start failed.
		rn.ExitCode, rn.Reason = 128, lifecycle.ReasonStartError
		rn.Message = fmt.Sprintf("systemd result %q before the command ran", info.Result)
		return
	}
	switch {
	case info.Result == "oom-kill":
		rn.Reason = lifecycle.ReasonOOMKilled
	case !mode.V2() && info.Result == "signal" && rn.Signal == int32(syscall.SIGKILL) && !rn.Stopping && memLimited:
		rn.Reason = lifecycle.ReasonOOMKilled
		rn.Message = "killed by SIGKILL under a memory limit; cgroup v1 gives systemd no OOM record, so this is inferred"
	case rn.ExitCode == 0:
		rn.Reason = lifecycle.ReasonCompleted
	default:
		rn.Reason = lifecycle.ReasonError
		if info.ExecMainCode == cldExited {
			rn.Message = systemdExitMessage(info.ExecMainStatus)
		}
	}
}

// systemdExitMessage explains the exit codes systemd itself uses when it could not set up the
// process (systemd.exec(5) "Process Exit Codes"); "" for others.
func systemdExitMessage(code int32) string {
	msg := map[int32]string{
		200: "200/CHDIR: systemd could not change to the working directory",
		203: "203/EXEC: systemd could not execute the command",
		204: "204/MEMORY: systemd ran out of memory setting up the process",
		206: "206/OOM_ADJUST: systemd could not set oom_score_adj",
		209: "209/STDOUT: systemd could not set up standard output or error",
		214: "214/SETSCHEDULER: systemd could not set the scheduling policy",
		216: "216/GROUP: systemd could not set the group (runAsGroup)",
		217: "217/USER: systemd could not set the user (runAsUser)",
		226: "226/NAMESPACE: systemd could not set up the mount namespace (volumes)",
	}[code]
	return msg
}
