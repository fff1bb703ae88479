package worker

import (
	"context"
	"errors"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// Runtime is a container runtime as the worker drives it: the CRI's sandbox and container
// calls (k8s.io/cri-api runtime v1; the kubelet's internalapi.RuntimeService, trimmed to what
// the worker uses). The worker builds the configurations (PodSandboxConfig, ContainerConfig:
// kuberuntime's generatePodSandboxConfig and generateContainerConfig) and decides everything
// about a pod's lifecycle; a Runtime only does what it is asked and reports what it has. Its
// methods are safe for concurrent use.
//
// Implementations: systemdrt (a sandbox is the pod slice plus the runtime's record of the pod;
// a container run is a transient service in the pod slice) and crirt (a CRI endpoint).
//
// Errors that mean the runtime cannot be reached wrap pods.ErrRuntimeUnavailable. Removing
// or stopping something that is already gone is not an error.
type Runtime interface {
	// Name is "systemd" or "cri".
	Name() string
	// Type is the scheme of its container IDs in pod statuses (<type>://<id>: "systemd",
	// "containerd").
	Type() string
	// Validate reports what this runtime cannot run, each problem with its field path and
	// value (e.g. images in the systemd runtime).
	Validate(pod *v1.Pod) field.ErrorList

	// RunPodSandbox creates and starts a pod sandbox (its cgroup parent is the pod slice,
	// config.Linux.CgroupParent) with the runtime handler of the pod's RuntimeClass ("" for
	// the default) and returns its ID.
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	// StopPodSandbox stops a sandbox and kills whatever still runs in it; it is then not ready.
	StopPodSandbox(ctx context.Context, id string) error
	// RemovePodSandbox removes a stopped sandbox and what the runtime keeps for it.
	RemovePodSandbox(ctx context.Context, id string) error
	// ListPodSandbox lists the sandboxes of the pod with that UID, or of every pod for "":
	// slicelet's and, for a runtime another agent shares, that agent's (Foreign), so that a
	// listing of every pod holds what the pod's own listing holds.
	ListPodSandbox(ctx context.Context, podUID string) ([]Sandbox, error)

	// CreateContainer creates a container in a sandbox (not started) and returns its ID.
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// StartContainer starts a created container. A start that fails leaves the container
	// exited (reason StartError), as containerd does, and returns the error.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends the container its stop signal, SIGKILL after grace, and returns once
	// it has ended (the CRI's StopContainer with a timeout).
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// UpdateContainerResources changes the cgroup configuration of a created or running
	// container in place (the CRI's UpdateContainerResources: an in-place resize).
	UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.LinuxContainerResources) error
	// RemoveContainer removes a container that is not running.
	RemoveContainer(ctx context.Context, id string) error
	// ListContainers lists the containers of the pod with that UID, or of every pod for ""
	// (slicelet's and another agent's, as ListPodSandbox), in every state.
	ListContainers(ctx context.Context, podUID string) ([]Container, error)
	// ContainerStatus inspects one container; ErrNotFound when it is gone.
	ContainerStatus(ctx context.Context, id string) (ContainerStatus, error)
	// ExecSync runs cmd in the container's context and waits for it, at most timeout.
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (ExecResult, error)

	// Logs writes a container's output to w: the current instance, or with opts.Previous the
	// one before it; pods.ErrNoLogs when there is none. Where the output is kept (the journal,
	// files) is the runtime's.
	Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, w io.Writer) error
}

// ImageService is the image side of a runtime that runs images (the CRI runtime): the worker
// makes a container's image present per its pull policy (the kubelet's EnsureImageExists)
// before it creates the container.
type ImageService interface {
	// ImageStatus returns the image's ID ("" when it is not present).
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (string, error)
	// ImageUser is the user the image runs as: its numeric uid, or the user name it gives
	// (both unset when it gives none, which is root), for runAsNonRoot (the kubelet's
	// getImageUser).
	ImageUser(ctx context.Context, image *runtimeapi.ImageSpec) (uid *int64, username string, err error)
	// PullImage pulls the image and returns its reference and its size in bytes (0 when the
	// runtime cannot say; the kubelet's puller asks for the size with best effort).
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, sandboxConfig *runtimeapi.PodSandboxConfig) (ref string, size uint64, err error)
}

// ErrNotFound is wrapped by ContainerStatus when the container does not exist.
var ErrNotFound = errors.New("not found")

// Sandbox is one pod sandbox.
type Sandbox struct {
	ID     string
	PodUID string
	// Attempt counts the pod's sandboxes from 0.
	Attempt   uint32
	Ready     bool
	CreatedAt time.Time
	// Foreign: another agent created it (the kubelet, on a node that changed agent; it lacks
	// LabelManaged). It is its pod's like slicelet's own once slicelet runs the pod; the
	// orphans' cleanup and sandbox GC leave it alone.
	Foreign bool
}

// State is a container's state (the CRI's ContainerState).
type State int

// Container states.
const (
	// StateCreated: created, not started yet.
	StateCreated State = iota
	// StateRunning: its process runs (StartedAt may still be unknown right after the start).
	StateRunning
	// StateExited: its process ended, or it can no longer run.
	StateExited
	// StateUnknown: the runtime cannot tell.
	StateUnknown
)

func (s State) String() string {
	switch s {
	case StateCreated:
		return "created"
	case StateRunning:
		return "running"
	case StateExited:
		return "exited"
	}
	return "unknown"
}

// Container is one container (one run of a pod's container) as a listing shows it.
type Container struct {
	ID        string
	SandboxID string
	PodUID    string
	// Name is the container's name in its pod.
	Name string
	// Attempt is the restart count of this run (the CRI's metadata.attempt).
	Attempt   uint32
	State     State
	CreatedAt time.Time
	// ImageRef is the image the container runs; empty without images.
	ImageRef string
	// Hash is the run's container hash as created (AnnotationContainerHash: ContainerHash in
	// hex); empty when the runtime does not keep it.
	Hash string
	// Foreign: another agent created it (see Sandbox.Foreign); container GC leaves it alone.
	Foreign bool
}

// ContainerStatus is one container inspected.
type ContainerStatus struct {
	Container
	// StartedAt is when its process started (zero while unknown); FinishedAt when it ended.
	StartedAt  time.Time
	FinishedAt time.Time
	// ExitCode, Signal (0 when the runtime cannot tell), Reason and Message are set once it
	// exited.
	ExitCode int32
	Signal   int32
	Reason   string
	Message  string
	// Grace is the pod's termination grace period the container was created with.
	Grace time.Duration
}

// ExecResult is what ExecSync's command did.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}
