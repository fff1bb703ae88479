package kubeletserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// The kubelet API's bounds: what a client may send and hold before anything is decoded.
const (
	// maxHeaderBytes bounds a request's header.
	maxHeaderBytes = 64 << 10
	// maxBodyBytes bounds a request's body (no endpoint here takes one).
	maxBodyBytes = 64 << 10
	// readHeaderTimeout bounds the time a client takes to send its request's header.
	readHeaderTimeout = 10 * time.Second
	// requestTimeout bounds the endpoints that answer at once (all but followed logs).
	requestTimeout = time.Minute
	// idleTimeout closes kept-alive connections nobody uses.
	idleTimeout = 2 * time.Minute
	// maxConnsPerClient bounds the connections open at once from one IP address.
	maxConnsPerClient = 32
	// maxLogQuery bounds the query of a logs request.
	maxLogQuery = 4 << 10
)

// ErrNotFound is a pod or container the kubelet API does not know (404).
var ErrNotFound = errors.New("not found")

// Options configure the kubelet API.
type Options struct {
	// NodeName is the Node the authorization checks are about.
	NodeName string
	// Address is host:port to listen on.
	Address string
	// CertFile and KeyFile are the serving pair; empty: a self-signed pair in CertDir
	// (kubelet.crt and kubelet.key, as the kubelet's --cert-dir), made once for Hosts.
	CertFile, KeyFile string
	CertDir           string
	// ServingCertificate, when set, is the serving certificate of each handshake instead
	// (a certificate manager's Current); nil fails the handshake.
	ServingCertificate func() *tls.Certificate
	Hosts              []string
	// ClientCAFile verifies client certificates; empty: none are accepted.
	ClientCAFile string
	// Anonymous lets requests without credentials through as system:anonymous.
	Anonymous bool
	Tokens    TokenReviewer
	Access    AccessReviewer
	// Pods are the node's pods (/pods).
	Pods func() []v1.Pod
	// Logs writes a container's log (/containerLogs); ErrNotFound for an unknown pod
	// or container.
	Logs func(ctx context.Context, namespace, name, container string, opts pods.LogOptions, w io.Writer) error
	// Summary is the stats summary (/stats/summary).
	Summary func() statsv1alpha1.Summary
	// Healthz answers /healthz.
	Healthz http.Handler
	Clock   clock.Clock
	Logger  *slog.Logger

	// Metrics, MetricsProbes, MetricsCadvisor and MetricsSLIs serve /metrics, /metrics/probes,
	// /metrics/cadvisor and /metrics/slis (authorized as nodes/metrics); a nil one is not
	// served.
	Metrics, MetricsProbes, MetricsCadvisor, MetricsSLIs http.Handler

	// Streamer is the runtime's streaming (/exec, /attach, /portForward, /run); nil: the
	// runtime has none, and those endpoints say so.
	Streamer pods.Streamer
	// StreamIdleTimeout closes a stream without traffic; DefaultStreamIdleTimeout when zero.
	StreamIdleTimeout time.Duration
}

// Server is the kubelet API (pkg/kubelet/server/server.go): HTTPS on the node's
// address, each request authenticated and authorized through the API server.
type Server struct {
	o    Options
	auth *delegatedAuth
	tls  *tls.Config
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	// streams are the open exec, attach and port-forward streams (kubeletstream.go).
	streams *streamSet
}

// errNoServingCertificate fails a handshake before the serving certificate is issued.
var errNoServingCertificate = errors.New("no serving certificate available for the kubelet")

// New loads (or makes) the serving pair and the client CA.
func New(o Options) (*Server, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StreamIdleTimeout <= 0 {
		o.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if o.ServingCertificate != nil {
		// As the kubelet's GetCertificate (pkg/kubelet/kubelet.go): until the cluster signs
		// one, handshakes fail.
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := o.ServingCertificate(); c != nil {
				return c, nil
			}
			return nil, errNoServingCertificate
		}
	} else {
		certFile, keyFile := o.CertFile, o.KeyFile
		if certFile == "" {
			var err error
			if certFile, keyFile, err = selfSignedPair(o.CertDir, o.Hosts); err != nil {
				return nil, err
			}
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet API serving certificate %s: %w", certFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if o.ClientCAFile != "" {
		pool, err := certutil.NewPool(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet API client CA %s: %w", o.ClientCAFile, err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	s := &Server{o: o, tls: cfg, log: o.Logger, streams: newStreamSet(o.Clock, o.StreamIdleTimeout),
		auth: newDelegatedAuth(o.NodeName, o.Anonymous, o.Tokens, o.Access, o.Clock)}
	s.srv = &http.Server{Handler: s.Handler(), TLSConfig: cfg, MaxHeaderBytes: maxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
	return s, nil
}

// selfSignedPair is dir's kubelet.crt and kubelet.key, made for hosts when absent (the
// kubelet's --cert-dir when no --tls-cert-file is given, pkg/kubelet/kubelet.go).
func selfSignedPair(dir string, hosts []string) (string, string, error) {
	crt, key := filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if ok, _ := certutil.CanReadCertAndKey(crt, key); ok {
		return crt, key, nil
	}
	var ips []net.IP
	var names []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			names = append(names, h)
		}
	}
	host := "localhost"
	if len(hosts) > 0 {
		host = hosts[0]
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, names)
	if err != nil {
		return "", "", fmt.Errorf("kubelet API self-signed certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("kubelet API certificate directory: %w", err)
	}
	if err := keyutil.WriteKey(key, keyPEM); err != nil {
		return "", "", fmt.Errorf("kubelet API key %s: %w", key, err)
	}
	if err := certutil.WriteCert(crt, certPEM); err != nil {
		return "", "", fmt.Errorf("kubelet API certificate %s: %w", crt, err)
	}
	return crt, key, nil
}

// TLSConfig is the server's TLS configuration.
func (s *Server) TLSConfig() *tls.Config { return s.tls }

// Listen opens the listening socket (an address in use fails the start).
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.o.Address)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	s.ln = &perClientListener{Listener: ln, max: maxConnsPerClient, open: map[string]int{}}
	return nil
}

// Close closes the listening socket of a server that will not serve.
func (s *Server) Close() error {
	if s.ln == nil {
		return nil
	}
	return s.ln.Close()
}

// Addr is the listening address (after Listen).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.streams.closeAll()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
	}()
	s.log.Info("kubelet API serving", "address", s.ln.Addr().String())
	err := s.srv.ServeTLS(s.ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler is the kubelet API's handler: authentication, authorization, then the endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	timed := func(h http.Handler) http.Handler {
		return http.TimeoutHandler(h, requestTimeout, "request timed out\n")
	}
	if s.o.Healthz != nil {
		mux.Handle("GET /healthz", timed(s.o.Healthz))
	}
	mux.Handle("GET /pods", timed(http.HandlerFunc(s.pods)))
	mux.Handle("GET /pods/{$}", timed(http.HandlerFunc(s.pods)))
	mux.Handle("GET /stats/summary", timed(http.HandlerFunc(s.summary)))
	mux.Handle("GET /metrics/resource", timed(http.HandlerFunc(s.resourceMetrics)))
	for path, h := range map[string]http.Handler{"/metrics": s.o.Metrics, "/metrics/probes": s.o.MetricsProbes, "/metrics/cadvisor": s.o.MetricsCadvisor,
		"/metrics/slis": s.o.MetricsSLIs} {
		if h != nil {
			mux.Handle("GET "+path, timed(h))
		}
	}
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	s.streamRoutes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		u, err := s.auth.authenticate(r.Context(), r)
		if err != nil {
			if !errors.Is(err, errUnauthenticated) {
				s.log.Warn("kubelet API authentication failed", "error", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, reason, err := s.auth.authorize(r.Context(), u, r.Method, r.URL.Path)
		if err != nil {
			s.log.Warn("kubelet API authorization failed", "user", u.Name, "path", r.URL.Path, "error", err)
			http.Error(w, "Authorization error (user="+u.Name+")", http.StatusInternalServerError)
			return
		}
		if !allowed {
			verb, subs := Attributes(r.Method, r.URL.Path)
			msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, verb, subs)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r.WithContext(withUser(r.Context(), u)))
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// pods is the node's pods as a v1.PodList (the kubelet's getPods).
func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	list := v1.PodList{Items: s.o.Pods()}
	list.Kind, list.APIVersion = "PodList", "v1"
	if list.Items == nil {
		list.Items = []v1.Pod{}
	}
	writeJSON(w, list)
}

// summary is the stats summary (the kubelet's /stats/summary).
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			http.Error(w, fmt.Sprintf("only_cpu_and_memory: %q is not true or false", v), http.StatusBadRequest)
			return
		}
	}
	writeJSON(w, s.o.Summary())
}

// resourceMetrics is the kubelet's /metrics/resource, made of the same summary.
func (s *Server) resourceMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = WriteResourceMetrics(w, s.o.Summary())
}

// flushWriter sends what is written at once (followed logs arrive as they are written).
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	n  int64
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.n += int64(n)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// containerLogs is /containerLogs/{namespace}/{pod}/{container} (the kubelet's
// getContainerLogs): the container's log as plain text, streamed.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) > maxLogQuery {
		http.Error(w, "query too long", http.StatusRequestURITooLong)
		return
	}
	q, err := pods.ParseLogQuery(r.URL.Query(), s.o.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	out := q.Writer(fw)
	ctx := r.Context()
	if !q.Options.Follow {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	err = s.o.Logs(ctx, ns, pod, container, q.Options, out)
	switch {
	case err == nil, errors.Is(err, pods.ErrLogLimit):
		if fw.n == 0 {
			w.WriteHeader(http.StatusOK)
		}
	case fw.n > 0:
		// The status line is gone; the stream ends.
		if r.Context().Err() == nil {
			s.log.Warn("kubelet API logs", "pod", ns+"/"+pod, "container", container, "error", err)
		}
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, pods.ErrNoLogs):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, pods.ErrTooManyFollowers):
		http.Error(w, err.Error(), http.StatusTooManyRequests)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// perClientListener refuses a connection from an IP address that has max open already.
type perClientListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c.RemoteAddr())
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
		}}, nil
	}
}

func remoteHost(a net.Addr) string {
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return strings.ToLower(h)
}

// countedConn releases its place once closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
