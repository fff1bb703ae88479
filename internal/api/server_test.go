package api

import (
	"bytes"
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
	"reflect"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods"
)

const webManifest = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    command: [/bin/sleep, infinity]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
`

func filePod(name, origin string) v1.Pod {
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "f0000000-0000-0000-0000-000000000001",
			Annotations: map[string]string{pods.AnnotationSource: pods.SourceFile, pods.AnnotationOrigin: origin}},
		Spec:   v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort},
	}
}

// rawRequest sends a request through the client's transport and returns status and body.
func rawRequest(t *testing.T, c *Client, method, path string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://slicelet"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func statusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestHealth(t *testing.T) {
	_, c := startServer(t, newFakeBackend(), 0)
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := rawRequest(t, c, "GET", "/healthz", nil); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q", code, body)
	}
}

func TestListAndGetPods(t *testing.T) {
	f := newFakeBackend()
	f.Add(filePod("a", "/etc/slicelet/pods.d/a.yaml"))
	f.Add(filePod("b", "/etc/slicelet/pods.d/b.yaml"))
	_, c := startServer(t, f, 0)
	ctx := context.Background()

	list, err := c.ListPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Kind != "Pod" || list[0].APIVersion != "v1" {
		t.Fatalf("ListPods = %d pods, first %+v", len(list), list[0].TypeMeta)
	}
	if got := list[0].Annotations[pods.AnnotationSource]; got != pods.SourceFile {
		t.Errorf("annotation source = %q", got)
	}
	// Compact for a program, indented when asked (as the Kubernetes API server answers).
	code, body := rawRequest(t, c, "GET", "/v1/pods", nil)
	if code != 200 || !strings.Contains(body, `"kind":"PodList"`) {
		t.Errorf("GET /v1/pods = %d %s", code, body)
	}
	code, body = rawRequest(t, c, "GET", "/v1/pods?pretty=true", nil)
	if code != 200 || !strings.Contains(body, `"kind": "PodList"`) {
		t.Errorf("GET /v1/pods?pretty=true = %d %s", code, body)
	}

	for _, tc := range []struct {
		name, ns, pod string
		code          int
		want          string
	}{
		{"found", "default", "a", 0, ""},
		{"missing", "default", "nope", 404, `pod "default/nope": not found`},
		{"other namespace", "kube-system", "a", 404, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := c.GetPod(ctx, tc.ns, tc.pod)
			if tc.code == 0 {
				if err != nil || pod.Name != tc.pod || pod.Status.Phase != v1.PodRunning {
					t.Fatalf("GetPod = %+v, %v", pod.ObjectMeta, err)
				}
				return
			}
			if statusOf(err) != tc.code || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("GetPod error = %v (status %d), want %d %q", err, statusOf(err), tc.code, tc.want)
			}
		})
	}
}

func TestApplyPod(t *testing.T) {
	f := newFakeBackend()
	f.Add(filePod("static", "/etc/slicelet/pods.d/static.yaml"))
	_, c := startServer(t, f, 0)
	ctx := context.Background()

	// Sequential: each step depends on the one before.
	for _, tc := range []struct {
		name     string
		manifest string
		action   string
		code     int
		want     string
	}{
		{"create", webManifest, ActionCreated, 0, ""},
		{"same again", webManifest, ActionUnchanged, 0, ""},
		{"changed", strings.Replace(webManifest, "64Mi", "128Mi", 1), ActionConfigured, 0, ""},
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","namespace":"ns1"},"spec":{"containers":[{"name":"c"}]}}`, ActionCreated, 0, ""},
		{"invalid", strings.Replace(webManifest, "memory: 64Mi", "memory: -1Mi", 1), "", 422, "spec.containers[0].resources.requests[memory]"},
		{"unknown field", strings.Replace(webManifest, "  containers:", "  bogus: 1\n  containers:", 1), "", 422, `unknown field "spec.bogus"`},
		{"file pod", strings.Replace(webManifest, "name: web", "name: static", 1), "", 409, "static.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.ApplyPod(ctx, []byte(tc.manifest))
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if res.Action != tc.action || res.Pod.Kind != "Pod" || res.Pod.UID == "" {
					t.Fatalf("ApplyPod = %s %+v", res.Action, res.Pod.ObjectMeta)
				}
				return
			}
			if statusOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ApplyPod error = %v (status %d), want %d %q", err, statusOf(err), tc.code, tc.want)
			}
			var ie *InvalidError
			if (tc.code == 422) != errors.As(err, &ie) {
				t.Errorf("errors.As(*InvalidError) = %v for status %d", errors.As(err, &ie), tc.code)
			}
			if tc.code == 422 && (len(ie.Problems) == 0 || !strings.Contains(ie.Problems[0], tc.want)) {
				t.Errorf("problems = %q", ie.Problems)
			}
			if tc.code == 409 && !errors.Is(err, ErrConflict) {
				t.Errorf("error %v is not ErrConflict", err)
			}
		})
	}

	for _, tc := range []struct {
		name string
		body io.Reader
		code int
		want string
	}{
		{"empty", strings.NewReader(""), 400, "empty request body"},
		{"too large", io.MultiReader(strings.NewReader("# "), bytes.NewReader(bytes.Repeat([]byte("x"), MaxManifestBytes))), 413, "larger than 3145728 bytes (3 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, c, "POST", "/v1/pods", tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) || !json.Valid([]byte(body)) {
				t.Errorf("POST /v1/pods = %d %s, want %d %q", code, body, tc.code, tc.want)
			}
		})
	}
}

func TestDeletePod(t *testing.T) {
	f := newFakeBackend()
	f.Add(filePod("static", "/etc/slicelet/pods.d/static.yaml"))
	_, c := startServer(t, f, 0)
	ctx := context.Background()
	if _, err := c.ApplyPod(ctx, []byte(webManifest)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pod string
		code      int
		is        error
		want      string
	}{
		{"api pod", "web", 0, nil, ""},
		{"gone now", "web", 404, ErrNotFound, "not found"},
		{"file pod", "static", 409, ErrConflict, "remove the manifest file /etc/slicelet/pods.d/static.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.DeletePod(ctx, "default", tc.pod)
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if statusOf(err) != tc.code || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DeletePod error = %v (status %d), want %d %q", err, statusOf(err), tc.code, tc.want)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	f := newFakeBackend()
	f.LogText["default/web/app"] = "one\ntwo\nthree\n"
	f.LogText["default/web/quiet"] = ""
	_, c := startServer(t, f, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		container string
		opts      pods.LogOptions
		code      int
		want      string
	}{
		{"all", "app", pods.LogOptions{}, 0, "one\ntwo\nthree\n"},
		{"tail", "app", pods.LogOptions{TailLines: 2}, 0, "two\nthree\n"},
		{"previous", "app", pods.LogOptions{Previous: true}, 0, "one\ntwo\nthree\n"},
		{"unknown container", "nope", pods.LogOptions{}, 404, `container "nope" of pod default/web: not found`},
		{"no logs", "quiet", pods.LogOptions{}, 404, "no logs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := c.Logs(ctx, "default", "web", tc.container, tc.opts, &out)
			if tc.code != 0 {
				if statusOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Logs error = %v (status %d), want %d %q", err, statusOf(err), tc.code, tc.want)
				}
				return
			}
			if err != nil || out.String() != tc.want {
				t.Fatalf("Logs = %q, %v; want %q", out.String(), err, tc.want)
			}
			f.Mu.Lock()
			got := f.LastLogOpts
			f.Mu.Unlock()
			if got != tc.opts {
				t.Errorf("backend got options %+v, want %+v", got, tc.opts)
			}
		})
	}

	for _, tc := range []struct {
		name, query, want string
	}{
		{"tailLines", "tailLines=1", "three\n"},
		{"tailLines 0 is no lines", "tailLines=0", ""},
		{"limitBytes", "limitBytes=5", "one\nt"},
		{"follow= is true (apimachinery's bool)", "follow=&tailLines=1", "three\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, c, "GET", "/v1/pods/default/web/log?container=app&"+tc.query, nil)
			if code != 200 || body != tc.want {
				t.Errorf("= %d %q, want 200 %q", code, body, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, query string
		want        string
	}{
		// One parser with the kubelet API (pods.ParseLogQuery): kubectl's names and bounds.
		{"bad tail", "tail=-1", `tailLines: -1: must be greater than or equal to 0`},
		{"bad tailLines", "tailLines=x", `tailLines: \"x\" is not a whole number`},
		{"zero sinceSeconds", "sinceSeconds=0", `sinceSeconds: 0: must be greater than 0`},
		{"both since", "sinceSeconds=5&sinceTime=2026-01-01T00:00:00.5Z", `sinceTime: at most one of sinceTime or sinceSeconds may be given`},
		{"stderr", "stream=Stderr", `stream: \"Stderr\" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, c, "GET", "/v1/pods/default/web/log?container=app&"+tc.query, nil)
			if code != 400 || !strings.Contains(body, tc.want) {
				t.Errorf("= %d %s, want 400 %q", code, body, tc.want)
			}
		})
	}
}

// TestLogsFollow: followed output reaches the client line by line while the backend is still
// writing, an error after output started arrives after the output, and ending the client's
// context ends the backend's Logs call.
func TestLogsFollow(t *testing.T) {
	f := newFakeBackend()
	step := make(chan struct{})
	backendDone := make(chan error, 1)
	f.Follow = func(ctx context.Context, w io.Writer) error {
		io.WriteString(w, "first\n")
		<-step // the client has read "first": it was flushed, not buffered
		io.WriteString(w, "second\n")
		<-ctx.Done()
		backendDone <- ctx.Err()
		return ctx.Err()
	}
	_, c := startServer(t, f, 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	clientDone := make(chan error, 1)
	go func() {
		clientDone <- c.Logs(ctx, "default", "web", "app", pods.LogOptions{Follow: true}, pw)
		pw.Close()
	}()
	buf := make([]byte, 64)
	readLine := func(want string) {
		t.Helper()
		n, err := io.ReadAtLeast(pr, buf, len(want))
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
		}
	}
	readLine("first\n")
	close(step)
	readLine("second\n")
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-clientDone; !errors.Is(err, context.Canceled) {
		t.Errorf("client Logs = %v, want context.Canceled", err)
	}
	if err := <-backendDone; !errors.Is(err, context.Canceled) {
		t.Errorf("backend context = %v, want canceled", err)
	}
}

func TestLogsErrorAfterOutput(t *testing.T) {
	f := newFakeBackend()
	f.Follow = func(_ context.Context, w io.Writer) error {
		io.WriteString(w, "partial\n")
		return errors.New("journal: cursor lost")
	}
	_, c := startServer(t, f, 0)
	var out bytes.Buffer
	err := c.Logs(context.Background(), "default", "web", "app", pods.LogOptions{Follow: true}, &out)
	if out.String() != "partial\n" || err == nil || err.Error() != "logs of default/web: journal: cursor lost" {
		t.Fatalf("Logs = %q, %v", out.String(), err)
	}
}

func TestNode(t *testing.T) {
	f := newFakeBackend()
	f.Add(filePod("a", "/x/a.yaml"))
	rejected := filePod("r", "/x/r.yaml")
	rejected.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", Message: "Pod was rejected: insufficient cpu"}
	f.Add(rejected)
	_, c := startServer(t, f, 0)
	n, err := c.Node(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.Node.Name != "testnode" || n.Node.Kind != "Node" {
		t.Errorf("node = %+v", n.Node.ObjectMeta)
	}
	if q := n.Node.Status.Allocatable[v1.ResourceCPU]; q.MilliValue() != 3800 {
		t.Errorf("allocatable cpu = %v", q.String())
	}
	if len(n.Node.Status.Conditions) != 1 {
		t.Errorf("conditions = %v", n.Node.Status.Conditions)
	}
	want := PodCounts{Total: 2, Active: 1, Max: 110, Rejected: 1,
		Phases: map[v1.PodPhase]int{v1.PodRunning: 1, v1.PodFailed: 1}, QOS: map[v1.PodQOSClass]int{v1.PodQOSBestEffort: 1}}
	if fmt.Sprint(n.Pods) != fmt.Sprint(want) {
		t.Errorf("pods = %+v, want %+v", n.Pods, want)
	}
}

func TestExplain(t *testing.T) {
	_, c := startServer(t, newFakeBackend(), 0)
	ctx := context.Background()
	x, err := c.ExplainPod(ctx, []byte(webManifest))
	if err != nil {
		t.Fatal(err)
	}
	if x.QOSClass != v1.PodQOSBurstable || !strings.HasPrefix(x.Slice, "kubepods-burstable-pod") {
		t.Errorf("ExplainPod = %+v", x)
	}
	if _, err := c.ExplainPod(ctx, []byte("kind: Nope")); statusOf(err) != 422 {
		t.Errorf("ExplainPod of a non-pod = %v, want 422", err)
	}
	nx, err := c.ExplainNode(ctx)
	if err != nil || nx.Allocatable.CPU != 3800 {
		t.Errorf("ExplainNode = %+v, %v", nx.Allocatable, err)
	}
	ex, err := c.ExplainEviction(ctx)
	if err != nil || ex.Evict == nil || ex.Evict.Pod != "default/hog" || len(ex.Ranking) != 1 || ex.Ranking[0].Reason != "exceeds its memory request" || ex.Reclaim != v1.ResourceMemory {
		t.Errorf("ExplainEviction = %+v, %v", ex, err)
	}
}

// TestCollect: POST /v1/gc/{images,containers} run or preview a collection and hand its result
// back whole.
func TestCollect(t *testing.T) {
	f := newFakeBackend()
	_, c := startServer(t, f, 0)
	ctx := context.Background()
	img, err := c.CollectImages(ctx, true)
	if err != nil || !img.DryRun || img.UsagePercent != 90 || len(img.Remove) != 1 || img.Remove[0].Reason != gc.ReasonSpace || !img.Measured || img.FreedBytes != 4<<20 {
		t.Errorf("CollectImages = %+v, %v", img, err)
	}
	ctr, err := c.CollectContainers(ctx, false)
	if err != nil || ctr.DryRun || len(ctr.Removed) != 2 {
		t.Errorf("CollectContainers = %+v, %v", ctr, err)
	}
	if want := []string{"images dry", "containers run"}; !reflect.DeepEqual(f.GCCalls, want) {
		t.Errorf("backend calls = %q, want %q", f.GCCalls, want)
	}
}

// TestBackendErrors: an unclassified backend error is a 500 with its message on every route.
func TestBackendErrors(t *testing.T) {
	f := newFakeBackend()
	f.Err = errBoom
	_, c := startServer(t, f, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"list", func() error { _, err := c.ListPods(ctx); return err }},
		{"get", func() error { _, err := c.GetPod(ctx, "default", "a"); return err }},
		{"apply", func() error { _, err := c.ApplyPod(ctx, []byte(webManifest)); return err }},
		{"delete", func() error { return c.DeletePod(ctx, "default", "a") }},
		{"logs", func() error { return c.Logs(ctx, "default", "a", "", pods.LogOptions{}, io.Discard) }},
		{"node", func() error { _, err := c.Node(ctx); return err }},
		{"explain pod", func() error { _, err := c.ExplainPod(ctx, []byte(webManifest)); return err }},
		{"explain node", func() error { _, err := c.ExplainNode(ctx); return err }},
		{"explain eviction", func() error { _, err := c.ExplainEviction(ctx); return err }},
		{"gc images", func() error { _, err := c.CollectImages(ctx, false); return err }},
		{"gc containers", func() error { _, err := c.CollectContainers(ctx, true); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if statusOf(err) != 500 || err.Error() != errBoom.Error() {
				t.Errorf("error = %v (status %d), want 500 %q", err, statusOf(err), errBoom)
			}
		})
	}
}

func TestUnknownRoutes(t *testing.T) {
	_, c := startServer(t, newFakeBackend(), 0)
	for _, tc := range []struct {
		name, method, path string
		code               int
		want               string
	}{
		{"no such path", "GET", "/v2/pods", 404, `"error": "no route GET /v2/pods"`},
		{"wrong method", "PUT", "/v1/node", 405, `"error": "method not allowed: PUT /v1/node (allowed: GET, HEAD)"`},
		{"gc with GET", "GET", "/v1/gc/images", 405, `"error": "method not allowed: GET /v1/gc/images (allowed: POST)"`},
		{"gc bad dryRun", "POST", "/v1/gc/containers?dryRun=maybe", 400, `"error": "query parameter dryRun=\"maybe\": want true or false"`},
		{"gc unknown kind", "POST", "/v1/gc/volumes", 404, `"error": "no route POST /v1/gc/volumes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, c, tc.method, tc.path, nil)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %d %s", tc.method, tc.path, code, body)
			}
		})
	}
}

func TestDaemonDown(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	for _, tc := range []struct {
		name, socket, reason string
	}{
		{"missing socket", filepath.Join(dir, "none.sock"), "no such file or directory"},
		{"refused", stale, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient(tc.socket).ListPods(context.Background())
			if !errors.Is(err, ErrDaemonDown) {
				t.Fatalf("error = %v, want ErrDaemonDown", err)
			}
			want := "cannot reach slicelet at " + tc.socket + ": " + tc.reason +
				"\n  is it running? systemctl status slicelet; journalctl -u slicelet"
			if err.Error() != want {
				t.Errorf("error =\n%s\nwant\n%s", err, want)
			}
		})
	}
}

func TestNewServerGroup(t *testing.T) {
	lookup := func(name string) (uint32, error) { return 0, fmt.Errorf("group: unknown group %s", name) }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"missing group", Options{Group: "nosuchgroup", LookupGroup: lookup}, `api group "nosuchgroup": group: unknown group nosuchgroup (create it`},
		{"missing group, real lookup", Options{Group: "slicelet-no-such-group-xyz"}, `api group "slicelet-no-such-group-xyz"`},
		{"empty group", Options{}, "api group: empty"},
		{"relative socket", Options{Socket: "s.sock", Group: "x"}, `api socket "s.sock": must be an absolute path`},
		{"long socket", Options{Socket: "/" + strings.Repeat("x", 120), Group: "x"}, "the limit for a unix socket is 107"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServer(newFakeBackend(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewServer = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestListenSocket(t *testing.T) {
	gid := uint32(os.Getgid())
	newServer := func(t *testing.T, socket string) *Server {
		s, err := NewServer(newFakeBackend(), Options{Socket: socket, Group: "g", LookupGroup: func(string) (uint32, error) { return gid, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("mode, group and parent directory", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "run", "s.sock")
		s := newServer(t, sock)
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		defer s.ln.Close()
		st, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o660 || st.Mode().Type() != os.ModeSocket || st.Sys().(*syscall.Stat_t).Gid != gid {
			t.Errorf("socket mode %v gid %d, want 0660 socket gid %d", st.Mode(), st.Sys().(*syscall.Stat_t).Gid, gid)
		}
		if dst, _ := os.Stat(filepath.Dir(sock)); dst.Mode().Perm() != 0o755 {
			t.Errorf("parent directory mode %v, want 0755", dst.Mode().Perm())
		}
	})
	t.Run("stale socket replaced", func(t *testing.T) {
		sock := testSocketPath(t)
		old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		old.SetUnlinkOnClose(false)
		old.Close()
		s := newServer(t, sock)
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		s.ln.Close()
	})
	t.Run("socket in use", func(t *testing.T) {
		sock := testSocketPath(t)
		live, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if err := newServer(t, sock).Listen(); err == nil || !strings.Contains(err.Error(), "another process is serving on it") {
			t.Errorf("Listen = %v", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		sock := testSocketPath(t)
		if err := os.WriteFile(sock, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := newServer(t, sock).Listen(); err == nil || !strings.Contains(err.Error(), "exists and is not a socket") {
			t.Errorf("Listen = %v", err)
		}
		if data, _ := os.ReadFile(sock); string(data) != "precious" {
			t.Errorf("file was touched: %q", data)
		}
	})
}

const hostNetworkManifest = `apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: app
    command: [/bin/sleep, infinity]
`

// TestApplyPodSecurity: a pod the API's Pod Security level refuses is a 403 with reason
// Forbidden and the API server's message, which the client hands back as a *ForbiddenError
// (not a refused peer); a dry run answers as apply would and stores nothing; every change is
// logged with the peer's credentials and the pod records who applied it.
func TestApplyPodSecurity(t *testing.T) {
	f := newFakeBackend()
	var logs bytes.Buffer
	_, c := startServerLogging(t, f, 0, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := t.Context()

	_, err := c.ApplyPod(ctx, []byte(hostNetworkManifest))
	var forbidden *ForbiddenError
	want := `pods "hostnet" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`
	if statusOf(err) != 403 || !errors.As(err, &forbidden) || err.Error() != want {
		t.Fatalf("apply of a host-network pod: %v (status %d), want 403 %q", err, statusOf(err), want)
	}
	if code, body := rawRequest(t, c, "POST", "/v1/pods", strings.NewReader(hostNetworkManifest)); code != 403 || !strings.Contains(body, `"reason": "Forbidden"`) {
		t.Errorf("raw 403 body: %d %s", code, body)
	}
	if _, err := c.ApplyPodDryRun(ctx, []byte(hostNetworkManifest)); !errors.As(err, &forbidden) {
		t.Errorf("dry run of a refused pod: %v", err)
	}

	res, err := c.ApplyPodDryRun(ctx, []byte(webManifest))
	if err != nil || !res.DryRun || res.Action != ActionCreated || !f.LastDryRun {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if _, err := c.GetPod(ctx, "default", "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dry run stored the pod: %v", err)
	}
	res, err = c.ApplyPod(ctx, []byte(webManifest))
	wantBy := fmt.Sprintf("uid=%d gid=%d pid=%d", os.Geteuid(), os.Getegid(), os.Getpid())
	if err != nil || res.DryRun || res.Pod.Annotations[AnnotationAppliedBy] != wantBy {
		t.Fatalf("apply: %+v, %v; want applied-by %q", res.Pod.Annotations, err, wantBy)
	}
	if err := c.DeletePod(ctx, "default", "web"); err != nil {
		t.Fatal(err)
	}

	// One "api change" record per change (refused ones included), none for the dry runs.
	var changes []string
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "api change" {
			continue
		}
		if rec["peer_uid"] != float64(os.Geteuid()) || rec["peer_gid"] != float64(os.Getegid()) || rec["peer_pid"] != float64(os.Getpid()) || rec["level"] != "INFO" {
			t.Errorf("change record without the peer: %s", line)
		}
		changes = append(changes, fmt.Sprintf("%v %v %v", rec["method"], rec["path"], rec["status"]))
	}
	wantChanges := "POST /v1/pods 403|POST /v1/pods 403|POST /v1/pods 201|DELETE /v1/pods/default/web 204"
	if got := strings.Join(changes, "|"); got != wantChanges {
		t.Errorf("change records:\n got %s\nwant %s\n%s", got, wantChanges, logs.String())
	}
}

// TestMetrics: the metrics lists have metrics-server's shape (metrics.k8s.io/v1beta1), empty
// lists included.
func TestMetrics(t *testing.T) {
	_, c := startServer(t, newFakeBackend(), 0)
	code, body := rawRequest(t, c, "GET", "/v1/metrics/pods", nil)
	if code != 200 || !strings.Contains(body, `"kind": "PodMetricsList"`) || !strings.Contains(body, `"apiVersion": "metrics.k8s.io/v1beta1"`) || !strings.Contains(body, `"cpu": "250m"`) {
		t.Errorf("GET /v1/metrics/pods = %d %s", code, body)
	}
	code, body = rawRequest(t, c, "GET", "/v1/metrics/nodes", nil)
	if code != 200 || !strings.Contains(body, `"kind": "NodeMetricsList"`) || !strings.Contains(body, `"items": []`) {
		t.Errorf("GET /v1/metrics/nodes = %d %s", code, body)
	}
	pods, err := c.PodMetrics(t.Context())
	if err != nil || len(pods) != 1 || pods[0].Containers[0].Usage.Memory().String() != "64Mi" {
		t.Errorf("PodMetrics = %+v, %v", pods, err)
	}
	if nodes, err := c.NodeMetrics(t.Context()); err != nil || len(nodes) != 0 {
		t.Errorf("NodeMetrics = %+v, %v", nodes, err)
	}
}
