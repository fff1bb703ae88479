package pods

import (
	"context"
	"errors"
	"net/url"

	v1 "k8s.io/api/core/v1"
)

// StreamKind is what a streaming request of the kubelet API asks the runtime for.
type StreamKind string

// The streaming requests (pkg/kubelet/server/server.go: /exec, /attach, /portForward).
const (
	StreamExec        StreamKind = "exec"
	StreamAttach      StreamKind = "attach"
	StreamPortForward StreamKind = "portForward"
)

// StreamRequest is one exec, attach or port-forward request, as the kubelet reads it from
// the URL (the kubelet's remotecommand Options and portforward V4Options).
type StreamRequest struct {
	Kind      StreamKind
	Namespace string
	Pod       string
	// UID is the pod's UID when the URL names one; empty: any pod of that name.
	UID string
	// Container is the container to exec in or attach to (not port-forward).
	Container string
	// Command is exec's command.
	Command []string
	// Stdin, Stdout, Stderr and TTY are the streams exec and attach open.
	Stdin, Stdout, Stderr, TTY bool
	// Ports are port-forward's ports when the client named them (websockets); SPDY clients
	// name them in each stream instead.
	Ports []int32
}

// ErrNoStreaming is a runtime that cannot stream (exec, attach, port-forward): the systemd
// runtime.
var ErrNoStreaming = errors.New("the container runtime has no streaming")

// Streamer is a container runtime that streams (the kubelet's StreamingRuntime): it answers
// with the URL of its streaming server for the request, which the kubelet API proxies to.
type Streamer interface {
	// StreamURL asks the runtime for the streaming URL of req on pod.
	StreamURL(ctx context.Context, pod *v1.Pod, req StreamRequest) (*url.URL, error)
	// RunInContainer runs cmd in the container and returns its stdout followed by its
	// stderr (the kubelet's RunInContainer: a non-zero exit is an error).
	RunInContainer(ctx context.Context, pod *v1.Pod, container string, cmd []string) ([]byte, error)
}
