package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/metrics"
)

// gcFailureThreshold is how many collections of one kind must fail in a row before the node
// condition ImageGCFailing / ContainerGCFailing turns true (gcImagesWarnable).
const gcFailureThreshold = 3

// collector is the part of *gc.Collector the daemon uses.
type collector interface {
	CollectImages(ctx context.Context, dryRun bool) (gc.ImageResult, error)
	DeleteUnusedImages(ctx context.Context) (gc.ImageResult, error)
	CollectContainers(ctx context.Context, dryRun bool) (gc.ContainerResult, error)
	DeleteAllUnusedContainers(ctx context.Context) (gc.ContainerResult, error)
}

// gcService runs collections for the API (and so for the timers' `slicectl gc`) and for
// eviction's node-level reclaim. Every run is counted in slicelet_gc_runs_total and reported
// to the health tracker, which turns repeated failures into a node condition and logs each
// change (the collector logs every run).
type gcService struct {
	col    collector
	met    *metrics.Metrics
	health *health.Tracker
}

func newGCService(col collector, met *metrics.Metrics, tr *health.Tracker) *gcService {
	tr.Register(gcContainersWarnable, gcImagesWarnable)
	return &gcService{col: col, met: met, health: tr}
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

// record counts one collection and reports it to the health tracker. ran is false for a
// collection that had nothing to do by configuration (image GC without images).
func (s *gcService) record(kind string, ran bool, freed uint64, removed int, err error) {
	if !ran {
		return
	}
	result := metrics.ResultSuccess
	if err != nil {
		result = metrics.ResultError
	}
	s.met.GCRun(kind, result, freed, removed)
	w := gcContainersWarnable
	if kind == gcImages {
		w = gcImagesWarnable
	}
	s.health.Set(w, err)
}

// gcRecordsFile is the image GC records file in the state directory.
const gcRecordsFile = "gc-images.json"

// podLogRoot is where CRI container logs live (/var/log/pods/<ns>_<name>_<uid>/...).
const podLogRoot = "/var/log/pods"

// newGCCollector builds the collector for the runtime: container GC for every runtime, image GC
// when the runtime has images (the CRI runtime). The sandbox image is always protected.
func newGCCollector(cfg *config.Config, rt *podRuntime, podState func() gc.PodState, clk clock.Clock, log *slog.Logger) (*gc.Collector, error) {
	opts := gc.CollectorOptions{
		Containers:      rt.containers,
		Sandboxes:       rt.sandboxes,
		ImagePolicy:     cfg.GC.Images.Policy(),
		ContainerPolicy: cfg.GC.Containers.Policy(),
		RecordsPath:     filepath.Join(cfg.StateDir, gcRecordsFile),
		PodState:        podState,
		Logger:          log.With("component", "gc"),
		Clock:           clk, // slicelet's start (max age waits for it) is the collector's creation
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

// detectLoop refreshes the image records every period until ctx ends, reporting each result
// to the health tracker (which logs a failure once, when it begins, and the recovery).
func detectLoop(ctx context.Context, clk clock.WithTicker, period time.Duration, detect func(context.Context) error, tr *health.Tracker) {
	tr.Register(imageDetectionWarnable)
	every(ctx, clk, period, func() { tr.Set(imageDetectionWarnable, detect(ctx)) })
}
