package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/metrics"
)

// gcFailureThreshold is how many collections of one kind must fail in a row before the node
// condition ImageGCFailing / ContainerGCFailing turns true. One failure is often transient (a
// runtime restarting); three in a row (3 min of container GC, 15 min of image GC at the
// defaults) is something the operator should look at.
const gcFailureThreshold = 3

// Node conditions of repeated GC failures (the kubelet only records ImageGCFailed and
// ContainerGCFailed events; a condition is what `slicectl node` and the API show).
const (
	conditionImageGCFailing     v1.NodeConditionType = "ImageGCFailing"
	conditionContainerGCFailing v1.NodeConditionType = "ContainerGCFailing"
)

// collector is the part of *gc.Collector the daemon uses.
type collector interface {
	CollectImages(ctx context.Context, dryRun bool) (gc.ImageResult, error)
	DeleteUnusedImages(ctx context.Context) (gc.ImageResult, error)
	CollectContainers(ctx context.Context, dryRun bool) (gc.ContainerResult, error)
	DeleteAllUnusedContainers(ctx context.Context) (gc.ContainerResult, error)
}

// gcHealth is the run history of one GC kind.
type gcHealth struct {
	failures  int // consecutive failed collections
	lastError string
	since     time.Time // when the current streak (failing or not) began
	condSince time.Time // when the node condition last changed status
	lastRun   time.Time
}

// gcService runs collections for the API (and so for the timers' `slicectl gc`) and for
// eviction's node-level reclaim, and keeps the failure state: a failing run is logged at
// warning level once per state change (the collector logs every run), repeated failures raise
// a node condition, and every run is counted in slicelet_gc_runs_total.
type gcService struct {
	col collector
	log *slog.Logger
	met *metrics.Metrics
	now func() time.Time

	mu     sync.Mutex
	health map[string]*gcHealth
}

func newGCService(col collector, met *metrics.Metrics, log *slog.Logger) *gcService {
	return &gcService{col: col, met: met, log: log.With("component", "gc"), now: time.Now, health: map[string]*gcHealth{}}
}

// Images runs (or with dryRun previews) an image collection.
func (s *gcService) Images(ctx context.Context, dryRun bool) (gc.ImageResult, error) {
	res, err := s.col.CollectImages(ctx, dryRun)
	if !dryRun {
		s.recordImages(res, err)
	}
	return res, err
}

// Containers runs (or with dryRun previews) a container collection.
func (s *gcService) Containers(ctx context.Context, dryRun bool) (gc.ContainerResult, error) {
	res, err := s.col.CollectContainers(ctx, dryRun)
	if !dryRun {
		s.recordContainers(res, err)
	}
	return res, err
}

// Reclaim is eviction's node-level reclaim (eviction.Reclaimer): every step runs, in order,
// and the errors are joined. The eviction manager observes again afterwards, so a step that
// freed enough avoids an eviction even if a later one failed.
func (s *gcService) Reclaim(ctx context.Context, steps []eviction.ReclaimStep) error {
	var errs []error
	for _, step := range steps {
		var err error
		switch step {
		case eviction.ReclaimContainers:
			var res gc.ContainerResult
			res, err = s.col.DeleteAllUnusedContainers(ctx)
			s.recordContainers(res, err)
		case eviction.ReclaimImages:
			var res gc.ImageResult
			res, err = s.col.DeleteUnusedImages(ctx)
			s.recordImages(res, err)
		default:
			err = fmt.Errorf("unknown reclaim step %q", step)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", step, err))
		}
	}
	return errors.Join(errs...)
}

// recordImages records an image collection; one skipped by configuration (no images) is no run.
func (s *gcService) recordImages(res gc.ImageResult, err error) {
	s.record(gcImages, res.Skipped == "" || err != nil, uint64(max(res.FreedBytes, 0)), len(res.Removed), err)
}

// recordContainers records a container collection: containers, sandboxes and log directories
// removed count alike.
func (s *gcService) recordContainers(res gc.ContainerResult, err error) {
	s.record(gcContainers, true, 0, len(res.Removed)+len(res.RemovedSandboxes)+len(res.RemovedLogDirs), err)
}

// record counts one collection and logs a change between working and failing. ran is false
// for a collection that had nothing to do by configuration (image GC without images).
func (s *gcService) record(kind string, ran bool, freed uint64, removed int, err error) {
	if !ran {
		return
	}
	result := metrics.ResultSuccess
	if err != nil {
		result = metrics.ResultError
	}
	s.met.GCRun(kind, result, freed, removed)

	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.health[kind]
	if h == nil {
		h = &gcHealth{since: s.now(), condSince: s.now()}
		s.health[kind] = h
	}
	now := s.now()
	h.lastRun = now
	switch {
	case err != nil && h.failures == 0:
		h.failures, h.lastError, h.since = 1, err.Error(), now
		s.log.Warn("gc failing", "kind", kind, "error", err)
	case err != nil:
		h.failures++
		h.lastError = err.Error()
		if h.failures == gcFailureThreshold {
			h.condSince = now
			s.log.Error("gc failed repeatedly; node condition set", "kind", kind, "failures", h.failures, "condition", string(gcCondition(kind)), "error", err)
		}
	case h.failures > 0:
		if h.failures >= gcFailureThreshold {
			h.condSince = now
		}
		s.log.Info("gc recovered", "kind", kind, "failures", h.failures, "failing_for", now.Sub(h.since).Round(time.Second))
		h.failures, h.lastError, h.since = 0, "", now
	}
}

func gcCondition(kind string) v1.NodeConditionType {
	if kind == gcImages {
		return conditionImageGCFailing
	}
	return conditionContainerGCFailing
}

// Conditions returns ImageGCFailing and ContainerGCFailing for the kinds that ran: true after
// gcFailureThreshold failures in a row, with the last error as message.
func (s *gcService) Conditions() []v1.NodeCondition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []v1.NodeCondition
	for _, kind := range []string{gcContainers, gcImages} {
		h := s.health[kind]
		if h == nil {
			continue
		}
		c := v1.NodeCondition{
			Type: gcCondition(kind), Status: v1.ConditionFalse,
			LastHeartbeatTime: metav1.NewTime(h.lastRun), LastTransitionTime: metav1.NewTime(h.condSince),
			Reason: "GCSucceeding", Message: fmt.Sprintf("%s garbage collection is working", kind),
		}
		if h.failures >= gcFailureThreshold {
			c.Status, c.Reason = v1.ConditionTrue, "GCFailing"
			c.Message = fmt.Sprintf("%d %s collections in a row failed; last error: %s", h.failures, kind, h.lastError)
		} else if h.failures > 0 {
			c.Message = fmt.Sprintf("%d %s collections in a row failed (condition at %d); last error: %s", h.failures, kind, gcFailureThreshold, h.lastError)
		}
		out = append(out, c)
	}
	return out
}

// gcRecordsFile is the image GC records file in the state directory.
const gcRecordsFile = "gc-images.json"

// podLogRoot is where CRI container logs live (/var/log/pods/<ns>_<name>_<uid>/...).
const podLogRoot = "/var/log/pods"

// newGCCollector builds the collector for the runtime: container GC for every runtime, image GC
// when the runtime has images (the CRI runtime). The sandbox image is always protected.
func newGCCollector(cfg *config.Config, rt *podRuntime, podState func() gc.PodState, log *slog.Logger) (*gc.Collector, error) {
	opts := gc.CollectorOptions{
		Containers:      rt.containers,
		Sandboxes:       rt.sandboxes,
		ImagePolicy:     cfg.GC.Images.Policy(),
		ContainerPolicy: cfg.GC.Containers.Policy(),
		RecordsPath:     filepath.Join(cfg.StateDir, gcRecordsFile),
		PodState:        podState,
		Logger:          log.With("component", "gc"),
		Started:         time.Now(),
	}
	if rt.images != nil {
		opts.Images = rt.images
		// The CRI runtime also reports its sandbox image pinned (from this option or its own
		// configuration), so it is protected even when this is empty.
		opts.SandboxImage = cfg.Runtime.SandboxImage
		opts.PodLogRoot = podLogRoot
	}
	col, err := gc.NewCollector(opts)
	if err != nil {
		return nil, err
	}
	if err := col.RecordsError(); err != nil {
		log.Error("image gc records were unreadable and set aside; image ages restart from now", "error", err)
	}
	return col, nil
}

// imageDetectPeriod is how often image records are refreshed between collections (the kubelet's
// detectImages loop), so an image used only briefly still gets its last-used time.
const imageDetectPeriod = 5 * time.Minute

// detectLoop refreshes the image records every period until ctx ends; a failure is logged
// once per change of the error.
func detectLoop(ctx context.Context, period time.Duration, detect func(context.Context) error, log *slog.Logger) {
	t := time.NewTicker(period)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			msg := ""
			if err := detect(ctx); err != nil {
				msg = err.Error()
			}
			if msg != last {
				if msg != "" {
					log.Warn("image detection failed", "error", msg)
				} else {
					log.Info("image detection works again")
				}
				last = msg
			}
		}
	}
}
