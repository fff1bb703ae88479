package systemdrt

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// CreateContainer records a run of a container in the sandbox; its unit is started by
// StartContainer. The record keeps the run's configuration, so a run created before slicelet
// stopped is started after it restarts. Of a container's earlier runs only the latest stays
// (systemd forgets the unit of an older failed one).
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	uid := sandboxPod(sandboxID)
	name := config.GetMetadata().GetName()
	attempt := config.GetMetadata().GetAttempt()
	unit, err := UnitName(uid, name, int(attempt)+1)
	if err != nil {
		return "", err
	}
	for _, m := range config.GetMounts() {
		if m.GetPropagation() == runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL {
			return "", fmt.Errorf("container %s: mount %s: bidirectional propagation: %s", name, m.GetContainerPath(), noBidirectional)
		}
	}
	// A CDI device is a specification's edits of an OCI runtime spec, which a systemd
	// service does not have: refused, never dropped.
	if cdi := config.GetCDIDevices(); len(cdi) > 0 {
		return "", fmt.Errorf("container %s: CDI device %s: the systemd runtime cannot apply CDI specifications; run the pod with the cri runtime", name, cdi[0].GetName())
	}
	var reset []string
	err = r.locked(uid, func(e *podEntry) error {
		sb := (*sandbox)(nil)
		if e.rec != nil {
			sb = e.rec.sandbox(sandboxID)
		}
		if sb == nil || !sb.Ready {
			return fmt.Errorf("container %s: sandbox %s is not ready", name, sandboxID)
		}
		data, err := protojson.Marshal(withResolvConf(config, sb.ResolvConf))
		if err != nil {
			return fmt.Errorf("container %s: configuration: %w", name, err)
		}
		if e.rec.run(unit) != nil {
			return fmt.Errorf("container %s: run %d exists already (%s)", name, attempt+1, unit)
		}
		g := grace(config)
		rn := &run{
			ID: unit, SandboxID: sandboxID, Name: name, Attempt: attempt, CreatedAt: r.clock.Now(), Config: data,
			MemoryLimited: sb.MemoryLimited || config.GetLinux().GetResources().GetMemoryLimitInBytes() > 0,
			StopSignal:    stopSignalName(config.GetStopSignal()), Grace: g,
		}
		keep := e.rec.Runs[:0]
		for _, old := range e.rec.Runs {
			if old.Name == name && old.Attempt+1 < attempt && old.Done {
				reset = append(reset, old.ID)
				continue
			}
			keep = append(keep, old)
		}
		e.rec.Runs = append(keep, rn)
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return "", err
	}
	for _, unit := range reset {
		if err := r.sd.ResetFailed(ctx, unit); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
			r.log.Debug("resetting an old container unit failed", "unit", unit, "error", err)
		}
	}
	return unit, nil
}

// StartContainer starts the run's transient service in the pod slice. A start that systemd
// rejects, or whose command cannot run on this host, leaves the run exited with StartError (so
// restart policy and back-off apply to it) and returns the error; a start whose outcome is
// unknown (the unit exists) is left to ContainerStatus.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var (
		cfg   *runtimeapi.ContainerConfig
		slice string
		rn    *run
	)
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if rn.Started || rn.Done {
			rn = nil
			return nil
		}
		if sb := e.rec.sandbox(rn.SandboxID); sb != nil {
			slice = sb.Slice
		}
		var err error
		cfg, err = rn.config()
		return err
	})
	if err != nil || rn == nil {
		return err
	}
	now := r.clock.Now()
	if cfg == nil {
		err = errors.New("no configuration recorded for this run")
	} else {
		err = r.startUnit(ctx, unit, slice, cfg)
	}
	if err == nil {
		return r.update(ref.UID, unit, func(rn *run) { rn.Started, rn.confirmed = true, r.listings.Load() })
	}
	if errors.Is(err, units.ErrJobFailed) || errors.Is(err, units.ErrTimeout) || errors.Is(err, units.ErrUnitExists) {
		// The unit exists (failed right away, or still starting): ContainerStatus reads what
		// became of it.
		if st, lerr := r.sd.List(ctx, unit); lerr == nil && loaded(st, unit) {
			r.log.Warn("container start did not finish cleanly", "unit", unit, "error", err)
			return r.update(ref.UID, unit, func(rn *run) { rn.Started, rn.confirmed = true, r.listings.Load() })
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("container %s: start %s: %w", rn.Name, unit, err)
	}
	if uerr := r.update(ref.UID, unit, func(rn *run) {
		rn.Done, rn.FinishedAt, rn.StartedAt, rn.ExitCode = true, now, now, 128
		rn.Reason, rn.Message = lifecycle.ReasonStartError, err.Error()
	}); uerr != nil {
		return uerr
	}
	return fmt.Errorf("container %s: start %s: %w", rn.Name, unit, err)
}

// startUnit starts the transient service of a run.
func (r *Runtime) startUnit(ctx context.Context, unit, slice string, cfg *runtimeapi.ContainerConfig) error {
	exe, err := r.resolveCommand(cfg.GetCommand(), cfg.GetEnvs())
	if err != nil {
		return err
	}
	want := int(cfg.GetLinux().GetResources().GetOomScoreAdj())
	adj, raised := r.oom.Apply(want)
	if raised {
		r.oomOnce.Do(func() {
			r.log.Warn("systemd lacks CAP_SYS_RESOURCE: container oom_score_adj values below systemd's own are raised to it",
				"floor", r.oom.Floor, "unit", unit, "wanted", want)
		})
	}
	sec, wrap, err := securityProperties(cfg.GetLinux().GetSecurityContext(), r.secEnv())
	if err != nil {
		return err
	}
	props := unitProperties(unitSpec{Config: cfg, Slice: slice, Exec: exe, OOMScoreAdj: adj, Mode: r.sd.Mode(), Security: sec, Wrap: wrap})
	return r.sd.StartService(ctx, unit, props)
}

// update changes a run under its pod's lock and saves the record.
func (r *Runtime) update(uid, unit string, f func(rn *run)) error {
	return r.locked(uid, func(e *podEntry) error {
		if e.rec == nil || e.rec.run(unit) == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		f(e.rec.run(unit))
		return r.saveRecord(e.rec)
	})
}

// loaded reports whether the list holds the unit name loaded.
func loaded(list []units.UnitStatus, name string) bool {
	for _, u := range list {
		if u.Name == name && u.LoadState != "not-found" {
			return true
		}
	}
	return false
}

// unitEnded reports whether a container unit's main process has ended: failed, inactive, or
// active/exited (RemainAfterExit) awaiting its stop.
func unitEnded(active, sub string) bool {
	switch active {
	case "failed", "inactive":
		return true
	case "active", "reloading", "deactivating":
		return sub == "exited"
	}
	return false
}

// UpdateContainerResources sets a run's cgroup properties on its unit (an in-place resize).
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.LinuxContainerResources) error {
	unit, _, err := parseContainerID(id)
	if err != nil {
		return err
	}
	if err := r.opts.Systemd.SetProperties(ctx, unit, slices.SliceProperties(resourceConfig(resources), r.opts.Systemd.Mode())); err != nil {
		return fmt.Errorf("container %s: update resources: %w", id, err)
	}
	return nil
}
