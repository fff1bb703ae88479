package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/unixsock"
)

// peers lets a test connect as any uid on a real socket: a client binds its end of the
// connection to <dir>/<uid>-<n>, and the server reads the uid from that name (a connection
// from an unnamed socket is the test's own uid, by SO_PEERCRED).
type peers struct {
	dir string
	n   atomic.Int64
}

func newPeers(t testing.TB) *peers {
	dir, err := os.MkdirTemp("", "peers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &peers{dir: dir}
}

// uidOf is the server's peerUID.
func (p *peers) uidOf(c net.Conn) (uint32, error) {
	if a, ok := c.RemoteAddr().(*net.UnixAddr); ok && strings.HasPrefix(a.Name, p.dir+"/") {
		uid, _, _ := strings.Cut(filepath.Base(a.Name), "-")
		n, err := strconv.ParseUint(uid, 10, 32)
		return uint32(n), err
	}
	pc, err := peerOf(c)
	return pc.UID, err
}

// dial connects to socket as uid.
func (p *peers) dial(t testing.TB, socket string, uid uint32) net.Conn {
	t.Helper()
	c, err := p.dialErr(socket, uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *peers) dialErr(socket string, uid uint32) (net.Conn, error) {
	local := &net.UnixAddr{Name: filepath.Join(p.dir, fmt.Sprintf("%d-%d", uid, p.n.Add(1))), Net: "unix"}
	return net.DialUnix("unix", local, &net.UnixAddr{Name: socket, Net: "unix"})
}

// client is an API client connecting as uid, one connection per request.
func (p *peers) client(socket string, uid uint32) *Client {
	c := NewClient(socket)
	c.http.Transport = &http.Transport{DisableKeepAlives: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) { return p.dialErr(socket, uid) }}
	return c
}

// startLimited starts a server whose peers are p, with limits and a hook.
func startLimited(t testing.TB, p *peers, opts Options, hook func(string)) (*Server, *Client) {
	return startServerSetup(t, newFakeBackend(), 0, opts, func(s *Server) {
		s.peerUID = p.uidOf
		s.hook = hook
	})
}

// postHead is the head of a manifest request whose body is size bytes.
func postHead(size int) string {
	return fmt.Sprintf("POST /v1/pods HTTP/1.1\r\nHost: slicelet\r\nContent-Type: application/yaml\r\nContent-Length: %d\r\n\r\n", size)
}

// closedByServer waits until the server closes c (its read ends with EOF or a reset; a
// closed connection may still have an answer to read first, which is returned).
func closedByServer(c net.Conn) <-chan string {
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		done <- string(b)
	}()
	return done
}

// TestSlowBodiesHoldNoTurn: clients sending their bodies slowly hold their connections and
// bytes, never a decode turn: with more of them than there are turns, another client's apply
// is answered at once.
func TestSlowBodiesHoldNoTurn(t *testing.T) {
	bodies := make(chan struct{}, 16)
	p := newPeers(t)
	s, _ := startLimited(t, p, Options{ManifestReadTimeout: time.Hour}, func(ev string) {
		if ev == "body" {
			bodies <- struct{}{}
		}
	})
	const slow = maxConcurrentManifests + 2
	for i := range slow {
		c := p.dial(t, s.Socket(), uint32(1000+i))
		if _, err := io.WriteString(c, postHead(len(webManifest))+webManifest[:5]); err != nil {
			t.Fatal(err)
		}
	}
	for range slow {
		<-bodies
	}
	if n := len(s.manifests); n != 0 {
		t.Fatalf("%d slow bodies hold %d decode turns, want 0", slow, n)
	}
	if h := s.Holdings(); h.Conns != slow || h.Waiting != slow {
		t.Errorf("holdings %+v, want %d connections, all waiting for their clients", h, slow)
	}
	res, err := p.client(s.Socket(), 0).ApplyPod(context.Background(), []byte(webManifest))
	if err != nil || res.Action != ActionCreated {
		t.Fatalf("apply beside %d slow bodies = %+v, %v; want created", slow, res, err)
	}
}

// TestTrickledBodyTimesOut: the body's deadline is on the whole body, so a client that sends a
// byte now and then (never idle) is still answered 408 at it.
func TestTrickledBodyTimesOut(t *testing.T) {
	p := newPeers(t)
	s, _ := startLimited(t, p, Options{ManifestReadTimeout: 200 * time.Millisecond}, nil)
	c := p.dial(t, s.Socket(), 1000)
	if _, err := io.WriteString(c, postHead(MaxManifestBytes)); err != nil {
		t.Fatal(err)
	}
	answer := closedByServer(c)
	tick := time.NewTicker(time.Millisecond) // a byte a millisecond: 3 MiB would take an hour
	defer tick.Stop()
	for {
		select {
		case got := <-answer:
			if !strings.HasPrefix(got, "HTTP/1.1 408") || !strings.Contains(got, "request body not received within 200ms") {
				t.Fatalf("trickled body answered %q, want 408", got)
			}
			return
		case <-tick.C:
			_, _ = c.Write([]byte{'#'}) // fails once the server has answered and closed
		}
	}
}

// TestConnectionFlood: a uid's connections beyond its limit displace its own connections that
// wait the longest; its new requests, and everyone else's, are answered.
func TestConnectionFlood(t *testing.T) {
	p := newPeers(t)
	limits := unixsock.Limits{ConnsPerUID: 8, Conns: 12, BytesPerUID: 1 << 20, Bytes: 2 << 20}
	s, _ := startLimited(t, p, Options{Limits: limits}, nil)
	const flood = 50
	var closed []<-chan string
	for range flood {
		c := p.dial(t, s.Socket(), 1000)
		if _, err := io.WriteString(c, "GET /v1/pods HTTP/1.1\r\n"); err != nil { // a header never finished
			t.Fatal(err)
		}
		closed = append(closed, closedByServer(c))
	}
	// The oldest are closed, in order, the newest kept.
	for i := range flood - limits.ConnsPerUID {
		<-closed[i]
	}
	if h := s.Holdings(); h.ConnsByUID[1000] != limits.ConnsPerUID {
		t.Fatalf("uid 1000 holds %d connections after a flood of %d, want its limit %d", h.ConnsByUID[1000], flood, limits.ConnsPerUID)
	}
	for i := flood - limits.ConnsPerUID; i < flood; i++ {
		select {
		case <-closed[i]:
			t.Fatalf("connection %d of %d (among the newest) was closed", i, flood)
		default:
		}
	}
	// The flooding uid itself, and another, are answered.
	for _, uid := range []uint32{1000, 2000} {
		if _, err := p.client(s.Socket(), uid).ListPods(context.Background()); err != nil {
			t.Errorf("uid %d during the flood: %v", uid, err)
		}
	}
}

// TestConnectionFloodOfUIDs: beyond the total, room is taken from the uid holding the most
// connections.
func TestConnectionFloodOfUIDs(t *testing.T) {
	p := newPeers(t)
	limits := unixsock.Limits{ConnsPerUID: 8, Conns: 12}
	s, _ := startLimited(t, p, Options{Limits: limits}, nil)
	stall := func(uid uint32) <-chan string {
		c := p.dial(t, s.Socket(), uid)
		if _, err := io.WriteString(c, "GET /v1/pods HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		return closedByServer(c)
	}
	var big []<-chan string
	for range 8 {
		big = append(big, stall(1000))
	}
	for range 3 {
		stall(2000)
	}
	for uid := uint32(3000); uid < 3003; uid++ {
		stall(uid)
	}
	// The last one asks and is answered: the listener accepts in order, so every connection
	// before it has been admitted by then.
	last := p.dial(t, s.Socket(), 4000)
	if _, err := io.WriteString(last, "GET /v1/pods HTTP/1.1\r\nHost: slicelet\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(last).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("the last connection: %q %v", line, err)
	}
	// 15 connections for 12 places: uid 1000's three oldest made room.
	for i := range 3 {
		<-big[i]
	}
	h := s.Holdings()
	if h.Conns != limits.Conns || h.ConnsByUID[1000] != 5 || h.ConnsByUID[2000] != 3 {
		t.Errorf("holdings %+v, want %d connections, uid 1000 down to 5, uid 2000 keeping 3", h, limits.Conns)
	}
}

// TestBusyConnectionsRefuse: connections the server works for (here watches) are never
// closed to make room; beyond the limit a new one is answered 429 naming it.
func TestBusyConnectionsRefuse(t *testing.T) {
	p := newPeers(t)
	limits := unixsock.Limits{ConnsPerUID: 4, Conns: 100}
	s, _ := startLimited(t, p, Options{Limits: limits}, nil)
	for range limits.ConnsPerUID {
		c := p.dial(t, s.Socket(), 1000)
		if _, err := io.WriteString(c, "GET /v1/pods?watch=true HTTP/1.1\r\nHost: slicelet\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// The watch has started (its status line is sent) once its first line arrives.
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("watch: %q %v", line, err)
		}
	}
	_, err := p.client(s.Socket(), 1000).ListPods(context.Background())
	if statusOf(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "too many connections from uid 1000: 4 open and all of them busy (the limit is 4 per uid)") {
		t.Fatalf("a fifth connection of uid 1000 = %v, want 429 naming the limit", err)
	}
	if _, err := p.client(s.Socket(), 2000).ListPods(context.Background()); err != nil {
		t.Errorf("uid 2000: %v", err)
	}
}

// TestBodyBytes: the bytes of bodies being received count against their uid; a body that
// would exceed it displaces the uid's stalled ones, and is refused 429 when the others are
// busy.
func TestBodyBytes(t *testing.T) {
	bodies, turns := make(chan struct{}, 16), make(chan struct{}, 16)
	p := newPeers(t)
	limits := unixsock.Limits{ConnsPerUID: 100, Conns: 100, BytesPerUID: 1 << 20, Bytes: 4 << 20}
	s, _ := startLimited(t, p, Options{Limits: limits, ManifestReadTimeout: time.Hour}, func(ev string) {
		switch ev {
		case "body":
			bodies <- struct{}{}
		case "turn":
			turns <- struct{}{}
		}
	})
	const size = 600 << 10
	stalled := p.dial(t, s.Socket(), 1000)
	if _, err := io.WriteString(stalled, postHead(size)+"apiVersion: v1\n"); err != nil {
		t.Fatal(err)
	}
	<-bodies
	if h := s.Holdings(); h.BytesByUID[1000] != size+1 {
		t.Fatalf("a stalled body holds %d bytes, want %d", h.BytesByUID[1000], size+1)
	}
	// Every turn taken: a complete body waits for one, busy, holding its bytes.
	for range maxConcurrentManifests {
		s.manifests <- struct{}{}
	}
	waiting := p.dial(t, s.Socket(), 1000)
	body := strings.Replace(webManifest, "{name: web}", "{name: big}", 1) + "#" + strings.Repeat("x", size) + "\n"
	if _, err := io.WriteString(waiting, postHead(len(body))+body); err != nil {
		t.Fatal(err)
	}
	<-bodies
	<-turns // received whole: busy now
	if got := <-closedByServer(stalled); got != "" {
		t.Fatalf("the stalled body's connection was answered %q, want closed to make room", got)
	}
	// The complete body waits for a turn: a third one of the same uid has no room.
	_, err := p.client(s.Socket(), 1000).ApplyPod(context.Background(), []byte(body))
	if statusOf(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "uid 1000's requests being received would hold more than 1048576 bytes") {
		t.Fatalf("a body beyond the uid's bytes = %v, want 429", err)
	}
	<-bodies
	// Another uid has its own share.
	for range maxConcurrentManifests {
		<-s.manifests
	}
	if _, err := p.client(s.Socket(), 2000).ApplyPod(context.Background(), []byte(webManifest)); err != nil {
		t.Fatalf("uid 2000: %v", err)
	}
	<-bodies
	<-turns
	if got, _ := bufio.NewReader(waiting).ReadString('\n'); !strings.HasPrefix(got, "HTTP/1.1 201") {
		t.Errorf("the waiting body was answered %q, want 201", got)
	}
}
