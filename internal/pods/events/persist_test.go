package events

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// TestPersist: Run saves the events when they changed and at its end; a new store loads them
// with their counts and times.
func TestPersist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "events.json")
		s := NewStore(clock.RealClock{}, "node1")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx, path, 10*time.Second, slog.New(slog.DiscardHandler)); close(done) }()
		s.Eventf(pod("web"), v1.EventTypeWarning, "BackOff", "back-off")
		s.Eventf(pod("web"), v1.EventTypeWarning, "BackOff", "back-off")
		time.Sleep(10 * time.Second) // one interval (synctest's clock)
		synctest.Wait()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("not saved after an interval: %v", err)
		}
		s.Eventf(pod("db"), v1.EventTypeNormal, "Started", "Started container db")
		cancel()
		<-done

		loaded := NewStore(clock.RealClock{}, "node1")
		if err := loaded.Load(path); err != nil {
			t.Fatal(err)
		}
		list := mustList(loaded)
		if len(list) != 2 || list[0].Reason != "BackOff" || list[0].Count != 2 || list[1].Reason != "Started" || list[0].ResourceVersion != "1" {
			t.Errorf("loaded %+v", list)
		}
	})
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(nil, "n")
	if err := s.Load(filepath.Join(dir, "missing.json")); err != nil {
		t.Errorf("a missing file: %v", err)
	}
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", "{", "events file"},
		{"too big", `[` + strings.Repeat(" ", maxFileBytes) + `]`, "larger than"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	p := filepath.Join(dir, "foreign.json")
	if err := os.WriteFile(p, []byte(`[{"reason": "X", "count": 1}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(p); err != nil || len(mustList(s)) != 0 {
		t.Errorf("an event without an object was loaded: %v", err)
	}
}
