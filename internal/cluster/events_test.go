package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

func TestEventsOnlyForTheClusterPods(t *testing.T) {
	web := apiPod("web")
	f := newFixture(t, web)
	fake := record.NewFakeRecorder(10)
	f.agent.events.recorder = fake
	if err := f.agent.SyncPods(context.Background(), listPods(t, f.cs)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		uid  types.UID
		want bool
	}{
		{name: "a container of the cluster's pod", uid: web.UID, want: true},
		{name: "a manifest pod", uid: "uid-file", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.agent.Eventf(&v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "x", UID: tc.uid, FieldPath: "spec.containers{c}"}, v1.EventTypeNormal, "Started", "Started container %s", "c")
			select {
			case e := <-fake.Events:
				if !tc.want {
					t.Errorf("recorded %q", e)
				} else if e != "Normal Started Started container c" {
					t.Errorf("event %q", e)
				}
			default:
				if tc.want {
					t.Error("not recorded")
				}
			}
		})
	}
}

func TestEventSinkWritesWithTheNodesClient(t *testing.T) {
	f := newFixture(t)
	sink := eventSink{events: func(ns string) EventClient { return f.cs.CoreV1().Events(ns) }}
	e := &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.1"}, Reason: "Started", Count: 1}
	if _, err := sink.Create(e); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Patch(e, []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}
	got, err := f.cs.CoreV1().Events("default").Get(context.Background(), "web.1", metav1.GetOptions{})
	if err != nil || got.Count != 2 || got.Reason != "Started" {
		t.Errorf("event %+v, %v", got, err)
	}
}

func TestDebugOnly(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(debugOnly{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}).With("component", "events")
	log.Error("Unable to write event", "retry", true)
	if out := buf.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "component=events") {
		t.Errorf("written as %q", out)
	}
	buf.Reset()
	quiet := slog.New(debugOnly{slog.NewTextHandler(&buf, nil)})
	quiet.Error("Unable to write event")
	if buf.Len() != 0 {
		t.Errorf("an info-level log wrote %q", buf.String())
	}
}
