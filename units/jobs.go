package units

import (
	"context"
	"fmt"
	"strconv"
	"time"

	godbus "github.com/godbus/dbus/v5"
)

// startJobFunc enqueues a job on c; go-systemd sends the job's result to ch.
type startJobFunc func(ctx context.Context, c *conn, ch chan<- string) (int, error)

// runJob enqueues a job (retrying if the connection drops before systemd answered, see call) and
// waits for its result, bounded by Options.JobTimeout.
func (m *Manager) runJob(ctx context.Context, unit, op string, start startJobFunc) (err error) {
	var (
		ch    chan string
		jobID int
	)
	began := m.clock.Now()
	defer m.observeDone(op, unit, began, &err)
	c, err := m.call(ctx, unit, op, func(c *conn) error {
		// Buffered: go-systemd delivers the result while holding its job-listener lock, so an
		// unbuffered channel we stopped reading (timeout) would block every later job.
		ch = make(chan string, 1)
		var err error
		jobID, err = start(ctx, c, ch)
		return err
	})
	if err != nil {
		return err
	}
	err = m.waitJob(ctx, c, unit, op, jobID, ch)
	m.log.Debug("systemd job finished", "unit", unit, "op", op, "job", jobID, "duration", m.clock.Since(began), "err", err)
	return err
}

// waitJob waits for the result of job jobID. If the connection drops meanwhile, the JobRemoved
// signal is lost with it, so the result is recovered after reconnecting (recoverJob).
func (m *Manager) waitJob(ctx context.Context, c *conn, unit, op string, jobID int, ch <-chan string) error {
	deadline := m.clock.Now().Add(m.opts.JobTimeout)
	t := m.clock.NewTimer(m.opts.JobTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return jobResultError(unit, op, r)
	case <-t.C():
		return &JobError{Unit: unit, Op: op, Waited: m.opts.JobTimeout}
	case <-ctx.Done():
		return fmt.Errorf("unit %q: %s job: %w", unit, op, ctx.Err())
	case <-c.lost():
		select {
		case r := <-ch: // the result made it before the connection went
			return jobResultError(unit, op, r)
		default:
		}
		m.log.Warn("systemd connection lost while waiting for a job", "unit", unit, "op", op, "job", jobID)
		return m.recoverJob(ctx, deadline, unit, op, jobID)
	}
}

// jobPath is the object path of job id (systemd keeps job ids across daemon-reexec).
func jobPath(id int) godbus.ObjectPath {
	return godbus.ObjectPath("/org/freedesktop/systemd1/job/" + strconv.Itoa(id))
}

// recoverJob reconnects, waits until job id no longer exists, and infers its result from the
// unit's state: for start, "failed" if the unit failed and "done" otherwise; for stop, "done"
// unless the unit is active again ("canceled").
func (m *Manager) recoverJob(ctx context.Context, deadline time.Time, unit, op string, id int) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		c, err := m.current(ctx)
		if err != nil {
			return fmt.Errorf("unit %q: %s job: result unknown: %w", unit, op, err)
		}
		gone := id == 0 // go-systemd could not parse the id: we cannot watch it
		if !gone {
			var v godbus.Variant
			err = c.sys.Object(systemdDest, jobPath(id)).CallWithContext(ctx,
				"org.freedesktop.DBus.Properties.Get", 0, "org.freedesktop.systemd1.Job", "State").Store(&v)
			gone = dbusErrorName(err) == dbusErrUnknownObject
		}
		if gone {
			st, found, err := m.status(ctx, unit)
			if err != nil {
				return fmt.Errorf("unit %q: %s job: result unknown: %w", unit, op, err)
			}
			result := "done"
			switch {
			case op == opStop && found && (st.ActiveState == "active" || st.ActiveState == "reloading"):
				result = "canceled"
			case op != opStop && found && st.ActiveState == "failed":
				result = "failed"
			}
			m.log.Info("systemd job result inferred after reconnect", "unit", unit, "op", op, "job", id, "result", result)
			if result == "done" {
				return nil
			}
			return &JobError{Unit: unit, Op: op, Result: result, Inferred: true}
		}
		t := m.clock.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			if ctx.Err() == context.DeadlineExceeded {
				return &JobError{Unit: unit, Op: op, Waited: m.opts.JobTimeout}
			}
			return fmt.Errorf("unit %q: %s job: %w", unit, op, ctx.Err())
		}
	}
}
