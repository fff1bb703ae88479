package units

import (
	"errors"
	"fmt"
	"time"

	godbus "github.com/godbus/dbus/v5"
)

// Sentinel errors. Every error the Manager returns wraps at most a few of these, so callers
// decide with errors.Is and never look at D-Bus error names.
var (
	// ErrUnitExists: a transient unit of that name exists and could not be adopted or replaced
	// (see the start methods of Manager for the exact contract).
	ErrUnitExists = errors.New("unit already exists")
	// ErrNoSuchUnit: the unit is not loaded (systemd's org.freedesktop.systemd1.NoSuchUnit, or
	// LoadState "not-found").
	ErrNoSuchUnit = errors.New("no such unit")
	// ErrNoProcess: Kill found no process to signal (org.freedesktop.systemd1.NoSuchProcess).
	ErrNoProcess = errors.New("no process to signal")
	// ErrJobFailed: systemd finished the job with a result other than "done"; see JobError.
	ErrJobFailed = errors.New("job failed")
	// ErrTimeout: the job did not finish within Options.JobTimeout, or systemd itself reported
	// the job result "timeout".
	ErrTimeout = errors.New("timeout")
	// ErrDisconnected: the connection to systemd is gone and could not be re-established within
	// the reconnect bound.
	ErrDisconnected = errors.New("systemd connection lost")
	// ErrInvalidProperty: a Property has a value type or value this package cannot send.
	ErrInvalidProperty = errors.New("invalid property")
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("manager closed")
)

// JobError is a systemd job that did not end with the result "done", or that we stopped
// waiting for. It matches ErrJobFailed when systemd reported a result, and ErrTimeout when the
// result is "timeout" or the wait hit the bound.
type JobError struct {
	Unit string // unit the job was for
	Op   string // "start", "stop", ...
	// Result is systemd's job result: "failed", "timeout", "canceled", "dependency",
	// "skipped", "invalid", "assert", "unsupported", "collected", "once", ...; empty when we
	// stopped waiting (Waited is then set).
	Result string
	// Waited is the bound that expired without a result, 0 otherwise. The job may still finish
	// later inside systemd.
	Waited time.Duration
	// Inferred is true when the connection dropped while waiting and the result was inferred
	// from the unit's state after reconnecting.
	Inferred bool
}

// Error implements error: `unit "x.slice": start job: result "failed"`.
func (e *JobError) Error() string {
	if e.Result == "" {
		return fmt.Sprintf("unit %q: %s job: no result after %s: %v", e.Unit, e.Op, e.Waited, ErrTimeout)
	}
	s := fmt.Sprintf("unit %q: %s job: result %q", e.Unit, e.Op, e.Result)
	if e.Inferred {
		s += " (inferred from unit state after reconnect)"
	}
	return s
}

// Is matches ErrJobFailed and ErrTimeout as documented on JobError.
func (e *JobError) Is(target error) bool {
	switch target {
	case ErrJobFailed:
		return e.Result != ""
	case ErrTimeout:
		return e.Result == "timeout" || e.Result == ""
	}
	return false
}

// jobResultError returns nil for the result "done" and a *JobError otherwise.
func jobResultError(unit, op, result string) error {
	if result == "done" {
		return nil
	}
	return &JobError{Unit: unit, Op: op, Result: result}
}

// D-Bus error names systemd and the bus use (src/libsystemd/sd-bus/bus-common-errors.h).
const (
	dbusErrUnitExists    = "org.freedesktop.systemd1.UnitExists"
	dbusErrNoSuchUnit    = "org.freedesktop.systemd1.NoSuchUnit"
	dbusErrLoadFailed    = "org.freedesktop.systemd1.LoadFailed"
	dbusErrNoSuchProcess = "org.freedesktop.systemd1.NoSuchProcess"
	dbusErrUnknownObject = "org.freedesktop.DBus.Error.UnknownObject"
	// Names seen while systemd is re-executing and the bus has no owner for systemd1.
	dbusErrServiceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
	dbusErrNameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
	dbusErrNoReply        = "org.freedesktop.DBus.Error.NoReply"
	dbusErrDisconnected   = "org.freedesktop.DBus.Error.Disconnected"
)

// dbusErrorName returns the D-Bus error name carried by err, or "".
func dbusErrorName(err error) string {
	var de godbus.Error
	if errors.As(err, &de) {
		return de.Name
	}
	var dep *godbus.Error
	if errors.As(err, &dep) && dep != nil {
		return dep.Name
	}
	return ""
}

// dbusErrorMessage returns the human text of a D-Bus error, or err.Error().
func dbusErrorMessage(err error) string {
	var de godbus.Error
	if errors.As(err, &de) && len(de.Body) > 0 {
		if s, ok := de.Body[0].(string); ok {
			return s
		}
	}
	return err.Error()
}

// mapError turns a D-Bus error into an error naming unit and op and wrapping our sentinel.
func mapError(unit, op string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch dbusErrorName(err) {
	case dbusErrUnitExists:
		sentinel = ErrUnitExists
	case dbusErrNoSuchUnit, dbusErrLoadFailed:
		sentinel = ErrNoSuchUnit
	case dbusErrNoSuchProcess:
		sentinel = ErrNoProcess
	}
	if sentinel != nil {
		return fmt.Errorf("unit %q: %s: %s: %w", unit, op, dbusErrorMessage(err), sentinel)
	}
	if name := dbusErrorName(err); name != "" {
		// Other systemd errors (InvalidArgs for a bad property value, PropertyReadOnly, access
		// denied, ...) keep their text and name but not the godbus type, which must not leak.
		return fmt.Errorf("unit %q: %s: %s (%s)", unit, op, dbusErrorMessage(err), name)
	}
	return fmt.Errorf("unit %q: %s: %w", unit, op, err)
}
