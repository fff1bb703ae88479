package unixsock

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Limits bound what the clients of a socket hold at once: connections and the bytes of the
// requests being received, per peer uid and in total. A zero field is no limit.
type Limits struct {
	// ConnsPerUID and Conns bound open connections.
	ConnsPerUID, Conns int
	// BytesPerUID and Bytes bound the request bytes connections hold (Conn.Hold).
	BytesPerUID, Bytes int64
}

// Listener accepts connections within Limits. A connection is either waiting for its client
// (new, idle between requests, or receiving a request: Conn.SetWaiting) or busy (the server
// works for it, or streams to it). When a new connection, or a connection's Hold, would exceed
// a limit, the connection that has waited for its client the longest is closed to make room,
// taken from the same uid for a per-uid limit and from the uid holding most for a total one: a
// flood of stalled connections displaces itself, never a client the server is answering. When
// nothing waits (every connection busy), the new connection is answered with Refuse's message
// and closed, and Hold fails.
type Listener struct {
	ln     net.Listener
	limits Limits
	uid    func(net.Conn) (uint32, error)
	refuse func(w io.Writer, msg string)

	mu    sync.Mutex
	seq   uint64
	uids  map[uint32]*holder
	total holder

	// refusing bounds the goroutines answering refused connections; beyond it a refused
	// connection is closed without an answer.
	refusing chan struct{}
}

// holder is what one uid (or everyone) holds.
type holder struct {
	conns map[*Conn]struct{}
	bytes int64
}

// unknownUID is the uid of a connection whose peer credentials cannot be read.
const unknownUID = ^uint32(0)

// maxRefusing bounds the refusals answered at once.
const maxRefusing = 16

// refuseTimeout bounds the time a refusal waits for the request before answering.
const refuseTimeout = time.Second

// NewListener limits ln. uid returns a connection's peer uid (an error puts the connection in
// one bucket of unknown peers); refuse writes the answer to a connection refused for msg
// (e.g. an HTTP 429 response).
func NewListener(ln net.Listener, limits Limits, uid func(net.Conn) (uint32, error), refuse func(w io.Writer, msg string)) *Listener {
	return &Listener{ln: ln, limits: limits, uid: uid, refuse: refuse, uids: map[uint32]*holder{},
		total: holder{conns: map[*Conn]struct{}{}}, refusing: make(chan struct{}, maxRefusing)}
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close closes the listener (not the connections).
func (l *Listener) Close() error { return l.ln.Close() }

// Accept returns the next connection within the limits, making room for it or refusing others.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := l.uid(raw)
		if err != nil {
			uid = unknownUID
		}
		c, msg := l.admit(raw, uid)
		if c != nil {
			return c, nil
		}
		l.refuseConn(raw, msg)
	}
}

// admit registers a connection of uid, closing waiting ones to make room; it returns the
// refusal's message when there is none.
func (l *Listener) admit(raw net.Conn, uid uint32) (*Conn, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.uids[uid]
	if h == nil {
		h = &holder{conns: map[*Conn]struct{}{}}
		l.uids[uid] = h
	}
	if n := l.limits.ConnsPerUID; n > 0 && len(h.conns) >= n && !l.evictLocked(h.conns, nil, false) {
		return nil, fmt.Sprintf("too many connections from uid %d: %d open and all of them busy (the limit is %d per uid)", uid, len(h.conns), n)
	}
	if n := l.limits.Conns; n > 0 && len(l.total.conns) >= n && !l.evictLargestLocked(nil, false) {
		return nil, fmt.Sprintf("too many connections: %d open and all of them busy (the limit is %d)", len(l.total.conns), n)
	}
	l.seq++
	c := &Conn{Conn: raw, l: l, uid: uid, waiting: true, since: l.seq}
	h.conns[c] = struct{}{}
	l.total.conns[c] = struct{}{}
	return c, ""
}

// evictLocked closes the connection of conns that has waited the longest (one holding bytes
// when bytes), except keep; false when none waits.
func (l *Listener) evictLocked(conns map[*Conn]struct{}, keep *Conn, bytes bool) bool {
	var oldest *Conn
	for c := range conns {
		if c == keep || !c.waiting || (bytes && c.held == 0) {
			continue
		}
		if oldest == nil || c.since < oldest.since {
			oldest = c
		}
	}
	if oldest == nil {
		return false
	}
	l.dropLocked(oldest)
	_ = oldest.Conn.Close() // its server goroutine sees the error and ends
	return true
}

// evictLargestLocked evicts from the uid holding the most connections (or bytes), then the
// next.
func (l *Listener) evictLargestLocked(keep *Conn, bytes bool) bool {
	hs := make([]*holder, 0, len(l.uids))
	for _, h := range l.uids {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool {
		if bytes {
			return hs[i].bytes > hs[j].bytes
		}
		return len(hs[i].conns) > len(hs[j].conns)
	})
	for _, h := range hs {
		if l.evictLocked(h.conns, keep, bytes) {
			return true
		}
	}
	return false
}

// dropLocked forgets a connection and what it holds.
func (l *Listener) dropLocked(c *Conn) {
	if c.gone {
		return
	}
	c.gone = true
	h := l.uids[c.uid]
	delete(h.conns, c)
	h.bytes -= c.held
	l.total.bytes -= c.held
	c.held = 0
	delete(l.total.conns, c)
	if len(h.conns) == 0 {
		delete(l.uids, c.uid)
	}
}

// refuseConn answers a refused connection and closes it: it reads what the client sends for
// up to refuseTimeout (so the client reads the answer rather than a reset), then answers.
func (l *Listener) refuseConn(c net.Conn, msg string) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseTimeout))
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil || endOfHeader(buf[:n]) {
				break
			}
		}
		l.refuse(c, msg)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
}

// endOfHeader reports whether a read ends with an HTTP header's end (a request without a body
// is then complete).
func endOfHeader(b []byte) bool {
	return len(b) >= 4 && string(b[len(b)-4:]) == "\r\n\r\n"
}

// Stats is what the listener's clients hold now.
type Stats struct {
	// Conns and Bytes are the totals; Waiting the connections waiting for their client.
	Conns, Waiting int
	Bytes          int64
	// ConnsByUID and BytesByUID are per peer uid.
	ConnsByUID map[uint32]int
	BytesByUID map[uint32]int64
}

// Stats returns what the clients hold now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Conns: len(l.total.conns), Bytes: l.total.bytes, ConnsByUID: map[uint32]int{}, BytesByUID: map[uint32]int64{}}
	for uid, h := range l.uids {
		s.ConnsByUID[uid] = len(h.conns)
		s.BytesByUID[uid] = h.bytes
	}
	for c := range l.total.conns {
		if c.waiting {
			s.Waiting++
		}
	}
	return s
}

// Conn is an accepted connection. Its server marks it waiting (for the client) or busy, and
// holds bytes while it receives a request.
type Conn struct {
	net.Conn
	l   *Listener
	uid uint32

	// Guarded by l.mu.
	waiting bool
	since   uint64 // when it started waiting (the listener's sequence)
	held    int64
	gone    bool // closed or evicted: it holds nothing
}

// ErrOverLimit is what Hold returns when nothing can make room.
var ErrOverLimit = errors.New("over the limit")

// UID is the connection's peer uid.
func (c *Conn) UID() uint32 { return c.uid }

// SyscallConn gives the underlying socket (its peer credentials).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%T has no socket", c.Conn)
	}
	return sc.SyscallConn()
}

// SetWaiting marks the connection as waiting for its client (it may be closed to make room)
// or busy.
func (c *Conn) SetWaiting(waiting bool) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if waiting && !c.waiting {
		c.l.seq++
		c.since = c.l.seq
	}
	c.waiting = waiting
}

// Hold counts n more bytes as held by the connection, closing waiting connections that hold
// bytes to make room; it fails with ErrOverLimit (wrapped, with the limit) when none can.
func (c *Conn) Hold(n int64) error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone {
		return fmt.Errorf("connection closed to make room for others: %w", ErrOverLimit)
	}
	h := l.uids[c.uid]
	if lim := l.limits.BytesPerUID; lim > 0 {
		for h.bytes+n > lim {
			if !l.evictLocked(h.conns, c, true) {
				return fmt.Errorf("uid %d's requests being received would hold more than %d bytes: %w", c.uid, lim, ErrOverLimit)
			}
		}
	}
	if lim := l.limits.Bytes; lim > 0 {
		for l.total.bytes+n > lim {
			if !l.evictLargestLocked(c, true) {
				return fmt.Errorf("the requests being received would hold more than %d bytes: %w", lim, ErrOverLimit)
			}
		}
	}
	c.held += n
	h.bytes += n
	l.total.bytes += n
	return nil
}

// Release gives back everything the connection holds.
func (c *Conn) Release() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone {
		return
	}
	h := l.uids[c.uid]
	h.bytes -= c.held
	l.total.bytes -= c.held
	c.held = 0
}

// Close closes the connection and forgets it.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.dropLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
