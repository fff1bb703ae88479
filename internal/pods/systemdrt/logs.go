package systemdrt

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	stdslices "slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// followDrain is how long Logs keeps following after the instance ended, so that the journal's
// last lines (written asynchronously by journald) still arrive.
const followDrain = 500 * time.Millisecond

// followCatchUp bounds the reads after a followed instance ended (see Logs).
const followCatchUp = 2 * time.Second

// Logs writes a container's output from the journal (journalctl --output=json
// _SYSTEMD_UNIT=<unit>, one line per entry's MESSAGE): the current instance, or with Previous
// the one before it. TailLines limits the output to the last lines; Follow then streams new
// lines until ctx ends or the instance has ended. A container without such an instance is
// pods.ErrNoLogs.
func (r *Runtime) Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, w io.Writer) error {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	if c, _ := lifecycle.ContainerByName(pod, container); c == nil {
		return fmt.Errorf("pod %s/%s: no container %q: %w", pod.Namespace, pod.Name, container, pods.ErrNoLogs)
	}
	n, invocation, since, err := r.instanceFor(ctx, uid, container, opts.Previous)
	if err != nil {
		return err
	}
	if n < 1 {
		what := "has not run yet"
		if opts.Previous {
			what = "has no previous instance"
		}
		return fmt.Errorf("pod %s/%s: container %s %s: %w", pod.Namespace, pod.Name, container, what, pods.ErrNoLogs)
	}
	unit, err := UnitName(uid, container, n)
	if err != nil {
		return err
	}
	// journald stamps a line with the unit's invocation ID only when it could still read it from
	// the unit's cgroup; lines of a process that exited at once often have none. So lines are
	// matched by unit name and kept when their invocation ID is this run's, or when they have
	// none and were received after this run started (a pod re-created with the same UID reuses
	// unit names).
	filter := entryFilter{invocation: invocation, since: since}
	base := []string{"--no-pager", "--quiet", "--output=json", "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID", "--all"}
	match := "_SYSTEMD_UNIT=" + unit

	// from are the arguments that read on from the last entry seen (cursor), or from the run's
	// start; follow streams new entries from there.
	cursor := ""
	from := func(follow bool) []string {
		args := stdslices.Clone(base)
		if follow {
			args = append(args, "--follow", "--lines=0")
		}
		if cursor != "" {
			return append(args, "--after-cursor="+cursor)
		}
		if !since.IsZero() {
			return append(args, "--lines=all", "--since=@"+strconv.FormatInt(since.Unix()-1, 10))
		}
		if !follow {
			args = append(args, "--lines=all")
		}
		return args
	}

	// What is in the journal now: all of it, or its last TailLines lines.
	lw := pods.NewLogWriter(opts, w)
	var lastRT int64 // the last entry read: its reception time (µs)
	read := r.clock.Now()
	err = r.journal(ctx, append(from(false), match), func(e journalEntry) error {
		cursor = e.Cursor
		lastRT = e.micros()
		msg, ok := e.message()
		if !ok || !filter.keep(e) {
			return nil
		}
		return lw.WriteLine(e.time(), append(msg, '\n'))
	})
	if err != nil {
		return fmt.Errorf("logs of %s: %w", unit, err)
	}
	if err := lw.Flush(); err != nil {
		return err
	}
	if !opts.Follow || opts.Previous {
		return nil
	}

	// Then follow from there until the instance has ended (and journald had time to write its
	// last lines) or ctx ends.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if ended, _ := r.waitEnded(cctx, unit, 365*24*time.Hour); ended {
			t := r.clock.NewTimer(followDrain)
			defer t.Stop()
			select {
			case <-t.C():
				cancel()
			case <-cctx.Done():
			}
		}
	}()
	write := func(e journalEntry) error {
		cursor = e.Cursor
		lastRT = max(lastRT, e.micros())
		msg, ok := e.message()
		if !ok || !filter.keep(e) {
			return nil
		}
		return lw.WriteLine(e.time(), append(msg, '\n'))
	}
	// Followed with every other follower (one journalctl --follow, journalHub); a client that
	// falls behind reads on from its last entry, then follows again.
	followFrom := read.Add(-journalLag).UnixMicro()
	for {
		err = r.hub.follow(cctx, unit, lastRT, cursor, followFrom, write)
		if !errors.Is(err, errLagged) {
			break
		}
		followFrom = r.clock.Now().Add(-journalLag).UnixMicro()
		if err = r.journal(cctx, append(from(false), match), write); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return nil // the caller is gone
	}
	if cctx.Err() == nil && err != nil {
		return fmt.Errorf("logs of %s: %w", unit, err)
	}
	// The instance ended. The follower may have been stopped before it printed what journald
	// had stored meanwhile, and journald may store the stream's last lines a little later
	// (under load, after followDrain): read on from the last entry printed until two reads in a
	// row find nothing new, for at most followCatchUp.
	deadline := r.clock.Now().Add(followCatchUp)
	for quiet := 0; ; {
		before := cursor
		if err := r.journal(ctx, append(from(false), match), write); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("logs of %s: %w", unit, err)
		}
		if cursor == before {
			quiet++
		} else {
			quiet = 0
		}
		if quiet == 2 || r.clock.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock.After(followDrain / 5):
		}
	}
}

// journal runs journalctl with args and calls fn for every entry of its JSON output.
func (r *Runtime) journal(ctx context.Context, args []string, fn func(journalEntry) error) error {
	return runJournal(ctx, r.opts.Journalctl, args, fn)
}

// runJournal runs the journalctl binary with args and calls fn for every entry of its JSON
// output.
func runJournal(ctx context.Context, journalctl string, args []string, fn func(journalEntry) error) error {
	cmd := exec.CommandContext(ctx, journalctl, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("journalctl: %w", err)
	}
	dec := json.NewDecoder(stdout)
	var ferr error
	for ferr == nil {
		var e journalEntry
		if err := dec.Decode(&e); err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				ferr = fmt.Errorf("journalctl output: %w", err)
			}
			break
		}
		ferr = fn(e)
	}
	if ferr != nil {
		_ = cmd.Process.Kill()
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	switch {
	case ferr != nil:
		return ferr
	case ctx.Err() != nil:
		return ctx.Err()
	case werr != nil:
		return fmt.Errorf("journalctl: %w: %s", werr, stderr.String())
	}
	return nil
}

// entryFilter selects the journal entries of one run of a unit.
type entryFilter struct {
	invocation string
	since      time.Time
}

// journalEntry is one line of journalctl --output=json.
type journalEntry struct {
	Message    json.RawMessage `json:"MESSAGE"`
	Invocation string          `json:"_SYSTEMD_INVOCATION_ID"`
	Unit       string          `json:"_SYSTEMD_UNIT"`
	Realtime   string          `json:"__REALTIME_TIMESTAMP"`
	Cursor     string          `json:"__CURSOR"`
}

// keep reports whether the entry belongs to the run.
func (f entryFilter) keep(e journalEntry) bool {
	if f.invocation != "" && e.Invocation != "" {
		return e.Invocation == f.invocation
	}
	if f.since.IsZero() {
		return true
	}
	us, err := strconv.ParseInt(e.Realtime, 10, 64)
	return err != nil || us >= f.since.UnixMicro()
}

// micros is when journald received the entry, in µs since the epoch; 0 when it has none.
func (e journalEntry) micros() int64 {
	us, _ := strconv.ParseInt(e.Realtime, 10, 64)
	return us
}

// time is when journald received the entry (__REALTIME_TIMESTAMP, microseconds since the
// epoch); the zero time when it has none.
func (e journalEntry) time() time.Time {
	us, err := strconv.ParseInt(e.Realtime, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// message returns MESSAGE, which journalctl writes as a JSON string, or as an array of bytes
// when it is not valid UTF-8.
func (e journalEntry) message() ([]byte, bool) {
	if len(e.Message) == 0 || e.Message[0] == 'n' {
		return nil, false
	}
	if e.Message[0] == '[' {
		var b []byte
		var nums []int
		if json.Unmarshal(e.Message, &nums) != nil {
			return nil, false
		}
		for _, n := range nums {
			b = append(b, byte(n))
		}
		return b, true
	}
	var s string
	if json.Unmarshal(e.Message, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// instanceFor returns the run whose logs are wanted (the current one, or with previous the one
// before it) as its instance number, its invocation ID and start time when known. Units are
// consulted when the pod has no record (state dir lost).
func (r *Runtime) instanceFor(ctx context.Context, uid, container string, previous bool) (int, string, time.Time, error) {
	n, invocation, known, since := 0, "", false, time.Time{}
	err := r.locked(uid, func(e *podEntry) error {
		if e.rec == nil {
			return nil
		}
		var runs []*run
		for _, rn := range e.rec.Runs {
			if rn.Name == container && (rn.Started || rn.Done) {
				runs = append(runs, rn)
			}
		}
		if len(runs) == 0 {
			return nil
		}
		known = true
		cur := stdslices.MaxFunc(runs, func(a, b *run) int { return cmp.Compare(a.Attempt, b.Attempt) })
		if !previous {
			n, invocation, since = int(cur.Attempt)+1, cur.InvocationID, cur.StartedAt
			return nil
		}
		n = int(cur.Attempt)
		for _, rn := range runs {
			if rn.Attempt+1 == cur.Attempt {
				invocation, since = rn.InvocationID, rn.StartedAt
			}
		}
		return nil
	})
	if err != nil {
		return 0, "", time.Time{}, err
	}
	if !known {
		list, err := r.sd.List(ctx, podPattern(uid))
		if err != nil {
			return 0, "", time.Time{}, fmt.Errorf("pod %s: container units: %w", uid, err)
		}
		for _, u := range list {
			if id, ok := parseUnit(u.Name); ok && id.UID == uid && id.Container == container && id.N > n {
				n = id.N
			}
		}
		if previous {
			n--
		}
	}
	return n, invocation, since, nil
}

// limitedBuffer keeps the first 4 KiB written to it (journalctl's error message).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	return strings.ReplaceAll(strings.TrimSpace(string(l.b)), "\n", "; ")
}
