package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// MaxLogFollowers is how many followed logs (kubectl or slicectl logs -f, through either API)
// the runtime serves at once; one more is refused with pods.ErrTooManyFollowers.
const MaxLogFollowers = 1024

// journalHub shares one `journalctl --follow` among every follower of a log. journalctl holds
// an inotify instance while it follows, and fs.inotify.max_user_instances (128 by default) is
// per user: for a daemon running as root it is shared with systemd and every root service of
// the host, so a follower each would starve the host. The hub runs one follow process at a
// time, matching every followed unit, and hands each entry to the followers of its unit; when
// a unit is added the process is started again from a little before the earliest position any
// follower needs, and each follower drops what it already has (by reception time and cursor).
type journalHub struct {
	journalctl string
	clock      clock.WithTicker
	log        *slog.Logger
	max        int

	mu      sync.Mutex
	subs    map[*follower]struct{}
	changed chan struct{} // a follower came or went
	running bool
	stopped chan struct{} // closed when the running hub has stopped its process and returned
}

// follower is one followed log.
type follower struct {
	unit    string
	entries chan journalEntry
	// Guarded by the hub's mu: the last entry delivered (reception time in µs, cursor), and
	// the time from which entries may still be missing (µs).
	lastRT     int64
	lastCursor string
	pos        int64
	lagged     bool // entries were dropped: closed, the follower reads on by itself
}

// followerBuffer bounds the entries waiting for a follower's client; a slower client falls
// behind and catches up by itself (reading the journal from its cursor, without following).
const followerBuffer = 4096

// journalLag bounds how long journald takes to make an entry it received readable: a follow
// process started again begins that much before the time its predecessor stopped.
const journalLag = 5 * time.Second

// restartDelay gathers the units of followers that start together into one restart.
const restartDelay = 100 * time.Millisecond

// errLagged ends a follow whose client fell followerBuffer entries behind.
var errLagged = errors.New("log follower fell behind")

func newJournalHub(journalctl string, c clock.WithTicker, log *slog.Logger) *journalHub {
	return &journalHub{journalctl: journalctl, clock: c, log: log, max: MaxLogFollowers, subs: map[*follower]struct{}{}, changed: make(chan struct{}, 1)}
}

// follow calls fn with every new entry of unit after the one at (lastRT, lastCursor) (a
// reception time in µs, and a cursor; the unit's entries before from (µs) are known to the
// caller), until ctx ends (nil) or the caller fell behind (errLagged).
func (h *journalHub) follow(ctx context.Context, unit string, lastRT int64, lastCursor string, from int64, fn func(journalEntry) error) error {
	f := &follower{unit: unit, entries: make(chan journalEntry, followerBuffer), lastRT: lastRT, lastCursor: lastCursor, pos: max(from, lastRT)}
	if err := h.add(f); err != nil {
		return err
	}
	defer h.remove(f)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-f.entries:
			if !ok {
				return errLagged
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

func (h *journalHub) add(f *follower) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= h.max {
		return fmt.Errorf("%d logs are followed, the limit (stop one, or read without following): %w", len(h.subs), pods.ErrTooManyFollowers)
	}
	h.subs[f] = struct{}{}
	h.signalLocked()
	if !h.running {
		h.running = true
		stopped := make(chan struct{})
		h.stopped = stopped
		go func() {
			defer close(stopped)
			h.run()
		}()
	}
	return nil
}

func (h *journalHub) remove(f *follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, f)
	h.signalLocked()
}

func (h *journalHub) signalLocked() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// Followers is how many logs are followed now.
func (h *journalHub) Followers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// plan is what the next follow process matches and where it starts (µs); no units when nobody
// follows (with stop, the hub then stops).
func (h *journalHub) plan(stop bool) (units []string, from int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.subs {
		if !slices.Contains(units, f.unit) {
			units = append(units, f.unit)
		}
		if from == 0 || f.pos < from {
			from = f.pos
		}
	}
	if len(units) == 0 && stop {
		h.running = false
	}
	slices.Sort(units)
	return units, from
}

// run runs follow processes until nobody follows.
func (h *journalHub) run() {
	for {
		// A change before the plan is in it.
		select {
		case <-h.changed:
		default:
		}
		units, from := h.plan(true)
		if len(units) == 0 {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.process(ctx, units, from) }()
		restart := false
		for !restart {
			select {
			case <-h.changed:
				// A unit the process does not match: started again, once the followers
				// that come together are there. Units nobody follows any more stay
				// matched until then (their entries go to nobody); nobody following
				// stops the process.
				now, _ := h.plan(false)
				if len(now) == 0 {
					restart = true
				} else if !sameUnits(units, now) {
					restart = true
					<-h.clock.After(restartDelay)
				}
			case err := <-done:
				done = nil
				if err != nil {
					h.log.Warn("journal follower", "err", err)
					<-h.clock.After(time.Second)
				}
				restart = true
			}
		}
		stopped := h.clock.Now().Add(-journalLag).UnixMicro()
		cancel()
		if done != nil {
			<-done
		}
		// What the process matched was delivered up to about when it stopped.
		h.mu.Lock()
		for f := range h.subs {
			if slices.Contains(units, f.unit) && f.pos < stopped {
				f.pos = stopped
			}
		}
		h.mu.Unlock()
	}
}

func sameUnits(a, b []string) bool {
	for _, u := range b {
		if !slices.Contains(a, u) {
			return false
		}
	}
	return true
}

// process runs one journalctl --follow matching units from from (µs) and delivers its entries.
func (h *journalHub) process(ctx context.Context, units []string, from int64) error {
	args := []string{"--no-pager", "--quiet", "--output=json", "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT", "--all", "--follow",
		"--lines=all", "--since=@" + strconv.FormatInt(from/1e6-1, 10)}
	for i, u := range units {
		if i > 0 {
			// Matches of one field are ORed anyway; "+" keeps that explicit.
			args = append(args, "+")
		}
		args = append(args, "_SYSTEMD_UNIT="+u)
	}
	err := runJournal(ctx, h.journalctl, args, func(e journalEntry) error {
		h.deliver(e)
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("journalctl --follow ended")
	}
	return err
}

// deliver hands an entry to its unit's followers that do not have it yet.
func (h *journalHub) deliver(e journalEntry) {
	rt, err := strconv.ParseInt(e.Realtime, 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.subs {
		if f.unit != e.Unit || f.lagged || rt < f.lastRT || (rt == f.lastRT && e.Cursor == f.lastCursor) {
			continue
		}
		select {
		case f.entries <- e:
			f.lastRT, f.lastCursor = rt, e.Cursor
		default:
			f.lagged = true
			close(f.entries)
		}
	}
}
