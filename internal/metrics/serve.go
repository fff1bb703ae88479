package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slicelet/slicelet/internal/unixsock"
)

// unixPrefix marks a unix socket address: "unix:/run/slicelet/metrics.sock".
const unixPrefix = "unix:"

// ParseAddress splits a [metrics] address into a network and an address for net.Listen:
// "host:port" is TCP, "unix:/absolute/path" a unix socket; "" means metrics are off and returns
// empty strings and no error.
func ParseAddress(address string) (network, addr string, err error) {
	switch {
	case address == "":
		return "", "", nil
	case strings.HasPrefix(address, unixPrefix):
		path := strings.TrimPrefix(address, unixPrefix)
		if !filepath.IsAbs(path) {
			return "", "", fmt.Errorf("metrics address %q: a unix socket needs an absolute path (unix:/run/slicelet/metrics.sock)", address)
		}
		// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
		if len(path) > 107 {
			return "", "", fmt.Errorf("metrics address %q: path is %d bytes, the limit for a unix socket is 107", address, len(path))
		}
		return "unix", filepath.Clean(path), nil
	}
	if _, _, err := net.SplitHostPort(address); err != nil {
		return "", "", fmt.Errorf("metrics address %q: want host:port or unix:/path: %w", address, err)
	}
	return "tcp", address, nil
}

// Handler serves /metrics (the registry and prober_probe_total in the Prometheus text or
// OpenMetrics format, as the scraper asks), the kubelet's /metrics/probes, /metrics/slis and
// /metrics/cadvisor (when built with a source), /healthz and /readyz (HealthHandler).
// Gathering errors are logged to log and the rest of the metrics still served.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", registryHandler(m.Gatherer(), log))
	mux.Handle("GET /metrics/probes", registryHandler(m.probesEndpoint, log))
	mux.Handle("GET /metrics/slis", registryHandler(m.slis, log))
	if m.cadvisor != nil {
		mux.Handle("GET /metrics/cadvisor", registryHandler(m.cadvisor, log))
	}
	mux.Handle("GET /healthz", m.HealthHandler(false))
	mux.Handle("GET /readyz", m.HealthHandler(true))
	return mux
}

// KubeletEndpoints are the kubelet API's handlers of metrics and health.
type KubeletEndpoints struct {
	// Metrics serves /metrics: the registry (the kubelet's families, slicelet's beside them,
	// Go and process).
	Metrics http.Handler
	// Probes serves /metrics/probes (prober_probe_total, prober_probe_duration_seconds,
	// process_start_time_seconds), SLIs /metrics/slis.
	Probes, SLIs http.Handler
	// Cadvisor serves /metrics/cadvisor; nil without a source.
	Cadvisor http.Handler
	// Healthz answers /healthz (HealthHandler), its checks recorded on /metrics/slis.
	Healthz http.Handler
}

// KubeletHandlers are the kubelet API's metrics and health endpoints, as the kubelet serves
// them; all nil on a nil *Metrics.
func (m *Metrics) KubeletHandlers(log *slog.Logger) KubeletEndpoints {
	if m == nil {
		return KubeletEndpoints{}
	}
	e := KubeletEndpoints{Metrics: registryHandler(m.reg, log), Probes: registryHandler(m.probesEndpoint, log),
		SLIs: registryHandler(m.slis, log), Healthz: m.HealthHandler(false)}
	if m.cadvisor != nil {
		e.Cadvisor = registryHandler(m.cadvisor, log)
	}
	return e
}

// Server serves a Metrics' Handler on one listener. Create it with Listen.
type Server struct {
	ln      net.Listener
	handler http.Handler
	log     *slog.Logger
}

// Listen binds address (see ParseAddress) and returns a Server ready to Serve; with an empty
// address it returns nil and no error: metrics are off. A TCP address that is not loopback is
// allowed, with a warning that the metrics are exposed on the network. A unix socket gets its
// parent directory (0755) if missing, replaces a stale socket (a socket some process still
// answers on, or a file that is not a socket, is an error) and has mode 0660.
func (m *Metrics) Listen(address string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	network, addr, err := ParseAddress(address)
	if err != nil || network == "" {
		return nil, err
	}
	var ln net.Listener
	switch network {
	case "unix":
		ln, err = listenUnix(addr)
	default:
		ln, err = net.Listen("tcp", addr)
		if err != nil {
			err = fmt.Errorf("metrics address %q: %w", address, err)
		}
	}
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn("metrics are exposed on the network: anyone who can reach this address can read them; use a loopback address or unix:/path to keep them local",
			"address", ln.Addr().String())
	}
	return &Server{ln: ln, handler: m.Handler(log), log: log}, nil
}

// listenUnix listens on the unix socket path with mode 0660.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("metrics socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("metrics socket %s: %w", path, err)
	}
	// Between bind and chmod the socket has the umask's mode (0755 under systemd's default
	// UMask=0022): connecting needs write permission, so nobody but the owner gets in meanwhile.
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("metrics socket %s: %w", path, err)
	}
	return ln, nil
}

// removeStale removes a socket nobody listens on.
func removeStale(path string) error { return unixsock.RemoveStale("metrics socket", path) }

// Addr is the address the server listens on (the real port when the address had port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down (waiting up to 5 s for scrapes in flight) and
// closes the listener, which removes a unix socket. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	<-errc
	if err != nil {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	return nil
}

// Serve listens on address and serves until ctx ends (Listen, then Server.Serve). With an empty
// address it returns nil at once: metrics are off.
func (m *Metrics) Serve(ctx context.Context, address string, log *slog.Logger) error {
	s, err := m.Listen(address, log)
	if err != nil || s == nil {
		return err
	}
	return s.Serve(ctx)
}
