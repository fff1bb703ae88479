package units

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults for Options.
const (
	// DefaultJobTimeout bounds each job wait; generous because systemd under load (many units
	// starting at boot, a slow cgroup teardown) can take seconds for a millisecond job.
	DefaultJobTimeout = 30 * time.Second
	// DefaultReconnectTimeout bounds reconnecting after the connection dropped; a daemon-reexec
	// takes well under a second.
	DefaultReconnectTimeout = 15 * time.Second
	// DefaultCgroupRoot is where the cgroup hierarchy is mounted.
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// Options configure Connect. The zero value is usable.
type Options struct {
	// JobTimeout bounds the wait for each systemd job (start, stop); DefaultJobTimeout when 0.
	// systemd under load can take seconds for a job that normally takes milliseconds.
	JobTimeout time.Duration
	// ReconnectTimeout bounds how long a call keeps trying to reconnect after the connection
	// dropped (daemon-reexec, dbus restart); DefaultReconnectTimeout when 0.
	ReconnectTimeout time.Duration
	// Logger receives connection changes (Info/Warn) and per-job results (Debug);
	// slog.Default() when nil.
	Logger *slog.Logger
	// CgroupRoot is where the cgroup hierarchy is mounted, for DetectMode; DefaultCgroupRoot
	// when empty.
	CgroupRoot string
	// Observe, when set, is told about every finished operation (metrics); see ObserveFunc.
	Observe ObserveFunc
	// Clock times operations, job waits and reconnect back-off; clock.RealClock when nil.
	// (Context deadlines, such as ReconnectTimeout's, stay on the wall clock.)
	Clock clock.Clock

	// dialers replaces the private-socket-then-system-bus order (tests).
	dialers []namedDial
}

// Manager is a connection to systemd (PID 1) that creates and controls units. It is safe for
// concurrent use. Every method validates unit names first (ValidateName), reconnects if the
// connection dropped, and retries a call that failed because the connection went away (after
// reconnecting with bounded back-off; at most two retries), so the caller's work is not lost. Errors name the unit and the operation and wrap the
// package's sentinel errors (ErrNoSuchUnit, ErrUnitExists, ErrJobFailed, ErrTimeout, ...).
type Manager struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	mode  Mode

	life   context.Context // lifetime of all connections; canceled by Close
	cancel context.CancelFunc

	reconnectMu sync.Mutex // serializes reconnects
	mu          sync.Mutex // guards c and closed
	c           *conn
	closed      bool
}

var _ Systemd = (*Manager)(nil)

// Connect connects to systemd: first over the private socket /run/systemd/private (root only,
// works without dbus-daemon), then over the system bus. It checks that systemd answers, and
// detects the cgroup mode at opts.CgroupRoot; a mode that cannot be detected is logged and
// reported as ModeUnknown by Mode, not an error. ctx bounds connecting only; the connection
// lives until Close.
func Connect(ctx context.Context, opts Options) (*Manager, error) {
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = DefaultJobTimeout
	}
	if opts.ReconnectTimeout <= 0 {
		opts.ReconnectTimeout = DefaultReconnectTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = DefaultCgroupRoot
	}
	if opts.dialers == nil {
		opts.dialers = []namedDial{
			{name: "private", dial: dialPrivate(systemdPrivateAddress)},
			{name: "bus", dial: dialSystemBus},
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Manager{opts: opts, log: opts.Logger, clock: opts.Clock}
	m.life, m.cancel = context.WithCancel(context.Background())
	c, err := connectOnce(ctx, m.life, opts.dialers)
	if err != nil {
		m.cancel()
		return nil, fmt.Errorf("systemd connection: %w", err)
	}
	m.c = c
	mode, err := DetectMode(opts.CgroupRoot)
	if err != nil {
		m.log.Warn("cgroup mode unknown", "cgroup_root", opts.CgroupRoot, "err", err)
	}
	m.mode = mode
	m.log.Debug("systemd connected", "via", c.via, "cgroup_mode", mode.String())
	return m, nil
}

// Mode returns the cgroup layout detected at Connect.
func (m *Manager) Mode() Mode { return m.mode }

// Close closes the connection. Calls after Close return ErrClosed. Jobs already queued in
// systemd are not canceled.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.cancel()
	m.c.close()
	m.c = nil
	return nil
}

// current returns a live connection, reconnecting if the last one dropped.
func (m *Manager) current(ctx context.Context) (*conn, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	c := m.c
	m.mu.Unlock()
	if c.alive() {
		return c, nil
	}
	return m.reconnect(ctx, c)
}

// reconnect replaces old with a new connection, trying with back-off until
// Options.ReconnectTimeout or ctx ends. If another goroutine already replaced old, its
// connection is used.
func (m *Manager) reconnect(ctx context.Context, old *conn) (*conn, error) {
	m.reconnectMu.Lock()
	defer m.reconnectMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if m.c != old && m.c.alive() {
		c := m.c
		m.mu.Unlock()
		return c, nil
	}
	stale := m.c
	m.mu.Unlock()
	// Both are dead (or about to be replaced); closing releases their goroutines. Close on a
	// closed connection is a no-op.
	old.close()
	stale.close()

	ctx, cancel := context.WithTimeout(ctx, m.opts.ReconnectTimeout)
	defer cancel()
	start := m.clock.Now()
	var lastErr error
	// Prefer the way we were connected: right after a daemon-reexec the private socket is back
	// a moment later, while the system bus would accept us at once and then block until
	// systemd re-registers, leaving us on the bus for good. Other ways are tried from the
	// fourth attempt on.
	var preferred []namedDial
	if old != nil {
		for _, d := range m.opts.dialers {
			if d.name == old.via {
				preferred = append(preferred, d)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		dialers := m.opts.dialers
		if attempt < 3 && len(preferred) > 0 {
			dialers = preferred
		}
		c, err := connectOnce(ctx, m.life, dialers)
		if err == nil {
			m.mu.Lock()
			if m.closed {
				m.mu.Unlock()
				c.close()
				return nil, ErrClosed
			}
			m.c = c
			m.mu.Unlock()
			m.log.Info("systemd reconnected", "via", c.via, "attempts", attempt+1, "duration", m.clock.Since(start))
			return c, nil
		}
		lastErr = err
		t := m.clock.NewTimer(backoff(attempt))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: gave up after %d attempts in %s: %w", ErrDisconnected, attempt+1, m.clock.Since(start).Round(time.Millisecond), errors.Join(ctx.Err(), lastErr))
		}
	}
}

// maxAttempts bounds how often call runs f when the connection keeps dropping under it: the
// first try plus two retries, each on a fresh connection. One retry is not enough when systemd
// re-executes twice in quick succession (seen with back-to-back `systemctl daemon-reexec`): the
// retry can land on the connection the second re-exec closes.
const maxAttempts = 3

// call runs f on a live connection; if f fails because the connection went away, it
// reconnects (bounded back-off, Options.ReconnectTimeout) and runs f again on the new
// connection, at most maxAttempts times in all. The returned conn is the one the last attempt
// used; the error is already mapped (mapError) and names unit and op.
func (m *Manager) call(ctx context.Context, unit, op string, f func(c *conn) error) (c *conn, err error) {
	defer m.observeCall(op, unit, m.clock.Now(), &err)
	c, err = m.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("unit %q: %s: %w", unit, op, err)
	}
	for attempt := 1; ; attempt++ {
		err = f(c)
		if err == nil || ctx.Err() != nil || !connectionLost(c, err) || attempt == maxAttempts {
			return c, mapError(unit, op, err)
		}
		m.log.Warn("systemd connection lost, reconnecting", "unit", unit, "op", op, "via", c.via, "attempt", attempt, "err", err)
		c2, rerr := m.reconnect(ctx, c)
		if rerr != nil {
			return nil, fmt.Errorf("unit %q: %s: %w (first error: %v)", unit, op, rerr, err)
		}
		c = c2
	}
}
