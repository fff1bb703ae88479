package gc

import (
	"context"
	"time"
)

// ImageFsInfo is the runtime's image filesystem numbers and when they were measured.
type ImageFsInfo struct {
	ImageFs
	// UsedBytes is what the runtime's images occupy on the filesystem.
	UsedBytes int64 `json:"usedBytes"`
	// Timestamp is when the runtime measured the numbers. After removing images the collector
	// waits for a timestamp newer than its last deletion before it reports the space really
	// freed, because containerd refreshes its image fs usage on its own schedule
	// (stats_collect_period) and removes content asynchronously (kubernetes#130663). The zero
	// time means the numbers are live, measured
	// during the call.
	Timestamp time.Time `json:"timestamp"`
}

// ImageRuntime is what image GC needs from a container runtime that has images (the CRI
// runtime). The built-in systemd runtime has none; the collector then reports "no image
// filesystem" instead of an error.
type ImageRuntime interface {
	// ListImages lists every image the runtime holds: ID as RemoveImage takes it, Names its
	// repo tags and digests (CRI Image.repo_tags + repo_digests), size and pinned flag.
	ListImages(ctx context.Context) ([]ListedImage, error)
	// ImageFsInfo measures the image filesystem (capacity and available from statfs of the
	// runtime's image store mountpoint).
	ImageFsInfo(ctx context.Context) (ImageFsInfo, error)
	// RemoveImage removes one image by ID; removing an image that is already gone is not an
	// error.
	RemoveImage(ctx context.Context, id string) error
}

// ContainerRuntime is what container GC needs from a container runtime (CRI or the built-in
// systemd runtime).
type ContainerRuntime interface {
	// ListContainers lists every container the daemon manages, running or dead (exited
	// containers stay listed until removed), with its pod UID, name, state, creation time,
	// image reference (CRI ContainerStatus.image_ref; empty without images) and sandbox ID.
	// Image GC keeps every image a listed container uses, so a container must never be left
	// out because it has exited.
	ListContainers(ctx context.Context) ([]Container, error)
	// StopContainer stops a container that may still run (state unknown) before its removal.
	StopContainer(ctx context.Context, id string) error
	// RemoveContainer removes a dead container; removing one that is already gone is not an
	// error.
	RemoveContainer(ctx context.Context, id string) error
}

// SandboxRuntime is what sandbox GC needs from a runtime whose pods have sandboxes of their
// own (the CRI runtime). The built-in systemd runtime has none to collect; the collector then
// collects no sandboxes.
type SandboxRuntime interface {
	// ListSandboxes lists the pod sandboxes, ready or not.
	ListSandboxes(ctx context.Context) ([]Sandbox, error)
	// StopSandbox stops a sandbox before its removal.
	StopSandbox(ctx context.Context, id string) error
	// RemoveSandbox removes a stopped sandbox; removing one that is already gone is not an
	// error.
	RemoveSandbox(ctx context.Context, id string) error
}
