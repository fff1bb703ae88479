package pods

import (
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// Bounds of the EventStore: what a pod's describe shows, and how many pods are remembered.
const (
	maxEventsPerPod = 50
	maxEventPods    = 2000
)

// EventComponent is the source.component of the events slicelet records (the kubelet's is
// "kubelet").
const EventComponent = "kubelet"

// EventStore keeps the latest events of each pod in memory for describe, as the API server
// keeps a node's events: an event equal to an earlier one of the pod (type, reason, object,
// message) is counted on it (count and lastTimestamp, the kubelet's event correlator), at most
// maxEventsPerPod per pod (the oldest go), at most maxEventPods pods (the pod whose latest
// event is oldest goes). It is a worker.EventRecorder (client-go's Eventf). Its methods are
// safe for concurrent use.
type EventStore struct {
	clock clock.PassiveClock
	host  string

	mu   sync.Mutex
	pods map[string][]v1.Event // by pod UID, oldest first
}

// NewEventStore returns an empty store; host is the source host of its events.
func NewEventStore(c clock.PassiveClock, host string) *EventStore {
	if c == nil {
		c = clock.RealClock{}
	}
	return &EventStore{clock: c, host: host, pods: map[string][]v1.Event{}}
}

// Eventf records an event about object, an *v1.ObjectReference to a pod (or one of its
// containers, by field path); other objects are ignored.
func (s *EventStore) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	ref, ok := object.(*v1.ObjectReference)
	if !ok || ref.UID == "" {
		return
	}
	now := metav1.NewTime(s.clock.Now())
	msg := fmt.Sprintf(messageFmt, args...)
	uid := string(ref.UID)
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.pods[uid]
	for i := range list {
		e := &list[i]
		if e.Type == eventtype && e.Reason == reason && e.Message == msg && e.InvolvedObject.FieldPath == ref.FieldPath {
			e.Count++
			e.LastTimestamp = now
			// The latest goes last, as describe sorts by last time.
			ev := *e
			s.pods[uid] = append(append(list[:i:i], list[i+1:]...), ev)
			return
		}
	}
	if _, known := s.pods[uid]; !known && len(s.pods) >= maxEventPods {
		s.dropOldestLocked()
	}
	ev := v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		InvolvedObject: *ref,
		Reason:         reason,
		Message:        msg,
		Type:           eventtype,
		Count:          1,
		FirstTimestamp: now,
		LastTimestamp:  now,
		Source:         v1.EventSource{Component: EventComponent, Host: s.host},
	}
	list = append(list, ev)
	if len(list) > maxEventsPerPod {
		list = list[len(list)-maxEventsPerPod:]
	}
	s.pods[uid] = list
}

// dropOldestLocked forgets the pod whose latest event is the oldest.
func (s *EventStore) dropOldestLocked() {
	var (
		oldest string
		at     time.Time
	)
	for uid, list := range s.pods {
		if last := list[len(list)-1].LastTimestamp.Time; oldest == "" || last.Before(at) {
			oldest, at = uid, last
		}
	}
	delete(s.pods, oldest)
}

// PodEvents returns copies of the events of the pod with that UID, oldest first by their last
// time.
func (s *EventStore) PodEvents(uid string) []v1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]v1.Event(nil), s.pods[uid]...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTimestamp.Before(&out[j].LastTimestamp) })
	return out
}

// Forget drops the events of a pod that is gone.
func (s *EventStore) Forget(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}
