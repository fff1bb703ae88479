// Package api is slicelet's local API: JSON over HTTP on a unix socket (default
// /run/slicelet/slicelet.sock, mode 0660, owner root, group from [api] group).
//
// The server (NewServer) checks every connection's peer credentials (SO_PEERCRED): only root and
// members of the configured group get an answer; everyone else gets 403 with a JSON error. The
// client (NewClient) is what slicectl uses; it turns a missing or refusing socket into
// ErrDaemonDown and every error response into a *StatusError.
//
// Routes (all answers are JSON unless noted; errors are {"error": "...", "problems": [...]}):
//
//	GET    /healthz                                  "ok\n" (text); 503 naming what the watchdog waits for
//	GET    /readyz                                   "ok\n" (text); 503 naming what keeps the node from Ready
//	GET    /v1/pods?labelSelector=&fieldSelector=    v1.PodList (every namespace), with its resourceVersion
//	GET    /v1/pods?watch=true&resourceVersion=&timeoutSeconds=   watch events (metav1.WatchEvent JSON, one a line):
//	                                                 sent when the Backend (a PodNotifier) reports a change, else within a second
//	GET    /v1/pods/{namespace}/{name}               v1.Pod
//	POST   /v1/pods?dryRun=                          ApplyResult; body: one pod manifest, YAML or JSON, ≤ 1 MiB
//	DELETE /v1/pods/{namespace}/{name}?gracePeriodSeconds=   204 (the grace needs a Backend that is a GracefulDeleter)
//	GET    /v1/pods/{namespace}/{name}/log?container=&follow=&previous=&tailLines=&limitBytes=&sinceTime=&sinceSeconds=&timestamps=   text, streamed (pods.ParseLogQuery, as the kubelet API)
//	GET    /v1/node                                  NodeInfo
//	POST   /v1/explain/pod                           slices.PodExplanation; body: one pod manifest
//	GET    /v1/explain/node                          slices.NodeExplanation
//	GET    /v1/explain/eviction                      eviction.Explanation (the last decision)
//	GET    /v1/metrics/pods                          metrics.k8s.io/v1beta1 PodMetricsList (every namespace)
//	GET    /v1/metrics/nodes                         metrics.k8s.io/v1beta1 NodeMetricsList (this node)
//	GET    /v1/events?fieldSelector=&watch=&resourceVersion=   v1.EventList, or watch events (Backend implementing EventLister)
//	GET    /v1/version                               buildinfo.Info (version, git commit, build date, Go version)
//
// The metrics are what metrics-server serves kubectl top: per container, the CPU used between the
// daemon's last two samples (cores) and the last working-set memory; a pod or node sampled once
// has none yet (the lists leave it out).
//
// Error statuses: 400 bad request (query, empty body), 403 peer not allowed, or a
// *ForbiddenError (a pod Pod Security refuses; its error body has "reason": "Forbidden"), 404
// ErrNotFound or pods.ErrNoLogs, 405 wrong method, 409 ErrConflict, 413 body over 1 MiB, 422
// *InvalidError, 503 the request was canceled (client gone, daemon stopping), 500 anything else.
//
// Every request that changes something (POST, DELETE; a dry run changes nothing) is logged at
// Info as "api change" with the peer's credentials (peer_uid, peer_gid, peer_pid, peer_comm),
// the method, path and status; a pod applied through the API carries who applied it in the
// annotation AnnotationAppliedBy.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// DefaultSocket is the socket path when the configuration names none.
const DefaultSocket = "/run/slicelet/slicelet.sock"

// MaxManifestBytes is the largest request body POST /v1/pods and POST /v1/explain/pod accept:
// the Kubernetes API server's (manifest.MaxInputBytes).
const MaxManifestBytes = manifest.MaxInputBytes

// Backend is what the server serves. The daemon implements it; tests use a fake.
type Backend interface {
	// ListPods returns every pod, with Status and the annotations pods.AnnotationSource and
	// pods.AnnotationOrigin. The pods are read-only below their top-level fields (and those of
	// their ObjectMeta, Spec and Status): they may share slices and maps with the daemon's
	// records, which the server only reads and encodes.
	ListPods(ctx context.Context) ([]v1.Pod, error)
	// GetPod returns one pod, or an error wrapping ErrNotFound.
	GetPod(ctx context.Context, namespace, name string) (v1.Pod, error)
	// ApplyPod creates or replaces an API pod from one manifest (YAML or JSON); with dryRun it
	// checks everything and returns the pod as it would be stored, storing nothing. Bad input is
	// an *InvalidError with field paths; a name that belongs to a file-source pod is
	// ErrConflict; a pod the API's Pod Security level refuses is a *ForbiddenError. The peer
	// that asked is PeerFrom(ctx). The result's Action is decided where the pod is stored, so
	// that of concurrent applies of a new name exactly one is ActionCreated.
	ApplyPod(ctx context.Context, manifest []byte, dryRun bool) (ApplyResult, error)
	// DeletePod deletes an API pod: ErrNotFound if there is none, ErrConflict for a file-source
	// pod (the message says which manifest file to remove).
	DeletePod(ctx context.Context, namespace, name string) error
	// Logs writes a container's output to w (see pods.LogOptions); ErrNotFound for an unknown
	// pod or container, pods.ErrNoLogs when there is nothing to show.
	Logs(ctx context.Context, namespace, name, container string, opts pods.LogOptions, w io.Writer) error
	// Node returns the node with status.capacity (including "pods": max pods),
	// status.allocatable and status.conditions. Pod counts are added by the server from ListPods
	// (NodeInfo.Pods), so Node need not compute them.
	Node(ctx context.Context) (v1.Node, error)
	// ExplainPod explains one manifest with the daemon's configuration, capacity and cgroup mode.
	ExplainPod(ctx context.Context, manifest []byte) (slices.PodExplanation, error)
	// ExplainNode explains the node with the daemon's configuration, capacity, cgroup mode and
	// active pods.
	ExplainNode(ctx context.Context) (slices.NodeExplanation, error)
	// PodMetrics returns the metrics of every pod sampled at least twice (podstats.Sampler).
	PodMetrics(ctx context.Context) ([]metricsv1beta1.PodMetrics, error)
	// NodeMetrics returns the node's metrics, or none before it was sampled twice.
	NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error)
	// ExplainEviction explains the eviction manager's last decision: thresholds met, node
	// conditions, the ranking with reasons and the pod chosen (At "" before its first cycle).
	ExplainEviction(ctx context.Context) (eviction.Explanation, error)
	// CollectImages runs an image collection now (with dryRun: plans it and changes nothing).
	// A collection that ran returns its result, with its problems in Error, and a nil error;
	// the error is for a collection that could not run at all.
	CollectImages(ctx context.Context, dryRun bool) (gc.ImageResult, error)
	// CollectContainers is CollectImages for dead containers, sandboxes and pod log directories.
	CollectContainers(ctx context.Context, dryRun bool) (gc.ContainerResult, error)
}

// Errors a Backend returns (wrapped with %w) and the client hands back (errors.Is works on both
// sides of the socket).
var (
	// ErrNotFound is 404: no such pod (or container).
	ErrNotFound = errors.New("not found")
	// ErrConflict is 409: the request collides with what another source owns.
	ErrConflict = errors.New("conflict")
	// ErrDaemonDown is returned by the client when nothing listens on the socket (missing file,
	// connection refused). The error is a *DaemonDownError.
	ErrDaemonDown = errors.New("daemon down")
)

// AnnotationAppliedBy is set on every pod applied through the API to the credentials of the
// process that applied its current version ("uid=1000 gid=1000 pid=4242", Peer.String). A value
// in the manifest is replaced; re-applying an unchanged pod keeps the first applier.
const AnnotationAppliedBy = "slicelet.io/applied-by"

// ReasonForbidden is the "reason" of a *ForbiddenError's 403 body, the API server's status reason.
const ReasonForbidden = "Forbidden"

// ForbiddenError is 403 with reason "Forbidden": a policy refused what was asked (a pod that
// violates the API's Pod Security level). Unlike a refused peer (403 without a reason), the
// caller may use the API; this request is what is refused.
type ForbiddenError struct {
	// Message is the whole message, in the API server's words:
	// `pods "web" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`.
	Message string
}

// PodForbidden is the API server's refusal of pod name for reason why.
func PodForbidden(name, why string) *ForbiddenError {
	return &ForbiddenError{Message: fmt.Sprintf("pods %q is forbidden: %s", name, why)}
}

// Error is the message.
func (e *ForbiddenError) Error() string { return e.Message }

// InvalidError is 422: the manifest cannot be used. Problems name the field path and value, one
// problem each.
type InvalidError struct {
	Problems []string
}

// Error joins the problems.
func (e *InvalidError) Error() string {
	if len(e.Problems) == 0 {
		return "invalid pod manifest"
	}
	return "invalid pod manifest: " + strings.Join(e.Problems, "; ")
}

// Actions of ApplyResult, as kubectl apply prints them.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
)

// ApplyResult is the answer to POST /v1/pods.
type ApplyResult struct {
	// Action is ActionCreated (no pod of that namespace/name existed), ActionUnchanged (the pod
	// existed with the same UID, labels, annotations and spec) or ActionConfigured.
	Action string `json:"action"`
	// Pod is the pod as the backend stored it (or, in a dry run, would store it).
	Pod v1.Pod `json:"pod"`
	// DryRun is true when nothing was stored (POST /v1/pods?dryRun=true).
	DryRun bool `json:"dryRun,omitempty"`
}

// NodeInfo is the answer to GET /v1/node.
type NodeInfo struct {
	// Node has status.capacity, status.allocatable and status.conditions.
	Node v1.Node `json:"node"`
	// Pods counts the node's pods.
	Pods PodCounts `json:"pods"`
	// Health is the state of every part of slicelet the health tracker follows.
	Health []health.WarnableState `json:"health,omitempty"`
}

// PodCounts counts pods by phase and QoS class.
type PodCounts struct {
	// Total is every pod slicelet knows, whatever its phase.
	Total int `json:"total"`
	// Active is the pods not in a terminal phase (not Succeeded or Failed): what counts against
	// max pods.
	Active int `json:"active"`
	// Max is the node's max pods (status.capacity "pods"); 0 when the node does not say.
	Max int64 `json:"max"`
	// Phases counts every pod by status.phase ("" counts as Pending).
	Phases map[v1.PodPhase]int `json:"phases"`
	// QOS counts the active pods by QoS class.
	QOS map[v1.PodQOSClass]int `json:"qos"`
	// Rejected is the Failed pods that never ran a container and carry a status.reason: pods
	// admission refused (OutOfcpu, OutOfmemory, OutOfpods, …).
	Rejected int `json:"rejected"`
}

// CountPods computes PodCounts; maxPods is the node's max pods.
func CountPods(list []v1.Pod, maxPods int64) PodCounts {
	c := PodCounts{Total: len(list), Max: maxPods, Phases: map[v1.PodPhase]int{}, QOS: map[v1.PodQOSClass]int{}}
	for i := range list {
		p := &list[i]
		phase := p.Status.Phase
		if phase == "" {
			phase = v1.PodPending
		}
		c.Phases[phase]++
		if phase == v1.PodSucceeded || phase == v1.PodFailed {
			if phase == v1.PodFailed && p.Status.Reason != "" && len(p.Status.ContainerStatuses) == 0 && len(p.Status.InitContainerStatuses) == 0 {
				c.Rejected++
			}
			continue
		}
		c.Active++
		qos := p.Status.QOSClass
		if qos == "" {
			qos = slices.QOSClass(p)
		}
		c.QOS[qos]++
	}
	return c
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error    string   `json:"error"`
	Reason   string   `json:"reason,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// StatusError is an error response the client received: the HTTP status and the server's message.
// It unwraps to ErrNotFound (404), ErrConflict (409), an *InvalidError (422) or a *ForbiddenError
// (403 with reason Forbidden) so callers can use
// errors.Is / errors.As as they would on the server side.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Message is the server's error message.
	Message string
	// Problems are the individual problems of a 422.
	Problems []string
	// Reason is the body's reason: ReasonForbidden for a *ForbiddenError, "" otherwise.
	Reason string
}

// Error is the server's message (the status code is not repeated: messages are written for people).
func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("slicelet answered HTTP %d", e.Code)
	}
	return e.Message
}

// Unwrap maps the status to the package's error values.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case 404:
		return ErrNotFound
	case 409:
		return ErrConflict
	case 422:
		return &InvalidError{Problems: e.Problems}
	case 403:
		if e.Reason == ReasonForbidden {
			return &ForbiddenError{Message: e.Message}
		}
	}
	return nil
}

// DaemonDownError is the client's error when nothing listens on the socket.
type DaemonDownError struct {
	// Socket is the path the client tried.
	Socket string
	// Err is the dial error (connection refused, no such file or directory).
	Err error
}

// Error says what failed and how to look into it.
func (e *DaemonDownError) Error() string {
	return fmt.Sprintf("cannot reach slicelet at %s: %v\n  is it running? systemctl status slicelet; journalctl -u slicelet", e.Socket, e.Err)
}

// Is makes errors.Is(err, ErrDaemonDown) true.
func (e *DaemonDownError) Is(target error) bool { return target == ErrDaemonDown }

// Unwrap returns the dial error.
func (e *DaemonDownError) Unwrap() error { return e.Err }

// SocketPermissionError is the client's error when the kernel refuses to connect to the socket
// (EACCES: the caller is neither root nor in the socket's group). It matches os.ErrPermission.
type SocketPermissionError struct {
	// Socket is the path the client tried.
	Socket string
	// Group is the socket's group name (or gid), "" if unknown.
	Group string
	// Err is the dial error.
	Err error
}

// Error says what to do about it.
func (e *SocketPermissionError) Error() string {
	who := "a member of the socket's group"
	if e.Group != "" {
		who = fmt.Sprintf("a member of group %q", e.Group)
	}
	return fmt.Sprintf("cannot connect to slicelet at %s: permission denied\n  run as root or as %s ([api] group in the configuration)", e.Socket, who)
}

// Unwrap returns the dial error (which is EACCES, hence os.ErrPermission).
func (e *SocketPermissionError) Unwrap() error { return e.Err }
