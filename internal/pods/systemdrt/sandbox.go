package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// RunPodSandbox records a new sandbox of the pod in its slice (the slice itself is the
// controller's): the pod's containers run as units in config.Linux.CgroupParent.
func (r *Runtime) RunPodSandbox(_ context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if runtimeHandler != "" {
		return "", fmt.Errorf("runtime handler %q: the systemd runtime has none", runtimeHandler)
	}
	md := config.GetMetadata()
	uid := md.GetUid()
	slice := config.GetLinux().GetCgroupParent()
	if slice == "" {
		return "", fmt.Errorf("pod %s/%s: no pod slice", md.GetNamespace(), md.GetName())
	}
	var id string
	err := r.locked(uid, func(e *podEntry) error {
		if e.rec == nil {
			e.rec = newPodRecord(uid)
		}
		rec := e.rec
		attempt := md.GetAttempt()
		for _, sb := range rec.Sandboxes {
			attempt = max(attempt, sb.Attempt+1)
		}
		resolv, err := r.sandboxResolvConf(uid, attempt, config.GetDnsConfig())
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", md.GetNamespace(), md.GetName(), err)
		}
		for _, sb := range rec.Sandboxes {
			sb.Ready = false
		}
		id = sandboxID(uid, attempt)
		rec.Namespace, rec.Name = md.GetNamespace(), md.GetName()
		rec.Sandboxes = append(rec.Sandboxes, &sandbox{
			ID: id, Attempt: attempt, Ready: true, CreatedAt: r.clock.Now(), Slice: slice,
			MemoryLimited: config.GetLinux().GetResources().GetMemoryLimitInBytes() > 0,
			ResolvConf:    resolv,
		})
		return r.saveRecord(rec)
	})
	return id, err
}

// StopPodSandbox makes the sandbox not ready and kills what still runs in it.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	var live []string
	err := r.locked(sandboxPod(id), func(e *podEntry) error {
		sb := (*sandbox)(nil)
		if e.rec != nil {
			sb = e.rec.sandbox(id)
		}
		if sb == nil {
			return nil
		}
		for _, rn := range e.rec.Runs {
			if rn.SandboxID == id && rn.Started && !rn.Done {
				live = append(live, rn.ID)
			}
		}
		if !sb.Ready {
			return nil
		}
		sb.Ready = false
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, unit := range live {
		errs = append(errs, r.StopContainer(ctx, unit, 0))
	}
	return errors.Join(errs...)
}

// RemovePodSandbox removes the sandbox, the units of its containers and their runs; the pod's
// record goes with its last sandbox.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	uid := sandboxPod(id)
	return r.locked(uid, func(e *podEntry) error {
		if e.rec == nil || e.rec.sandbox(id) == nil {
			return nil
		}
		rec := e.rec
		var errs []error
		keep := rec.Runs[:0]
		for _, rn := range rec.Runs {
			if rn.SandboxID != id {
				keep = append(keep, rn)
				continue
			}
			errs = append(errs, r.resetUnit(ctx, rn.ID))
		}
		rec.Runs = keep
		if f := rec.sandbox(id).ResolvConf; f != "" {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
			}
		}
		rec.Sandboxes = slices.DeleteFunc(rec.Sandboxes, func(sb *sandbox) bool { return sb.ID == id })
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("pod %s: %w", uid, err)
		}
		if len(rec.Sandboxes) == 0 && len(rec.Runs) == 0 {
			if err := os.Remove(r.statePath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("pod %s state: %w", uid, err)
			}
			e.rec = nil
			r.log.Info("pod state removed", "pod_uid", uid)
			return nil
		}
		return r.saveRecord(rec)
	})
}

// resetUnit stops a unit and resets it if it failed, so systemd forgets it.
func (r *Runtime) resetUnit(ctx context.Context, unit string) error {
	if err := r.sd.Stop(ctx, unit); err != nil {
		return err
	}
	return r.sd.ResetFailed(ctx, unit)
}

// ListPodSandbox lists the sandboxes of the pod, or of every pod for "".
func (r *Runtime) ListPodSandbox(_ context.Context, podUID string) ([]worker.Sandbox, error) {
	uids := []string{podUID}
	if podUID == "" {
		var err error
		if uids, err = r.podUIDs(); err != nil {
			return nil, err
		}
	}
	var out []worker.Sandbox
	var errs []error
	for _, uid := range uids {
		err := r.locked(uid, func(e *podEntry) error {
			if e.rec == nil {
				return nil
			}
			for _, sb := range e.rec.Sandboxes {
				out = append(out, worker.Sandbox{ID: sb.ID, PodUID: uid, Attempt: sb.Attempt, Ready: sb.Ready, CreatedAt: sb.CreatedAt})
			}
			return nil
		})
		errs = append(errs, r.skipUnreadable(podUID, uid, err))
	}
	return out, errors.Join(errs...)
}

// skipUnreadable is err for a listing of one pod; a listing of every pod leaves out a pod
// whose record cannot be read, with a warning, rather than fail for all of them (the pod's own
// syncs report the error).
func (r *Runtime) skipUnreadable(listed, uid string, err error) error {
	if err == nil || listed != "" {
		return err
	}
	r.log.Warn("pod state unreadable, the pod is left out of the listing", "pod_uid", uid, "error", err)
	return nil
}
