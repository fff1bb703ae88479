package units

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	godbus "github.com/godbus/dbus/v5"
)

func TestJobResultError(t *testing.T) {
	tests := []struct {
		result              string
		wantNil             bool
		isFailed, isTimeout bool
	}{
		{"done", true, false, false},
		{"failed", false, true, false},
		{"timeout", false, true, true},
		{"dependency", false, true, false},
		{"canceled", false, true, false},
		{"skipped", false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			err := jobResultError("a.slice", "start", tt.result)
			if (err == nil) != tt.wantNil {
				t.Fatalf("jobResultError(%q) = %v", tt.result, err)
			}
			if err == nil {
				return
			}
			if errors.Is(err, ErrJobFailed) != tt.isFailed || errors.Is(err, ErrTimeout) != tt.isTimeout {
				t.Errorf("%v: Is(ErrJobFailed)=%v Is(ErrTimeout)=%v", err, errors.Is(err, ErrJobFailed), errors.Is(err, ErrTimeout))
			}
			want := fmt.Sprintf(`unit "a.slice": start job: result %q`, tt.result)
			if err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		})
	}
	wait := &JobError{Unit: "a.slice", Op: "stop", Waited: 30 * time.Second}
	if !errors.Is(wait, ErrTimeout) || errors.Is(wait, ErrJobFailed) || !strings.Contains(wait.Error(), "no result after 30s") {
		t.Errorf("wait timeout error %q: wrong matching", wait)
	}
}

func dbusErr(name, msg string) error { return godbus.Error{Name: name, Body: []any{msg}} }

func TestMapError(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"exists", dbusErr(dbusErrUnitExists, "Unit a.slice already exists."), ErrUnitExists, `unit "a.slice": start: Unit a.slice already exists.: unit already exists`},
		{"no such unit", dbusErr(dbusErrNoSuchUnit, "Unit a.slice not loaded."), ErrNoSuchUnit, `unit "a.slice": start: Unit a.slice not loaded.: no such unit`},
		{"no process", dbusErr(dbusErrNoSuchProcess, "No main process to kill"), ErrNoProcess, "no process to signal"},
		{"other systemd error", dbusErr("org.freedesktop.DBus.Error.InvalidArgs", "Invalid value"), nil, `unit "a.slice": start: Invalid value (org.freedesktop.DBus.Error.InvalidArgs)`},
		{"context", context.DeadlineExceeded, context.DeadlineExceeded, "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mapError("a.slice", "start", tt.err)
			if tt.sentinel != nil && !errors.Is(got, tt.sentinel) {
				t.Errorf("mapError = %v, want it to wrap %v", got, tt.sentinel)
			}
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("mapError = %q, want it to contain %q", got, tt.want)
			}
			var de godbus.Error
			if errors.As(got, &de) {
				t.Errorf("mapError leaks the godbus error type: %v", got)
			}
		})
	}
	if mapError("a", "b", nil) != nil {
		t.Error("mapError(nil) != nil")
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{25, 50, 100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		if got := backoff(i); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %s, want %s", i, got, w*time.Millisecond)
		}
	}
}

func TestConnectionLost(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"systemd error", dbusErr(dbusErrNoSuchUnit, "x"), false},
		{"invalid args", dbusErr("org.freedesktop.DBus.Error.InvalidArgs", "x"), false},
		{"no reply", dbusErr(dbusErrNoReply, "x"), true},
		{"service unknown", dbusErr(dbusErrServiceUnknown, "x"), true},
		{"closed", godbus.ErrClosed, true},
		{"eof", io.EOF, true},
		{"epipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"other", errors.New("type mismatch"), false},
	}
	// A live-looking conn is not available without systemd; connectionLost only consults it
	// for non-D-Bus errors, and treats a nil conn as gone, so test those cases separately.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyLost(tt.err); got != tt.want {
				t.Errorf("classifyLost(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if !connectionLost(nil, errors.New("anything")) {
		t.Error("connectionLost(nil conn) = false, want true")
	}
}
