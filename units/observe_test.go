package units

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

func TestResultOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ResultSuccess},
		{"job result timeout", &JobError{Unit: "a.slice", Op: opStart, Result: "timeout"}, ResultTimeout},
		{"job wait bound", &JobError{Unit: "a.slice", Op: opStart, Waited: time.Second}, ResultTimeout},
		{"job failed", &JobError{Unit: "a.slice", Op: opStart, Result: "failed"}, ResultJobFailed},
		{"no such unit", fmt.Errorf("unit %q: stop: %w", "a.slice", ErrNoSuchUnit), ResultNoSuchUnit},
		{"unit exists", fmt.Errorf("unit %q: start: %w", "a.slice", ErrUnitExists), ResultUnitExists},
		{"no process", fmt.Errorf("unit %q: kill: %w", "a.slice", ErrNoProcess), ResultNoProcess},
		{"disconnected", fmt.Errorf("unit %q: list: %w", "*", ErrDisconnected), ResultDisconnected},
		{"closed", fmt.Errorf("unit %q: list: %w", "*", ErrClosed), ResultClosed},
		{"canceled", fmt.Errorf("unit %q: start job: %w", "a.slice", context.Canceled), ResultCanceled},
		{"deadline", fmt.Errorf("unit %q: start job: %w", "a.slice", context.DeadlineExceeded), ResultCanceled},
		{"invalid property", fmt.Errorf("unit %q: start: %w", "a.slice", ErrInvalidProperty), ResultInvalid},
		{"systemd error text", errors.New(`unit "a.slice": set-properties: Invalid argument (org.freedesktop.DBus.Error.InvalidArgs)`), ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResultOf(tt.err); got != tt.want {
				t.Errorf("ResultOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// observed is one ObserveFunc call.
type observed struct {
	op, unit string
	d        time.Duration
	err      error
}

// recorder collects ObserveFunc calls.
type recorder struct {
	mu  sync.Mutex
	got []observed
}

func (r *recorder) observe(op, unit string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, observed{op, unit, d, err})
}

func (r *recorder) calls() []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observed(nil), r.got...)
}

// TestObserveClosedManager drives every operation on a closed Manager: each fails before any
// D-Bus traffic, and each must be reported exactly once, job operations included (call must not
// report them a second time), with the operation's detail suffix cut off.
func TestObserveClosedManager(t *testing.T) {
	tests := []struct {
		name   string
		run    func(ctx context.Context, m *Manager) error
		op     string
		unit   string
		result string
	}{
		{"start", func(ctx context.Context, m *Manager) error { return m.StartSlice(ctx, "a.slice", nil) }, opStart, "a.slice", ResultClosed},
		{"stop", func(ctx context.Context, m *Manager) error { return m.Stop(ctx, "a.slice") }, opStop, "a.slice", ResultClosed},
		{"set properties", func(ctx context.Context, m *Manager) error {
			return m.SetProperties(ctx, "a.slice", []Property{{Name: "CPUWeight", Value: uint64(10)}})
		}, opSetProps, "a.slice", ResultClosed},
		{"kill", func(ctx context.Context, m *Manager) error { return m.Kill(ctx, "a.service", syscall.SIGTERM, KillAll) }, opKill, "a.service", ResultClosed},
		{"reset failed", func(ctx context.Context, m *Manager) error { return m.ResetFailed(ctx, "a.service") }, opResetFailed, "a.service", ResultClosed},
		{"list", func(ctx context.Context, m *Manager) error { _, err := m.List(ctx, "a*"); return err }, opList, "a*", ResultClosed},
		{"property", func(ctx context.Context, m *Manager) error {
			_, err := m.Property(ctx, "a.service", "Service", "MainPID")
			return err
		}, opGet, "a.service", ResultClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			m := &Manager{opts: Options{Observe: rec.observe}, log: slog.New(slog.DiscardHandler), clock: clock.RealClock{}, closed: true}
			err := tt.run(t.Context(), m)
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("error = %v, want ErrClosed", err)
			}
			got := rec.calls()
			if len(got) != 1 {
				t.Fatalf("observed %d operations, want 1: %+v", len(got), got)
			}
			o := got[0]
			if o.op != tt.op || o.unit != tt.unit || ResultOf(o.err) != tt.result || o.d < 0 {
				t.Errorf("observed (%q, %q, %v, %v), want (%q, %q, >=0, %s)", o.op, o.unit, o.d, o.err, tt.op, tt.unit, tt.result)
			}
		})
	}
}

// TestObserveNotCalledBeforeDBus checks that a call refused by validation, before anything is
// sent, is not an observed operation, and that a Manager without Observe works.
func TestObserveNotCalledBeforeDBus(t *testing.T) {
	var rec recorder
	m := &Manager{opts: Options{Observe: rec.observe}, log: slog.New(slog.DiscardHandler), clock: clock.RealClock{}, closed: true}
	if err := m.StartSlice(t.Context(), "not a unit", nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("StartSlice error = %v, want ErrInvalidName", err)
	}
	if got := rec.calls(); len(got) != 0 {
		t.Errorf("observed %+v, want nothing", got)
	}
	quiet := &Manager{log: slog.New(slog.DiscardHandler), clock: clock.RealClock{}, closed: true}
	if err := quiet.Stop(t.Context(), "a.slice"); !errors.Is(err, ErrClosed) {
		t.Errorf("Stop without Observe: error = %v, want ErrClosed", err)
	}
}
