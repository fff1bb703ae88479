package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

// The backend serves the pods' events (api.EventBackend).
var _ api.EventBackend = (*backend)(nil)

// PodEvents returns the events the worker recorded about the pod.
func (b *backend) PodEvents(_ context.Context, namespace, name string) ([]v1.Event, error) {
	pod, ok := b.ctrl.Pod(namespace, name)
	if !ok {
		return nil, fmt.Errorf("pod %q: %w", namespace+"/"+name, api.ErrNotFound)
	}
	return b.events.PodEvents(string(pod.UID)), nil
}

// teeRecorder records each event with every recorder.
type teeRecorder []worker.EventRecorder

// Eventf passes the event on.
func (t teeRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	for _, r := range t {
		r.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// Forget passes on to the recorders that keep events (worker.EventForgetter).
func (t teeRecorder) Forget(uid string) {
	for _, r := range t {
		if f, ok := r.(worker.EventForgetter); ok {
			f.Forget(uid)
		}
	}
}

// The daemon's event store is forgotten with its pods.
var _ worker.EventForgetter = (*pods.EventStore)(nil)
