package api

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	_, c := startServer(t, newFakeBackend(), 0)
	got, err := c.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := buildinfo.Get(); got != want {
		t.Errorf("Version = %+v, want %+v", got, want)
	}
}

func labelled(name, ns, phase string, labels map[string]string) v1.Pod {
	return v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Status: v1.PodStatus{Phase: v1.PodPhase(phase)}}
}

func TestListSelectors(t *testing.T) {
	f := newFakeBackend()
	f.Add(labelled("web", "default", "Running", map[string]string{"app": "web", "tier": "front"}))
	f.Add(labelled("db", "default", "Pending", map[string]string{"app": "db"}))
	f.Add(labelled("dns", "kube-system", "Running", nil))
	_, c := startServer(t, f, 0)
	for _, tc := range []struct {
		name       string
		opts       ListOptions
		want       []string
		wantStatus int
	}{
		{name: "everything", want: []string{"default/db", "default/web", "kube-system/dns"}},
		{name: "label equality", opts: ListOptions{LabelSelector: "app=web"}, want: []string{"default/web"}},
		{name: "label set", opts: ListOptions{LabelSelector: "app in (web,db),tier!=front"}, want: []string{"default/db"}},
		{name: "label exists", opts: ListOptions{LabelSelector: "!app"}, want: []string{"kube-system/dns"}},
		{name: "phase", opts: ListOptions{FieldSelector: "status.phase=Running"}, want: []string{"default/web", "kube-system/dns"}},
		{name: "namespace and not name", opts: ListOptions{FieldSelector: "metadata.namespace=default,metadata.name!=web"}, want: []string{"default/db"}},
		{name: "both", opts: ListOptions{LabelSelector: "app", FieldSelector: "status.phase=Pending"}, want: []string{"default/db"}},
		{name: "bad label selector", opts: ListOptions{LabelSelector: "app=(web"}, wantStatus: 400},
		{name: "unknown field", opts: ListOptions{FieldSelector: "spec.priority=1"}, wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := c.ListPodList(context.Background(), tc.opts)
			if tc.wantStatus != 0 {
				if statusOf(err) != tc.wantStatus {
					t.Fatalf("err = %v, want status %d", err, tc.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, p := range list.Items {
				got[p.Namespace+"/"+p.Name] = true
				if p.ResourceVersion == "" {
					t.Errorf("%s/%s has no resourceVersion", p.Namespace, p.Name)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
			if list.ResourceVersion == "" {
				t.Error("the list has no resourceVersion")
			}
		})
	}
}

// TestWatchPods: the initial ADDED events and their BOOKMARK, then one event per change at the
// watch's next round; a watch from a resource version skips what it has seen.
func TestWatchPods(t *testing.T) {
	f := newFakeBackend()
	f.Add(labelled("web", "default", "Pending", map[string]string{"app": "web"}))
	f.Add(labelled("other", "default", "Pending", nil))
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	_, c := startServerWith(t, f, 0, Options{Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan WatchEvent, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchPods(ctx, ListOptions{LabelSelector: "app=web"}, func(e WatchEvent) error {
			events <- e
			return nil
		})
	}()
	next := func(wantType watch.EventType, wantPhase string) WatchEvent {
		t.Helper()
		select {
		case e := <-events:
			if e.Type != wantType || (wantPhase != "" && string(e.Pod.Status.Phase) != wantPhase) {
				t.Fatalf("event %s %s/%s %s, want %s %s", e.Type, e.Pod.Namespace, e.Pod.Name, e.Pod.Status.Phase, wantType, wantPhase)
			}
			return e
		case err := <-done:
			t.Fatalf("watch ended: %v", err)
		}
		return WatchEvent{}
	}
	// round waits for the watch's ticker, then lets one interval pass.
	round := func() {
		for !fc.HasWaiters() {
			runtime.Gosched()
		}
		fc.Step(watchInterval)
	}
	added := next(watch.Added, "Pending")
	if added.Pod.Name != "web" || added.Pod.ResourceVersion == "" {
		t.Errorf("first event: %+v", added.Pod.ObjectMeta)
	}
	if b := next(watch.Bookmark, ""); b.Pod.Annotations[InitialEventsEndAnnotation] != "true" {
		t.Errorf("bookmark without %s: %v", InitialEventsEndAnnotation, b.Pod.Annotations)
	}
	f.Add(labelled("web", "default", "Running", map[string]string{"app": "web"}))
	f.Add(labelled("other", "default", "Running", nil)) // not selected: no event
	round()
	mod := next(watch.Modified, "Running")
	if mod.Pod.ResourceVersion == added.Pod.ResourceVersion {
		t.Errorf("MODIFIED kept resourceVersion %s", mod.Pod.ResourceVersion)
	}
	if err := f.DeletePod(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	round()
	next(watch.Deleted, "Running")
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("watch: %v", err)
	}

	// From a resource version: only what changed after it.
	list, err := c.ListPodList(context.Background(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Add(labelled("late", "default", "Pending", nil))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var got []string
	err = c.WatchPods(ctx2, ListOptions{ResourceVersion: list.ResourceVersion}, func(e WatchEvent) error {
		got = append(got, string(e.Type)+" "+e.Pod.Name)
		cancel2()
		return nil
	})
	if len(got) != 1 || got[0] != "ADDED late" {
		t.Errorf("watch from %s: %v (%v)", list.ResourceVersion, got, err)
	}
}

// TestWatchBounds: one watch more than MaxWatches is refused with 429.
func TestWatchBounds(t *testing.T) {
	s, c := startServer(t, newFakeBackend(), 0)
	for range MaxWatches {
		s.kube.watches <- struct{}{}
	}
	err := c.WatchPods(context.Background(), ListOptions{}, func(WatchEvent) error { return nil })
	if statusOf(err) != 429 {
		t.Errorf("watch beyond the bound: %v, want 429", err)
	}
}

// eventBackend is the fake backend with events (EventLister).
type eventBackend struct {
	*fakeBackend
	events []v1.Event
}

func (b *eventBackend) Events(since uint64) ([]v1.Event, uint64) {
	var out []v1.Event
	for _, e := range b.events {
		if rv, _ := strconv.ParseUint(e.ResourceVersion, 10, 64); rv > since {
			out = append(out, e)
		}
	}
	return out, uint64(len(b.events))
}

func TestEvents(t *testing.T) {
	ev := func(rv, name, typ, reason string, count int32) v1.Event {
		return v1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + "." + rv, Namespace: "default", ResourceVersion: rv},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name}, Type: typ, Reason: reason, Count: count}
	}
	b := &eventBackend{fakeBackend: newFakeBackend(), events: []v1.Event{
		ev("1", "web", "Normal", "Started", 1), ev("2", "db", "Warning", "OutOfcpu", 1), ev("3", "web", "Warning", "BackOff", 2),
	}}
	_, c := startServer(t, b, 0)
	for _, tc := range []struct{ sel, want string }{
		{"", "Started OutOfcpu BackOff"},
		{"involvedObject.name=web", "Started BackOff"},
		{"type=Warning,involvedObject.name!=db", "BackOff"},
	} {
		list, err := c.ListEvents(context.Background(), tc.sel)
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Reason)
		}
		if err != nil || strings.Join(got, " ") != tc.want || list.ResourceVersion != "3" {
			t.Errorf("ListEvents(%q) = %v rv %s, %v; want %s", tc.sel, got, list.ResourceVersion, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	err := c.WatchEvents(ctx, "involvedObject.name=web", "1", func(t watch.EventType, e v1.Event) error {
		got = append(got, string(t)+" "+e.Reason)
		cancel()
		return nil
	})
	if len(got) != 1 || got[0] != "MODIFIED BackOff" {
		t.Errorf("watch from 1: %v (%v); want MODIFIED BackOff (a repeated event)", got, err)
	}
	// A backend without events answers 404.
	_, c2 := startServer(t, newFakeBackend(), 0)
	if _, err := c2.ListEvents(context.Background(), ""); statusOf(err) != 404 {
		t.Errorf("ListEvents without events: %v, want 404", err)
	}
}

// notifyingBackend is the fake backend as a PodNotifier.
type notifyingBackend struct {
	*fakeBackend
	Broadcast
}

func (b *notifyingBackend) PodsChanged() <-chan struct{} { return b.Wait() }

// TestWatchPodsNotified: a backend's change notification wakes the watch at once, without
// waiting for the next round.
func TestWatchPodsNotified(t *testing.T) {
	b := &notifyingBackend{fakeBackend: newFakeBackend()}
	fc := clocktesting.NewFakeClock(time.Unix(0, 0)) // never stepped: only the notification wakes
	_, c := startServerWith(t, b, 0, Options{Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan WatchEvent, 4)
	go func() {
		_ = c.WatchPods(ctx, ListOptions{}, func(e WatchEvent) error { events <- e; return nil })
	}()
	if e := <-events; e.Type != watch.Bookmark {
		t.Fatalf("first event %s, want the initial BOOKMARK", e.Type)
	}
	// The watch took the notification channel before the list it sent the bookmark after.
	b.Add(labelled("web", "default", "Pending", nil))
	b.Notify()
	if e := <-events; e.Type != watch.Added || e.Pod.Name != "web" {
		t.Errorf("after the notification: %s %s", e.Type, e.Pod.Name)
	}
}

func TestBroadcast(t *testing.T) {
	var b Broadcast
	w1, w2 := b.Wait(), b.Wait()
	b.Notify()
	for i, w := range []<-chan struct{}{w1, w2} {
		select {
		case <-w:
		default:
			t.Errorf("waiter %d not woken", i)
		}
	}
	select {
	case <-b.Wait():
		t.Error("a new waiter was woken by the old notification")
	default:
	}
	b.Notify() // without waiters: nothing to wake, no panic
}

func TestDeletePodGrace(t *testing.T) {
	f := newFakeBackend()
	f.Add(labelled("web", "default", "Running", nil))
	_, c := startServer(t, f, 0)
	if err := c.DeletePodGrace(context.Background(), "default", "web", time.Second); statusOf(err) != 400 || !strings.Contains(err.Error(), "own grace period only") {
		t.Errorf("grace without a GracefulDeleter: %v, want 400", err)
	}
	for _, q := range []string{"-1", "x", "86401"} {
		if code, body := rawRequest(t, c, "DELETE", "/v1/pods/default/web?gracePeriodSeconds="+q, nil); code != 400 || !strings.Contains(body, "gracePeriodSeconds") {
			t.Errorf("gracePeriodSeconds=%s: %d %s", q, code, body)
		}
	}
	if _, err := c.GetPod(context.Background(), "default", "web"); err != nil {
		t.Errorf("a refused delete deleted: %v", err)
	}
}
