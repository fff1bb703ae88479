package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/health"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		name          string
		address       string
		network, addr string
		err           string
	}{
		{name: "off", address: ""},
		{name: "loopback", address: "127.0.0.1:10255", network: "tcp", addr: "127.0.0.1:10255"},
		{name: "ipv6 loopback", address: "[::1]:10255", network: "tcp", addr: "[::1]:10255"},
		{name: "all interfaces", address: ":10255", network: "tcp", addr: ":10255"},
		{name: "unix", address: "unix:/run/slicelet/metrics.sock", network: "unix", addr: "/run/slicelet/metrics.sock"},
		{name: "unix cleaned", address: "unix:/run/slicelet//metrics.sock", network: "unix", addr: "/run/slicelet/metrics.sock"},
		{name: "unix relative", address: "unix:metrics.sock", err: `metrics address "unix:metrics.sock": a unix socket needs an absolute path`},
		{name: "unix too long", address: "unix:/" + strings.Repeat("a", 107), err: "path is 108 bytes, the limit for a unix socket is 107"},
		{name: "no port", address: "localhost", err: `metrics address "localhost": want host:port or unix:/path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			network, addr, err := ParseAddress(tt.address)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseAddress(%q) error = %v, want one containing %q", tt.address, err, tt.err)
				}
				return
			}
			if err != nil || network != tt.network || addr != tt.addr {
				t.Errorf("ParseAddress(%q) = %q, %q, %v; want %q, %q, nil", tt.address, network, addr, err, tt.network, tt.addr)
			}
		})
	}
}

// serving starts s.Serve and returns a function that stops it and checks it ended cleanly.
func serving(t *testing.T, s *Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// get fetches path through client and returns the status and body.
func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// checkEndpoints checks /metrics and /healthz through client at base.
func checkEndpoints(t *testing.T, client *http.Client, base string) {
	t.Helper()
	code, body := get(t, client, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d: %s", code, body)
	}
	for _, want := range []string{
		`slicelet_pods{phase="Running",qos="Guaranteed"} 1`,
		`slicelet_build_info{goversion="`,
		`slicelet_systemd_operation_duration_seconds_count{operation="start",result="success"} 1`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := get(t, client, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 \"ok\\n\"", code, body)
	}
	if code, _ := get(t, client, base+"/other"); code != http.StatusNotFound {
		t.Errorf("/other = %d, want 404", code)
	}
}

func served() *Metrics {
	m := New(Options{Version: "test", Pods: fakePods{pod(v1.PodQOSGuaranteed, v1.PodRunning, "", 1)}})
	m.ObserveSystemd("start", "success", time.Millisecond)
	return m
}

// logBuffer returns a logger writing text records to the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func TestServeTCPLoopback(t *testing.T) {
	m := served()
	log, logs := logBuffer()
	s, err := m.Listen("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	stop := serving(t, s)
	checkEndpoints(t, http.DefaultClient, "http://"+s.Addr().String())
	if strings.Contains(logs.String(), "exposed on the network") {
		t.Errorf("a loopback address logged the exposure warning: %s", logs)
	}
	stop()
	if c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Serve returned", s.Addr())
	}
}

func TestListenNonLoopbackWarns(t *testing.T) {
	log, logs := logBuffer()
	s, err := served().Listen("0.0.0.0:0", log)
	if err != nil {
		t.Fatal(err)
	}
	serving(t, s)()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "metrics are exposed on the network") {
		t.Errorf("no exposure warning for %s; log: %s", s.Addr(), logs)
	}
}

func TestListenOff(t *testing.T) {
	m := served()
	s, err := m.Listen("", nil)
	if s != nil || err != nil {
		t.Errorf("Listen(\"\") = %v, %v; want nil, nil (metrics off)", s, err)
	}
	if err := m.Serve(t.Context(), "", nil); err != nil {
		t.Errorf("Serve(\"\") = %v, want nil at once", err)
	}
}

func TestListenTCPInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	if _, err := served().Listen(addr, nil); err == nil || !strings.Contains(err.Error(), `metrics address "`+addr+`"`) {
		t.Errorf("Listen on a busy port: %v, want an error naming the address", err)
	}
}

// unixClient is an HTTP client that dials the unix socket path.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

func TestServeUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "metrics.sock") // parent created by Listen
	s, err := served().Listen("unix:"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want a socket with 0660", st.Mode())
	}
	stop := serving(t, s)
	checkEndpoints(t, unixClient(path), "http://metrics")

	// A second slicelet must not steal the socket.
	if _, err := served().Listen("unix:"+path, nil); err == nil || !strings.Contains(err.Error(), "another process is serving on it") {
		t.Errorf("Listen on a served socket: %v, want a refusal", err)
	}
	stop()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Serve returned: %v, want it removed", err)
	}
}

func TestListenUnixStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.sock")
	// A socket left behind by a killed process: bound, nobody listening.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s, err := served().Listen("unix:"+path, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	serving(t, s)
	checkEndpoints(t, unixClient(path), "http://metrics")
}

func TestListenUnixRefusesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := served().Listen("unix:"+path, nil); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Listen over a regular file: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
		t.Errorf("file after the refusal: %q, %v; want it untouched", b, err)
	}
}

// TestHealthEndpoints: /healthz fails while a watchdog warnable is not healthy, /readyz while a
// critical one is not; both name the reasons, and answer "ok" without a tracker.
func TestHealthEndpoints(t *testing.T) {
	runtime := &health.Warnable{Code: "runtime", Title: "container runtime", Severity: health.SeverityCritical}
	tr := testTracker()
	tr.Register(runtime)
	h := New(Options{Health: tr, NoRuntimeCollectors: true}).Handler(nil)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz with a live loop = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "container runtime: not reported yet\n" {
		t.Errorf("/readyz before the runtime reported = %d %q", code, body)
	}
	tr.SetUnhealthy(runtime, "connection refused")
	tr.SetUnhealthy(loop, "stuck")
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || body != "eviction loop: stuck\n" {
		t.Errorf("/healthz with a stuck loop = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "eviction loop: stuck\ncontainer runtime: connection refused\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	tr.SetHealthy(runtime)
	tr.Renew(loop, time.Minute)
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz when healthy = %d %q", code, body)
	}
	none := New(Options{NoRuntimeCollectors: true}).Handler(nil)
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		none.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
			t.Errorf("%s without a tracker = %d %q", path, rec.Code, rec.Body)
		}
	}
}
