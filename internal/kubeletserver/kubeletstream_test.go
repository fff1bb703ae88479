package kubeletserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/pods"
)

func TestParseStreamRequest(t *testing.T) {
	exec := pods.StreamRequest{Kind: pods.StreamExec, Namespace: "default", Pod: "web", Container: "main"}
	attach := pods.StreamRequest{Kind: pods.StreamAttach, Namespace: "default", Pod: "web", Container: "main"}
	pf := pods.StreamRequest{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web"}
	tests := []struct {
		name      string
		base      pods.StreamRequest
		query     string
		websocket bool
		want      pods.StreamRequest
		wantErr   string // the parameter (and value) the error names
	}{
		{name: "kubectl exec -i: the API server's encoding", base: exec, query: "command=sh&command=-c&command=echo+hi&input=1&output=1&error=1",
			want: with(exec, func(r *pods.StreamRequest) {
				r.Command = []string{"sh", "-c", "echo hi"}
				r.Stdin, r.Stdout, r.Stderr = true, true, true
			})},
		{name: "tty drops stderr", base: exec, query: "command=sh&input=1&output=1&error=1&tty=1",
			want: with(exec, func(r *pods.StreamRequest) { r.Command = []string{"sh"}; r.Stdin, r.Stdout, r.TTY = true, true, true })},
		{name: "only 1 is on, as the kubelet reads it", base: exec, query: "command=ls&output=1&error=true",
			want: with(exec, func(r *pods.StreamRequest) { r.Command = []string{"ls"}; r.Stdout = true })},
		{name: "no stream", base: exec, query: "command=ls&output=0", wantErr: "input, output, error: you must specify at least 1 of stdin, stdout, stderr"},
		{name: "exec without a command", base: exec, query: "output=1", wantErr: "command: required"},
		{name: "attach needs no command", base: attach, query: "output=1&error=1",
			want: with(attach, func(r *pods.StreamRequest) { r.Stdout, r.Stderr = true, true })},
		{name: "port-forward over SPDY: ports come per stream", base: pf, query: "port=abc", want: pf},
		{name: "port-forward over websockets", base: pf, query: "port=80&port=8080,9090", websocket: true,
			want: with(pf, func(r *pods.StreamRequest) { r.Ports = []int32{80, 8080, 9090} })},
		{name: "websocket port-forward without ports", base: pf, websocket: true, wantErr: `port: query parameter "port" is required`},
		{name: "websocket port-forward with an empty port", base: pf, query: "port=", websocket: true, wantErr: `port: query parameter "port" cannot be empty`},
		{name: "port 0", base: pf, query: "port=0", websocket: true, wantErr: `port: "0" is not a port number`},
		{name: "port too big", base: pf, query: "port=80,65536", websocket: true, wantErr: `port: "65536" is not a port number`},
		{name: "unknown kind", base: pods.StreamRequest{Kind: "run"}, wantErr: `stream kind "run"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStreamRequest(tc.base, q, tc.websocket)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func with(r pods.StreamRequest, f func(*pods.StreamRequest)) pods.StreamRequest {
	f(&r)
	return r
}

// fakeStreamer records what it is asked and answers with its streaming server's URL.
type fakeStreamer struct {
	url  string
	mu   sync.Mutex
	reqs []pods.StreamRequest
	runs []string
}

func (f *fakeStreamer) StreamURL(_ context.Context, pod *v1.Pod, req pods.StreamRequest) (*url.URL, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if req.Container == "gone" {
		return nil, fmt.Errorf("container not found (%q)", req.Container)
	}
	return url.Parse(f.url + "/" + string(req.Kind) + "/token-" + string(pod.UID))
}

func (f *fakeStreamer) RunInContainer(_ context.Context, pod *v1.Pod, container string, cmd []string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, fmt.Sprintf("%s/%s %q", pod.UID, container, cmd))
	if cmd[0] == "false" {
		return nil, errors.New("command 'false' exited with 1: ")
	}
	return []byte(strings.Join(cmd, "+")), nil
}

func (f *fakeStreamer) take() ([]pods.StreamRequest, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, x := f.reqs, f.runs
	f.reqs, f.runs = nil, nil
	return r, x
}

// echoStreamingServer is a runtime's streaming server: it switches to the requested protocol
// and echoes what it reads after saying which path it serves; a path ending in /refuse is
// answered 404 as containerd answers an unknown token.
func echoStreamingServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the client's credentials reached the runtime: %q", r.Header.Get("Authorization"))
		}
		if strings.HasSuffix(r.URL.Path, "/refuse") {
			http.Error(w, "unknown token", http.StatusNotFound)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n%s\n", r.Header.Get("Upgrade"), r.URL.Path)
		if err := brw.Flush(); err != nil {
			return
		}
		_, _ = io.Copy(c, brw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type streamEnv struct {
	srv     *Server
	ts      *httptest.Server
	clock   *clocktesting.FakeClock
	fake    *fakeStreamer
	admin   tls.Certificate
	runtime *httptest.Server
}

func newStreamEnv(t *testing.T, streaming bool) *streamEnv {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, "test-ca")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	reviews := &fakeReviews{}
	e := &streamEnv{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), runtime: echoStreamingServer(t)}
	e.fake = &fakeStreamer{url: e.runtime.URL}
	o := Options{NodeName: "node-1", CertDir: filepath.Join(dir, "pki"), Hosts: []string{"127.0.0.1"},
		ClientCAFile: caFile, Tokens: fakeTokens{reviews}, Access: fakeAccess{reviews}, Clock: e.clock,
		Pods: func() []v1.Pod {
			return []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u2"}}}
		}}
	if streaming {
		o.Streamer = e.fake
	}
	var err error
	if e.srv, err = New(o); err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewUnstartedServer(e.srv.Handler())
	e.ts.TLS = e.srv.TLSConfig()
	e.ts.StartTLS()
	t.Cleanup(e.ts.Close)
	e.admin = ca.client(t, "admin", "system:masters")
	return e
}

// do sends an upgrade request (SPDY unless upgrade says otherwise; none when "") and returns
// the status, the body (or, upgraded, the first line the streaming server sends) and the
// upgraded connection.
func (e *streamEnv) do(t *testing.T, method, path, upgrade string) (int, string, io.ReadWriteCloser) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{e.admin}}}}
	req, err := http.NewRequestWithContext(t.Context(), method, e.ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The client certificate authenticates; the token, which must not reach the runtime,
	// is as valid.
	req.Header.Set("Authorization", "Bearer good")
	if upgrade != "" {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", upgrade)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	rwc := resp.Body.(io.ReadWriteCloser)
	t.Cleanup(func() { rwc.Close() })
	line, err := bufio.NewReader(io.LimitReader(rwc, int64(len(path)+64))).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: first line: %v", path, err)
	}
	return resp.StatusCode, strings.TrimSpace(line), rwc
}

// TestKubeletStreaming: which request each URL becomes, the errors in the kubelet's shape, and
// the upgraded connection proxied to the runtime's streaming server.
func TestKubeletStreaming(t *testing.T) {
	e := newStreamEnv(t, true)
	tests := []struct {
		name, method, path string
		upgrade            string // "" : not an upgrade
		want               []pods.StreamRequest
		wantStatus         int
		wantBody           string
	}{
		{name: "exec over SPDY", method: "POST", path: "/exec/default/web/main?command=ls&command=-l&output=1&error=1", upgrade: "SPDY/3.1",
			want:       []pods.StreamRequest{{Kind: pods.StreamExec, Namespace: "default", Pod: "web", Container: "main", Command: []string{"ls", "-l"}, Stdout: true, Stderr: true}},
			wantStatus: http.StatusSwitchingProtocols, wantBody: "/exec/token-u1"},
		{name: "exec with the UID of the second pod of that name", method: "GET", path: "/exec/default/web/u2/main?command=sh&input=1&tty=1&output=1", upgrade: "websocket",
			want:       []pods.StreamRequest{{Kind: pods.StreamExec, Namespace: "default", Pod: "web", UID: "u2", Container: "main", Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}},
			wantStatus: http.StatusSwitchingProtocols, wantBody: "/exec/token-u2"},
		{name: "attach", method: "POST", path: "/attach/default/web/main?output=1", upgrade: "SPDY/3.1",
			want:       []pods.StreamRequest{{Kind: pods.StreamAttach, Namespace: "default", Pod: "web", Container: "main", Stdout: true}},
			wantStatus: http.StatusSwitchingProtocols, wantBody: "/attach/token-u1"},
		{name: "port-forward over SPDY", method: "POST", path: "/portForward/default/web", upgrade: "SPDY/3.1",
			want:       []pods.StreamRequest{{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web"}},
			wantStatus: http.StatusSwitchingProtocols, wantBody: "/portForward/token-u1"},
		{name: "port-forward over websockets with its UID", method: "GET", path: "/portForward/default/web/u1?port=8080", upgrade: "websocket",
			want:       []pods.StreamRequest{{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web", UID: "u1", Ports: []int32{8080}}},
			wantStatus: http.StatusSwitchingProtocols, wantBody: "/portForward/token-u1"},
		{name: "a bad query", method: "POST", path: "/exec/default/web/main?command=ls", upgrade: "SPDY/3.1",
			wantStatus: http.StatusBadRequest, wantBody: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "an unknown pod", method: "POST", path: "/exec/default/nope/main?command=ls&output=1", upgrade: "SPDY/3.1",
			wantStatus: http.StatusNotFound, wantBody: "pod does not exist"},
		{name: "exec with an unknown UID: no such container", method: "POST", path: "/exec/default/web/u9/main?command=ls&output=1", upgrade: "SPDY/3.1",
			wantStatus: http.StatusInternalServerError, wantBody: `container not found ("main")`},
		{name: "port-forward with an unknown UID: no such pod", method: "POST", path: "/portForward/default/web/u9", upgrade: "SPDY/3.1",
			wantStatus: http.StatusNotFound, wantBody: "pod not found"},
		{name: "what the runtime cannot find", method: "POST", path: "/exec/default/web/gone?command=ls&output=1", upgrade: "SPDY/3.1",
			want:       []pods.StreamRequest{{Kind: pods.StreamExec, Namespace: "default", Pod: "web", Container: "gone", Command: []string{"ls"}, Stdout: true}},
			wantStatus: http.StatusInternalServerError, wantBody: `container not found ("gone")`},
		{name: "not an upgrade", method: "POST", path: "/exec/default/web/main?command=ls&output=1",
			wantStatus: http.StatusBadRequest, wantBody: "Upgrade request required"},
		{name: "PUT is not served", method: "PUT", path: "/exec/default/web/main?command=ls&output=1", upgrade: "SPDY/3.1",
			wantStatus: http.StatusMethodNotAllowed},
		{name: "run", method: "POST", path: "/run/default/web/main?cmd=cat+/etc/hostname",
			wantStatus: http.StatusOK, wantBody: "cat+/etc/hostname"},
		{name: "run that fails", method: "POST", path: "/run/default/web/u2/main?cmd=false",
			wantStatus: http.StatusInternalServerError, wantBody: "command 'false' exited with 1"},
		{name: "run is POST only", method: "GET", path: "/run/default/web/main?cmd=ls", wantStatus: http.StatusMethodNotAllowed},
		{name: "a query too long", method: "POST", path: "/exec/default/web/main?command=" + strings.Repeat("x", maxStreamQuery), upgrade: "SPDY/3.1",
			wantStatus: http.StatusRequestURITooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, conn := e.do(t, tc.method, tc.path, tc.upgrade)
			got, _ := e.fake.take()
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, status, body, tc.wantStatus, tc.wantBody)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("runtime asked %+v, want %+v", got, tc.want)
			}
			if conn == nil {
				return
			}
			// The connection is the runtime's, both ways.
			if _, err := io.WriteString(conn, "ping\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Errorf("echo: %q, %v", line, err)
			}
		})
	}
	if _, runs := e.fake.take(); runs != nil {
		t.Errorf("left over runs %v", runs)
	}
}

// TestKubeletStreamingBounds: streams over a client's bound are refused with 429 and
// Retry-After; a stream idle for the idle timeout is closed, as are all when the server stops.
func TestKubeletStreamingBounds(t *testing.T) {
	e := newStreamEnv(t, true)
	e.srv.streams.perClient = 2
	const exec = "/exec/default/web/main?command=sh&input=1&output=1"
	_, _, first := e.do(t, "POST", exec, "SPDY/3.1")
	_, _, second := e.do(t, "POST", exec, "SPDY/3.1")
	if status, body, _ := e.do(t, "POST", exec, "SPDY/3.1"); status != http.StatusTooManyRequests || !strings.Contains(body, "at most 2 per client") {
		t.Fatalf("third stream: %d %q, want 429", status, body)
	}
	if n := e.srv.streams.open(); n != 2 {
		t.Fatalf("open streams %d, want 2", n)
	}

	// Traffic on the first stream at 3h keeps it; the second, silent, is closed at 4h.
	waitFor(t, "two idle watches", func() bool { return e.clock.Waiters() == 2 })
	e.clock.Step(3 * time.Hour)
	waitFor(t, "the idle watches rearmed", func() bool { return e.clock.Waiters() == 2 })
	if _, err := io.WriteString(first, "still here\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(first)
	if line, err := r.ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	e.clock.Step(time.Hour)
	if _, err := io.ReadAll(second); err != nil {
		t.Fatalf("idle stream: %v", err)
	}
	waitFor(t, "the idle stream's place given back", func() bool { return e.srv.streams.open() == 1 })
	if _, err := io.WriteString(first, "after\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "after\n" {
		t.Fatalf("the busy stream was closed: %q, %v", line, err)
	}

	// The server stopping closes the rest and refuses new streams.
	e.srv.streams.closeAll()
	if _, err := io.ReadAll(first); err != nil {
		t.Fatalf("stream at stop: %v", err)
	}
	if status, _, _ := e.do(t, "POST", exec, "SPDY/3.1"); status != http.StatusTooManyRequests {
		t.Errorf("stream after stop: %d, want 429", status)
	}
}

// TestKubeletStreamingWithoutRuntimeStreaming: the systemd runtime has no streaming server.
func TestKubeletStreamingWithoutRuntimeStreaming(t *testing.T) {
	e := newStreamEnv(t, false)
	for _, path := range []string{"/exec/default/web/main?command=ls&output=1", "/attach/default/web/main?output=1", "/portForward/default/web"} {
		status, body, _ := e.do(t, "POST", path, "SPDY/3.1")
		if status != http.StatusInternalServerError || !strings.Contains(body, `need the CRI runtime (runtime.type = "cri")`) {
			t.Errorf("%s: %d %q, want 500 naming the CRI runtime", path, status, body)
		}
	}
	if status, body, _ := e.do(t, "POST", "/run/default/web/main?cmd=ls", ""); status != http.StatusInternalServerError || !strings.Contains(body, "has no streaming") {
		t.Errorf("run: %d %q", status, body)
	}
}

// waitFor waits (in real time, for the server's goroutines) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
