package units

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ObserveFunc is told about every systemd operation the Manager finished: op is the operation
// ("start", "stop", "set-properties", "kill", "reset-failed", "list", "get-properties",
// "attach-processes"), unit the unit (or list pattern) it was for, d how long it took and err
// its outcome (nil on success; ResultOf turns it into a short label). It is called on the
// caller's goroutine after the operation, never under the Manager's locks, and must be fast
// and safe for concurrent use.
type ObserveFunc func(op, unit string, d time.Duration, err error)

// Results ResultOf returns: short, fixed labels for an operation's outcome, suitable as metric
// label values.
const (
	ResultSuccess      = "success"
	ResultTimeout      = "timeout"
	ResultJobFailed    = "job_failed"
	ResultNoSuchUnit   = "no_such_unit"
	ResultUnitExists   = "unit_exists"
	ResultNoProcess    = "no_process"
	ResultDisconnected = "disconnected"
	ResultClosed       = "closed"
	ResultCanceled     = "canceled"
	ResultInvalid      = "invalid"
	ResultError        = "error"
)

// ResultOf classifies an error the Manager returned (or passed to ObserveFunc) by the package's
// sentinel errors; nil is ResultSuccess, anything unclassified ResultError.
func ResultOf(err error) string {
	switch {
	case err == nil:
		return ResultSuccess
	// Before ErrJobFailed: a job whose result is "timeout" matches both.
	case errors.Is(err, ErrTimeout):
		return ResultTimeout
	case errors.Is(err, ErrJobFailed):
		return ResultJobFailed
	case errors.Is(err, ErrNoSuchUnit):
		return ResultNoSuchUnit
	case errors.Is(err, ErrUnitExists):
		return ResultUnitExists
	case errors.Is(err, ErrNoProcess):
		return ResultNoProcess
	case errors.Is(err, ErrDisconnected):
		return ResultDisconnected
	case errors.Is(err, ErrClosed):
		return ResultClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ResultCanceled
	case errors.Is(err, ErrInvalidProperty), errors.Is(err, ErrInvalidName):
		return ResultInvalid
	}
	return ResultError
}

// observeDone reports an operation that began at began and ended with *err to Options.Observe.
// op may carry a detail after a space ("get-properties ActiveState"); only the first word is
// reported, so the set of operations stays small.
func (m *Manager) observeDone(op, unit string, began time.Time, err *error) {
	if m.opts.Observe == nil {
		return
	}
	op, _, _ = strings.Cut(op, " ")
	m.opts.Observe(op, unit, m.clock.Since(began), *err)
}

// observeCall is observeDone for call. Job operations (start, stop) only reach call through
// runJob, which reports them itself as enqueue plus wait for the job, so each is reported once.
func (m *Manager) observeCall(op, unit string, began time.Time, err *error) {
	if op == opStart || op == opStop {
		return
	}
	m.observeDone(op, unit, began, err)
}
