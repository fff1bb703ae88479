package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slicelet/slicelet/internal/pods"
)

// runSource runs m in the background, delivering snapshots on the returned channel; the source
// stops when the test ends.
func runSource(t *testing.T, m *ManifestDir) <-chan pods.Snapshot {
	t.Helper()
	ch := make(chan pods.Snapshot, 100)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := m.Run(ctx, func(s pods.Snapshot) { ch <- s }); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ch
}

// waitFor reads snapshots until one satisfies ok; the wait is bounded (inotify delivers within
// milliseconds; the rescan is an hour away in these tests, so only inotify can deliver).
func waitFor(t *testing.T, ch <-chan pods.Snapshot, what string, ok func(pods.Snapshot) bool) pods.Snapshot {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if ok(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("no snapshot with %s within 10s", what)
		}
	}
}

func podsAre(want ...string) func(pods.Snapshot) bool {
	return func(s pods.Snapshot) bool {
		return strings.Join(names(s), " ") == strings.Join(want, " ") && len(s.Problems) == 0
	}
}

func TestManifestDirInotify(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods.d")
	m, err := NewManifestDir(ManifestDirOptions{Dir: dir, Rescan: time.Hour, Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ch := runSource(t, m)

	// The directory does not exist yet: an empty first snapshot.
	waitFor(t, ch, "the empty first snapshot", podsAre())

	// Created later; an editor writes a temporary file and renames it into place.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{".a.yaml.swp": podYAML("a")})
	if err := os.Rename(filepath.Join(dir, ".a.yaml.swp"), filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, ch, "pod a", podsAre("default/a@a.yaml"))
	uidA := s.Pods[0].Pod.UID

	// Edited in place: replaced, new UID.
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a", "  restartPolicy: OnFailure\n")})
	s = waitFor(t, ch, "pod a edited", func(s pods.Snapshot) bool { return podsAre("default/a@a.yaml")(s) && s.Pods[0].Pod.UID != uidA })
	uidA = s.Pods[0].Pod.UID

	// A broken file next to it: a problem, nothing else changes.
	writeFiles(t, dir, map[string]string{"b.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: main, comand: [x]}]}\n"})
	s = waitFor(t, ch, "the problem of b.yaml", func(s pods.Snapshot) bool {
		return len(s.Problems) == 1 && strings.Contains(s.Problems[0].Error, `unknown field "spec.containers[0].comand"`)
	})
	if got := names(s); len(got) != 1 || s.Pods[0].Pod.UID != uidA {
		t.Fatalf("broken b.yaml disturbed a: %v", got)
	}
	// Fixed.
	writeFiles(t, dir, map[string]string{"b.yaml": podYAML("b")})
	waitFor(t, ch, "pods a and b", podsAre("default/a@a.yaml", "default/b@b.yaml"))

	// Vim's way of saving: move the original away, write a new file, remove the backup.
	if err := os.Rename(filepath.Join(dir, "b.yaml"), filepath.Join(dir, "b.yaml~")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"b.yaml": podYAML("b2")})
	if err := os.Remove(filepath.Join(dir, "b.yaml~")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "pods a and b2", podsAre("default/a@a.yaml", "default/b2@b.yaml"))

	// Moved out of the directory, then deleted.
	if err := os.Rename(filepath.Join(dir, "b.yaml"), filepath.Join(root, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "pod a alone", podsAre("default/a@a.yaml"))
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "no pods", podsAre())

	// The directory removed and created again.
	writeFiles(t, dir, map[string]string{"c.yaml": podYAML("c")})
	waitFor(t, ch, "pod c", podsAre("default/c@c.yaml"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "no pods after removing the directory", podsAre())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"d.yaml": podYAML("d")})
	waitFor(t, ch, "pod d in the recreated directory", podsAre("default/d@d.yaml"))

	// The directory moved away and another one moved into its place.
	other := filepath.Join(root, "next")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, other, map[string]string{"e.yaml": podYAML("e")})
	if err := os.Rename(dir, filepath.Join(root, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "pod e after the directory was swapped", podsAre("default/e@e.yaml"))
	// And the new directory is watched.
	writeFiles(t, dir, map[string]string{"f.yaml": podYAML("f")})
	waitFor(t, ch, "pods e and f", podsAre("default/e@e.yaml", "default/f@f.yaml"))
}

// fakeWatcher lets a test fire inotify notifications by hand.
type fakeWatcher struct{ ch chan struct{} }

func (f fakeWatcher) Events() <-chan struct{} { return f.ch }
func (fakeWatcher) Ensure() error             { return nil }
func (fakeWatcher) Close() error              { return nil }

// startFake runs m with a fake watcher inside a synctest bubble.
// got returns the snapshots sent so far, after waiting for the bubble to settle.
func startFake(t *testing.T, m *ManifestDir) (events chan struct{}, got func() []pods.Snapshot, stop func()) {
	t.Helper()
	events = make(chan struct{}, 1)
	m.newWatcher = func(string) (watcher, error) { return fakeWatcher{events}, nil }
	var (
		mu   sync.Mutex
		sent []pods.Snapshot
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx, func(s pods.Snapshot) { mu.Lock(); sent = append(sent, s); mu.Unlock() })
	}()
	got = func() []pods.Snapshot {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		return append([]pods.Snapshot(nil), sent...)
	}
	return events, got, func() { cancel(); <-done }
}

func TestManifestDirPeriodicRescan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		_, got, stop := startFake(t, m)
		defer stop()
		if s := got(); len(s) != 1 || len(s[0].Pods) != 0 {
			t.Fatalf("first snapshot: %+v", s)
		}

		// A file appears without any event (say, behind a symlink): the rescan finds it.
		writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a")})
		time.Sleep(DefaultRescan - time.Millisecond)
		if n := len(got()); n != 1 {
			t.Fatalf("snapshot before the rescan interval: %d", n)
		}
		time.Sleep(2 * time.Millisecond)
		if s := got(); len(s) != 2 || len(s[1].Pods) != 1 {
			t.Fatalf("after %v: %d snapshots", DefaultRescan, len(s))
		}

		// Nothing changes: rescans send nothing.
		time.Sleep(5 * DefaultRescan)
		if n := len(got()); n != 2 {
			t.Fatalf("unchanged directory sent %d snapshots, want 2", n)
		}
		// An ignored file changes nothing either.
		writeFiles(t, dir, map[string]string{"notes.txt": "x", ".a.yaml.swp": "x"})
		time.Sleep(DefaultRescan)
		if n := len(got()); n != 2 {
			t.Fatalf("ignored files sent a snapshot: %d", n)
		}
	})
}

func TestManifestDirDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := NewManifestDir(ManifestDirOptions{Dir: dir, Debounce: 100 * time.Millisecond, MaxDelay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		events, got, stop := startFake(t, m)
		defer stop()
		count := func() int { return len(got()) }
		if n := count(); n != 1 {
			t.Fatalf("first snapshot: %d", n)
		}

		// Events 90 ms apart keep postponing the scan; it runs 100 ms after the last one.
		writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a")})
		for range 3 {
			events <- struct{}{}
			time.Sleep(90 * time.Millisecond)
			if n := count(); n != 1 {
				t.Fatalf("scanned while events kept coming: %d snapshots", n)
			}
		}
		// (Checked just after the deadline: a check at the very instant the timer fires races
		// with it.)
		time.Sleep(11 * time.Millisecond)
		if n := count(); n != 2 {
			t.Fatalf("100 ms after the last event: %d snapshots, want 2", n)
		}

		// A directory that never goes quiet is still read within MaxDelay.
		writeFiles(t, dir, map[string]string{"b.yaml": podYAML("b")})
		start := time.Now()
		for count() == 2 {
			if time.Since(start) > time.Second {
				t.Fatalf("no scan within MaxDelay under a steady stream of events")
			}
			events <- struct{}{}
			time.Sleep(50 * time.Millisecond)
		}
		if s := got(); len(s[len(s)-1].Pods) != 2 {
			t.Fatalf("after the forced scan: %v", names(s[len(s)-1]))
		}
	})
}
