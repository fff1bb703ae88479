// Package pods runs pods: it merges what the pod sources want (the manifest directory and the
// local API), admits pods against node allocatable, gives each admitted pod its slice
// (slices/hierarchy.Manager) and has the runtime run its containers, and keeps every pod's status.
//
// This file holds the contracts between the parts: sources produce Snapshots, a Runtime runs
// containers, and the controller (controller.go) ties them together.
package pods

import (
	"context"
	"errors"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/slices"
)

// Pod sources, as the kubelet names them in the kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceAPI  = "api"
	// SourceCluster is the Kubernetes API server of cluster mode (internal/cluster): the pods
	// bound to this node. (The kubelet calls that source "api"; slicelet's "api" is its local
	// API.)
	SourceCluster = "cluster"
)

// Annotations slicelet sets on every pod it runs (the kubelet's names where it has them).
const (
	// AnnotationSource is "file" or "api".
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationOrigin is the manifest file a file-source pod came from.
	AnnotationOrigin = "slicelet.io/origin"
)

// Desired is one pod a source wants to run. Pod has its namespace and UID filled in (a file
// pod without metadata.uid gets its content-derived UID) and has passed slices.ValidatePod.
type Desired struct {
	Pod *v1.Pod
	// Source is SourceFile or SourceAPI.
	Source string
	// Origin is the manifest file for SourceFile, "api" for SourceAPI.
	Origin string
}

// Problem is an input a source could not use: a broken manifest file or document, or a stored
// API pod that does not decode. It is reported (log, status) and changes nothing: the pods the
// origin produced at its last good read stay in the snapshot.
type Problem struct {
	Origin string `json:"origin"`
	Error  string `json:"error"`
	// Pod is the namespace/name the input stands for, when known without decoding it (a stored
	// API pod's file name).
	Pod string `json:"pod,omitempty"`
	// Hold says a pod of this input may be running: a stored API pod that does not load. While
	// any such problem is reported nothing is destroyed as an orphan, and the pod is listed
	// (phase Unknown, the problem as its message) until an apply or delete of it resolves it.
	Hold bool `json:"hold,omitempty"`
	// Source is the source of the input (SourceFile, SourceAPI), as Controller.Problems
	// reports it.
	Source string `json:"source,omitempty"`
}

// Snapshot is everything one source wants right now. A source sends a complete snapshot on every
// change (level-triggered); a pod missing from it is to be deleted. The pods are shared with the
// source and read-only for everyone: a source replaces a pod that changes, never changes it in
// place, and the controller copies a pod before it changes anything (withEvictionAnnotations).
type Snapshot struct {
	Source   string
	Pods     []Desired
	Problems []Problem
}

// LogOptions select what Runtime.Logs writes.
type LogOptions struct {
	// Follow keeps streaming until ctx ends or the container instance ends.
	Follow bool
	// Previous selects the instance before the current one (kubectl logs --previous).
	Previous bool
	// TailLines limits the output to the last N lines; 0 means all. It applies after SinceTime.
	TailLines int
	// SinceTime, when set, leaves out the lines written before it (kubectl logs --since and
	// --since-time).
	SinceTime time.Time
	// Timestamps prefixes every line with the time it was written, RFC 3339 with nanoseconds
	// and a space, as the kubelet does (kubectl logs --timestamps).
	Timestamps bool
}

// Line applies SinceTime and Timestamps to one line written at ts: the line to write, or false
// for a line to leave out.
func (o LogOptions) Line(ts time.Time, line []byte) ([]byte, bool) {
	if !o.SinceTime.IsZero() && ts.Before(o.SinceTime) {
		return nil, false
	}
	if !o.Timestamps {
		return line, true
	}
	return append([]byte(ts.UTC().Format(time.RFC3339Nano)+" "), line...), true
}

// ErrTooManyFollowers is returned by Runtime.Logs with Follow when the runtime follows as many
// logs as it may (the APIs answer 429).
var ErrTooManyFollowers = errors.New("too many log followers")

// ErrNoLogs is returned by Runtime.Logs when the container (or its previous instance) has none.
var ErrNoLogs = errors.New("no logs")

// ErrRuntimeUnavailable is wrapped by a Runtime's errors when the container runtime behind it
// cannot be reached right now (the CRI endpoint is down or restarting). The failure is
// transient: the controller reports the pod's phase as Unknown, deletes nothing and cleans no
// orphans until the runtime answers again, then resyncs.
var ErrRuntimeUnavailable = errors.New("container runtime unavailable")

// Runtime runs the containers of pods inside their slices: the pod worker (package worker) over
// the configured container runtime (the built-in systemd runtime or a CRI runtime).
type Runtime interface {
	// Name is "systemd" or "cri".
	Name() string
	// Validate reports what slicelet cannot run with this runtime (e.g. images in the systemd
	// runtime), with field paths and values.
	Validate(pod *v1.Pod) field.ErrorList
	// SyncPod makes the pod's containers match its spec inside slice: init containers run to
	// completion in order, then the app containers (restartable init containers keep running);
	// exited containers restart per restartPolicy with the kubelet's back-off; a restarted
	// container is a new instance and the dead one stays inspectable. It is level-triggered and
	// idempotent: the controller calls it on every change and periodically, and it must never
	// start a duplicate (also after slicelet restarts). A pod whose containers ended for good
	// (nothing runs or will run again) gets its sandboxes stopped and its volumes torn down,
	// as the kubelet kills a finished pod; its exited containers stay for status and logs. It
	// returns the pod's current status (phase, container statuses with restart counts,
	// states, exit codes, OOMKilled, times).
	SyncPod(ctx context.Context, pod *v1.Pod, slice slices.PodSlice) (v1.PodStatus, error)
	// KillPod stops every container of the pod gracefully within grace (stop signal, then
	// SIGKILL), waits until they are gone, and returns the final status.
	KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error)
	// Forget drops everything the runtime keeps about a deleted pod (dead instances, records).
	Forget(ctx context.Context, uid string) error
	// PodUIDs lists the UIDs of pods that have containers (running or dead) in the runtime, for
	// adoption and orphan cleanup after a restart.
	PodUIDs(ctx context.Context) ([]string, error)
	// Relist lists every container once (the kubelet's PLEG relist): the pods whose containers
	// changed or whose back-off ended are due for a sync, and the given pods that were not
	// observed yet get their status from that one listing (see Relisted).
	Relist(ctx context.Context, pods []*v1.Pod) (Relisted, error)
	// NextSync is when the pod's earliest back-off ends; zero when none is pending.
	NextSync(uid string) time.Time
	// Logs writes a container's output to w.
	Logs(ctx context.Context, pod *v1.Pod, container string, opts LogOptions, w io.Writer) error
}

// Relisted is what one relist found.
type Relisted struct {
	// Due are the UIDs of the pods whose containers changed, appeared or vanished, or whose
	// back-off ended: they need a sync now.
	Due []string
	// Statuses are the statuses of the pods the relist was given that had not been observed
	// before (after slicelet started: all of them), by UID, computed from that one listing
	// without acting on anything. A restarted slicelet reports the pods that kept running
	// Running at once, and never Pending first.
	Statuses map[string]v1.PodStatus
}

// Slices is what the controller needs from the slice manager (*hierarchy.Manager, slices/hierarchy).
type Slices interface {
	EnsurePod(ctx context.Context, pod *v1.Pod) (slices.PodSlice, error)
	DestroyPod(ctx context.Context, uid string) error
	CleanupOrphans(ctx context.Context) ([]slices.Orphan, error)
	Pods() []slices.PodSlice
}
