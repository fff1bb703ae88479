package pods

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEventStore: repeated events are counted on the first, the latest last; each pod keeps
// its newest maxEventsPerPod.
func TestEventStore(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := NewEventStore(clk, "node")
	ref := &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1", FieldPath: "spec.containers{app}"}
	s.Eventf(ref, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: %s", "boom")
	clk.SetTime(clk.Now().Add(time.Second))
	s.Eventf(ref, v1.EventTypeNormal, "Started", "Started container %s", "app")
	clk.SetTime(clk.Now().Add(time.Second))
	s.Eventf(ref, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: %s", "boom")
	got := s.PodEvents("u1")
	if len(got) != 2 || got[0].Reason != "Started" || got[1].Reason != "Unhealthy" || got[1].Count != 2 ||
		!got[1].LastTimestamp.After(got[1].FirstTimestamp.Time) || got[1].Source.Component != "kubelet" {
		t.Fatalf("events %+v", got)
	}
	for i := range 2 * maxEventsPerPod {
		s.Eventf(ref, v1.EventTypeNormal, "Pulled", "image %d", i)
	}
	if got := s.PodEvents("u1"); len(got) != maxEventsPerPod || got[len(got)-1].Message != "image 99" {
		t.Errorf("%d events, last %q", len(got), got[len(got)-1].Message)
	}
	s.Forget("u1")
	if got := s.PodEvents("u1"); len(got) != 0 {
		t.Errorf("after Forget: %d events", len(got))
	}
}
