// Package health is the daemon's one record of how its parts are doing, modelled on
// tailscale's health.Tracker: each component declares Warnables (the systemd connection, the
// eviction loop, image GC, ...) and reports their state to a Tracker as it changes: healthy,
// failing (with a message), or alive for a while (Renew, a lease that turns unhealthy when it is
// not renewed in time, for loops that cannot report their own hang).
//
// Everything that shows health reads the Tracker and keeps no state of its own: the sd_notify
// STATUS= line and the watchdog, the node's conditions in the local API and `slicectl node`,
// /healthz and /readyz, and the slicelet_health* metrics. The Tracker logs every transition
// once (a journald record under systemd) and counts them.
//
// A nil *Tracker is valid and records nothing, so a component can be built without one.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Severity says what an unhealthy Warnable means for the node.
type Severity string

const (
	// SeverityCritical: slicelet cannot do its job (pods cannot be started, stopped or
	// protected). The node is not Ready and /readyz fails.
	SeverityCritical Severity = "critical"
	// SeverityWarning: something is degraded and the operator should look; the node stays
	// Ready.
	SeverityWarning Severity = "warning"
)

// Status is a Warnable's state.
type Status string

const (
	// StatusUnknown: registered, never reported (the component has not started).
	StatusUnknown Status = "Unknown"
	// StatusHealthy: the last report was good (or a failure below FailuresToUnhealthy), and a
	// renewed lease has not expired.
	StatusHealthy Status = "Healthy"
	// StatusUnhealthy: FailuresToUnhealthy failures in a row, or a lease that expired.
	StatusUnhealthy Status = "Unhealthy"
)

// Warnable is something whose health the operator may need to know about. Components declare
// their Warnables as package variables and report on them; the pointer is the identity.
type Warnable struct {
	// Code identifies the warnable in logs, metrics and the API ("systemd", "eviction-loop").
	// Codes are unique within a Tracker.
	Code string
	// Title names it for people ("systemd connection").
	Title string
	// Severity is what being unhealthy means.
	Severity Severity
	// Watchdog marks what a restart of slicelet can repair (a hung loop, a dead D-Bus
	// connection): while such a warnable is unhealthy the sd_notify watchdog withholds its
	// pings and systemd restarts slicelet; /healthz fails too.
	Watchdog bool
	// FailuresToUnhealthy is how many failures in a row make the warnable unhealthy; 0 means 1.
	// Failures before that are recorded (Failures, Message) without a transition.
	FailuresToUnhealthy int
	// Condition, if set, is the node condition that shows this warnable: true while it is
	// unhealthy, absent while it is unknown.
	Condition *Condition
}

// Condition describes the node condition of a Warnable, in the kubelet's vocabulary.
type Condition struct {
	// Type is the condition type ("MemoryPressure", "ImageGCFailing").
	Type string
	// TrueReason and FalseReason are the condition's reasons while the warnable is unhealthy
	// and healthy ("KubeletHasInsufficientMemory", "KubeletHasSufficientMemory").
	TrueReason, FalseReason string
	// TrueMessage and FalseMessage are fixed messages; empty means the reported message (or,
	// while healthy without one, none).
	TrueMessage, FalseMessage string
}

func (w *Warnable) threshold() int { return max(w.FailuresToUnhealthy, 1) }

// WarnableState is a Warnable's state at one moment, as State returns it.
type WarnableState struct {
	// Warnable is the definition; the fields below repeat what readers print.
	Warnable *Warnable `json:"-"`
	Code     string    `json:"code"`
	Title    string    `json:"title"`
	Severity Severity  `json:"severity"`
	Watchdog bool      `json:"watchdog,omitempty"`
	// Condition is the node condition type that shows this warnable, if any.
	Condition string `json:"condition,omitempty"`

	Status Status `json:"status"`
	// Message is why it is unhealthy, or the last failure while still healthy (Failures > 0),
	// or what a healthy report said.
	Message string `json:"message,omitempty"`
	// Since is when Status last changed (the first report for a warnable never unhealthy).
	Since time.Time `json:"since,omitzero"`
	// LastReport is the time of the last report (the node condition's heartbeat).
	LastReport time.Time `json:"lastReport,omitzero"`
	// Failures counts failures in a row; FailuresToUnhealthy is the warnable's threshold.
	Failures            int `json:"failures,omitempty"`
	FailuresToUnhealthy int `json:"failuresToUnhealthy,omitempty"`
	// Expires is the last instant the lease of the last Renew is valid; zero without one.
	Expires time.Time `json:"expires,omitzero"`
	// Transitions counts status changes between Healthy and Unhealthy since the start.
	Transitions int `json:"transitions"`
}

// Healthy reports whether the state is StatusHealthy.
func (s WarnableState) Healthy() bool { return s.Status == StatusHealthy }

// State is every registered Warnable's state, in registration order.
type State struct {
	// At is when the state was taken.
	At        time.Time       `json:"at"`
	Warnables []WarnableState `json:"warnables"`
}

// Get returns the state of w, and false when w is not registered.
func (s State) Get(w *Warnable) (WarnableState, bool) {
	for _, ws := range s.Warnables {
		if ws.Warnable == w {
			return ws, true
		}
	}
	return WarnableState{}, false
}

// Unhealthy returns the unhealthy warnables whose severity is one of sev (any severity when
// sev is empty).
func (s State) Unhealthy(sev ...Severity) []WarnableState {
	var out []WarnableState
	for _, ws := range s.Warnables {
		if ws.Status == StatusUnhealthy && (len(sev) == 0 || slices.Contains(sev, ws.Severity)) {
			out = append(out, ws)
		}
	}
	return out
}

// NotLive returns the watchdog warnables that are not healthy (unhealthy, or not reported
// yet): while there is one, the watchdog withholds its pings and /healthz fails.
func (s State) NotLive() []WarnableState {
	var out []WarnableState
	for _, ws := range s.Warnables {
		if ws.Watchdog && ws.Status != StatusHealthy {
			out = append(out, ws)
		}
	}
	return out
}

// NotReady returns the critical warnables that are not healthy (unhealthy, or not reported
// yet): while there is one, the node is not Ready and /readyz fails.
func (s State) NotReady() []WarnableState {
	var out []WarnableState
	for _, ws := range s.Warnables {
		if ws.Severity == SeverityCritical && ws.Status != StatusHealthy {
			out = append(out, ws)
		}
	}
	return out
}

// Describe joins "title: message" of the states, for one-line summaries.
func Describe(states []WarnableState) string {
	parts := make([]string, len(states))
	for i, ws := range states {
		msg := ws.Message
		if ws.Status == StatusUnknown {
			msg = "not reported yet"
		}
		parts[i] = ws.Title
		if msg != "" {
			parts[i] += ": " + msg
		}
	}
	return strings.Join(parts, "; ")
}

// Options configure New.
type Options struct {
	// Clock tells the time and fires lease expiries; clock.RealClock when nil.
	Clock clock.WithDelayedExecution
	// Logger receives one record per transition; nil discards.
	Logger *slog.Logger
}

// Tracker holds the state of every Warnable reported to it. Its methods are safe for
// concurrent use and do nothing on a nil *Tracker.
type Tracker struct {
	clock clock.WithDelayedExecution
	log   *slog.Logger

	mu     sync.Mutex
	order  []*Warnable
	states map[*Warnable]*state
	codes  map[string]*Warnable
	// pending are the transition records to log once mu is released (unlock): a logger that
	// blocks (journald under load) must not hold up the tracker's readers.
	pending []logRecord
}

// logRecord is one transition to log.
type logRecord struct {
	level slog.Level
	msg   string
	attrs []any
}

// unlock releases mu and then logs the transitions recorded while it was held.
func (t *Tracker) unlock() {
	recs := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, r := range recs {
		t.log.Log(context.Background(), r.level, r.msg, r.attrs...)
	}
}

// state is what the Tracker keeps per Warnable.
type state struct {
	status      Status
	message     string
	since       time.Time
	lastReport  time.Time
	failures    int
	transitions int
	expires     time.Time   // zero: no lease
	timer       clock.Timer // fires at expires
}

// New returns an empty Tracker.
func New(o Options) *Tracker {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{clock: o.Clock, log: o.Logger, states: map[*Warnable]*state{}, codes: map[string]*Warnable{}}
}

// Register makes the warnables known with StatusUnknown, so readers list them before their
// first report. Registering a warnable again does nothing; registering a different warnable
// with a code already in use panics (two components claiming one name is a programming error).
func (t *Tracker) Register(ws ...*Warnable) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range ws {
		t.registerLocked(w)
	}
}

func (t *Tracker) registerLocked(w *Warnable) *state {
	if s, ok := t.states[w]; ok {
		return s
	}
	if other, ok := t.codes[w.Code]; ok && other != w {
		panic(fmt.Sprintf("health: two warnables with code %q", w.Code))
	}
	s := &state{status: StatusUnknown}
	t.states[w] = s
	t.codes[w.Code] = w
	t.order = append(t.order, w)
	return s
}

// SetHealthy reports w healthy: its failures are reset and a lease is dropped.
func (t *Tracker) SetHealthy(w *Warnable) { t.report(w, nil, "", 0) }

// SetHealthyMessage reports w healthy with a note (shown while healthy, e.g. what a warning
// is about to become).
func (t *Tracker) SetHealthyMessage(w *Warnable, message string) { t.report(w, nil, message, 0) }

// SetUnhealthy reports one failure of w with its message; w turns unhealthy at its
// FailuresToUnhealthy-th failure in a row.
func (t *Tracker) SetUnhealthy(w *Warnable, message string) {
	t.report(w, &message, "", 0)
}

// Set reports err: nil is SetHealthy, anything else SetUnhealthy with its text.
func (t *Tracker) Set(w *Warnable, err error) {
	if err == nil {
		t.SetHealthy(w)
		return
	}
	t.SetUnhealthy(w, err.Error())
}

// Renew reports w healthy until validFor from now (inclusive): unless renewed (or reported)
// again by then, it turns unhealthy right after, with a message saying since when nothing was heard. It is how
// a loop reports that it is alive.
func (t *Tracker) Renew(w *Warnable, validFor time.Duration) { t.report(w, nil, "", validFor) }

// report records one report: failure (message non-nil) or success, with an optional lease.
func (t *Tracker) report(w *Warnable, failure *string, note string, lease time.Duration) {
	if t == nil || w == nil {
		return
	}
	t.mu.Lock()
	defer t.unlock()
	now := t.clock.Now()
	s := t.registerLocked(w)
	s.lastReport = now
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.expires = time.Time{}
	next := StatusHealthy
	if failure != nil {
		s.failures++
		s.message = *failure
		if s.failures >= w.threshold() {
			next = StatusUnhealthy
		} else if s.status == StatusUnhealthy {
			next = StatusUnhealthy // an expired lease stays unhealthy until a success
		}
	} else {
		s.failures = 0
		s.message = note
		if lease > 0 {
			s.expires = now.Add(lease)
			// In a goroutine of its own: a fake clock runs the callback while holding its
			// lock, and expire asks it for the time.
			s.timer = t.clock.AfterFunc(lease+time.Nanosecond, func() { go t.expire(w) })
		}
	}
	t.transitionLocked(w, s, next, now)
}

// expire turns a warnable whose lease ran out unhealthy (the timer's callback).
func (t *Tracker) expire(w *Warnable) {
	t.mu.Lock()
	defer t.unlock()
	t.expireLocked(w, t.states[w], t.clock.Now())
}

// expireLocked applies an expired lease; readers call it too, so a read never shows a lease
// that ran out as healthy even before the timer's callback ran.
func (t *Tracker) expireLocked(w *Warnable, s *state, now time.Time) {
	if s == nil || s.expires.IsZero() || !now.After(s.expires) {
		return
	}
	s.message = fmt.Sprintf("no report since %s (expected within %s)",
		s.lastReport.UTC().Format(time.RFC3339), s.expires.Sub(s.lastReport).Round(time.Second))
	s.expires = time.Time{}
	s.timer = nil
	t.transitionLocked(w, s, StatusUnhealthy, now)
}

// transitionLocked moves s to next, counting a change between healthy and unhealthy and
// recording it for the log (unlock writes it). The first report of a healthy warnable is no transition and is not logged.
func (t *Tracker) transitionLocked(w *Warnable, s *state, next Status, now time.Time) {
	prev := s.status
	if prev == next {
		return
	}
	s.status = next
	s.since = now
	if prev == StatusUnknown && next == StatusHealthy {
		return
	}
	s.transitions++
	attrs := []any{"warnable", w.Code, "severity", string(w.Severity)}
	if next == StatusUnhealthy {
		attrs = append(attrs, "message", s.message)
		if s.failures > 1 {
			attrs = append(attrs, "failures", s.failures)
		}
		if w.Condition != nil {
			attrs = append(attrs, "condition", w.Condition.Type, "status", "True")
		}
		level := slog.LevelWarn
		if w.Severity == SeverityCritical {
			level = slog.LevelError
		}
		t.pending = append(t.pending, logRecord{level, w.Title + " unhealthy", attrs})
		return
	}
	if w.Condition != nil {
		attrs = append(attrs, "condition", w.Condition.Type, "status", "False")
	}
	t.pending = append(t.pending, logRecord{slog.LevelInfo, w.Title + " healthy again", attrs})
}

// Get returns the state of w now (StatusUnknown for a warnable never reported or registered).
func (t *Tracker) Get(w *Warnable) WarnableState {
	if t == nil {
		return stateOf(w, &state{status: StatusUnknown})
	}
	t.mu.Lock()
	defer t.unlock()
	s, ok := t.states[w]
	if !ok {
		return stateOf(w, &state{status: StatusUnknown})
	}
	t.expireLocked(w, s, t.clock.Now())
	return stateOf(w, s)
}

// State returns every registered warnable's state now, in registration order.
func (t *Tracker) State() State {
	if t == nil {
		return State{}
	}
	t.mu.Lock()
	defer t.unlock()
	now := t.clock.Now()
	out := State{At: now, Warnables: make([]WarnableState, 0, len(t.order))}
	for _, w := range t.order {
		s := t.states[w]
		t.expireLocked(w, s, now)
		out.Warnables = append(out.Warnables, stateOf(w, s))
	}
	return out
}

func stateOf(w *Warnable, s *state) WarnableState {
	ws := WarnableState{
		Warnable: w, Code: w.Code, Title: w.Title, Severity: w.Severity, Watchdog: w.Watchdog,
		Status: s.status, Message: s.message, Since: s.since, LastReport: s.lastReport,
		Failures: s.failures, Expires: s.expires, Transitions: s.transitions,
	}
	if w.FailuresToUnhealthy > 1 {
		ws.FailuresToUnhealthy = w.FailuresToUnhealthy
	}
	if w.Condition != nil {
		ws.Condition = w.Condition.Type
	}
	return ws
}
