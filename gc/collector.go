package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// PodState is what container GC must know about pods, from the daemon's pod controller.
type PodState struct {
	// Known holds the UIDs of the pods some source still wants (admitted or not, running or
	// terminated). A pod UID that has containers, sandboxes or a log directory but is not known
	// is deleted — only when AllSourcesReady, because a pod a source has not reported yet would
	// look deleted (the kubelet's ShouldPodContentBeRemoved).
	Known map[string]bool
	// Terminated holds the UIDs of known pods whose containers have all ended and will not
	// restart (the kubelet's ShouldPodRuntimeBeRemoved). Only DeleteAllUnusedContainers
	// (evictNonDeletedPods) removes their dead containers and sandboxes.
	Terminated map[string]bool
	// AllSourcesReady is set once every pod source has reported at least once.
	AllSourcesReady bool
}

// Defaults of CollectorOptions.
const (
	// DefaultFreshnessTimeout bounds the wait for image filesystem numbers measured after the
	// last deletion.
	DefaultFreshnessTimeout = 10 * time.Second
	// DefaultFreshnessPoll is how often ImageFsInfo is asked again while waiting.
	DefaultFreshnessPoll = 250 * time.Millisecond
)

// CollectorOptions configure a Collector.
type CollectorOptions struct {
	// Images is the runtime's image side; nil when the runtime has no images (the built-in
	// systemd runtime): image collections then report Skipped = SkipNoImageFs, not an error.
	Images ImageRuntime
	// Containers is the runtime's container side. Required: image GC needs it too, because an
	// image any container uses (running or exited) must stay.
	Containers ContainerRuntime
	// Sandboxes is the runtime's sandbox side; nil when its pods have no sandboxes to collect
	// (the built-in systemd runtime): no sandbox is listed or removed.
	Sandboxes SandboxRuntime
	// ImagePolicy and ContainerPolicy are the kubelet's policies; both are validated.
	ImagePolicy     ImagePolicy
	ContainerPolicy ContainerPolicy
	// SandboxImage is the pod sandbox (pause) image, never removed (containerd 1.6 does not
	// report it pinned). Empty: none.
	SandboxImage string
	// RecordsPath is the JSON file keeping first-detected and last-used times across restarts
	// (e.g. /var/lib/slicelet/gc-images.json). Empty: records live in memory only.
	RecordsPath string
	// PodLogRoot is the pod logs directory (/var/log/pods) whose entries of deleted pods
	// container GC removes. Empty: pod log directories are not collected.
	PodLogRoot string
	// PodState reports the pods; nil is "no source ready yet" (no pod is ever taken for
	// deleted).
	PodState func() PodState
	// Clock tells the time and waits; clock.RealClock when nil (under testing/synctest it runs
	// on the bubble's fake time).
	Clock clock.Clock
	// Logger gets one record per removal and per collection; discarded when nil.
	Logger *slog.Logger
	// Started is when the daemon started (the kubelet's beganGC, which MaxAge waits for);
	// Clock.Now() at NewCollector when zero.
	Started time.Time
	// FreshnessTimeout bounds the wait for fresh image filesystem numbers after deletions
	// (DefaultFreshnessTimeout when 0); FreshnessPoll is the interval between readings
	// (DefaultFreshnessPoll when 0).
	FreshnessTimeout time.Duration
	FreshnessPoll    time.Duration
}

// Collector executes image and container GC plans against a runtime and reports what really
// happened. Collections of one kind are serialized; image and container collections may run
// concurrently. Its methods are safe for concurrent use.
type Collector struct {
	opts  CollectorOptions
	clock clock.Clock
	log   *slog.Logger

	imageMu    sync.Mutex
	records    map[string]Record
	recordsErr error

	containerMu sync.Mutex
}

// NewCollector checks the options and loads the image records. A records file that cannot be
// parsed is not fatal: it is moved aside to RecordsPath+".corrupt" (so nothing is lost
// silently), a warning is logged, records start empty, and RecordsError reports the problem.
// A records file that cannot be read at all is an error.
func NewCollector(opts CollectorOptions) (*Collector, error) {
	if opts.Containers == nil {
		return nil, errors.New("gc collector: no container runtime")
	}
	var errs []error
	if err := opts.ImagePolicy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("image gc policy: %w", err))
	}
	if err := opts.ContainerPolicy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("container gc policy: %w", err))
	}
	if opts.PodLogRoot != "" && !filepath.IsAbs(opts.PodLogRoot) {
		errs = append(errs, fmt.Errorf("pod log root %q: must be an absolute path", opts.PodLogRoot))
	}
	if opts.RecordsPath != "" && !filepath.IsAbs(opts.RecordsPath) {
		errs = append(errs, fmt.Errorf("image gc records path %q: must be an absolute path", opts.RecordsPath))
	}
	if opts.FreshnessTimeout < 0 || opts.FreshnessPoll < 0 {
		errs = append(errs, fmt.Errorf("image fs freshness timeout %v and poll %v: must not be negative", opts.FreshnessTimeout, opts.FreshnessPoll))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gc collector: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FreshnessTimeout == 0 {
		opts.FreshnessTimeout = DefaultFreshnessTimeout
	}
	if opts.FreshnessPoll == 0 {
		opts.FreshnessPoll = DefaultFreshnessPoll
	}
	c := &Collector{opts: opts, clock: opts.Clock, log: opts.Logger, records: map[string]Record{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.opts.Started.IsZero() {
		c.opts.Started = c.clock.Now()
	}
	if opts.RecordsPath != "" {
		recs, corrupt, err := loadRecords(opts.RecordsPath)
		switch {
		case corrupt:
			aside := opts.RecordsPath + ".corrupt"
			if rerr := os.Rename(opts.RecordsPath, aside); rerr != nil {
				err = fmt.Errorf("%w; moving it aside: %w", err, rerr)
			} else {
				err = fmt.Errorf("%w (moved to %s; starting with no records)", err, aside)
			}
			c.recordsErr = err
			c.log.Warn("image gc records unreadable, starting fresh: images count as first detected now", "path", opts.RecordsPath, "error", err)
		case err != nil:
			return nil, fmt.Errorf("gc collector: %w", err)
		default:
			c.records = recs
		}
	}
	return c, nil
}

// RecordsError returns the problem found in the records file at start (it was moved aside and
// records started empty), or nil.
func (c *Collector) RecordsError() error {
	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	return c.recordsErr
}

// Records returns a copy of the image records (for status and tests).
func (c *Collector) Records() map[string]Record {
	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	return maps.Clone(c.records)
}

// Detect is the kubelet's detectImages: it lists images and containers, refreshes the records
// (first detected, last used by a container, size, pinned; forgets images that are gone) and
// persists them. The kubelet runs it every 5 minutes and at every image GC; the daemon should
// too, so that "last used" stays right between collections. Without an image runtime it does
// nothing.
func (c *Collector) Detect(ctx context.Context) error {
	if c.opts.Images == nil {
		return nil
	}
	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	_, _, err := c.detect(ctx, c.clock.Now(), false)
	return err
}

// detect lists and refreshes the records as of now; in a dry run the collector's records and
// file stay unchanged. It returns the images with their records and the containers; when only
// saving the records failed, both come with the error. Call with imageMu held.
func (c *Collector) detect(ctx context.Context, now time.Time, dryRun bool) ([]Image, []Container, error) {
	listed, err := c.opts.Images.ListImages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("image list: %w", err)
	}
	containers, err := c.opts.Containers.ListContainers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("container list: %w", err)
	}
	next, images := Detect(c.records, listed, ImagesInUse(containers), now)
	if dryRun {
		return images, containers, nil
	}
	c.records = next
	return images, containers, c.persist()
}

// persist saves the records, if there is a file. Call with imageMu held.
func (c *Collector) persist() error {
	if c.opts.RecordsPath == "" {
		return nil
	}
	return saveRecords(c.opts.RecordsPath, c.records)
}

// Duration is a time.Duration that reads and writes as Go's duration text ("1.5s") in JSON.
type Duration time.Duration

// MarshalText returns the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a duration written by MarshalText.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// Failure is one removal (or stop) that failed.
type Failure struct {
	// ID is the image, container or sandbox ID, or the log directory.
	ID string `json:"id"`
	// Op is what failed: "remove-image", "stop-container", "remove-container",
	// "stop-sandbox", "remove-sandbox" or "remove-log-dir".
	Op string `json:"op"`
	// Error is the runtime's error.
	Error string `json:"error"`
}

// errString is the JSON form of an error: null or its message.
func errString(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
