package crirt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// The worker.Runtime calls: each is one CRI call (or two where the kubelet's runtime service
// makes two), on what slicelet created (worker.LabelManaged) and on what the kubelet created
// (managedSelector). The log layout under LogRoot is
// this runtime's: RunPodSandbox and CreateContainer fill in the log directory and path.

var (
	_ worker.Runtime        = (*Runtime)(nil)
	_ worker.ImageService   = (*Runtime)(nil)
	_ worker.SandboxNetwork = (*Runtime)(nil)
)

// managedSelector selects the sandboxes or containers of the pod uid, or, for "", of every
// pod: all that carry a pod UID label (worker.LabelPodUID, the kubelet's), slicelet's own
// (worker.LabelManaged) and those the kubelet created (a node that moved from the kubelet to
// slicelet). A listing of every pod thus holds what each pod's listing holds; the worker
// adopts another agent's as the pod's once it runs the pod, and leaves those of pods it does
// not run alone (worker.Sandbox.Foreign). A CRI label selector matches values only, so the
// listing of every pod is unfiltered and pods' is kept by listedPod.
func managedSelector(uid string) map[string]string {
	if uid != "" {
		return map[string]string{worker.LabelPodUID: uid}
	}
	return map[string]string{}
}

// listedPod is the pod UID of a listed sandbox or container by its labels ("" for one no pod
// owns: not the kubelet's nor slicelet's) and whether another agent created it (it lacks
// worker.LabelManaged).
func listedPod(labels map[string]string) (uid string, foreign bool) {
	return labels[worker.LabelPodUID], labels[worker.LabelManaged] != "true"
}

func unixNano(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// RunPodSandbox creates the pod's log directory (LogRoot/<namespace>_<name>_<uid>) and runs the
// sandbox with it.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	md := config.GetMetadata()
	config.LogDirectory = r.podLogDir(md.GetNamespace(), md.GetName(), md.GetUid())
	if err := os.MkdirAll(config.LogDirectory, 0o755); err != nil {
		return "", fmt.Errorf("log directory: %w", err)
	}
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.RunPodSandboxResponse, error) {
		return r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	})
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox and every container in it; one already gone is not an error.
// A failure is retried once: containerd stops the sandbox's containers with an immediate
// SIGKILL, which fails ("ttrpc: closed") for a container whose exit it has not handled yet (see
// StopContainer); by the second call the exit is known.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	stop := func() error {
		_, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StopPodSandboxResponse, error) {
			return r.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		})
		return err
	}
	err := stop()
	if err != nil && !isNotFound(err) && ctx.Err() == nil {
		r.log.Debug("pod sandbox stop failed, retrying once", "sandbox_id", id, "error", err)
		err = stop()
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("pod sandbox %s: stop: %w", id, err)
	}
	return nil
}

// RemovePodSandbox removes a stopped sandbox, and the pod's log directory with the pod's last
// sandbox; one already gone is not an error.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	sbs, err := r.listSandboxes(ctx, &runtimeapi.PodSandboxFilter{Id: id})
	if err != nil {
		return err
	}
	_, err = call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.RemovePodSandboxResponse, error) {
		return r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("pod sandbox %s: remove: %w", id, err)
	}
	for _, sb := range sbs {
		uid := sb.GetLabels()[worker.LabelPodUID]
		if uid == "" {
			continue
		}
		if left, err := r.listSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector(uid)}); err != nil || len(left) > 0 {
			continue
		}
		md := sb.GetMetadata()
		if err := os.RemoveAll(r.podLogDir(md.GetNamespace(), md.GetName(), uid)); err != nil {
			return fmt.Errorf("pod %s: log directory: %w", uid, err)
		}
	}
	return nil
}

func (r *Runtime) listSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListPodSandboxResponse, error) {
		return r.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	})
	if err != nil {
		return nil, fmt.Errorf("pod sandboxes: list: %w", err)
	}
	return resp.Items, nil
}

// CreateContainer creates a container in the sandbox; its log goes to <container>/<restart
// count>.log in the pod's log directory.
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	md := sandboxConfig.GetMetadata()
	sandboxConfig.LogDirectory = r.podLogDir(md.GetNamespace(), md.GetName(), md.GetUid())
	config.LogPath = containerLogPath(config.GetMetadata().GetName(), int(config.GetMetadata().GetAttempt())+1)
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.CreateContainerResponse, error) {
		return r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: config, SandboxConfig: sandboxConfig})
	})
	if err != nil {
		return "", err
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	_, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StartContainerResponse, error) {
		return r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	})
	return err
}

// StopContainer stops a container within grace (the runtime sends the stop signal, then
// SIGKILL); one already gone is not an error.
//
// A stop that fails for a container that ended anyway is a success. containerd's CRI
// (internal/cri/server/container_stop.go) sends the stop signal, waits up to the grace period
// for the exit event to be handled, then sends SIGKILL; on a loaded host the container may have
// exited (its shim gone) while the event was still queued, and the SIGKILL then fails with
// "failed to kill container ...: ttrpc: closed". So after an error the container's state
// decides: exited (or gone) is stopped; still running gets one more stop, whose answer stands.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	secs := int64((grace + time.Second - 1) / time.Second)
	stop := func() error {
		_, err := call(ctx, r, grace, func(ctx context.Context) (*runtimeapi.StopContainerResponse, error) {
			return r.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: secs})
		})
		if err == nil || isNotFound(err) {
			return nil
		}
		return err
	}
	err := stop()
	for attempt := 0; err != nil && attempt < 2; attempt++ {
		if r.containerEnded(ctx, id) {
			r.log.Debug("container stop failed but the container ended", "container_id", id, "error", err)
			return nil
		}
		if attempt == 0 {
			err = stop()
		}
	}
	if err != nil {
		return fmt.Errorf("container %s: stop: %w", id, err)
	}
	return nil
}

// containerEnded reports whether the runtime says the container exited or no longer exists.
func (r *Runtime) containerEnded(ctx context.Context, id string) bool {
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	})
	if isNotFound(err) {
		return true
	}
	return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
}

// RemoveContainer removes a container and its log file; one already gone is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %s: remove: %w", id, err)
	}
	_, err = call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.RemoveContainerResponse, error) {
		return r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("container %s: remove: %w", id, err)
	}
	if p := st.GetStatus().GetLogPath(); p != "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("container %s: remove log %s: %w", id, p, err)
		}
	}
	return nil
}

// state maps a CRI container state.
func state(s runtimeapi.ContainerState) worker.State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return worker.StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return worker.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return worker.StateExited
	}
	return worker.StateUnknown
}

// containerName is a container's name in its pod: its label, else its metadata name.
func containerName(labels map[string]string, md *runtimeapi.ContainerMetadata) string {
	if n := labels[worker.LabelContainerName]; n != "" {
		return n
	}
	return md.GetName()
}

func (r *Runtime) listContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	})
	if err != nil {
		return nil, fmt.Errorf("containers: list: %w", err)
	}
	return resp.Containers, nil
}

// ContainerStatus inspects a container (without its sandbox ID); worker.ErrNotFound when it is
// gone.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (worker.ContainerStatus, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	})
	if isNotFound(err) {
		return worker.ContainerStatus{}, fmt.Errorf("container %s: %w", id, worker.ErrNotFound)
	}
	if err != nil {
		return worker.ContainerStatus{}, err
	}
	s := resp.Status
	if s == nil {
		return worker.ContainerStatus{}, fmt.Errorf("container %s: status: the runtime returned none", id)
	}
	st := worker.ContainerStatus{
		Container: worker.Container{
			ID: s.Id, Name: containerName(s.Labels, s.Metadata),
			Attempt: s.GetMetadata().GetAttempt(), State: state(s.State), CreatedAt: unixNano(s.CreatedAt), ImageRef: s.ImageRef,
			Hash: s.Annotations[worker.AnnotationContainerHash],
		},
		StartedAt: unixNano(s.StartedAt),
	}
	st.PodUID, st.Foreign = listedPod(s.Labels)
	if g, ok := worker.GracePeriod(s.Annotations); ok {
		st.Grace = g
	}
	if st.State == worker.StateExited {
		st.FinishedAt = unixNano(s.FinishedAt)
		st.ExitCode, st.Reason, st.Message = s.ExitCode, s.Reason, s.Message
	}
	// The CRI's ContainerStatus does not carry the sandbox: the worker takes it from the
	// listing.
	return st, nil
}

// UpdateContainerResources changes a container's cgroup configuration (the CRI call the
// kubelet makes for an in-place resize).
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.LinuxContainerResources) error {
	_, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.UpdateContainerResourcesResponse, error) {
		return r.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: resources})
	})
	if err != nil {
		return fmt.Errorf("container %s: update resources: %w", id, err)
	}
	return nil
}

// ExecSync runs cmd in the container and waits for it, at most timeout; a command that ran out
// of time is an error wrapping context.DeadlineExceeded (the kubelet's remote runtime client
// turns codes.DeadlineExceeded into its TimeoutError).
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (worker.ExecResult, error) {
	resp, err := call(ctx, r, timeout, func(ctx context.Context) (*runtimeapi.ExecSyncResponse, error) {
		return r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64((timeout + time.Second - 1) / time.Second)})
	})
	if status.Code(err) == codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		return worker.ExecResult{}, fmt.Errorf("container %s: exec: %w: %w", id, err, context.DeadlineExceeded)
	}
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("container %s: exec: %w", id, err)
	}
	return worker.ExecResult{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitCode: resp.ExitCode}, nil
}

// PodSandboxIPs are the IPs of the sandbox's network (PodSandboxStatus), the pod's IPs; none
// for a sandbox in the host's network namespace.
func (r *Runtime) PodSandboxIPs(ctx context.Context, id string) ([]string, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.PodSandboxStatusResponse, error) {
		return r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	})
	if err != nil {
		return nil, fmt.Errorf("pod sandbox %s: status: %w", id, err)
	}
	net := resp.GetStatus().GetNetwork()
	var ips []string
	if ip := net.GetIp(); ip != "" {
		ips = append(ips, ip)
	}
	for _, a := range net.GetAdditionalIps() {
		if a.GetIp() != "" {
			ips = append(ips, a.GetIp())
		}
	}
	return ips, nil
}

// ImageStatus returns the image's ID, "" when it is not present.
func (r *Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (string, error) {
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	})
	if err != nil {
		return "", err
	}
	return st.GetImage().GetId(), nil
}

// ImageUser is the image's user per the runtime's image status: its uid, the user name when
// the image names a user that is not a number, or 0 when it names none.
func (r *Runtime) ImageUser(ctx context.Context, image *runtimeapi.ImageSpec) (*int64, string, error) {
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	})
	if err != nil {
		return nil, "", err
	}
	img := st.GetImage()
	if img == nil {
		return nil, "", fmt.Errorf("image %q: not present", image.GetImage())
	}
	if u := img.GetUid(); u != nil {
		v := u.GetValue()
		return &v, "", nil
	}
	if n := img.GetUsername(); n != "" {
		return nil, n, nil
	}
	// An image that names no user runs as root (kuberuntime getImageUser).
	root := int64(0)
	return &root, "", nil
}

// PullImage pulls the image and returns its reference and size; the size is asked for with
// best effort, an error leaving it 0 (pkg/kubelet/images/puller.go).
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, sandboxConfig *runtimeapi.PodSandboxConfig) (string, uint64, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.PullImageResponse, error) {
		return r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, SandboxConfig: sandboxConfig})
	})
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unknown {
		// The runtime's message alone, without "rpc error: code = Unknown desc =", in the
		// events and the waiting message, as the kubelet's CRI client strips it
		// (k8s.io/cri-client/pkg/remote_image.go, PullImage).
		err = errors.New(st.Message())
	}
	if err != nil {
		return "", 0, err
	}
	st, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	})
	if err != nil {
		return resp.ImageRef, 0, nil
	}
	return resp.ImageRef, st.GetImage().GetSize(), nil
}

// podLogDir is the pod's log directory: LogRoot/<namespace>_<name>_<uid>.
func (r *Runtime) podLogDir(namespace, name, uid string) string {
	return filepath.Join(r.opts.LogRoot, fmt.Sprintf("%s_%s_%s", namespace, name, uid))
}
