package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"

	"github.com/slicelet/slicelet/internal/unixsock"
)

// Options configure a Server.
type Options struct {
	// Socket is the unix socket path; DefaultSocket when empty.
	Socket string
	// Group is the group that owns the socket; its members may use the API. It must exist.
	Group string
	// Logger receives refusals (Warn), server errors (Error) and one Debug record per request.
	Logger *slog.Logger
	// LookupGroup resolves Group to a gid; the user database (os/user) when nil. Tests inject it
	// so they need not edit /etc/group.
	LookupGroup func(name string) (uint32, error)
	// ProcRoot is where peers' /proc/<pid>/status is read; "/proc" when empty.
	ProcRoot string
	// Health answers /healthz and /readyz and is the node's health in GET /v1/node; nil
	// answers "ok" and shows none.
	Health *health.Tracker
	// ManifestReadTimeout bounds the time a client takes to send a manifest's body
	// (DefaultManifestReadTimeout when zero); a slower client is answered 408.
	ManifestReadTimeout time.Duration
	// Limits bound what clients hold (DefaultLimits when zero): connections and the bytes of
	// request bodies being received, per peer uid and in total.
	Limits unixsock.Limits
	// Clock paces the pod watches; the real clock when nil.
	Clock clock.WithTicker
}

// Server serves Backend on a unix socket. Create it with NewServer.
type Server struct {
	backend Backend
	socket  string
	group   string
	gid     uint32
	proc    string
	log     *slog.Logger
	health  *health.Tracker

	mu sync.Mutex
	ln *net.UnixListener

	// manifests holds one token per manifest being decoded (maxConcurrentManifests); bodies
	// are received before a turn is taken.
	manifests   chan struct{}
	readTimeout time.Duration
	limits      unixsock.Limits
	// limited is the listener Serve accepts from (nil before Serve).
	limited *unixsock.Listener
	// peerUID returns a connection's peer uid for the limits (tests replace it).
	peerUID func(net.Conn) (uint32, error)
	// hook, when set by a test, is told of what the server does ("body" when a request body
	// starts being received, "turn" when a received one waits for a decode turn).
	hook func(event string)
	// kube is the state of the kubectl behaviours (resource versions, watches).
	kube *kubectlState
}

// NewServer checks the options and resolves the group; a group that does not exist is an error
// naming it.
func NewServer(backend Backend, opts Options) (*Server, error) {
	if opts.Socket == "" {
		opts.Socket = DefaultSocket
	}
	if !filepath.IsAbs(opts.Socket) {
		return nil, fmt.Errorf("api socket %q: must be an absolute path", opts.Socket)
	}
	// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
	if len(opts.Socket) > 107 {
		return nil, fmt.Errorf("api socket %q: path is %d bytes, the limit for a unix socket is 107", opts.Socket, len(opts.Socket))
	}
	if opts.Group == "" {
		return nil, errors.New("api group: empty: name the group whose members may use the socket")
	}
	lookup := opts.LookupGroup
	if lookup == nil {
		lookup = lookupGroup
	}
	gid, err := lookup(opts.Group)
	if err != nil {
		return nil, fmt.Errorf("api group %q: %w (create it, e.g. groupadd --system %s, or set [api] group)", opts.Group, err, opts.Group)
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ManifestReadTimeout <= 0 {
		opts.ManifestReadTimeout = DefaultManifestReadTimeout
	}
	if opts.Limits == (unixsock.Limits{}) {
		opts.Limits = DefaultLimits
	}
	return &Server{backend: backend, socket: opts.Socket, group: opts.Group, gid: gid, proc: opts.ProcRoot, log: opts.Logger, health: opts.Health,
		manifests: make(chan struct{}, maxConcurrentManifests), readTimeout: opts.ManifestReadTimeout, limits: opts.Limits,
		peerUID: func(c net.Conn) (uint32, error) {
			p, err := peerOf(c)
			return p.UID, err
		},
		kube: newKubectlState(opts.Clock)}, nil
}

// What one client may hold. Each open connection costs the daemon about 20 KiB (its goroutine
// and buffers), so DefaultLimits' connections cost at most ~20 MiB and the bodies 32 MiB.
var DefaultLimits = unixsock.Limits{
	// A log shipper following every container of a full node (110 pods) fits in one uid's
	// share.
	ConnsPerUID: 512,
	Conns:       1024,
	// Enough for several manifests of the largest size (MaxManifestBytes) at once.
	BytesPerUID: 16 << 20,
	Bytes:       32 << 20,
}

// Time bounds of a connection; DefaultManifestReadTimeout bounds a manifest's body.
const (
	// headerTimeout bounds the time a client takes to send a request's header.
	headerTimeout = 10 * time.Second
	// idleTimeout closes a kept-alive connection with no request.
	idleTimeout = time.Minute
	// writeTimeout bounds the time a client takes to read an answer (a streamed answer: each
	// write).
	writeTimeout = 30 * time.Second
)

// Socket is the socket path the server listens on.
func (s *Server) Socket() string { return s.socket }

// Listen creates the socket: the parent directory (0755) if missing, a stale socket removed (a
// socket some process still answers on is an error, and so is a non-socket file at the path),
// then listen, chmod 0660 and chown to the group. After Listen returns, clients can connect
// (their requests wait for Serve). Calling it is optional: Serve listens if needed.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.socket), 0o755); err != nil {
		return fmt.Errorf("api socket directory: %w", err)
	}
	if err := removeStale(s.socket); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("api socket: %w", err)
	}
	// Between bind and chmod the socket has the umask's mode; that window is harmless because
	// every connection's peer credentials are checked anyway.
	if err := os.Chmod(s.socket, 0o660); err != nil {
		ln.Close()
		return fmt.Errorf("api socket: %w", err)
	}
	// The owner stays the daemon's user (root in production); only the group changes.
	if err := os.Chown(s.socket, -1, int(s.gid)); err != nil {
		ln.Close()
		return fmt.Errorf("api socket group %q (gid %d): %w", s.group, s.gid, err)
	}
	s.ln = ln
	return nil
}

// removeStale removes a socket nobody listens on.
func removeStale(path string) error { return unixsock.RemoveStale("api socket", path) }

type peerKey struct{}

// connKey is the context key of the request's connection (*unixsock.Conn).
type connKey struct{}

// connOf is the request's limited connection; nil when the request did not come through Serve.
func connOf(r *http.Request) *unixsock.Conn {
	c, _ := r.Context().Value(connKey{}).(*unixsock.Conn)
	return c
}

// peerInfo is what ConnContext stores for the handlers.
type peerInfo struct {
	peer Peer
	err  error
}

// Serve serves until ctx ends, then shuts down (in-flight requests, including followed logs,
// see their contexts canceled) and removes the socket. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			p, err := peerOf(c)
			ctx = context.WithValue(ctx, connKey{}, c)
			return context.WithValue(ctx, peerKey{}, peerInfo{peer: p, err: err})
		},
		ConnState: func(c net.Conn, state http.ConnState) {
			// Between requests a connection waits for its client again.
			if lc, ok := c.(*unixsock.Conn); ok && state == http.StateIdle {
				lc.SetWaiting(true)
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	s.limited = unixsock.NewListener(s.ln, s.limits, s.peerUID, refusal)
	ln := s.limited
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api server: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx) // closes the listener, which unlinks the socket
	<-errc
	if err != nil {
		return fmt.Errorf("api server shutdown: %w", err)
	}
	return nil
}

// refusal is the answer to a connection the limits refuse: 429 with the API's JSON error.
func refusal(w io.Writer, msg string) {
	body, _ := json.Marshal(errorBody{Error: msg})
	fmt.Fprintf(w, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n", len(body)+1, body)
}

// Holdings is what the clients hold now (zero before Serve).
func (s *Server) Holdings() unixsock.Stats {
	s.mu.Lock()
	l := s.limited
	s.mu.Unlock()
	if l == nil {
		return unixsock.Stats{}
	}
	return l.Stats()
}

// Handler is the API's HTTP handler, peer check included. Requests whose context carries no peer
// credentials (not from Serve's listener) are refused.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.Handler(s.health, false))
	mux.Handle("GET /readyz", health.Handler(s.health, true))
	mux.HandleFunc("GET /v1/pods", s.listPods)
	mux.HandleFunc("GET /v1/pods/{namespace}/{name}", s.getPod)
	mux.HandleFunc("POST /v1/pods", s.applyPod)
	mux.HandleFunc("DELETE /v1/pods/{namespace}/{name}", s.deletePod)
	mux.HandleFunc("GET /v1/pods/{namespace}/{name}/log", s.logs)
	mux.HandleFunc("GET /v1/node", s.node)
	mux.HandleFunc("POST /v1/explain/pod", s.explainPod)
	mux.HandleFunc("GET /v1/explain/node", s.explainNode)
	mux.HandleFunc("GET /v1/explain/eviction", s.explainEviction)
	mux.HandleFunc("GET /v1/metrics/pods", s.podMetrics)
	mux.HandleFunc("GET /v1/metrics/nodes", s.nodeMetrics)
	mux.HandleFunc("POST /v1/gc/images", s.collectImages)
	mux.HandleFunc("POST /v1/gc/containers", s.collectContainers)
	s.objectRoutes(mux)
	s.registerKubectl(mux)
	return s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == "" {
			// The mux's own 404 and 405 (with its Allow header) answer in text; keep their
			// status and headers but give the body the API's JSON error shape.
			h.ServeHTTP(&jsonErrorWriter{ResponseWriter: w, what: r.Method + " " + r.URL.Path}, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// jsonErrorWriter turns a text error response into the API's JSON error.
type jsonErrorWriter struct {
	http.ResponseWriter
	what    string
	written bool
}

func (j *jsonErrorWriter) WriteHeader(code int) {
	if j.written {
		return
	}
	j.written = true
	j.Header().Del("X-Content-Type-Options")
	msg := fmt.Sprintf("no route %s", j.what)
	if code == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("method not allowed: %s (allowed: %s)", j.what, j.Header().Get("Allow"))
	}
	writeError(j.ResponseWriter, code, msg, nil)
}

func (j *jsonErrorWriter) Write(p []byte) (int, error) {
	if !j.written {
		j.WriteHeader(http.StatusOK)
	}
	return len(p), nil
}

// authenticate lets root and group members through and answers everyone else 403.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info, ok := r.Context().Value(peerKey{}).(peerInfo)
		err := info.err
		if !ok {
			err = errors.New("peer credentials: not a unix socket connection")
		}
		if err == nil {
			err = s.authorize(info.peer)
		}
		if err != nil {
			s.log.Warn("api request refused", "peer_uid", info.peer.UID, "peer_gid", info.peer.GID, "peer_pid", info.peer.PID,
				"method", r.Method, "path", r.URL.Path, "err", err)
			if !errors.Is(err, errPermission) {
				err = fmt.Errorf("%w: %v", errPermission, err)
			}
			writeError(w, http.StatusForbidden, err.Error(), nil)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if c := connOf(r); c != nil {
			// The server works for the client now: not a connection to close for room. An
			// answer the client does not read ends writeTimeout after the server began it (a
			// streamed one moves the deadline at each write); the server's own time to make
			// the answer (a busy controller, a loaded machine) is not the client's.
			c.SetWaiting(false)
			rec.begin = func() { _ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout)) }
			defer c.Release() // the request body's bytes, once it is answered
		}
		next.ServeHTTP(rec, r)
		if mutating(r) {
			// The audit record of every change: who (as the kernel vouches for it), what, and
			// how it ended. A refused change is recorded too.
			s.log.Info("api change", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"peer_uid", info.peer.UID, "peer_gid", info.peer.GID, "peer_pid", info.peer.PID,
				"peer_comm", peerComm(s.proc, info.peer.PID), "duration", time.Since(start))
			return
		}
		s.log.Debug("api request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"peer_uid", info.peer.UID, "peer_pid", info.peer.PID, "duration", time.Since(start))
	})
}

// authorize checks a peer, looking up its supplementary groups only when needed.
func (s *Server) authorize(p Peer) error {
	if authorize(p, nil, s.gid, s.group) == nil {
		return nil
	}
	groups, err := peerGroups(s.proc, p)
	if err != nil {
		return fmt.Errorf("%w: uid %d is not root and its groups cannot be read: %v", errPermission, p.UID, err)
	}
	return authorize(p, groups, s.gid, s.group)
}

// mutating reports whether a request may change something: every POST and DELETE except a dry
// run (and except the explanations, which only compute).
func mutating(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodDelete {
		return false
	}
	if strings.HasPrefix(r.URL.Path, "/v1/explain/") {
		return false
	}
	dry, err := strconv.ParseBool(r.URL.Query().Get("dryRun"))
	return err != nil || !dry
}

// peerComm is the peer's command name (procRoot/<pid>/comm) for the audit record; "" when it is
// gone. The pid may have been reused since the request: the name is a hint, the uid is the fact.
func peerComm(procRoot string, pid int32) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(int(pid)), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// statusRecorder remembers the status for the request log, passes flushes through and calls
// begin (when set) once, as the answer begins.
type statusRecorder struct {
	http.ResponseWriter
	status int
	begin  func()
}

func (r *statusRecorder) started() {
	if r.begin != nil {
		r.begin()
		r.begin = nil
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	r.started()
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.started()
	return r.ResponseWriter.Write(b)
}

// SetWriteDeadline is http.ResponseController's: a handler that sets its own deadlines (a
// stream) replaces begin's.
func (r *statusRecorder) SetWriteDeadline(d time.Time) error {
	r.begin = nil
	return http.NewResponseController(r.ResponseWriter).SetWriteDeadline(d)
}

// Unwrap lets http.ResponseController reach the real writer (Flush).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) listPods(w http.ResponseWriter, r *http.Request) {
	sel, err := parsePodSelector(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	if r.URL.Query().Get("watch") == "true" {
		s.watchPods(w, r, sel)
		return
	}
	list, err := s.backend.ListPods(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rv := s.kube.observe(list)
	list = sel.filter(list)
	items := make([]v1.Pod, len(list))
	for i := range list {
		items[i] = withPodType(list[i])
	}
	writePods(w, r, v1.PodList{TypeMeta: typeMeta("PodList"), ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}, Items: items})
}

func (s *Server) getPod(w http.ResponseWriter, r *http.Request) {
	pod, err := s.backend.GetPod(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writePods(w, r, withPodType(pod))
}

// Bounds of the manifests being received and decoded.
const (
	// maxConcurrentManifests is how many manifests are decoded at once; others wait for a turn
	// (as long as their client does). A turn is taken once the body is received: a slow client
	// holds its connection and its bytes (DefaultLimits), never a turn.
	maxConcurrentManifests = 2
	// DefaultManifestReadTimeout bounds the time a client takes to send one manifest body,
	// from its first byte to its last: MaxManifestBytes at minBodyRate, with 4 s to spare. A
	// body trickled a byte at a time is never idle, so the bound is on the whole body.
	DefaultManifestReadTimeout = 4*time.Second + MaxManifestBytes/minBodyRate*time.Second
	// minBodyRate is the slowest rate, in bytes a second, at which the largest body arrives in
	// time (a local client sends 3 MiB in milliseconds).
	minBodyRate = 512 << 10
	// maxDiscardBytes is how much of a body refused for its size is read and discarded.
	maxDiscardBytes = 2 * MaxManifestBytes
)

// readManifest receives a request body of at most MaxManifestBytes within the read timeout,
// then waits for a manifest turn (release must be called when it returns ok) and checks the
// body's bounds (manifest.CheckBounds) before anything decodes it; it writes the error response
// itself and returns ok=false on failure. While the body arrives the connection waits for its
// client (the limits may close it to make room) and holds the bytes received.
func (s *Server) readManifest(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	conn := connOf(r)
	if conn != nil {
		conn.SetWaiting(true)
	}
	first := true
	hold := func(n int64) error {
		var err error
		if conn != nil {
			err = conn.Hold(n)
		}
		if first && s.hook != nil {
			s.hook("body")
		}
		first = false
		return err
	}
	rc := http.NewResponseController(w)
	// Not every writer has deadlines (tests' recorders); the limit then is the client's.
	_ = rc.SetReadDeadline(time.Now().Add(s.readTimeout))
	body, err := readBody(r.Body, r.ContentLength, MaxManifestBytes, hold)
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
		if conn != nil {
			conn.SetWaiting(false)
		}
	} else {
		// The connection ends with the answer. A body refused for its size is read on
		// (within its deadline, discarded, at most maxDiscardBytes) so that the client, still
		// writing it, reads the answer rather than a broken pipe; then the passed deadline
		// stops the server from waiting for more of it.
		if errors.As(err, new(*http.MaxBytesError)) || errors.Is(err, unixsock.ErrOverLimit) {
			_, _ = io.CopyN(io.Discard, r.Body, maxDiscardBytes)
		}
		_ = rc.SetReadDeadline(time.Now())
		w.Header().Set("Connection", "close")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("pod manifest: larger than %d bytes (3 MiB, the Kubernetes API server's request limit)", MaxManifestBytes), nil)
	case errors.Is(err, unixsock.ErrOverLimit):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "pod manifest: "+err.Error(), nil)
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf("pod manifest: request body not received within %v", s.readTimeout), nil)
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("pod manifest: reading the request body: %v", err), nil)
	case len(body) == 0:
		writeError(w, http.StatusBadRequest, "pod manifest: empty request body", nil)
	default:
		if s.hook != nil {
			s.hook("turn")
		}
		select {
		case s.manifests <- struct{}{}:
		case <-r.Context().Done():
			writeError(w, http.StatusServiceUnavailable, "pod manifest: gave up waiting for a turn to decode", nil)
			return nil, nil, false
		}
		release = func() { <-s.manifests }
		err = manifest.CheckBounds(body)
		switch {
		case errors.Is(err, manifest.ErrTooLarge):
			writeError(w, http.StatusRequestEntityTooLarge, "pod manifest: "+err.Error(), nil)
		case err != nil:
			writeError(w, http.StatusUnprocessableEntity, "pod manifest: "+err.Error(), []string{"manifest: " + err.Error()})
		default:
			return body, release, true
		}
		release()
	}
	return nil, nil, false
}

// readBody reads r (of length size when known, else -1) up to max bytes, calling hold for
// every byte of buffer before it is allocated; more than max is an *http.MaxBytesError.
func readBody(r io.Reader, size, max int64, hold func(int64) error) ([]byte, error) {
	c := int64(64 << 10)
	if size >= 0 {
		// One byte more than the body, to read its end without growing.
		c = min(size+1, max+1)
	}
	if err := hold(c); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, c)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > max {
				return nil, &http.MaxBytesError{Limit: max}
			}
			grow := min(int64(cap(buf)), max+1-int64(cap(buf)))
			if err := hold(grow); err != nil {
				return nil, err
			}
			buf = slices.Grow(buf, int(grow))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, &http.MaxBytesError{Limit: max}
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (s *Server) applyPod(w http.ResponseWriter, r *http.Request) {
	dry, ok := dryRun(w, r)
	if !ok {
		return
	}
	body, release, ok := s.readManifest(w, r)
	if !ok {
		return
	}
	defer release()
	res, err := s.backend.ApplyPod(r.Context(), body, dry)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.Pod, res.DryRun = withPodType(res.Pod), dry
	status := http.StatusOK
	if res.Action == ActionCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, res)
}

func (s *Server) deletePod(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("gracePeriodSeconds") {
		s.deletePodGrace(w, r)
		return
	}
	if err := s.backend.DeletePod(r.Context(), r.PathValue("namespace"), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logErrorTrailer carries an error that happened after log output had started streaming (the
// status line is gone by then).
const logErrorTrailer = "Slicelet-Error"

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	q, err := pods.ParseLogQuery(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	err = s.backend.Logs(r.Context(), r.PathValue("namespace"), r.PathValue("name"), r.URL.Query().Get("container"), q.Options, q.Writer(sw))
	switch {
	case errors.Is(err, pods.ErrLogLimit):
	case err != nil && !sw.started:
		s.fail(w, r, err)
	case err != nil:
		if r.Context().Err() == nil {
			s.log.Error("api logs", "path", r.URL.Path, "err", err)
		}
		w.Header().Set(logErrorTrailer, err.Error())
	case !sw.started:
		sw.start()
	}
}

// streamWriter sends the status line at the first write and flushes after every write, so
// followed logs arrive as they are written.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *streamWriter) start() {
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Trailer", logErrorTrailer)
	s.w.WriteHeader(http.StatusOK)
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.start()
	}
	// A follower that does not read is dropped after writeTimeout without progress.
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, s.rc.Flush()
}

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	node, err := s.backend.Node(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.backend.ListPods(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var maxPods int64
	if q, ok := node.Status.Capacity[v1.ResourcePods]; ok {
		maxPods = q.Value()
	}
	node.TypeMeta = typeMeta("Node")
	writeJSON(w, http.StatusOK, NodeInfo{Node: node, Pods: CountPods(list, maxPods), Health: s.health.State().Warnables})
}

func (s *Server) explainPod(w http.ResponseWriter, r *http.Request) {
	body, release, ok := s.readManifest(w, r)
	if !ok {
		return
	}
	defer release()
	x, err := s.backend.ExplainPod(r.Context(), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, x)
}

func (s *Server) explainNode(w http.ResponseWriter, r *http.Request) {
	x, err := s.backend.ExplainNode(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, x)
}

func (s *Server) explainEviction(w http.ResponseWriter, r *http.Request) {
	x, err := s.backend.ExplainEviction(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, x)
}

func (s *Server) podMetrics(w http.ResponseWriter, r *http.Request) {
	items, err := s.backend.PodMetrics(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if items == nil {
		items = []metricsv1beta1.PodMetrics{}
	}
	writeJSON(w, http.StatusOK, metricsv1beta1.PodMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}, Items: items})
}

func (s *Server) nodeMetrics(w http.ResponseWriter, r *http.Request) {
	items, err := s.backend.NodeMetrics(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if items == nil {
		items = []metricsv1beta1.NodeMetrics{}
	}
	writeJSON(w, http.StatusOK, metricsv1beta1.NodeMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}, Items: items})
}

// dryRun reads the dryRun query parameter of a GC request ("true"/"false", "1"/"0"; absent is
// false); a bad value is answered with 400.
func dryRun(w http.ResponseWriter, r *http.Request) (dry, ok bool) {
	v := r.URL.Query().Get("dryRun")
	if v == "" {
		return false, true
	}
	dry, err := strconv.ParseBool(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter dryRun=%q: want true or false", v), nil)
		return false, false
	}
	return dry, true
}

func (s *Server) collectImages(w http.ResponseWriter, r *http.Request) {
	dry, ok := dryRun(w, r)
	if !ok {
		return
	}
	res, err := s.backend.CollectImages(r.Context(), dry)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) collectContainers(w http.ResponseWriter, r *http.Request) {
	dry, ok := dryRun(w, r)
	if !ok {
		return
	}
	res, err := s.backend.CollectContainers(r.Context(), dry)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// fail maps a backend error to its status and writes it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *InvalidError
	var forbidden *ForbiddenError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusUnprocessableEntity, err.Error(), invalid.Problems)
	case errors.As(err, &forbidden):
		writeJSON(w, http.StatusForbidden, errorBody{Error: forbidden.Message, Reason: ReasonForbidden})
	case errors.Is(err, pods.ErrTooManyFollowers):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, err.Error(), nil)
	case errors.Is(err, ErrNotFound), errors.Is(err, pods.ErrNoLogs):
		writeError(w, http.StatusNotFound, err.Error(), nil)
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err.Error(), nil)
	case r.Context().Err() != nil:
		// The client went away or the server is shutting down: nobody reads the answer.
		writeError(w, http.StatusServiceUnavailable, err.Error(), nil)
	case errors.As(err, new(syscall.Errno)):
		// A storage (or other system) error: the request was fine, the node was not. The
		// error names the file; the answer adds the errno's name.
		var errno syscall.Errno
		errors.As(err, &errno)
		status := http.StatusInternalServerError
		if errno == syscall.ENOSPC || errno == syscall.EDQUOT {
			status = http.StatusInsufficientStorage
		}
		msg := fmt.Sprintf("%v (%s)", err, unix.ErrnoName(errno))
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "errno", unix.ErrnoName(errno), "err", err)
		writeError(w, status, msg, nil)
	default:
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	encodeJSON(w, status, v, true)
}

// writePods writes a pod or a pod list (the answers clients poll), indented only for a
// person (prettyJSON): indenting every pod of a list the pollers fetch over and over was a
// quarter of slicelet's CPU while it started 100 pods under a 50 ms poller.
func writePods(w http.ResponseWriter, r *http.Request, v any) {
	encodeJSON(w, http.StatusOK, v, prettyJSON(r))
}

func encodeJSON(w http.ResponseWriter, status int, v any, indent bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	enc.SetEscapeHTML(false) // '<' in a pod stays one byte, not six
	enc.Encode(v)            // a write error means the client is gone; nothing to tell it
}

// prettyJSON reports whether the answer to r is indented, as the Kubernetes API server decides
// (k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go, isPrettyPrint): ?pretty=
// says so; otherwise a client that shows it to a person (curl, Wget, a browser) gets it
// indented, a program compact.
func prettyJSON(r *http.Request) bool {
	if pp := r.URL.Query().Get("pretty"); pp != "" {
		pretty, _ := strconv.ParseBool(pp)
		return pretty
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

func writeError(w http.ResponseWriter, status int, msg string, problems []string) {
	writeJSON(w, status, errorBody{Error: msg, Problems: problems})
}

func typeMeta(kind string) metav1.TypeMeta { return metav1.TypeMeta{Kind: kind, APIVersion: "v1"} }

// withPodType fills in kind and apiVersion, as the Kubernetes API does on every answer.
func withPodType(p v1.Pod) v1.Pod {
	p.TypeMeta = typeMeta("Pod")
	return p
}
