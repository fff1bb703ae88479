// Package events keeps the node's pod events, bounded (and saved for the next slicelet), as the kubelet's recorder
// would send them to the API server: the worker's container events (Created, Started, Killing,
// BackOff, Failed, Pulling, Pulled), the controller's admission verdicts and evictions. An event
// repeated for the same object with the same type, reason and message is counted, not stored
// again (client-go's EventCorrelator aggregates the same way).
package events

import (
	"fmt"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Bounds of a Store.
const (
	// MaxPerObject is how many distinct events one object keeps; the oldest go first.
	MaxPerObject = 50
	// MaxTotal is how many events the store keeps; the oldest go first.
	MaxTotal = 1000
	// maxMessage is the longest message kept (the API server's limit is 1 KiB for the note).
	maxMessage = 1024
)

// Store records events (Eventf, client-go's record.EventRecorder method) and lists them.
type Store struct {
	clock  clock.WithTicker
	source string
	mu     sync.Mutex
	// events in the order they were last seen; rv is the last resource version given.
	events []*v1.Event
	rv     uint64
	// saved is the resource version last written by Run.
	saved uint64
}

// NewStore returns an empty store; host names the source (the events' source.host).
func NewStore(c clock.WithTicker, host string) *Store {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Store{clock: c, source: host}
}

// Eventf records an event about object (a pod, or a *v1.ObjectReference to a pod's container).
func (s *Store) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	ref, ok := reference(object)
	if !ok {
		return
	}
	msg := fmt.Sprintf(messageFmt, args...)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	now := metav1.NewTime(s.clock.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	for i, e := range s.events {
		if e.InvolvedObject == ref && e.Type == eventtype && e.Reason == reason && e.Message == msg {
			e.Count++
			e.LastTimestamp = now
			e.ResourceVersion = strconv.FormatUint(s.rv, 10)
			s.events = append(append(s.events[:i:i], s.events[i+1:]...), e) // last seen goes last
			return
		}
	}
	e := &v1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()),
			Namespace:         ref.Namespace,
			UID:               types.UID(strconv.FormatUint(s.rv, 10)),
			ResourceVersion:   strconv.FormatUint(s.rv, 10),
			CreationTimestamp: now,
		},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: eventtype,
		Source:         v1.EventSource{Component: "slicelet", Host: s.source},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "slicelet", ReportingInstance: s.source,
	}
	s.events = append(s.events, e)
	s.trim(ref.UID)
}

// trim drops the oldest events of uid beyond MaxPerObject, then the oldest beyond MaxTotal.
func (s *Store) trim(uid types.UID) {
	n := 0
	for _, e := range s.events {
		if e.InvolvedObject.UID == uid {
			n++
		}
	}
	for i := 0; n > MaxPerObject && i < len(s.events); {
		if s.events[i].InvolvedObject.UID == uid {
			s.events = append(s.events[:i], s.events[i+1:]...)
			n--
			continue
		}
		i++
	}
	if over := len(s.events) - MaxTotal; over > 0 {
		s.events = append(s.events[:0:0], s.events[over:]...)
	}
}

// reference is the object's reference: a *v1.ObjectReference as given, else built from the
// object's metadata.
func reference(object runtime.Object) (v1.ObjectReference, bool) {
	if ref, ok := object.(*v1.ObjectReference); ok && ref != nil {
		return *ref, true
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return v1.ObjectReference{}, false
	}
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}, true
}

// List returns copies of the events changed after resource version since (0: all), in the
// order they were last seen, with the store's current resource version.
func (s *Store) List(since uint64) ([]v1.Event, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []v1.Event
	for _, e := range s.events {
		rv, _ := strconv.ParseUint(e.ResourceVersion, 10, 64)
		if rv > since {
			out = append(out, *e.DeepCopy())
		}
	}
	return out, s.rv
}
