package units

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// systemdPrivateAddress is PID 1's private D-Bus socket: root only, no dbus-daemon needed, and
// it works before dbus.service is up.
const systemdPrivateAddress = "unix:path=/run/systemd/private"

const (
	systemdDest = "org.freedesktop.systemd1"
	systemdPath = godbus.ObjectPath("/org/freedesktop/systemd1")
	managerIfc  = "org.freedesktop.systemd1.Manager"
)

// conn is one live connection to systemd: go-systemd's Conn (for jobs and the typed calls) and
// the two godbus connections under it (sys for calls we make directly, sig for the JobRemoved
// signals), so we can see when they drop.
type conn struct {
	sd  *sddbus.Conn
	sys *godbus.Conn
	sig *godbus.Conn
	via string // "private" or "bus"
}

// alive reports whether both underlying connections are still open.
func (c *conn) alive() bool { return c != nil && c.sys.Connected() && c.sig.Connected() }

// lost is closed when the signal connection is gone: no JobRemoved can arrive any more.
func (c *conn) lost() <-chan struct{} { return c.sig.Context().Done() }

func (c *conn) close() {
	if c != nil {
		c.sd.Close()
	}
}

// dialFunc opens one authenticated godbus connection. life bounds the connection's lifetime:
// godbus closes a connection when the context given to WithContext ends, so it must be the
// Manager's lifetime context, never a per-call context.
type dialFunc func(life context.Context) (*godbus.Conn, error)

func dialPrivate(address string) dialFunc {
	return func(life context.Context) (*godbus.Conn, error) {
		c, err := godbus.Dial(address, godbus.WithContext(life))
		if err != nil {
			return nil, err
		}
		// EXTERNAL with the numeric uid: no user name lookup, no Hello (there is no bus).
		if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

func dialSystemBus(life context.Context) (*godbus.Conn, error) {
	c, err := godbus.SystemBusPrivate(godbus.WithContext(life))
	if err != nil {
		return nil, err
	}
	if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Hello(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openConn builds a go-systemd connection on top of dial, keeping the godbus connections.
func openConn(life context.Context, dial dialFunc, via string) (*conn, error) {
	var dialed []*godbus.Conn
	sd, err := sddbus.NewConnection(func() (*godbus.Conn, error) {
		c, err := dial(life)
		if err == nil {
			dialed = append(dialed, c)
		}
		return c, err
	})
	if err != nil {
		for _, c := range dialed {
			c.Close()
		}
		return nil, err
	}
	if len(dialed) != 2 {
		// go-systemd dials exactly twice (calls, signals); anything else is a library change
		// we must notice rather than mis-assign connections.
		sd.Close()
		return nil, fmt.Errorf("go-systemd opened %d connections, expected 2", len(dialed))
	}
	return &conn{sd: sd, sys: dialed[0], sig: dialed[1], via: via}, nil
}

// ping checks that systemd answers on c (on the system bus the bus may be up while PID 1 is
// still re-executing).
func (c *conn) ping(ctx context.Context) error {
	var v godbus.Variant
	return c.sys.Object(systemdDest, systemdPath).
		CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, managerIfc, "Version").Store(&v)
}

// connectOnce tries each dialer in order and returns the first connection systemd answers on.
func connectOnce(ctx, life context.Context, dialers []namedDial) (*conn, error) {
	var errs []error
	for _, d := range dialers {
		c, err := withContext(ctx, func() (*conn, error) { return openConn(life, d.dial, d.name) })
		if err == nil {
			if err = c.ping(ctx); err == nil {
				return c, nil
			}
			c.close()
		}
		errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
	}
	return nil, errors.Join(errs...)
}

// namedDial is a dialer and the name used in logs and errors.
type namedDial struct {
	name string
	dial dialFunc
}

// withContext runs f but returns early when ctx ends (dialing and authenticating have no
// context of their own in godbus); a connection f returns after that is closed.
func withContext(ctx context.Context, f func() (*conn, error)) (*conn, error) {
	type result struct {
		c   *conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := f()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.close()
			}
		}()
		return nil, ctx.Err()
	}
}

// backoff is the delay before reconnect attempt n (0-based): 25 ms doubling to at most 1 s.
func backoff(n int) time.Duration {
	d := 25 * time.Millisecond
	for i := 0; i < n && d < time.Second; i++ {
		d *= 2
	}
	return min(d, time.Second)
}

// connectionLost reports whether err means the connection (or systemd behind the bus) went
// away, so that reconnecting and retrying can help. Errors systemd itself returned (a D-Bus
// error reply other than the bus's "nobody there" ones) are not.
func connectionLost(c *conn, err error) bool {
	if err == nil {
		return false
	}
	if dbusErrorName(err) == "" && !c.alive() {
		return true
	}
	return classifyLost(err)
}

// classifyLost is connectionLost judged from the error alone.
func classifyLost(err error) bool {
	if err == nil {
		return false
	}
	switch dbusErrorName(err) {
	case dbusErrServiceUnknown, dbusErrNameHasNoOwner, dbusErrNoReply, dbusErrDisconnected:
		return true
	case "":
	default:
		return false
	}
	var opErr *net.OpError
	var errno syscall.Errno
	return errors.Is(err, godbus.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &opErr) || errors.As(err, &errno)
}
