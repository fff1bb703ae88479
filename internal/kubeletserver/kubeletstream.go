package kubeletserver

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// The bounds of the streaming endpoints (/exec, /attach, /portForward): what one client, and
// all of them, may hold open. A stream is one upgraded connection proxied to the runtime's
// streaming server until either side closes it.
const (
	// DefaultStreamIdleTimeout closes a stream with no traffic either way for that long (the
	// kubelet's --streaming-connection-idle-timeout default).
	DefaultStreamIdleTimeout = 4 * time.Hour
	// maxStreamsPerClient bounds the streams one authenticated user holds at once. Every
	// `kubectl exec` through the API server is its kubelet client's, and a stream holds one
	// of the maxConnsPerClient connections of the API server's address: below that bound, so
	// that its other requests (logs, stats) still get through.
	maxStreamsPerClient = maxConnsPerClient * 3 / 4
	// maxStreams bounds the streams open at once.
	maxStreams = 64
	// maxStreamQuery bounds a streaming request's query (exec's command is in it).
	maxStreamQuery = 32 << 10
	// streamRetryAfter is what a client over its bound is told to wait, in seconds.
	streamRetryAfter = "10"
	// streamDialTimeout bounds the connection to the runtime's streaming server, and
	// runtimeRequestTimeout its answer to the upgrade (the kubelet's
	// --runtime-request-timeout default).
	streamDialTimeout     = 30 * time.Second
	runtimeRequestTimeout = 2 * time.Minute
)

// ParseStreamRequest reads an exec, attach or port-forward request's query as the kubelet
// does (k8s.io/cri-streaming/pkg/streaming/remotecommand/httpstream.go, NewOptions; and
// k8s.io/cri-streaming/pkg/streaming/portforward/websocket.go, NewV4Options) into req, whose kind
// and path fields are set: for exec and attach the streams input, output, error and tty are
// on when "1" (the API server's encoding; tty drops error, which a terminal merges into
// output), at least one of input, output, error must be on, and exec needs a command; for
// port-forward over websockets the port parameters (comma-separated lists allowed) are
// required, each 1 to 65535, while SPDY clients name ports per stream. An error names the
// parameter and value.
func ParseStreamRequest(req pods.StreamRequest, q url.Values, websocket bool) (pods.StreamRequest, error) {
	switch req.Kind {
	case pods.StreamExec, pods.StreamAttach:
		on := func(name string) bool { return q.Get(name) == "1" }
		req.Stdin, req.Stdout, req.Stderr, req.TTY = on(v1.ExecStdinParam), on(v1.ExecStdoutParam), on(v1.ExecStderrParam), on(v1.ExecTTYParam)
		if req.TTY {
			req.Stderr = false
		}
		if !req.Stdin && !req.Stdout && !req.Stderr {
			return req, fmt.Errorf("%s, %s, %s: you must specify at least 1 of stdin, stdout, stderr", v1.ExecStdinParam, v1.ExecStdoutParam, v1.ExecStderrParam)
		}
		if req.Kind == pods.StreamExec {
			req.Command = q[v1.ExecCommandParam]
			if len(req.Command) == 0 {
				return req, fmt.Errorf("%s: required", v1.ExecCommandParam)
			}
		}
	case pods.StreamPortForward:
		if !websocket {
			return req, nil
		}
		values := q[v1.PortHeader]
		if len(values) == 0 {
			return req, fmt.Errorf("%s: query parameter %q is required", v1.PortHeader, v1.PortHeader)
		}
		for _, v := range values {
			if v == "" {
				return req, fmt.Errorf("%s: query parameter %q cannot be empty", v1.PortHeader, v1.PortHeader)
			}
			for p := range strings.SplitSeq(v, ",") {
				n, err := strconv.ParseUint(p, 10, 16)
				if err != nil || n < 1 {
					return req, fmt.Errorf("%s: %q is not a port number (1-65535)", v1.PortHeader, p)
				}
				req.Ports = append(req.Ports, int32(n))
			}
		}
	default:
		return req, fmt.Errorf("stream kind %q: want exec, attach or portForward", req.Kind)
	}
	return req, nil
}

// isUpgradeRequest says whether r asks to switch protocols: a Connection header naming
// upgrade (httpstream.IsUpgradeRequest, k8s.io/streaming/pkg/httpstream).
func isUpgradeRequest(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// isWebSocketRequest says whether r asks for a websocket (Connection: Upgrade, Upgrade:
// websocket), as wsstream.IsWebSocketRequest does.
func isWebSocketRequest(r *http.Request) bool {
	return isUpgradeRequest(r) && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// streamRoutes registers the streaming endpoints (pkg/kubelet/server/server.go,
// InstallDebuggingHandlers): exec and attach with or without the pod's UID, GET and POST;
// portForward likewise; run POST only.
func (s *Server) streamRoutes(mux *http.ServeMux) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		for _, kind := range []pods.StreamKind{pods.StreamExec, pods.StreamAttach} {
			h := s.streamHandler(kind)
			mux.Handle(m+" /"+string(kind)+"/{namespace}/{pod}/{container}", h)
			mux.Handle(m+" /"+string(kind)+"/{namespace}/{pod}/{uid}/{container}", h)
		}
		h := s.streamHandler(pods.StreamPortForward)
		mux.Handle(m+" /portForward/{namespace}/{pod}", h)
		mux.Handle(m+" /portForward/{namespace}/{pod}/{uid}", h)
	}
	mux.Handle("POST /run/{namespace}/{pod}/{container}", http.HandlerFunc(s.run))
	mux.Handle("POST /run/{namespace}/{pod}/{uid}/{container}", http.HandlerFunc(s.run))
}

// findPod is the node's pod of that namespace and name, the one of uid first when given.
func (s *Server) findPod(namespace, name, uid string) (v1.Pod, bool) {
	var found v1.Pod
	ok := false
	for _, p := range s.o.Pods() {
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if !ok || uid != "" && string(p.UID) == uid {
			found, ok = p, true
		}
	}
	return found, ok
}

// streamer is the runtime's streaming, or an error saying the runtime has none.
func (s *Server) streamer() (pods.Streamer, error) {
	if s.o.Streamer == nil {
		return nil, fmt.Errorf("%w: exec, attach, port-forward and run need the CRI runtime (runtime.type = \"cri\")", pods.ErrNoStreaming)
	}
	return s.o.Streamer, nil
}

// streamHandler serves one kind of streaming request (the kubelet's getExec, getAttach and
// getPortForward): the query parsed, the pod found, the runtime asked for its streaming URL,
// and the upgraded connection proxied to it (proxyStream; the kubelet no longer redirects).
// Errors have the kubelet's shape: plain text, 400 for a bad query, 404 for an unknown pod,
// 500 for what the runtime refuses or cannot find (the kubelet's streaming.WriteError), 429
// over the stream bounds.
func (s *Server) streamHandler(kind pods.StreamKind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.RawQuery) > maxStreamQuery {
			http.Error(w, "query too long", http.StatusRequestURITooLong)
			return
		}
		req := pods.StreamRequest{Kind: kind, Namespace: r.PathValue("namespace"), Pod: r.PathValue("pod"),
			UID: r.PathValue("uid"), Container: r.PathValue("container")}
		req, err := ParseStreamRequest(req, r.URL.Query(), isWebSocketRequest(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pod, ok := s.findPod(req.Namespace, req.Pod, req.UID)
		if !ok {
			http.Error(w, "pod does not exist", http.StatusNotFound)
			return
		}
		if req.UID != "" && string(pod.UID) != req.UID {
			// The kubelet: no running pod of that UID, so no container (exec, attach) or pod.
			if kind == pods.StreamPortForward {
				http.Error(w, "pod not found", http.StatusNotFound)
			} else {
				http.Error(w, fmt.Sprintf("container not found (%q)", req.Container), http.StatusInternalServerError)
			}
			return
		}
		// The kubelet's proxy requires the upgrade (and answers its absence after asking the
		// runtime, with a 500): refused here before the runtime opens a session for nothing.
		if !isUpgradeRequest(r) {
			http.Error(w, "Upgrade request required", http.StatusBadRequest)
			return
		}
		st, err := s.streamer()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		u := userFrom(r.Context())
		release, ok := s.streams.acquire(u)
		if !ok {
			s.tooManyStreams(w)
			return
		}
		defer release()
		ctx, cancel := context.WithTimeout(r.Context(), runtimeRequestTimeout)
		target, err := st.StreamURL(ctx, &pod, req)
		cancel()
		if err != nil {
			s.log.Debug("kubelet API stream refused", "kind", string(kind), "pod", req.Namespace+"/"+req.Pod, "container", req.Container, "error", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.log.Debug("kubelet API stream", "kind", string(kind), "pod", req.Namespace+"/"+req.Pod, "container", req.Container, "user", u)
		s.proxyStream(w, r, target)
	})
}

// tooManyStreams is the answer over the stream bounds (the kubelet's streaming server answers
// 429 with Retry-After when its cache of pending streams is full).
func (s *Server) tooManyStreams(w http.ResponseWriter) {
	w.Header().Set("Retry-After", streamRetryAfter)
	http.Error(w, fmt.Sprintf("too many streams (at most %d per client, %d in all)", s.streams.perClient, s.streams.max), http.StatusTooManyRequests)
}

// proxyStream proxies the upgraded connection to the runtime's streaming server (the
// kubelet's proxyStream; net/http/httputil's ReverseProxy switches protocols as
// apimachinery's UpgradeAwareHandler does, without its dependencies). The client's
// credentials stay here; the connection closes after DefaultStreamIdleTimeout without
// traffic, or when the server stops.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, target *url.URL) {
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: target.Scheme, Host: target.Host, Path: target.Path, RawPath: target.RawPath, RawQuery: target.RawQuery}
			pr.Out.Host = ""
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
		},
		Transport: s.streams.transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	p.ServeHTTP(&hijackWatch{ResponseWriter: w, streams: s.streams}, r)
}

// run is /run/{namespace}/{pod}/[{uid}/]{container} (the kubelet's getRun): the space-separated
// cmd parameter run to completion in the container, its output as the body.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) > maxStreamQuery {
		http.Error(w, "query too long", http.StatusRequestURITooLong)
		return
	}
	ns, name, uid, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	pod, ok := s.findPod(ns, name, uid)
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	if uid != "" && string(pod.UID) != uid {
		http.Error(w, fmt.Sprintf("container not found (%q)", container), http.StatusInternalServerError)
		return
	}
	st, err := s.streamer()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	release, ok := s.streams.acquire(userFrom(r.Context()))
	if !ok {
		s.tooManyStreams(w)
		return
	}
	defer release()
	// For legacy reasons run's command is one parameter, split at spaces (as the kubelet does).
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	ctx, cancel := context.WithTimeout(r.Context(), runtimeRequestTimeout)
	defer cancel()
	out, err := st.RunInContainer(ctx, &pod, container, cmd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if out != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// userKey carries the authenticated user's name in a request's context.
type userKey struct{}

func withUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u.Name)
}

func userFrom(ctx context.Context) string {
	name, _ := ctx.Value(userKey{}).(string)
	return name
}

// streamSet counts the open streams by client and keeps their connections, to close them
// when idle or when the server stops.
type streamSet struct {
	clock     clock.Clock
	idle      time.Duration
	transport http.RoundTripper
	// perClient and max bound the streams of one client and of all (maxStreamsPerClient,
	// maxStreams).
	perClient, max int

	mu       sync.Mutex
	byClient map[string]int
	total    int
	conns    map[*idleConn]struct{}
	closed   bool
}

func newStreamSet(clk clock.Clock, idle time.Duration) *streamSet {
	d := &net.Dialer{Timeout: streamDialTimeout}
	return &streamSet{clock: clk, idle: idle, perClient: maxStreamsPerClient, max: maxStreams, byClient: map[string]int{}, conns: map[*idleConn]struct{}{},
		// No proxy from the environment: the streaming server is the runtime's, on the node.
		transport: &http.Transport{DialContext: d.DialContext, ResponseHeaderTimeout: runtimeRequestTimeout,
			TLSHandshakeTimeout: streamDialTimeout, DisableKeepAlives: true, MaxResponseHeaderBytes: maxHeaderBytes}}
}

// acquire takes a place for client's stream; release gives it back.
func (s *streamSet) acquire(client string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.total >= s.max || s.byClient[client] >= s.perClient {
		return nil, false
	}
	s.total++
	s.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byClient[client]--; s.byClient[client] <= 0 {
				delete(s.byClient, client)
			}
		})
	}, true
}

// track watches an upgraded connection: closed after s.idle without traffic, or by closeAll.
func (s *streamSet) track(c net.Conn) net.Conn {
	ic := &idleConn{Conn: c, set: s, done: make(chan struct{})}
	ic.last.Store(s.clock.Now().UnixNano())
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns[ic] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		_ = ic.Close()
		return ic
	}
	go ic.watch()
	return ic
}

// closeAll closes every stream and refuses new ones (the server is stopping).
func (s *streamSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*idleConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// open is the number of streams open.
func (s *streamSet) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// idleConn is an upgraded client connection that notes when bytes last went either way.
type idleConn struct {
	net.Conn
	set  *streamSet
	last atomic.Int64 // unix nanoseconds
	once sync.Once
	done chan struct{}
}

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.last.Store(c.set.clock.Now().UnixNano())
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.last.Store(c.set.clock.Now().UnixNano())
	}
	return n, err
}

func (c *idleConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		close(c.done)
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return err
}

// watch closes the connection once it has been idle for the set's idle timeout.
func (c *idleConn) watch() {
	t := c.set.clock.NewTimer(c.set.idle)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C():
		}
		idle := c.set.clock.Since(time.Unix(0, c.last.Load()))
		if idle >= c.set.idle {
			_ = c.Close()
			return
		}
		t.Reset(c.set.idle - idle)
	}
}

// hijackWatch hands the proxy the client's connection under the stream set's watch.
type hijackWatch struct {
	http.ResponseWriter
	streams *streamSet
}

// Hijack takes over the connection (http.Hijacker).
func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return h.streams.track(c), brw, nil
}

// Unwrap is the ResponseWriter underneath (http.ResponseController).
func (h *hijackWatch) Unwrap() http.ResponseWriter { return h.ResponseWriter }
