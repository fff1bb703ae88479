package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// bomb is a ~300 KB manifest whose aliases expand to about 2 GB of JSON.
func bomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations: {a: &s \"" + strings.Repeat("x", 100<<10) + "\"}\n")
	b.WriteString("spec:\n  containers:\n  - name: c\n    image: i\n    args: [*s" + strings.Repeat(",*s", 20000) + "]\n")
	return b.String()
}

// TestManifestBounds: what manifest.CheckBounds refuses is answered before the backend (or the
// server's own look at metadata) decodes anything.
func TestManifestBounds(t *testing.T) {
	f := newFakeBackend()
	_, c := startServer(t, f, 0)
	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"alias bomb", "/v1/pods", bomb(), 413, "more than 1572864 bytes as JSON (1.5 MiB, etcd's object limit)"},
		{"alias bomb explained", "/v1/explain/pod", bomb(), 413, "1.5 MiB"},
		{"alias cycle", "/v1/pods", "apiVersion: v1\nkind: Pod\nmetadata: &m {name: a, labels: *m}\n", 422, "an alias refers to a node that contains it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, body := rawRequest(t, c, "POST", tc.path, strings.NewReader(tc.body))
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("POST %s = %d %s, want %d %q", tc.path, code, body, tc.code, tc.want)
			}
			t.Logf("answered in %v", time.Since(start))
		})
	}
	if len(f.Pods) != 0 {
		t.Errorf("the backend stored %d pods", len(f.Pods))
	}
}

// TestManifestReadTimeout: a client that does not send its body within the read timeout is
// answered 408 and gives its turn back.
func TestManifestReadTimeout(t *testing.T) {
	_, c := startServerWith(t, newFakeBackend(), 0, Options{ManifestReadTimeout: 100 * time.Millisecond})
	for range maxConcurrentManifests + 1 {
		// More stalled clients than turns: each one's turn ends with its timeout.
		pr2, pw2 := io.Pipe()
		defer pw2.Close()
		code, body := rawRequest(t, c, "POST", "/v1/pods", io.MultiReader(strings.NewReader("apiVersion: v1\n"), pr2))
		if code != http.StatusRequestTimeout || !strings.Contains(body, "request body not received within 100ms") {
			t.Fatalf("stalled body: %d %s, want 408", code, body)
		}
	}
	if code, body := rawRequest(t, c, "POST", "/v1/pods", strings.NewReader(webManifest)); code != http.StatusCreated {
		t.Fatalf("after the stalled clients: %d %s, want 201", code, body)
	}
}

// TestManifestTurns: with every turn taken, a manifest request waits; one whose client gives up
// is answered 503 without the backend seeing it, and a turn given back lets the next one in.
func TestManifestTurns(t *testing.T) {
	f := newFakeBackend()
	s, _ := startServer(t, f, 0)
	for range maxConcurrentManifests {
		s.manifests <- struct{}{}
	}
	req := func(ctx context.Context) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(context.WithValue(ctx, peerKey{}, peerInfo{}), "POST", "/v1/pods", strings.NewReader(webManifest))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w := req(ctx); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "waiting for a turn") {
		t.Fatalf("with every turn taken: %d %s, want 503", w.Code, w.Body)
	}
	if len(f.Pods) != 0 {
		t.Fatalf("the backend saw a request without a turn")
	}
	<-s.manifests
	if w := req(context.Background()); w.Code != http.StatusCreated {
		t.Fatalf("with a turn free: %d %s, want 201", w.Code, w.Body)
	}
	if len(s.manifests) != maxConcurrentManifests-1 {
		t.Errorf("%d turns taken after the request, want %d (its own given back)", len(s.manifests), maxConcurrentManifests-1)
	}
}

// TestStorageErrors: a backend that cannot store a pod answers 507 for a full disk or quota,
// 500 for any other system error, each naming the file and the errno, and logs it; never 422.
func TestStorageErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errno syscall.Errno
		code  int
		want  string
	}{
		{"disk full", syscall.ENOSPC, 507, "write /var/lib/slicelet/pods/api/default_web.json: no space left on device (ENOSPC)"},
		{"quota", syscall.EDQUOT, 507, "(EDQUOT)"},
		{"i/o error", syscall.EIO, 500, "input/output error (EIO)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			f := newFakeBackend()
			f.Err = fmt.Errorf("pod default/web: write /var/lib/slicelet/pods/api/default_web.json: %w", tc.errno)
			_, c := startServerLogging(t, f, 0, slog.New(slog.NewTextHandler(&logs, nil)))
			code, body := rawRequest(t, c, "POST", "/v1/pods", strings.NewReader(webManifest))
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("POST /v1/pods = %d %s, want %d %q", code, body, tc.code, tc.want)
			}
			if !strings.Contains(logs.String(), "default_web.json") || !strings.Contains(logs.String(), "errno="+unix.ErrnoName(tc.errno)) {
				t.Errorf("not logged with the path and errno: %s", logs.String())
			}
		})
	}
}
