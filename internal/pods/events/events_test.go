package events

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
}

func TestStore(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	s := NewStore(fc, "node1")
	web := pod("web")
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: web.UID, FieldPath: "spec.containers{app}"}
	s.Eventf(ref, v1.EventTypeNormal, "Started", "Started container %s", "app")
	fc.Step(time.Second)
	s.Eventf(web, v1.EventTypeWarning, "OutOfcpu", "Node didn't have enough resource: cpu")
	fc.Step(time.Second)
	s.Eventf(ref, v1.EventTypeNormal, "Started", "Started container %s", "app") // repeated: counted

	list, rv := s.List(0)
	if rv != 3 || len(list) != 2 {
		t.Fatalf("List(0) = %d events, rv %d; want 2, 3", len(list), rv)
	}
	first, last := list[0], list[1]
	if first.Reason != "OutOfcpu" || first.InvolvedObject.FieldPath != "" || first.Type != v1.EventTypeWarning || first.Source.Host != "node1" {
		t.Errorf("first: %+v", first)
	}
	if last.Reason != "Started" || last.Count != 2 || last.InvolvedObject.FieldPath != "spec.containers{app}" ||
		!last.LastTimestamp.Time.Equal(fc.Now()) || last.FirstTimestamp.Time.Equal(fc.Now()) {
		t.Errorf("repeated event: %+v", last)
	}
	if got, _ := s.List(2); len(got) != 1 || got[0].Reason != "Started" {
		t.Errorf("List(2) = %+v, want the repeated event only", got)
	}
	if s.Eventf(&v1.PodList{}, v1.EventTypeNormal, "X", "no object meta"); len(mustList(s)) != 2 {
		t.Error("an object without metadata was recorded")
	}
}

func mustList(s *Store) []v1.Event {
	l, _ := s.List(0)
	return l
}

func TestStoreBounds(t *testing.T) {
	s := NewStore(clocktesting.NewFakeClock(time.Unix(0, 0)), "n")
	web := pod("web")
	for i := range MaxPerObject + 10 {
		s.Eventf(web, v1.EventTypeNormal, "R", "event %d", i)
	}
	list := mustList(s)
	if len(list) != MaxPerObject || list[0].Message != "event 10" {
		t.Errorf("per object: %d events, first %q; want %d, event 10", len(list), list[0].Message, MaxPerObject)
	}
	for i := range MaxTotal {
		s.Eventf(pod(fmt.Sprintf("p%d", i)), v1.EventTypeNormal, "R", "one")
	}
	list = mustList(s)
	if len(list) != MaxTotal || list[len(list)-1].InvolvedObject.Name != fmt.Sprintf("p%d", MaxTotal-1) {
		t.Errorf("total: %d events; want %d, the newest kept", len(list), MaxTotal)
	}
	long := make([]byte, 5000)
	s.Eventf(web, v1.EventTypeNormal, "Long", "%s", long)
	if l := mustList(s); len(l[len(l)-1].Message) != maxMessage {
		t.Errorf("message of %d bytes kept", len(l[len(l)-1].Message))
	}
}
