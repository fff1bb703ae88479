package lifecycle

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBackoff(t *testing.T) {
	b := DefaultBackoff()
	// A container that crashes 1 s after each start: the kubelet's sequence of delays.
	var delay time.Duration
	var updated time.Time
	finished := t0
	var waits []time.Duration
	for range 8 {
		w := waitAt(b, delay, updated, finished, finished)
		waits = append(waits, w)
		delay, updated = b.Next(delay, updated, finished)
		finished = finished.Add(w + time.Second)
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !reflect.DeepEqual(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}

	cases := []struct {
		name              string
		delay             time.Duration
		updated, finished time.Time
		now               time.Time
		wantWait          bool
		wantUntil         time.Time
		wantNext          time.Duration
	}{
		{"no entry: restart now", 0, time.Time{}, t0, t0, false, time.Time{}, 10 * time.Second},
		{"in back-off", 20 * time.Second, t0, t0.Add(time.Minute), t0.Add(time.Minute + 5*time.Second), true, t0.Add(time.Minute + 20*time.Second), 40 * time.Second},
		{"back-off over", 20 * time.Second, t0, t0.Add(time.Minute), t0.Add(time.Minute + 20*time.Second), false, time.Time{}, 40 * time.Second},
		{"capped", 300 * time.Second, t0, t0.Add(time.Minute), t0.Add(time.Minute), true, t0.Add(6 * time.Minute), 300 * time.Second},
		{"ran 10 minutes: reset", 300 * time.Second, t0, t0.Add(11 * time.Minute), t0.Add(11 * time.Minute), false, time.Time{}, 10 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			until, wait := b.Until(c.delay, c.updated, c.finished, c.now)
			if wait != c.wantWait || !until.Equal(c.wantUntil) {
				t.Errorf("Until = %v %v, want %v %v", until, wait, c.wantUntil, c.wantWait)
			}
			if next, _ := b.Next(c.delay, c.updated, c.finished); next != c.wantNext {
				t.Errorf("Next = %v, want %v", next, c.wantNext)
			}
		})
	}
}

func TestBackoffWithDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   Backoff
		want Backoff
	}{
		{"zero: the kubelet's values", Backoff{}, DefaultBackoff()},
		{"initial only", Backoff{Initial: time.Second}, Backoff{Initial: time.Second, Max: DefaultBackoffMax, ResetAfter: 2 * DefaultBackoffMax}},
		{"initial above the default max", Backoff{Initial: 10 * time.Minute}, Backoff{Initial: 10 * time.Minute, Max: 10 * time.Minute, ResetAfter: 20 * time.Minute}},
		{"max given: reset after 2·max", Backoff{Initial: 200 * time.Millisecond, Max: 400 * time.Millisecond}, Backoff{Initial: 200 * time.Millisecond, Max: 400 * time.Millisecond, ResetAfter: 800 * time.Millisecond}},
		{"all given", Backoff{Initial: 1, Max: 2, ResetAfter: 3}, Backoff{Initial: 1, Max: 2, ResetAfter: 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.in.WithDefaults(); got != c.want {
				t.Errorf("WithDefaults() = %+v, want %+v", got, c.want)
			}
		})
	}
}

// A crash loop taken over from another agent after each of its runs (the kubelet's, with no
// entry of this agent's) continues the kubelet's sequence of delays, as if one agent had run it
// all; an adopted run that lasted past ResetAfter restarts at once.
func TestBackoffAdopted(t *testing.T) {
	b := DefaultBackoff()
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for adoptAfter := range len(want) {
		t.Run(fmt.Sprintf("adopted after run %d", adoptAfter), func(t *testing.T) {
			var delay time.Duration
			var updated time.Time
			started := t0
			var waits []time.Duration
			for run := range len(want) {
				finished := started.Add(time.Second) // each run crashes 1 s after its start
				if run == adoptAfter {
					delay, updated = b.Adopted(uint32(run), started)
				}
				w := waitAt(b, delay, updated, finished, finished)
				waits = append(waits, w)
				delay, updated = b.Next(delay, updated, finished)
				started = finished.Add(w)
			}
			if !reflect.DeepEqual(waits, want) {
				t.Errorf("waits %v, want %v", waits, want)
			}
		})
	}

	cases := []struct {
		name        string
		attempt     uint32
		started     time.Time
		finished    time.Time
		wantDelay   time.Duration
		wantWaitFor time.Duration
	}{
		{"first run: restart at once", 0, t0, t0.Add(time.Second), 0, 0},
		{"run 3 crashed at once: 40 s", 3, t0, t0.Add(time.Second), 40 * time.Second, 39 * time.Second},
		{"run 40: capped, no overflow", 40, t0, t0.Add(time.Second), 300 * time.Second, 299 * time.Second},
		{"run 5 ran 11 minutes: expired, at once", 5, t0, t0.Add(11 * time.Minute), 160 * time.Second, 0},
		{"no start time: no entry", 5, time.Time{}, t0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			delay, updated := b.Adopted(c.attempt, c.started)
			if delay != c.wantDelay {
				t.Errorf("Adopted delay = %v, want %v", delay, c.wantDelay)
			}
			if got := waitAt(b, delay, updated, c.finished, c.finished.Add(time.Second)); got != c.wantWaitFor {
				t.Errorf("wait after the exit = %v, want %v", got, c.wantWaitFor)
			}
		})
	}
}

// waitAt is how long a restart of a run that finished at finished waits at now (0: at once).
func waitAt(b Backoff, delay time.Duration, updated, finished, now time.Time) time.Duration {
	if until, wait := b.Until(delay, updated, finished, now); wait {
		return until.Sub(now)
	}
	return 0
}
