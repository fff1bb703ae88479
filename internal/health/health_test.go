package health

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	loop = &Warnable{Code: "loop", Title: "test loop", Severity: SeverityCritical, Watchdog: true}
	gcw  = &Warnable{Code: "gc", Title: "test gc", Severity: SeverityWarning, FailuresToUnhealthy: 3,
		Condition: &Condition{Type: "GCFailing", TrueReason: "GCFailing", FalseReason: "GCSucceeding"}}
	conn = &Warnable{Code: "conn", Title: "test connection", Severity: SeverityCritical}
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newTracker() (*Tracker, *clocktesting.FakeClock, *bytes.Buffer) {
	clk := clocktesting.NewFakeClock(t0)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return New(Options{Clock: clk, Logger: log}), clk, &logs
}

func TestRegisterIsUnknownUntilReported(t *testing.T) {
	tr, _, logs := newTracker()
	tr.Register(loop, conn)
	tr.Register(loop) // again: nothing
	st := tr.State()
	if len(st.Warnables) != 2 || st.Warnables[0].Code != "loop" || st.Warnables[1].Code != "conn" {
		t.Fatalf("state = %+v, want loop and conn in registration order", st.Warnables)
	}
	for _, ws := range st.Warnables {
		if ws.Status != StatusUnknown {
			t.Errorf("%s: %s before any report", ws.Code, ws.Status)
		}
	}
	if got := Describe(st.NotReady()); got != "test loop: not reported yet; test connection: not reported yet" {
		t.Errorf("NotReady = %q", got)
	}
	if len(st.NotLive()) != 1 || len(st.Unhealthy()) != 0 {
		t.Errorf("NotLive %v Unhealthy %v", st.NotLive(), st.Unhealthy())
	}
	tr.SetHealthy(conn)
	if ws := tr.Get(conn); ws.Status != StatusHealthy || !ws.Since.Equal(t0) || ws.Transitions != 0 {
		t.Errorf("after the first report: %+v", ws)
	}
	if logs.Len() != 0 {
		t.Errorf("the first healthy report was logged:\n%s", logs)
	}
}

func TestDuplicateCodePanics(t *testing.T) {
	tr, _, _ := newTracker()
	tr.Register(loop)
	defer func() {
		if recover() == nil {
			t.Error("a second warnable with the code of a registered one was accepted")
		}
	}()
	tr.Register(&Warnable{Code: "loop"})
}

// TestFailuresToUnhealthy: a warnable with a threshold turns unhealthy at the third failure in
// a row, a success resets the count, and each transition is logged once.
func TestFailuresToUnhealthy(t *testing.T) {
	tr, clk, logs := newTracker()
	boom := errors.New("runtime: connection refused")
	steps := []struct {
		err          error
		want         Status
		failures     int
		transitions  int
		sinceSeconds int
	}{
		{boom, StatusHealthy, 1, 0, 0},
		{boom, StatusHealthy, 2, 0, 0},
		{nil, StatusHealthy, 0, 0, 0},
		{boom, StatusHealthy, 1, 0, 0},
		{boom, StatusHealthy, 2, 0, 0},
		{boom, StatusUnhealthy, 3, 1, 5},
		{boom, StatusUnhealthy, 4, 1, 5},
		{nil, StatusHealthy, 0, 2, 7},
	}
	for i, st := range steps {
		tr.Set(gcw, st.err)
		ws := tr.Get(gcw)
		if ws.Status != st.want || ws.Failures != st.failures || ws.Transitions != st.transitions ||
			ws.Since.Sub(t0) != time.Duration(st.sinceSeconds)*time.Second || !ws.LastReport.Equal(clk.Now()) {
			t.Errorf("step %d: %+v, want %s with %d failures, %d transitions, since +%ds", i, ws, st.want, st.failures, st.transitions, st.sinceSeconds)
		}
		if st.err != nil && ws.Message != boom.Error() {
			t.Errorf("step %d: message %q", i, ws.Message)
		}
		clk.Step(time.Second)
	}
	if n := strings.Count(logs.String(), `msg="test gc unhealthy"`); n != 1 {
		t.Errorf("%d unhealthy records, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), `msg="test gc healthy again"`); n != 1 {
		t.Errorf("%d recovery records, want 1:\n%s", n, logs)
	}
	for _, want := range []string{"level=WARN", "warnable=gc", "condition=GCFailing status=True", "failures=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// TestRenewExpires: a lease keeps a warnable healthy until it runs out; then it is unhealthy
// on its own, logged once at the expiry, and a read never shows an expired lease as healthy.
func TestRenewExpires(t *testing.T) {
	tr, clk, logs := newTracker()
	tr.Renew(loop, time.Minute)
	clk.Step(59 * time.Second)
	if ws := tr.Get(loop); !ws.Healthy() || !ws.Expires.Equal(t0.Add(time.Minute)) {
		t.Fatalf("within the lease: %+v", ws)
	}
	tr.Renew(loop, time.Minute) // renewed at +59s: good until +119s
	clk.Step(30 * time.Second)
	if !tr.Get(loop).Healthy() {
		t.Fatal("unhealthy within a renewed lease")
	}
	clk.Step(30 * time.Second) // +119s: the lease's last instant
	if !tr.Get(loop).Healthy() {
		t.Fatal("unhealthy at the last instant of the lease")
	}
	clk.Step(time.Second) // the timer fires
	ws := tr.Get(loop)
	if ws.Status != StatusUnhealthy || !ws.Since.Equal(t0.Add(120*time.Second)) ||
		ws.Message != "no report since 2030-01-02T03:05:04Z (expected within 1m0s)" {
		t.Errorf("after the lease: %+v", ws)
	}
	if len(tr.State().NotLive()) != 1 {
		t.Error("an expired watchdog warnable is live")
	}
	if n := strings.Count(logs.String(), "test loop unhealthy"); n != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("want one error record of the expiry:\n%s", logs)
	}
	// A failure report keeps it unhealthy; only a success or a renewal heals it.
	tr.SetUnhealthy(loop, "stuck")
	if ws := tr.Get(loop); ws.Status != StatusUnhealthy || ws.Message != "stuck" || ws.Transitions != 1 {
		t.Errorf("failure after expiry: %+v", ws)
	}
	tr.Renew(loop, time.Minute)
	if ws := tr.Get(loop); !ws.Healthy() || ws.Transitions != 2 {
		t.Errorf("renewed after expiry: %+v", ws)
	}
	if !strings.Contains(logs.String(), "test loop healthy again") {
		t.Errorf("the recovery is not logged:\n%s", logs)
	}
}

// TestExpiredLeaseSeenBeforeTheTimer: reads apply the expiry themselves (a reader may run
// before the timer's callback).
func TestExpiredLeaseSeenBeforeTheTimer(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	tr := New(Options{Clock: passiveOnly{clk}})
	tr.Renew(loop, time.Second)
	clk.SetTime(t0.Add(2 * time.Second))
	if ws, _ := tr.State().Get(loop); ws.Status != StatusUnhealthy {
		t.Errorf("state after the lease without its timer: %+v", ws)
	}
}

// passiveOnly is a clock whose timers never fire.
type passiveOnly struct{ *clocktesting.FakePassiveClock }

func (passiveOnly) After(time.Duration) <-chan time.Time { return nil }
func (p passiveOnly) NewTimer(time.Duration) clock.Timer { return nopTimer{} }
func (passiveOnly) Sleep(time.Duration)                  {}
func (passiveOnly) Tick(time.Duration) <-chan time.Time  { return nil }
func (p passiveOnly) AfterFunc(time.Duration, func()) clock.Timer {
	return nopTimer{}
}

type nopTimer struct{}

func (nopTimer) C() <-chan time.Time      { return nil }
func (nopTimer) Stop() bool               { return true }
func (nopTimer) Reset(time.Duration) bool { return true }

func TestNilTracker(t *testing.T) {
	var tr *Tracker
	tr.Register(loop)
	tr.SetHealthy(loop)
	tr.SetUnhealthy(loop, "x")
	tr.Renew(loop, time.Second)
	if ws := tr.Get(loop); ws.Status != StatusUnknown || ws.Code != "loop" {
		t.Errorf("Get on nil = %+v", ws)
	}
	if st := tr.State(); len(st.Warnables) != 0 {
		t.Errorf("State on nil = %+v", st)
	}
}

func TestStateFilters(t *testing.T) {
	tr, _, _ := newTracker()
	tr.Register(loop, gcw, conn)
	tr.SetHealthy(loop)
	for range 3 {
		tr.SetUnhealthy(gcw, "disk full")
	}
	tr.SetUnhealthy(conn, "refused")
	st := tr.State()
	if got := Describe(st.Unhealthy()); got != "test gc: disk full; test connection: refused" {
		t.Errorf("Unhealthy = %q", got)
	}
	if got := Describe(st.Unhealthy(SeverityWarning)); got != "test gc: disk full" {
		t.Errorf("Unhealthy(warning) = %q", got)
	}
	if got := Describe(st.NotReady()); got != "test connection: refused" {
		t.Errorf("NotReady = %q", got)
	}
	if len(st.NotLive()) != 0 {
		t.Errorf("NotLive = %v", st.NotLive())
	}
	if ws, ok := st.Get(gcw); !ok || ws.Condition != "GCFailing" || ws.FailuresToUnhealthy != 3 {
		t.Errorf("Get(gc) = %+v, %v", ws, ok)
	}
}
