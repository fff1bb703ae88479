package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Kinds of collection, as ImageResult.Kind and ContainerResult.Kind report them.
const (
	// KindImages is the periodic image GC (the kubelet's GarbageCollect).
	KindImages = "images"
	// KindUnusedImages is eviction's image reclaim (the kubelet's DeleteUnusedImages).
	KindUnusedImages = "unused-images"
	// KindContainers is the periodic container GC.
	KindContainers = "containers"
	// KindAllUnusedContainers is eviction's container reclaim (evictNonDeletedPods).
	KindAllUnusedContainers = "all-unused-containers"
)

// Why an image collection did nothing (ImageResult.Skipped).
const (
	// SkipNoImageFs: the runtime has no images (the built-in systemd runtime).
	SkipNoImageFs = "no image filesystem"
	// SkipImageGCDisabled: the high threshold is 100 and there is no maximum age, so the
	// kubelet would not run image GC at all.
	SkipImageGCDisabled = "image gc disabled (high threshold 100, no maximum age)"
)

// ImageResult tells what an image collection planned and what really happened. It marshals to
// stable camelCase JSON: every key is always present, lists are [] when empty.
type ImageResult struct {
	// Kind is KindImages or KindUnusedImages.
	Kind string `json:"kind"`
	// DryRun is set when nothing was removed on purpose; the records were not updated either.
	DryRun bool `json:"dryRun"`
	// StartedAt and Duration time the collection.
	StartedAt time.Time `json:"startedAt"`
	Duration  Duration  `json:"duration"`
	// Skipped says why nothing was attempted (SkipNoImageFs, SkipImageGCDisabled); "" otherwise.
	Skipped string `json:"skipped"`
	// ImageFs is the image filesystem before the collection; null when it was not read.
	ImageFs *ImageFsInfo `json:"imageFs"`
	// UsagePercent and AmountToFree are the kubelet's numbers (PlanImageGC); 0 for
	// KindUnusedImages.
	UsagePercent int   `json:"usagePercent"`
	AmountToFree int64 `json:"amountToFree"`
	// Remove is the plan: the images to remove, in order, with their reasons.
	Remove []ImageRemoval `json:"remove"`
	// Kept is every other image and why it stays.
	Kept []Keep `json:"kept"`
	// Removed are the images the runtime removed, in order; Failed the removals it refused.
	Removed []string  `json:"removed"`
	Failed  []Failure `json:"failed"`
	// PlannedFreedBytes is the sum of the listed sizes in Remove; RemovedBytes that of the
	// images really removed. Both are what the runtime lists, not what the disk shows:
	// layers shared between images are counted in each.
	PlannedFreedBytes int64 `json:"plannedFreedBytes"`
	RemovedBytes      int64 `json:"removedBytes"`
	// Measured is set when the image filesystem was read again after the runtime's numbers had
	// become newer than the last deletion; then FreedBytes is the available space gained
	// (after − before, negative if something else filled the disk meanwhile), ImageFsAfter the
	// reading and UsagePercentAfter the kubelet's usage from it. Otherwise FreedBytes is 0 and
	// MeasureError says why (e.g. the runtime's numbers were not refreshed in time).
	Measured          bool         `json:"measured"`
	FreedBytes        int64        `json:"freedBytes"`
	ImageFsAfter      *ImageFsInfo `json:"imageFsAfter"`
	UsagePercentAfter int          `json:"usagePercentAfter"`
	MeasureWait       Duration     `json:"measureWait"`
	MeasureError      string       `json:"measureError"`
	// Error is null or the collection's error (the same as the returned one): the kubelet's
	// messages for capacity 0 and for not enough eligible images, a *MeasuredShortfallError,
	// failed removals, or garbage from the runtime.
	Error *string `json:"error"`
}

// MeasuredShortfallError reports that the plan removed enough by the runtime's listed sizes but
// the image filesystem shows less freed than needed (shared layers, a disk filled meanwhile).
type MeasuredShortfallError struct {
	// AmountToFree is what was needed; Freed what the image filesystem shows.
	AmountToFree, Freed int64
	// UsagePercent is the usage after the collection; LowThreshold the target.
	UsagePercent, LowThreshold int
}

// Error words it after the kubelet's FreeDiskSpaceFailed message.
func (e *MeasuredShortfallError) Error() string {
	return fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but the image filesystem shows only %d bytes freed (usage %d%%, low threshold %d%%).",
		e.AmountToFree, e.Freed, e.UsagePercent, e.LowThreshold)
}

// CollectImages is the kubelet's image GarbageCollect: detect (records refreshed and saved),
// plan with PlanImageGC, remove in order — a failed removal is reported and skipped, as the
// kubelet does — and then, beyond the kubelet, wait until the runtime's image filesystem
// numbers are newer than the last deletion (at most FreshnessTimeout) and report the space
// really freed. The error is nil, ErrInvalidCapacity (after any age-based removals, as the
// kubelet), a *FreeSpaceError (not enough eligible; the eligible ones are removed), a
// *MeasuredShortfallError, the removals' errors, or garbage from the runtime (wrapping
// ErrInvalidInput; nothing removed). A dry run plans only: nothing is removed and the records
// are not updated.
func (c *Collector) CollectImages(ctx context.Context, dryRun bool) (ImageResult, error) {
	return c.collectImages(ctx, KindImages, dryRun)
}

// DeleteUnusedImages is eviction's image reclaim (the kubelet's DeleteUnusedImages): every
// image no container uses, not pinned, not the sandbox image, first detected at least MinAge
// ago, whatever the thresholds; then the same re-measure as CollectImages.
func (c *Collector) DeleteUnusedImages(ctx context.Context) (ImageResult, error) {
	return c.collectImages(ctx, KindUnusedImages, false)
}

func (c *Collector) collectImages(ctx context.Context, kind string, dryRun bool) (res ImageResult, err error) {
	start := c.clock.Now()
	res = ImageResult{Kind: kind, DryRun: dryRun, StartedAt: start}
	defer func() {
		res.Duration = Duration(c.clock.Now().Sub(start))
		res.Error = errString(err)
		res.Remove, res.Kept = nonNil(res.Remove), nonNil(res.Kept)
		res.Removed, res.Failed = nonNil(res.Removed), nonNil(res.Failed)
		c.logImages(res)
	}()
	if c.opts.Images == nil {
		res.Skipped = SkipNoImageFs
		return res, nil
	}
	policy := c.opts.ImagePolicy
	if kind == KindImages && policy.HighThresholdPercent >= 100 && policy.MaxAge == 0 {
		res.Skipped = SkipImageGCDisabled
		return res, nil
	}

	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	var errs []error
	images, containers, err := c.detect(ctx, start, dryRun)
	if images == nil && err != nil {
		return res, fmt.Errorf("image gc: %w", err)
	}
	if err != nil {
		errs = append(errs, err) // the records could not be saved; collect anyway
	}
	before, err := c.readFs(ctx)
	if err != nil {
		return res, fmt.Errorf("image gc: %w", err)
	}
	res.ImageFs = &before

	var plan ImagePlan
	if kind == KindImages {
		plan = PlanImageGC(before.ImageFs, images, containers, c.opts.SandboxImage, policy, start, c.opts.Started)
	} else {
		plan = PlanDeleteUnusedImages(images, containers, c.opts.SandboxImage, policy, start)
	}
	res.UsagePercent, res.AmountToFree = plan.UsagePercent, plan.AmountToFree
	res.Remove, res.Kept, res.PlannedFreedBytes = plan.Remove, plan.Kept, plan.FreedBytes
	if errors.Is(plan.Err, ErrInvalidInput) {
		return res, fmt.Errorf("image gc: %w", plan.Err)
	}
	if dryRun {
		return res, plan.Err
	}

	// Remove in order. As the kubelet's freeSpace, a failed removal is skipped and the next
	// eligible image is tried while not enough has been freed: the planner is asked again
	// without the images tried so far, crediting what was removed. (The kubelet keeps walking
	// even when the remaining usage is below the high threshold; the re-plan stops there.)
	var lastDeletion time.Time
	var spaceFreed int64
	tried := map[string]bool{}
	for round := plan.Remove; len(round) > 0; {
		failed := false
		for _, r := range round {
			if ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("image gc: %w", ctx.Err()))
				break
			}
			tried[r.ID] = true
			if err := c.opts.Images.RemoveImage(ctx, r.ID); err != nil {
				failed = true
				res.Failed = append(res.Failed, Failure{ID: r.ID, Op: "remove-image", Error: err.Error()})
				errs = append(errs, fmt.Errorf("image %s: remove: %w", r.ID, err))
				c.log.Warn("image removal failed", "image_id", r.ID, "reason", string(r.Reason), "error", err)
				continue
			}
			lastDeletion = c.clock.Now()
			res.Removed = append(res.Removed, r.ID)
			res.RemovedBytes = addSat(res.RemovedBytes, r.SizeBytes)
			if r.Reason == ReasonSpace {
				spaceFreed = addSat(spaceFreed, r.SizeBytes)
			}
			delete(c.records, r.ID)
			c.log.Info("image removed", "image_id", r.ID, "size_bytes", r.SizeBytes, "reason", string(r.Reason), "kind", kind)
		}
		round = nil
		if failed && ctx.Err() == nil && kind == KindImages && plan.AmountToFree > 0 && spaceFreed < plan.AmountToFree {
			rest := make([]Image, 0, len(images))
			for _, img := range images {
				if !tried[img.ID] {
					rest = append(rest, img)
				}
			}
			fs := before.ImageFs
			fs.AvailableBytes = min(addSat(fs.AvailableBytes, res.RemovedBytes), fs.CapacityBytes)
			next := PlanImageGC(fs, rest, containers, c.opts.SandboxImage, policy, start, c.opts.Started)
			for _, r := range next.Remove {
				res.Remove = append(res.Remove, r)
				res.PlannedFreedBytes = addSat(res.PlannedFreedBytes, r.SizeBytes)
				round = append(round, r)
				res.Kept = slices.DeleteFunc(res.Kept, func(k Keep) bool { return k.ID == r.ID })
			}
		}
	}
	if len(res.Removed) > 0 {
		if err := c.persist(); err != nil {
			errs = append(errs, err)
		}
		c.measure(ctx, &res, lastDeletion)
	}
	var fse *FreeSpaceError
	switch {
	case errors.As(plan.Err, &fse) || kind == KindImages && plan.AmountToFree > 0 && spaceFreed < plan.AmountToFree:
		// The kubelet's message, with what was really removed as "eligible".
		errs = append([]error{&FreeSpaceError{AmountToFree: plan.AmountToFree, Eligible: spaceFreed}}, errs...)
	case plan.Err != nil:
		errs = append([]error{plan.Err}, errs...)
	case res.Measured && res.AmountToFree > 0 && res.FreedBytes < res.AmountToFree:
		errs = append(errs, &MeasuredShortfallError{AmountToFree: res.AmountToFree, Freed: res.FreedBytes, UsagePercent: res.UsagePercentAfter, LowThreshold: policy.LowThresholdPercent})
	}
	return res, errors.Join(errs...)
}

// readFs reads the image filesystem and rejects garbage.
func (c *Collector) readFs(ctx context.Context) (ImageFsInfo, error) {
	info, err := c.opts.Images.ImageFsInfo(ctx)
	if err != nil {
		return ImageFsInfo{}, fmt.Errorf("image filesystem: %w", err)
	}
	switch {
	case info.CapacityBytes < 0:
		return info, invalid("image filesystem capacity %d: must not be negative", info.CapacityBytes)
	case info.AvailableBytes < 0:
		return info, invalid("image filesystem available bytes %d: must not be negative", info.AvailableBytes)
	case info.UsedBytes < 0:
		return info, invalid("image filesystem used bytes %d: must not be negative", info.UsedBytes)
	}
	return info, nil
}

// measure waits until the runtime's image filesystem numbers are newer than lastDeletion —
// containerd refreshes them every stats_collect_period and removes content asynchronously, so
// a reading right after RemoveImage shows nothing freed (kubernetes#130663) — and records the
// space really freed. It gives up after FreshnessTimeout and says so.
func (c *Collector) measure(ctx context.Context, res *ImageResult, lastDeletion time.Time) {
	deadline := lastDeletion.Add(c.opts.FreshnessTimeout)
	for {
		info, err := c.readFs(ctx)
		if err != nil {
			res.MeasureError = err.Error()
			return
		}
		res.ImageFsAfter = &info
		if info.Timestamp.IsZero() || info.Timestamp.After(lastDeletion) {
			res.Measured = true
			res.MeasureWait = Duration(max(c.clock.Now().Sub(lastDeletion), 0))
			res.FreedBytes = info.AvailableBytes - res.ImageFs.AvailableBytes
			if info.CapacityBytes > 0 {
				res.UsagePercentAfter = 100 - int(mulDiv(min(info.AvailableBytes, info.CapacityBytes), 100, info.CapacityBytes))
			}
			return
		}
		if !c.clock.Now().Before(deadline) {
			res.MeasureError = fmt.Sprintf("image filesystem numbers not refreshed within %v of the last deletion (measured at %s, last deletion at %s): space freed unknown",
				c.opts.FreshnessTimeout, info.Timestamp.UTC().Format(time.RFC3339Nano), lastDeletion.UTC().Format(time.RFC3339Nano))
			return
		}
		select {
		case <-ctx.Done():
			res.MeasureError = fmt.Sprintf("image filesystem re-measure: %v", ctx.Err())
			return
		case <-c.clock.After(c.opts.FreshnessPoll):
		}
	}
}

func (c *Collector) logImages(res ImageResult) {
	level := c.log.Info
	if res.DryRun || res.Skipped != "" {
		level = c.log.Debug
	}
	args := []any{"kind", res.Kind, "dry_run", res.DryRun, "duration", time.Duration(res.Duration),
		"usage_percent", res.UsagePercent, "amount_to_free", res.AmountToFree,
		"planned", len(res.Remove), "removed", len(res.Removed), "failed", len(res.Failed),
		"planned_freed_bytes", res.PlannedFreedBytes, "measured", res.Measured, "freed_bytes", res.FreedBytes}
	if res.Skipped != "" {
		args = append(args, "skipped", res.Skipped)
	}
	if res.MeasureError != "" {
		args = append(args, "measure_error", res.MeasureError)
	}
	if res.Error != nil {
		args = append(args, "error", *res.Error)
	}
	level("image gc finished", args...)
}

// nonNil makes a nil slice empty, so that it marshals as [] instead of null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
