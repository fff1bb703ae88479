package cluster

import (
	"context"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/slicelet/slicelet/internal/pods"
)

// EventClient is the node's access to the events of one namespace.
type EventClient interface {
	Create(ctx context.Context, event *v1.Event, opts metav1.CreateOptions) (*v1.Event, error)
	Update(ctx context.Context, event *v1.Event, opts metav1.UpdateOptions) (*v1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Event, error)
}

// eventSink writes the broadcaster's events with the node's client (client-go's
// record.EventSinkImpl, over EventClient instead of the generated clientset), each call
// bounded by callTimeout.
type eventSink struct {
	events func(namespace string) EventClient
}

// Create is record.EventSink's.
func (s eventSink) Create(e *v1.Event) (*v1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return s.events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
}

// Update is record.EventSink's.
func (s eventSink) Update(e *v1.Event) (*v1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return s.events(e.Namespace).Update(ctx, e, metav1.UpdateOptions{})
}

// Patch is record.EventSink's.
func (s eventSink) Patch(old *v1.Event, data []byte) (*v1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return s.events(old.Namespace).Patch(ctx, old.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// Events forwards the pods' events (the worker's and the controller's: Pulled, Created,
// Started, Killing, BackOff, Unhealthy, the admission rejections, ...) to the API server
// for the pods that came from it, through client-go's event broadcaster (aggregation and
// spam filtering as the kubelet's, source component "kubelet" on the node's host name).
// Events of the manifest directory's and the local API's pods stay local.
// The wiring makes it (NewEvents) before the pod worker that records into it; the Member
// starts its broadcaster and tells it which pods are the cluster's.
type Events struct {
	mu       sync.Mutex
	recorder record.EventRecorder // nil until Run starts the broadcaster
	pods     map[types.UID]bool   // the cluster's pods
	// nodeConds are the node's conditions' statuses events were recorded for.
	nodeConds map[v1.NodeConditionType]v1.ConditionStatus
}

// Eventf records an event about object (a *v1.Pod, or the *v1.ObjectReference of a pod's
// container) with the API server when it is one of the cluster's pods, and those about the
// node (an *v1.ObjectReference of kind Node).
func (e *Events) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	var uid types.UID
	var annotations map[string]string
	switch o := object.(type) {
	case *v1.Pod:
		uid = o.UID
		if reason == pods.ReasonEvicted {
			annotations = EvictionAnnotations(o)
		}
	case *v1.ObjectReference:
		uid = o.UID
	}
	e.mu.Lock()
	r, ok := e.recorder, e.pods[uid]
	e.mu.Unlock()
	if ref, isRef := object.(*v1.ObjectReference); isRef && ref.Kind == "Node" {
		// The pod worker's events about the node (MissingClusterDNS, as the kubelet's DNS
		// configurer records them).
		ok = true
	}
	switch {
	case r == nil || !ok:
	case annotations != nil:
		// The eviction manager's event (pkg/kubelet/eviction/eviction_manager.go, evictPod).
		r.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	default:
		r.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// NewEvents returns the cluster's event forwarder: it forwards nothing until the Member runs.
func NewEvents() *Events { return &Events{} }

// setPods replaces the set of the cluster's pods.
func (e *Events) setPods(uids map[types.UID]bool) {
	e.mu.Lock()
	e.pods = uids
	e.mu.Unlock()
}

// start starts the broadcaster until ctx ends. Its failures go to log at debug level (an
// API server that is away must not flood the log: the cluster warnable says it once).
func (e *Events) start(ctx context.Context, sink record.EventSink, scheme *runtime.Scheme, node string, log *slog.Logger) {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(debugOnly{log.Handler()}))
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(sink)
	r := b.NewRecorder(scheme, v1.EventSource{Component: "kubelet", Host: node})
	e.mu.Lock()
	e.recorder = r
	e.mu.Unlock()
	go func() {
		<-ctx.Done()
		e.mu.Lock()
		e.recorder = nil
		e.mu.Unlock()
		b.Shutdown()
	}()
}

// debugOnly is a slog handler that writes every record at debug level at most.
type debugOnly struct{ slog.Handler }

// Enabled is the wrapped handler's at debug level.
func (h debugOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, min(l, slog.LevelDebug))
}

// Handle writes r at debug level at most.
func (h debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = min(r.Level, slog.LevelDebug)
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper.
func (h debugOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugOnly{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper.
func (h debugOnly) WithGroup(name string) slog.Handler { return debugOnly{h.Handler.WithGroup(name)} }
