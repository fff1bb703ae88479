package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// fakeJournalctl writes a journalctl that logs each run (pid and arguments) to the returned
// file; a --follow run prints one entry per unit it matches, in argument order, then waits to
// be killed.
func fakeJournalctl(t *testing.T) (bin, runs string) {
	dir := t.TempDir()
	bin, runs = filepath.Join(dir, "journalctl"), filepath.Join(dir, "runs")
	script := `#!/bin/sh
echo "$$ $*" >> ` + runs + `
case " $* " in *" --follow "*) ;; *) exit 0;; esac
for a in "$@"; do
  case "$a" in _SYSTEMD_UNIT=*) u=${a#_SYSTEMD_UNIT=}
    printf '{"MESSAGE":"hello %s","_SYSTEMD_UNIT":"%s","__REALTIME_TIMESTAMP":"1700000000000000","__CURSOR":"c-%s"}\n' "$u" "$u" "$u";;
  esac
done
exec sleep 3600
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, runs
}

// followRuns are the pids of the --follow runs logged, and how many are alive.
func followRuns(t *testing.T, runs string) (pids []int, alive int) {
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pid, args, _ := strings.Cut(line, " ")
		if !strings.Contains(" "+args+" ", " --follow ") {
			continue
		}
		n, _ := strconv.Atoi(pid)
		pids = append(pids, n)
		if syscall.Kill(n, 0) == nil {
			alive++
		}
	}
	return pids, alive
}

// TestJournalHubShares: 200 followers of 200 units are served by one journalctl --follow at a
// time (one inotify instance, whatever the number of followers), each gets its unit's entries
// once although the process is started again as units are added, and the process ends with
// the last follower.
func TestJournalHubShares(t *testing.T) {
	bin, runs := fakeJournalctl(t)
	h := newJournalHub(bin, clock.RealClock{}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	first := make(chan string, 256)
	start := func(unit string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := h.follow(ctx, unit, 0, "", 1, func(e journalEntry) error {
				mu.Lock()
				got[unit]++
				n := got[unit]
				mu.Unlock()
				if msg, _ := e.message(); string(msg) != "hello "+unit {
					t.Errorf("follower of %s got %q", unit, msg)
				}
				if n == 1 {
					first <- unit
				}
				return nil
			})
			if err != nil {
				t.Errorf("follow %s: %v", unit, err)
			}
		}()
	}
	const n = 200
	for i := range n {
		start(fmt.Sprintf("slicelet-u%03d.service", i))
	}
	for range n {
		<-first
	}
	// A last follower: once it has its entry, the process matching all of them has printed
	// every unit's entry (in order) and the duplicates have been dropped.
	start("slicelet-zzz.service")
	<-first
	mu.Lock()
	for unit, c := range got {
		if c != 1 {
			t.Errorf("%s: %d entries delivered, want 1", unit, c)
		}
	}
	mu.Unlock()
	pids, alive := followRuns(t, runs)
	if alive != 1 {
		t.Errorf("%d journalctl --follow processes alive for %d followers, want 1", alive, n+1)
	}
	t.Logf("%d followers: %d follow processes started in all", n+1, len(pids))
	if got := h.Followers(); got != n+1 {
		t.Errorf("Followers() = %d, want %d", got, n+1)
	}
	cancel()
	wg.Wait()
	// The last follower gone, the process is stopped (the hub waits for it before it returns).
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	<-stopped
	if _, alive := followRuns(t, runs); alive != 0 {
		t.Errorf("%d follow processes alive with no follower", alive)
	}
}

// TestJournalHubLimit: beyond MaxLogFollowers a follow is refused with ErrTooManyFollowers.
func TestJournalHubLimit(t *testing.T) {
	bin, _ := fakeJournalctl(t)
	h := newJournalHub(bin, clock.RealClock{}, slog.New(slog.DiscardHandler))
	h.max = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.follow(ctx, fmt.Sprintf("u%d.service", i), 0, "", 1, func(journalEntry) error { started <- struct{}{}; return nil })
		}()
	}
	<-started
	<-started
	err := h.follow(ctx, "u3.service", 0, "", 1, func(journalEntry) error { return nil })
	if !errors.Is(err, pods.ErrTooManyFollowers) || !strings.Contains(err.Error(), "2 logs are followed, the limit") {
		t.Fatalf("a third follower: %v, want ErrTooManyFollowers naming the limit", err)
	}
	cancel()
	wg.Wait()
}
