package crirt

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

var _ pods.Streamer = (*Runtime)(nil)

// StreamURL asks the runtime's streaming server for the URL of req (the kubelet's GetExec,
// GetAttach and GetPortForward, pkg/kubelet/kubelet_pods.go,
// pkg/kubelet/kuberuntime/kuberuntime_container.go and kuberuntime_sandbox.go): exec and
// attach go to the pod's running container of that name, port-forward to the pod's sandbox.
// Attach's TTY is the container's (whether it runs in a terminal cannot change once started),
// not the request's.
func (r *Runtime) StreamURL(ctx context.Context, pod *v1.Pod, req pods.StreamRequest) (*url.URL, error) {
	var raw string
	switch req.Kind {
	case pods.StreamExec, pods.StreamAttach:
		id, err := r.runningContainer(ctx, pod, req.UID, req.Container)
		if err != nil {
			return nil, err
		}
		if req.Kind == pods.StreamExec {
			resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ExecResponse, error) {
				return r.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: req.Command,
					Tty: req.TTY, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr})
			})
			if err != nil {
				return nil, fmt.Errorf("exec in container %s: %w", id, err)
			}
			raw = resp.Url
			break
		}
		c, _ := lifecycle.ContainerByName(pod, req.Container)
		tty := c != nil && c.TTY
		resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.AttachResponse, error) {
			return r.rs.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id,
				Tty: tty, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr})
		})
		if err != nil {
			return nil, fmt.Errorf("attach to container %s: %w", id, err)
		}
		raw = resp.Url
	case pods.StreamPortForward:
		if req.UID != "" && req.UID != string(pod.UID) {
			return nil, fmt.Errorf("pod not found (%q)", podFullName(pod))
		}
		id, err := r.sandboxOf(ctx, string(pod.UID))
		if err != nil {
			return nil, err
		}
		resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.PortForwardResponse, error) {
			return r.rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: req.Ports})
		})
		if err != nil {
			return nil, fmt.Errorf("port-forward to pod sandbox %s: %w", id, err)
		}
		raw = resp.Url
	default:
		return nil, fmt.Errorf("stream kind %q: want exec, attach or portForward", req.Kind)
	}
	return streamingURL(raw)
}

// streamingURL checks the runtime's answer: an absolute http(s) URL (the kubelet's remote
// runtime refuses an empty one, k8s.io/cri-client/pkg/remote_runtime.go: "URL is not set").
func streamingURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("streaming url: not set by the runtime")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("streaming url %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("streaming url %q: want an absolute http or https URL", raw)
	}
	return u, nil
}

// RunInContainer runs cmd in the container with ExecSync and returns its stdout followed by
// its stderr (pkg/kubelet/kuberuntime/kuberuntime_container.go, RunInContainer: no timeout
// of its own; the call timeout bounds it here). A non-zero exit is an error naming the
// command, its exit code and its stderr, as the kubelet's remote runtime words it.
func (r *Runtime) RunInContainer(ctx context.Context, pod *v1.Pod, container string, cmd []string) ([]byte, error) {
	id, err := r.runningContainer(ctx, pod, "", container)
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ExecSyncResponse, error) {
		return r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
	})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", id, err)
	}
	out := append(slices.Clip(resp.Stdout), resp.Stderr...)
	if resp.ExitCode != 0 {
		return out, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr)
	}
	return out, nil
}

// podFullName is the kubelet's name_namespace of a pod (kubecontainer.GetPodFullName).
func podFullName(pod *v1.Pod) string { return pod.Name + "_" + pod.Namespace }

// runningContainer is the ID of the pod's running container of that name (the kubelet's
// findContainer: the running pod of that full name and, when uid is given, that UID).
func (r *Runtime) runningContainer(ctx context.Context, pod *v1.Pod, uid, name string) (string, error) {
	notFound := fmt.Errorf("container not found (%q)", name)
	if uid != "" && uid != string(pod.UID) {
		return "", notFound
	}
	sel := managedSelector(string(pod.UID))
	sel[worker.LabelContainerName] = name
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel,
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	})
	if err != nil {
		return "", fmt.Errorf("containers of pod %s: list: %w", pod.UID, err)
	}
	var best *runtimeapi.Container
	for _, c := range resp.Containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if best == nil || c.GetMetadata().GetAttempt() > best.GetMetadata().GetAttempt() {
			best = c
		}
	}
	if best == nil {
		return "", notFound
	}
	return best.Id, nil
}

// sandboxOf is the ID of the pod's sandbox to port-forward into. The kubelet takes the newest
// (pkg/kubelet/kuberuntime/kuberuntime_sandbox.go, getSandboxIDByPodUID); a ready one goes
// first here, so that a replacement sandbox that failed does not hide the one that runs.
func (r *Runtime) sandboxOf(ctx context.Context, uid string) (string, error) {
	sbs, err := r.listSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector(uid)})
	if err != nil {
		return "", err
	}
	if len(sbs) == 0 {
		return "", fmt.Errorf("pod %s: no pod sandbox found", uid)
	}
	slices.SortStableFunc(sbs, func(a, b *runtimeapi.PodSandbox) int {
		ra, rb := a.State == runtimeapi.PodSandboxState_SANDBOX_READY, b.State == runtimeapi.PodSandboxState_SANDBOX_READY
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		switch {
		case a.CreatedAt > b.CreatedAt:
			return -1
		case a.CreatedAt < b.CreatedAt:
			return 1
		}
		return 0
	})
	return sbs[0].Id, nil
}
