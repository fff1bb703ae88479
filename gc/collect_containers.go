package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ContainerResult tells what a container collection planned and what really happened. It
// marshals to stable camelCase JSON: every key is always present, lists are [] when empty.
type ContainerResult struct {
	// Kind is KindContainers or KindAllUnusedContainers.
	Kind string `json:"kind"`
	// DryRun is set when nothing was stopped or removed on purpose.
	DryRun bool `json:"dryRun"`
	// StartedAt and Duration time the collection.
	StartedAt time.Time `json:"startedAt"`
	Duration  Duration  `json:"duration"`
	// AllSourcesReady is the pod state's flag: until it is set no pod counts as deleted.
	AllSourcesReady bool `json:"allSourcesReady"`
	// DeletedPods are the UIDs, sorted, that have containers, sandboxes or a log directory but
	// are not known to any source.
	DeletedPods []string `json:"deletedPods"`
	// Remove, RemoveSandboxes and RemoveLogDirs are the plan, in execution order.
	Remove          []ContainerRemoval `json:"remove"`
	RemoveSandboxes []SandboxRemoval   `json:"removeSandboxes"`
	RemoveLogDirs   []string           `json:"removeLogDirs"`
	// Removed, RemovedSandboxes and RemovedLogDirs are what was really removed, in order.
	Removed          []string `json:"removed"`
	RemovedSandboxes []string `json:"removedSandboxes"`
	RemovedLogDirs   []string `json:"removedLogDirs"`
	// Failed lists the stops and removals that failed; a container or sandbox whose stop
	// failed is not removed (as in the kubelet).
	Failed []Failure `json:"failed"`
	// Error is null or the collection's error (the same as the returned one).
	Error *string `json:"error"`
}

// CollectContainers is the kubelet's container GarbageCollect: dead containers by the policy
// (PlanContainerGC; a container in unknown state is stopped first and kept if that fails),
// then sandboxes (PlanSandboxGC, counting the containers that are left), then the log
// directories of deleted pods under PodLogRoot (PlanLogDirGC). Failures are reported and the
// collection goes on. A dry run plans only; its sandbox plan assumes the planned container
// removals succeed.
func (c *Collector) CollectContainers(ctx context.Context, dryRun bool) (ContainerResult, error) {
	return c.collectContainers(ctx, KindContainers, dryRun, false)
}

// DeleteAllUnusedContainers is eviction's container reclaim: CollectContainers with the
// kubelet's evictNonDeletedPods, so terminated pods lose their dead containers and inactive
// sandboxes too.
func (c *Collector) DeleteAllUnusedContainers(ctx context.Context) (ContainerResult, error) {
	return c.collectContainers(ctx, KindAllUnusedContainers, false, true)
}

func (c *Collector) collectContainers(ctx context.Context, kind string, dryRun, evictNonDeletedPods bool) (res ContainerResult, err error) {
	start := c.clock.Now()
	res = ContainerResult{Kind: kind, DryRun: dryRun, StartedAt: start}
	defer func() {
		res.Duration = Duration(c.clock.Now().Sub(start))
		res.Error = errString(err)
		res.DeletedPods, res.Remove, res.RemoveSandboxes = nonNil(res.DeletedPods), nonNil(res.Remove), nonNil(res.RemoveSandboxes)
		res.RemoveLogDirs, res.Removed, res.RemovedSandboxes = nonNil(res.RemoveLogDirs), nonNil(res.Removed), nonNil(res.RemovedSandboxes)
		res.RemovedLogDirs, res.Failed = nonNil(res.RemovedLogDirs), nonNil(res.Failed)
		c.logContainers(res)
	}()
	c.containerMu.Lock()
	defer c.containerMu.Unlock()

	var ps PodState
	if c.opts.PodState != nil {
		ps = c.opts.PodState()
	}
	res.AllSourcesReady = ps.AllSourcesReady
	rt := c.opts.Containers
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		return res, fmt.Errorf("container gc: container list: %w", err)
	}
	var sandboxes []Sandbox
	if c.opts.Sandboxes != nil {
		if sandboxes, err = c.opts.Sandboxes.ListSandboxes(ctx); err != nil {
			return res, fmt.Errorf("container gc: sandbox list: %w", err)
		}
	}
	var logDirs []string
	if c.opts.PodLogRoot != "" {
		ents, err := os.ReadDir(c.opts.PodLogRoot)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("container gc: pod log root: %w", err)
		}
		for _, e := range ents {
			logDirs = append(logDirs, e.Name())
		}
	}

	// A pod is deleted when it has something in the runtime (or a log directory) and no source
	// wants it — decided only once every source has reported (ShouldPodContentBeRemoved).
	deleted := map[string]bool{}
	if ps.AllSourcesReady {
		mark := func(uid string) {
			if uid != "" && !ps.Known[uid] {
				deleted[uid] = true
			}
		}
		for _, ct := range containers {
			mark(ct.PodUID)
		}
		for _, s := range sandboxes {
			mark(s.PodUID)
		}
		for _, d := range logDirs {
			mark(PodUIDFromLogDir(d))
		}
	}
	for uid := range deleted {
		res.DeletedPods = append(res.DeletedPods, uid)
	}
	slices.Sort(res.DeletedPods)

	cp := PlanContainerGC(containers, deleted, c.opts.ContainerPolicy, start, ps.AllSourcesReady, evictNonDeletedPods, ps.Terminated)
	if cp.Err != nil {
		return res, fmt.Errorf("container gc: %w", cp.Err)
	}
	res.Remove = cp.Remove
	var errs []error
	gone := make(map[string]bool, len(cp.Remove))
	for _, r := range cp.Remove {
		if dryRun {
			gone[r.ID] = true
			continue
		}
		if ctx.Err() != nil {
			return res, errors.Join(append(errs, fmt.Errorf("container gc: %w", ctx.Err()))...)
		}
		if r.StopFirst {
			if err := rt.StopContainer(ctx, r.ID); err != nil {
				res.Failed = append(res.Failed, Failure{ID: r.ID, Op: "stop-container", Error: err.Error()})
				errs = append(errs, fmt.Errorf("container %s: stop: %w", r.ID, err))
				c.log.Warn("container stop before removal failed; not removed", "container_id", r.ID, "pod_uid", r.PodUID, "container", r.Name, "error", err)
				continue
			}
		}
		if err := rt.RemoveContainer(ctx, r.ID); err != nil {
			res.Failed = append(res.Failed, Failure{ID: r.ID, Op: "remove-container", Error: err.Error()})
			errs = append(errs, fmt.Errorf("container %s: remove: %w", r.ID, err))
			c.log.Warn("container removal failed", "container_id", r.ID, "pod_uid", r.PodUID, "container", r.Name, "error", err)
			continue
		}
		gone[r.ID] = true
		res.Removed = append(res.Removed, r.ID)
		c.log.Info("dead container removed", "container_id", r.ID, "pod_uid", r.PodUID, "container", r.Name, "reason", string(r.Reason), "kind", kind)
	}

	// Sandboxes: the kubelet lists containers again after removing; the ones it removed are
	// exactly those gone.
	left := make([]Container, 0, len(containers)-len(gone))
	for _, ct := range containers {
		if !gone[ct.ID] {
			left = append(left, ct)
		}
	}
	sp := PlanSandboxGC(sandboxes, left, deleted, evictNonDeletedPods, ps.Terminated)
	if sp.Err != nil {
		errs = append(errs, fmt.Errorf("sandbox gc: %w", sp.Err))
	}
	res.RemoveSandboxes = sp.Remove
	for _, s := range sp.Remove {
		if dryRun {
			continue
		}
		if ctx.Err() != nil {
			return res, errors.Join(append(errs, fmt.Errorf("container gc: %w", ctx.Err()))...)
		}
		if err := c.opts.Sandboxes.StopSandbox(ctx, s.ID); err != nil {
			res.Failed = append(res.Failed, Failure{ID: s.ID, Op: "stop-sandbox", Error: err.Error()})
			errs = append(errs, fmt.Errorf("sandbox %s: stop: %w", s.ID, err))
			c.log.Warn("sandbox stop failed; not removed", "sandbox_id", s.ID, "pod_uid", s.PodUID, "error", err)
			continue
		}
		if err := c.opts.Sandboxes.RemoveSandbox(ctx, s.ID); err != nil {
			res.Failed = append(res.Failed, Failure{ID: s.ID, Op: "remove-sandbox", Error: err.Error()})
			errs = append(errs, fmt.Errorf("sandbox %s: remove: %w", s.ID, err))
			c.log.Warn("sandbox removal failed", "sandbox_id", s.ID, "pod_uid", s.PodUID, "error", err)
			continue
		}
		res.RemovedSandboxes = append(res.RemovedSandboxes, s.ID)
		c.log.Info("sandbox removed", "sandbox_id", s.ID, "pod_uid", s.PodUID, "reason", string(s.Reason), "kind", kind)
	}

	res.RemoveLogDirs = PlanLogDirGC(logDirs, deleted, ps.AllSourcesReady)
	for _, d := range res.RemoveLogDirs {
		if dryRun {
			continue
		}
		// ReadDir names are single path elements, so the join stays inside the root.
		if err := os.RemoveAll(filepath.Join(c.opts.PodLogRoot, d)); err != nil {
			res.Failed = append(res.Failed, Failure{ID: d, Op: "remove-log-dir", Error: err.Error()})
			errs = append(errs, fmt.Errorf("pod log directory %s: %w", d, err))
			c.log.Warn("pod log directory removal failed", "dir", d, "error", err)
			continue
		}
		res.RemovedLogDirs = append(res.RemovedLogDirs, d)
		c.log.Info("pod log directory removed", "dir", d, "pod_uid", PodUIDFromLogDir(d))
	}
	return res, errors.Join(errs...)
}

func (c *Collector) logContainers(res ContainerResult) {
	level := c.log.Info
	if res.DryRun {
		level = c.log.Debug
	}
	args := []any{"kind", res.Kind, "dry_run", res.DryRun, "duration", time.Duration(res.Duration),
		"all_sources_ready", res.AllSourcesReady, "deleted_pods", len(res.DeletedPods),
		"planned", len(res.Remove), "removed", len(res.Removed),
		"planned_sandboxes", len(res.RemoveSandboxes), "removed_sandboxes", len(res.RemovedSandboxes),
		"planned_log_dirs", len(res.RemoveLogDirs), "removed_log_dirs", len(res.RemovedLogDirs),
		"failed", len(res.Failed)}
	if res.Error != nil {
		args = append(args, "error", *res.Error)
	}
	level("container gc finished", args...)
}
