package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	testclock "k8s.io/utils/clock/testing"

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

	// A writer still has g.yaml open with a truncated (valid) pod when h.yaml is renamed into
	// place: h is read at once, g not until its writer closes it, and then whole.
	g, err := os.Create(filepath.Join(dir, "g.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	full := podYAML("g", "  restartPolicy: Never\n")
	if _, err := g.WriteString(podYAML("g")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"h.yaml": podYAML("h")})
	if err := os.Rename(filepath.Join(root, "h.yaml"), filepath.Join(dir, "h.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "pod h beside e and f, g held back", podsAre("default/e@e.yaml", "default/f@f.yaml", "default/h@h.yaml"))
	if _, err := g.WriteAt([]byte(full), 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	s = waitFor(t, ch, "pod g once closed", podsAre("default/e@e.yaml", "default/f@f.yaml", "default/g@g.yaml", "default/h@h.yaml"))
	if p := s.Pods[2].Pod; p.Spec.RestartPolicy != "Never" {
		t.Fatalf("pod g read before its write completed: restartPolicy %q", p.Spec.RestartPolicy)
	}
}

// fakeWatcher lets a test fire inotify notifications by hand and counts the scans (every scan
// calls Ensure first).
type fakeWatcher struct {
	ch, written chan struct{}
	scans       *atomic.Int64
}

func (f fakeWatcher) Events() <-chan struct{}  { return f.ch }
func (f fakeWatcher) Written() <-chan struct{} { return f.written }
func (f fakeWatcher) Ensure() error {
	if f.scans != nil {
		f.scans.Add(1)
	}
	return nil
}
func (fakeWatcher) Close() error { return nil }

// startFake runs m with a fake watcher inside a synctest bubble.
// got returns the snapshots sent so far, after waiting for the bubble to settle.
func startFake(t *testing.T, m *ManifestDir) (events chan struct{}, got func() []pods.Snapshot, stop func()) {
	t.Helper()
	events = make(chan struct{}, 1)
	m.newWatcher = func(string) (watcher, error) { return fakeWatcher{ch: events}, nil }
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

// TestManifestDirCompletedWriteReadAtOnce: a completed write (Written) is read at once, other
// events wait for the directory to be quiet (Debounce, at most MaxDelay), the rescan keeps its
// interval. Time is the injected fake clock; synctest.Wait lets Run settle after each step.
func TestManifestDirCompletedWriteReadAtOnce(t *testing.T) {
	const debounce, maxDelay = 100 * time.Millisecond, time.Second
	type step struct {
		fire    string        // "written", "other" or "" (none)
		advance time.Duration // then the clock moves on by this much
		scans   int64         // scans so far (the first one at start included)
	}
	// steady is a stream of other events every 90 ms for a second: each postpones the read
	// until MaxDelay is reached.
	var steady []step
	for range 11 {
		steady = append(steady, step{fire: "other", advance: 90 * time.Millisecond, scans: 1})
	}
	steady = append(steady, step{advance: 10 * time.Millisecond, scans: 2})
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a completed write is read at once", []step{{fire: "written", scans: 2}}},
		{"each completed write is read at once", []step{{fire: "written", scans: 2}, {fire: "written", scans: 3}, {fire: "written", scans: 4}}},
		{"a created or removed file waits for the debounce", []step{
			{fire: "other", advance: debounce - time.Millisecond, scans: 1},
			{advance: time.Millisecond, scans: 2},
		}},
		{"a completed write during the debounce is read at once and ends the debounce", []step{
			{fire: "other", advance: 50 * time.Millisecond, scans: 1},
			{fire: "written", scans: 2},
			{advance: debounce, scans: 2},
		}},
		{"events after a completed write are debounced again", []step{
			{fire: "written", scans: 2},
			{fire: "other", advance: debounce - time.Millisecond, scans: 2},
			{advance: time.Millisecond, scans: 3},
		}},
		{"a directory that never goes quiet is read within MaxDelay", steady},
		{"the periodic rescan keeps its interval", []step{
			{advance: DefaultRescan - time.Millisecond, scans: 1},
			{advance: time.Millisecond, scans: 2},
			{fire: "written", advance: DefaultRescan, scans: 4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
				m, err := NewManifestDir(ManifestDirOptions{Dir: t.TempDir(), Debounce: debounce, MaxDelay: maxDelay, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				var scans atomic.Int64
				w := fakeWatcher{ch: make(chan struct{}, 1), written: make(chan struct{}, 1), scans: &scans}
				m.newWatcher = func(string) (watcher, error) { return w, nil }
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { defer close(done); _ = m.Run(ctx, func(pods.Snapshot) {}) }()
				defer func() { cancel(); <-done }()
				synctest.Wait()
				if n := scans.Load(); n != 1 {
					t.Fatalf("scans at start: %d, want 1", n)
				}
				for i, st := range tc.steps {
					switch st.fire {
					case "written":
						w.written <- struct{}{}
					case "other":
						w.ch <- struct{}{}
					}
					synctest.Wait()
					if st.advance > 0 {
						clk.Step(st.advance)
						synctest.Wait()
					}
					if n := scans.Load(); n != st.scans {
						t.Fatalf("step %d (%q, then %v): %d scans, want %d", i, st.fire, st.advance, n, st.scans)
					}
				}
			})
		})
	}
}

// TestManifestDirHoldsFilesBeingWritten: a manifest that a writer still has open is never read
// (its content may be a truncated, valid, different pod): the file keeps what its last complete
// read gave until the writer closes it, or until it was held for the rescan interval.
func TestManifestDirHoldsFilesBeingWritten(t *testing.T) {
	full := podYAML("a", "  restartPolicy: Never\n")
	partial := podYAML("a") // valid on its own: a different pod
	type step struct {
		do      string // "write" (whole file, closed), "open" (truncate, write content, keep open), "close", "advance", "reader" (open read-only, keep open)
		content string
		advance time.Duration
		want    string // pods after a scan, "name/restartPolicy ..."
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a new file still open for writing is not read", []step{
			{do: "open", content: partial, want: ""},
			{do: "close", want: "a/Always"},
		}},
		{"a file rewritten in place keeps its pods until closed", []step{
			{do: "write", content: partial, want: "a/Always"},
			{do: "open", content: full, want: "a/Always"},
			{do: "close", want: "a/Never"},
		}},
		{"a file closed after writing is read", []step{
			{do: "open", content: full, want: ""},
			{do: "close", want: "a/Never"},
		}},
		{"a file open for writing longer than the rescan interval is read as it is", []step{
			{do: "open", content: partial, want: ""},
			{do: "advance", advance: DefaultRescan - time.Millisecond, want: ""},
			{do: "advance", advance: time.Millisecond, want: "a/Always"},
		}},
		{"a file open only for reading is read", []step{
			{do: "write", content: full, want: "a/Never"},
			{do: "reader", want: "a/Never"},
			{do: "write", content: partial, want: "a/Always"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.yaml")
			clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
			m, err := NewManifestDir(ManifestDirOptions{Dir: dir, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			var open []*os.File
			defer func() {
				for _, f := range open {
					_ = f.Close()
				}
			}()
			for i, st := range tc.steps {
				switch st.do {
				case "write":
					writeFiles(t, dir, map[string]string{"a.yaml": st.content})
				case "open":
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
					if err != nil {
						t.Fatal(err)
					}
					open = append(open, f)
					if _, err := f.WriteString(st.content); err != nil {
						t.Fatal(err)
					}
				case "reader":
					f, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					open = append(open, f)
				case "close":
					for _, f := range open {
						if err := f.Close(); err != nil {
							t.Fatal(err)
						}
					}
					open = nil
				case "advance":
					clk.Step(st.advance)
				}
				s := m.Scan()
				var got []string
				for _, d := range s.Pods {
					got = append(got, d.Pod.Name+"/"+string(d.Pod.Spec.RestartPolicy))
				}
				if strings.Join(got, " ") != st.want {
					t.Fatalf("step %d (%s): pods %q (problems %v), want %q", i, st.do, got, s.Problems, st.want)
				}
			}
		})
	}
}
