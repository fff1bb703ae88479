package crirt

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/gc"
)

// The primitives of image GC (gc.ImageRuntime); deciding what to remove is the GC's plan.
// Container and sandbox GC go through the pod worker (worker.ContainerGC, worker.SandboxGC).
var _ gc.ImageRuntime = (*Runtime)(nil)

// SandboxImage is the pod sandbox image, which image GC must never remove (containerd 1.6
// does not report it pinned): Options.SandboxImage when set, else what the runtime reports in
// its verbose status (containerd's CRI config "sandboxImage").
func (r *Runtime) SandboxImage(ctx context.Context) (string, error) {
	if r.opts.SandboxImage != "" {
		return r.opts.SandboxImage, nil
	}
	r.sandboxMu.Lock()
	defer r.sandboxMu.Unlock()
	if r.sandboxImage != "" {
		return r.sandboxImage, nil
	}
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return r.rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	})
	if err != nil {
		return "", fmt.Errorf("sandbox image: runtime status: %w", err)
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if raw := resp.Info["config"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return "", fmt.Errorf("sandbox image: runtime status config: %w", err)
		}
	}
	if cfg.SandboxImage == "" {
		return "", fmt.Errorf("sandbox image: cri runtime %s does not report one; set runtime.sandbox_image", r.opts.Endpoint)
	}
	r.sandboxImage = cfg.SandboxImage
	return cfg.SandboxImage, nil
}

// ListImages lists every image the runtime holds. The sandbox image is reported pinned (as
// containerd 1.7 does and 1.6 does not): removing it would make every new pod fail. When the
// sandbox image is not known (no option, and the runtime does not say), listing fails rather
// than let image GC take it.
func (r *Runtime) ListImages(ctx context.Context) ([]gc.ListedImage, error) {
	sandbox, err := r.SandboxImage(ctx)
	if err != nil {
		return nil, fmt.Errorf("images: list: %w", err)
	}
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListImagesResponse, error) {
		return r.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	})
	if err != nil {
		return nil, fmt.Errorf("images: list: %w", err)
	}
	out := make([]gc.ListedImage, 0, len(resp.Images))
	for _, img := range resp.Images {
		names := append(append([]string(nil), img.RepoTags...), img.RepoDigests...)
		pinned := img.Pinned || gc.IsImage(img.Id, names, sandbox)
		out = append(out, gc.ListedImage{ID: img.Id, Names: names, SizeBytes: clampInt64(img.Size), Pinned: pinned})
	}
	return out, nil
}

// clampInt64 converts a runtime's unsigned size; a garbage value beyond int64 stays visibly
// wrong (MaxInt64) for the GC to report instead of wrapping negative.
func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// ImageFsInfo measures the image filesystem: used bytes and the timestamp from the runtime
// (containerd refreshes them every stats_collect_period), capacity and available space from
// statfs of the mountpoint the runtime reports (containerd reports no capacity). The numbers are
// returned as they are, capacity 0 included: judging them is the GC's job.
func (r *Runtime) ImageFsInfo(ctx context.Context) (gc.ImageFsInfo, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
		return r.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	})
	if err != nil {
		return gc.ImageFsInfo{}, fmt.Errorf("image filesystem info: %w", err)
	}
	if len(resp.ImageFilesystems) == 0 {
		return gc.ImageFsInfo{}, fmt.Errorf("image filesystem info: cri runtime %s reported no image filesystem", r.opts.Endpoint)
	}
	fs := resp.ImageFilesystems[0]
	mp := fs.GetFsId().GetMountpoint()
	if mp == "" {
		return gc.ImageFsInfo{}, fmt.Errorf("image filesystem info: cri runtime %s reported no mountpoint", r.opts.Endpoint)
	}
	r.imageFsPath.Store(&mp)
	statfs := r.statfs
	if statfs == nil {
		statfs = statfsBytes
	}
	capacity, avail, err := statfs(mp)
	if err != nil {
		return gc.ImageFsInfo{}, fmt.Errorf("image filesystem %s: %w", mp, err)
	}
	out := gc.ImageFsInfo{ImageFs: gc.ImageFs{CapacityBytes: capacity, AvailableBytes: avail}}
	if fs.UsedBytes != nil {
		out.UsedBytes = clampInt64(fs.UsedBytes.Value)
	}
	if fs.Timestamp > 0 {
		out.Timestamp = time.Unix(0, fs.Timestamp)
	}
	return out, nil
}

// ImageFsMountpoint is the mountpoint of the runtime's image store, for the eviction
// manager's imagefs.* signals: the one the last ImageFsInfo reported, else asked now (an
// unreachable runtime is an error wrapping pods.ErrRuntimeUnavailable).
func (r *Runtime) ImageFsMountpoint(ctx context.Context) (string, error) {
	if p := r.imageFsPath.Load(); p != nil {
		return *p, nil
	}
	if _, err := r.ImageFsInfo(ctx); err != nil {
		if p := r.imageFsPath.Load(); p != nil {
			return *p, nil // the mountpoint came back; only statfs failed
		}
		return "", err
	}
	return *r.imageFsPath.Load(), nil
}

// RemoveImage removes one image by ID (every tag of it); an image already gone is not an error.
func (r *Runtime) RemoveImage(ctx context.Context, id string) error {
	_, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.RemoveImageResponse, error) {
		return r.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("image %s: remove: %w", id, err)
	}
	return nil
}
