// Package apitest is an in-memory fake of the backend the local API's server serves from
// (internal/api's Backend), shared by the API's tests and slicectl's.
//
// The fake does not import internal/api (the API's own in-package tests use it): the API's
// result type is the type parameter R and its errors come in through Hooks.
package apitest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// Actions of an apply, as kubectl apply prints them (the API's ActionCreated and its kin).
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
)

// Hooks are the API's types and errors the fake answers with.
type Hooks[R any] struct {
	// Result makes the answer to an apply.
	Result func(action string, pod v1.Pod) R
	// NotFound and Conflict are the API's sentinel errors, wrapped.
	NotFound, Conflict error
	// Invalid is the error of a manifest that does not parse; Forbidden that of a pod Pod
	// Security refuses.
	Invalid   func(problems []string) error
	Forbidden func(name, why string) error
	// AppliedBy, when set, tells the peer of a request; its string is recorded on applied pods
	// under AppliedByAnnotation.
	AppliedBy           func(ctx context.Context) (string, bool)
	AppliedByAnnotation string
}

// Backend is an in-memory backend. Every field is read and written under Mu.
type Backend[R any] struct {
	Hooks Hooks[R]

	Mu   sync.Mutex
	Pods map[string]v1.Pod // "namespace/name"
	// LogText maps "namespace/name/container" to the container's output.
	LogText map[string]string
	// Follow, when set, is used for followed logs: it is called with the context and the writer.
	Follow func(ctx context.Context, w io.Writer) error
	// Err, when set, is returned by every call.
	Err error
	// NodeObject is what Node returns.
	NodeObject v1.Node

	// Apply is how ApplyPod stores a pod: ApplyAPI (the daemon's store: the manifest's own
	// annotations kept, the applier recorded, phase Pending, unchanged when the UID is) or
	// ApplySpec (annotations replaced, unchanged when the spec is, the stored pod returned).
	Apply ApplyMode
	// ApplyConflict and DeleteConflict are the formats of the errors for a pod from a manifest
	// file: the pod's key (%q), the API's Conflict (%w) and the file (%s), in the order written.
	ApplyConflict, DeleteConflict string
	// Tail, when set, makes Logs honour TailLines and answer pods.ErrNoLogs for empty output.
	Tail bool

	// ExplainUID and ExplainMode are what ExplainPod explains a pod with; NodeExplanation is
	// what ExplainNode returns.
	ExplainUID      types.UID
	ExplainMode     units.Mode
	NodeExplanation slices.NodeExplanation
	// Eviction is the eviction manager's last decision as ExplainEviction returns it.
	Eviction eviction.Explanation
	// ImageGC and ContainerGC are what CollectImages and CollectContainers return (DryRun is
	// set from the request).
	ImageGC     gc.ImageResult
	ContainerGC gc.ContainerResult
	// PodMetricsList and NodeMetricsList are what the metrics endpoints return.
	PodMetricsList  []metricsv1beta1.PodMetrics
	NodeMetricsList []metricsv1beta1.NodeMetrics

	// LastLogOpts records the options of the last Logs call, and LastLogs the same as
	// "container follow=… previous=… tail=… since=… timestamps=…".
	LastLogOpts pods.LogOptions
	LastLogs    string
	// GCCalls records the collections asked for, as "images dry" / "containers run".
	GCCalls []string
	// LastDryRun is the dryRun of the last ApplyPod.
	LastDryRun bool
}

// ApplyMode is how ApplyPod stores a pod (see Backend.Apply).
type ApplyMode int

const (
	ApplyAPI ApplyMode = iota
	ApplySpec
)

// Baseline is the API's default Pod Security level.
var Baseline = func() admission.PodSecurity {
	p, err := admission.ParsePodSecurity("baseline", "latest")
	if err != nil {
		panic(err)
	}
	return p
}()

// Add stores pod (namespace "default" when it has none).
func (f *Backend[R]) Add(pod v1.Pod) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	f.Pods[pod.Namespace+"/"+pod.Name] = pod
}

func (f *Backend[R]) ListPods(context.Context) ([]v1.Pod, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	var out []v1.Pod
	for _, p := range f.Pods {
		out = append(out, p)
	}
	return out, nil
}

func (f *Backend[R]) GetPod(_ context.Context, ns, name string) (v1.Pod, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return v1.Pod{}, f.Err
	}
	p, ok := f.Pods[ns+"/"+name]
	if !ok {
		return v1.Pod{}, fmt.Errorf("pod %q: %w", ns+"/"+name, f.Hooks.NotFound)
	}
	return p, nil
}

// ApplyPod refuses what Pod Security baseline refuses, as the daemon's API level does by default.
func (f *Backend[R]) ApplyPod(ctx context.Context, body []byte, dryRun bool) (R, error) {
	pod, action, err := f.applyPod(ctx, body, dryRun)
	if err != nil {
		var zero R
		return zero, err
	}
	return f.Hooks.Result(action, pod), nil
}

// applyPod is ApplyPod's work; the action compares with the pod stored before, under the lock.
func (f *Backend[R]) applyPod(ctx context.Context, body []byte, dryRun bool) (v1.Pod, string, error) {
	if f.Err != nil {
		return v1.Pod{}, "", f.Err
	}
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return v1.Pod{}, "", f.Hooks.Invalid([]string{err.Error()})
	}
	pod := parsed[0]
	if d := admission.CheckPodSecurity(pod, Baseline); !d.Admit {
		return v1.Pod{}, "", f.Hooks.Forbidden(pod.Name, d.Message)
	}
	uid, err := slices.PodUID(pod, "api")
	if err != nil && f.Apply == ApplyAPI {
		return v1.Pod{}, "", err
	}
	pod.UID = types.UID(uid)
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.LastDryRun = dryRun
	key := pod.Namespace + "/" + pod.Name
	old, exists := f.Pods[key]
	if exists && old.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return v1.Pod{}, "", fmt.Errorf(f.ApplyConflict, key, old.Annotations[pods.AnnotationOrigin], f.Hooks.Conflict)
	}
	action := ActionCreated
	switch f.Apply {
	case ApplySpec:
		pod.Annotations = map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}
		if exists {
			if equality.Semantic.DeepEqual(old.Spec, pod.Spec) {
				return old, ActionUnchanged, nil
			}
			action = ActionConfigured
		}
	default:
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[pods.AnnotationSource] = pods.SourceAPI
		pod.Annotations[pods.AnnotationOrigin] = "api"
		if f.Hooks.AppliedBy != nil {
			if peer, ok := f.Hooks.AppliedBy(ctx); ok {
				pod.Annotations[f.Hooks.AppliedByAnnotation] = peer
			}
		}
		pod.Status.Phase = v1.PodPending
		if exists {
			action = ActionConfigured
			if old.UID == pod.UID {
				action = ActionUnchanged
			}
		}
	}
	if !dryRun {
		f.Pods[key] = *pod
	}
	return *pod, action, nil
}

func (f *Backend[R]) DeletePod(_ context.Context, ns, name string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	key := ns + "/" + name
	p, ok := f.Pods[key]
	if !ok {
		return fmt.Errorf("pod %q: %w", key, f.Hooks.NotFound)
	}
	if p.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return fmt.Errorf(f.DeleteConflict, key, f.Hooks.Conflict, p.Annotations[pods.AnnotationOrigin])
	}
	delete(f.Pods, key)
	return nil
}

func (f *Backend[R]) Logs(ctx context.Context, ns, name, container string, opts pods.LogOptions, w io.Writer) error {
	f.Mu.Lock()
	f.LastLogOpts = opts
	since := "-"
	if !opts.SinceTime.IsZero() {
		since = opts.SinceTime.UTC().Format(time.RFC3339Nano)
	}
	f.LastLogs = fmt.Sprintf("%s follow=%v previous=%v tail=%d since=%s timestamps=%v", container, opts.Follow, opts.Previous, opts.TailLines, since, opts.Timestamps)
	follow, berr := f.Follow, f.Err
	text, ok := f.LogText[ns+"/"+name+"/"+container]
	f.Mu.Unlock()
	if berr != nil {
		return berr
	}
	if opts.Follow && follow != nil {
		return follow(ctx, w)
	}
	if !ok {
		return fmt.Errorf("container %q of pod %s/%s: %w", container, ns, name, f.Hooks.NotFound)
	}
	if f.Tail {
		if text == "" {
			return pods.ErrNoLogs
		}
		if opts.TailLines > 0 {
			lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) > opts.TailLines {
				lines = lines[len(lines)-opts.TailLines:]
			}
			text = strings.Join(lines, "") + "\n"
		}
	}
	_, err := io.WriteString(w, text)
	return err
}

func (f *Backend[R]) Node(context.Context) (v1.Node, error) {
	if f.Err != nil {
		return v1.Node{}, f.Err
	}
	return f.NodeObject, nil
}

func (f *Backend[R]) ExplainPod(_ context.Context, body []byte) (slices.PodExplanation, error) {
	if f.Err != nil {
		return slices.PodExplanation{}, f.Err
	}
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return slices.PodExplanation{}, f.Hooks.Invalid([]string{err.Error()})
	}
	pod := parsed[0]
	pod.UID = f.ExplainUID
	return slices.ExplainPod(pod, slices.Options{}, f.ExplainMode, slices.Capacity{Memory: 16 << 30})
}

func (f *Backend[R]) ExplainNode(context.Context) (slices.NodeExplanation, error) {
	if f.Err != nil {
		return slices.NodeExplanation{}, f.Err
	}
	return f.NodeExplanation, nil
}

func (f *Backend[R]) PodMetrics(context.Context) ([]metricsv1beta1.PodMetrics, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	return f.PodMetricsList, nil
}

func (f *Backend[R]) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	return f.NodeMetricsList, nil
}

func (f *Backend[R]) ExplainEviction(context.Context) (eviction.Explanation, error) {
	if f.Err != nil {
		return eviction.Explanation{}, f.Err
	}
	return f.Eviction, nil
}

func (f *Backend[R]) gcCall(kind string, dryRun bool) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	mode := "run"
	if dryRun {
		mode = "dry"
	}
	f.GCCalls = append(f.GCCalls, kind+" "+mode)
}

func (f *Backend[R]) CollectImages(_ context.Context, dryRun bool) (gc.ImageResult, error) {
	if f.Err != nil {
		return gc.ImageResult{}, f.Err
	}
	f.gcCall("images", dryRun)
	r := f.ImageGC
	r.DryRun = dryRun
	return r, nil
}

func (f *Backend[R]) CollectContainers(_ context.Context, dryRun bool) (gc.ContainerResult, error) {
	if f.Err != nil {
		return gc.ContainerResult{}, f.Err
	}
	f.gcCall("containers", dryRun)
	r := f.ContainerGC
	r.DryRun = dryRun
	return r, nil
}

// nodeStatus is the fixtures' node: 4 CPUs, 16 GiB, 3800m and 14760Mi allocatable, no memory
// pressure.
func nodeStatus() v1.NodeStatus {
	return v1.NodeStatus{
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3800m"), v1.ResourceMemory: resource.MustParse("14760Mi"), v1.ResourcePods: resource.MustParse("110")},
		Conditions:  []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory"}},
	}
}

// NewServerFixture is the API server's tests' backend: no pods, node "testnode", a fixed
// explanation of the node, eviction decision, metrics and collections.
func NewServerFixture[R any](h Hooks[R]) *Backend[R] {
	return &Backend[R]{
		Hooks:          h,
		Pods:           map[string]v1.Pod{},
		LogText:        map[string]string{},
		NodeObject:     v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "testnode"}, Status: nodeStatus()},
		ApplyConflict:  "pod %q comes from manifest file %s: %w",
		DeleteConflict: "pod %q: %w: remove the manifest file %s",
		Tail:           true,

		ExplainUID:      "11111111-aaaa-bbbb-cccc-000000000009",
		ExplainMode:     units.ModeHybrid,
		NodeExplanation: slices.NodeExplanation{Allocatable: slices.Amounts{CPU: 3800, Memory: 14760 << 20}},
		Eviction: eviction.Explanation{At: "2026-11-21T08:00:00Z", ThresholdsMet: []eviction.ThresholdExplanation{}, Reclaim: v1.ResourceMemory,
			Signal: eviction.SignalMemoryAvailable, Ranking: []eviction.Candidate{{Name: "default/hog", Priority: 0, Reason: "exceeds its memory request"}},
			Evict: &eviction.EvictionExplanation{Pod: "default/hog", Signal: eviction.SignalMemoryAvailable, GracePeriod: "1s", Message: "The node was low on resource: memory."}},
		ImageGC: gc.ImageResult{Kind: gc.KindImages, UsagePercent: 90, AmountToFree: 3 << 20,
			Remove: []gc.ImageRemoval{{ID: "sha256:old", SizeBytes: 4 << 20, Reason: gc.ReasonSpace}}, Removed: []string{"sha256:old"},
			Measured: true, FreedBytes: 4 << 20},
		ContainerGC: gc.ContainerResult{Kind: gc.KindContainers, Removed: []string{"c1", "c2"}},
		PodMetricsList: []metricsv1beta1.PodMetrics{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

// SocketPath returns a socket path in a fresh directory, short enough for sun_path.
func SocketPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.sock")
	if len(p) > 100 {
		dir, err := os.MkdirTemp("", "api")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		p = filepath.Join(dir, "s.sock")
	}
	return p
}
