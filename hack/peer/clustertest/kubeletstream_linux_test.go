package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	e2ewebsocket "k8s.io/kubernetes/test/e2e/framework/websocket"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// streamPort is the port the streaming test's pod serves HTTP on (on the node's network).
const streamPort = 18080

// TestKubeletStreaming runs a pod on a slicelet node and reaches it through the API server as
// kubectl and the e2e framework do: exec with client-go's SPDY and websocket executors
// (stdout, stderr, exit code, stdin), attach, the conformance specs' raw websockets for exec
// (channel.k8s.io) and logs (binary.k8s.io), `kubectl exec`, and port-forward over SPDY and
// over websockets to the pod's HTTP server.
func TestKubeletStreaming(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandbox(t, "^TestKubeletStreaming$")
		return
	}
	work, bin, slicelet := os.Getenv(workEnv), os.Getenv(binEnv), os.Getenv(sliceletEnv)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	c := startClusterNode(t, ctx, work, bin, slicelet, controlplane.Config{Nodes: []string{nodeName}},
		func(cp *controlplane.ControlPlane) string {
			return clusterHead(cp) + fmt.Sprintf("node_ip = \"127.0.0.1\"\nclient_ca_file = %q\n", cp.CAFile())
		})
	cp, admin := c.cp, c.admin
	cfg, err := cp.RESTConfig(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "streamer", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", fmt.Sprintf("mkdir -p /tmp/www && echo hello through port-forward > /tmp/www/index.html && echo container is alive && exec httpd -f -p %d -h /tmp/www", streamPort)}},
				{Name: "ticker", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
					Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do echo tick; sleep 0.2; done"}}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "pod Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "streamer", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("pod failed: %s: %s", p.Status.Reason, p.Status.Message)
		}
		return p.Status.Phase == v1.PodRunning, nil
	})
	execURL := func(opts *v1.PodExecOptions) *rest.Request {
		return admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("streamer").
			SubResource("exec").VersionedParams(opts, scheme.ParameterCodec)
	}

	// client-go's executors: SPDY (POST) and websockets (GET, v5.channel.k8s.io, which the API
	// server translates to SPDY toward the node).
	executors := map[string]func(opts *v1.PodExecOptions) (remotecommand.Executor, error){
		"spdy": func(opts *v1.PodExecOptions) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(cfg, "POST", execURL(opts).URL())
		},
		"websocket": func(opts *v1.PodExecOptions) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, "GET", execURL(opts).URL().String())
		},
	}
	for _, name := range []string{"spdy", "websocket"} {
		t.Run("exec over "+name, func(t *testing.T) {
			newExec := executors[name]
			for _, tc := range []struct {
				name             string
				cmd              []string
				stdin            string
				wantOut, wantErr string
				wantCode         int
			}{
				{name: "stdout, stderr and the exit code", cmd: []string{"/bin/sh", "-c", "echo to stdout; echo to stderr >&2; exit 3"},
					wantOut: "to stdout\n", wantErr: "to stderr\n", wantCode: 3},
				{name: "stdin", cmd: []string{"/bin/cat"}, stdin: "through stdin\n", wantOut: "through stdin\n"},
				{name: "the container's filesystem", cmd: []string{"/bin/cat", "/tmp/www/index.html"}, wantOut: "hello through port-forward\n"},
			} {
				opts := &v1.PodExecOptions{Container: "main", Command: tc.cmd, Stdin: tc.stdin != "", Stdout: true, Stderr: true}
				ex, err := newExec(opts)
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				so := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
				if tc.stdin != "" {
					so.Stdin = strings.NewReader(tc.stdin)
				}
				sctx, scancel := context.WithTimeout(ctx, time.Minute)
				err = ex.StreamWithContext(sctx, so)
				scancel()
				code := 0
				var exit utilexec.ExitError
				switch {
				case errors.As(err, &exit):
					code = exit.ExitStatus()
				case err != nil:
					t.Errorf("%s: %v", tc.name, err)
					continue
				}
				if stdout.String() != tc.wantOut || stderr.String() != tc.wantErr || code != tc.wantCode {
					t.Errorf("%s: stdout %q stderr %q exit %d, want %q %q %d", tc.name, stdout.String(), stderr.String(), code, tc.wantOut, tc.wantErr, tc.wantCode)
				}
			}
			// A container the pod does not have: the kubelet's error, through the API server.
			ex, err := newExec(&v1.PodExecOptions{Container: "nope", Command: []string{"true"}, Stdout: true})
			if err == nil {
				err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			}
			if err == nil || !strings.Contains(err.Error(), "nope") {
				t.Errorf("exec in an unknown container: %v, want an error naming it", err)
			}
		})
	}

	// The conformance spec "Pods should support remote command execution over websockets":
	// the old channel.k8s.io protocol, which the API server proxies as is to the node.
	t.Run("exec over a raw websocket", func(t *testing.T) {
		u := admin.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("streamer").Suffix("exec").
			Param("stderr", "1").Param("stdout", "1").Param("container", "main").
			Param("command", "echo").Param("command", "remote execution test").URL()
		out := readWebsocket(t, u, cfg, "channel.k8s.io", true)
		if !strings.Contains(out, "remote execution test") {
			t.Errorf("websocket exec: %q, want the command's output", out)
		}
	})
	// "Pods should support retrieving logs from the container over websockets".
	t.Run("logs over a raw websocket", func(t *testing.T) {
		u := admin.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("streamer").Suffix("log").
			Param("container", "main").URL()
		out := readWebsocket(t, u, cfg, "binary.k8s.io", false)
		if !strings.Contains(out, "container is alive") {
			t.Errorf("websocket logs: %q, want the container's output", out)
		}
	})
	// Attach: the running process's output, as it comes, until the client leaves.
	t.Run("attach over spdy", func(t *testing.T) {
		u := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("streamer").SubResource("attach").
			VersionedParams(&v1.PodAttachOptions{Container: "ticker", Stdout: true}, scheme.ParameterCodec).URL()
		ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		defer acancel()
		out := &untilWriter{want: "tick\ntick\n", done: acancel}
		err = ex.StreamWithContext(actx, remotecommand.StreamOptions{Stdout: out})
		if got := out.String(); !strings.Contains(got, "tick\ntick\n") {
			t.Errorf("attach: %q, %v; want the container's ticks", got, err)
		}
	})
	t.Run("kubectl exec", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cp.AdminKubeconfig(),
			"exec", "-i", "streamer", "-c", "main", "--", "/bin/sh", "-c", "cat; echo done")
		cmd.Stdin = strings.NewReader("typed\n")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "typed\ndone\n" {
			t.Errorf("kubectl exec -i: %q, %v", out, err)
		}
	})

	// A container's own stdin (stdinOnce) through kubectl run -i --rm, as the conformance spec
	// "Kubectl run --rm job" runs it: the input reaches cat, the end of input closes the
	// container's stdin, and the pod is deleted once the session ends.
	t.Run("kubectl run -i --rm", func(t *testing.T) {
		overrides := fmt.Sprintf(`{"apiVersion":"v1","spec":{"nodeName":%q,"automountServiceAccountToken":false,"terminationGracePeriodSeconds":1}}`, nodeName)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cp.AdminKubeconfig(),
			"run", "run-rm", "--image", peerrun.TestImage, "--image-pull-policy", "Never", "--restart", "Never",
			"--rm", "-i", "--overrides", overrides, "--", "/bin/sh", "-c", "cat && echo stdin closed")
		cmd.Stdin = strings.NewReader("abcd1234")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "abcd1234stdin closed") {
			t.Fatalf("kubectl run -i --rm: %q, %v", out, err)
		}
		poll(t, ctx, "pod run-rm deleted", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "run-rm", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
	// A container on a terminal, attached to as kubectl attach -it does from a terminal (tty,
	// no stderr): the shell reads what is typed and its exit ends the session.
	t.Run("attach to a terminal", func(t *testing.T) {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "tty", Namespace: "default"},
			Spec: v1.PodSpec{NodeName: nodeName, AutomountServiceAccountToken: ptr.To(false), RestartPolicy: v1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "sh", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh"},
					Stdin: true, TTY: true}}},
		}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, "pod tty Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
			p, err := admin.CoreV1().Pods("default").Get(ctx, "tty", metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning, err
		})
		u := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("tty").SubResource("attach").
			VersionedParams(&v1.PodAttachOptions{Container: "sh", Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec).URL()
		ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		defer acancel()
		err = ex.StreamWithContext(actx, remotecommand.StreamOptions{Stdin: strings.NewReader("echo answer-$((6*7))\nexit 3\n"), Stdout: &out, Tty: true})
		if !strings.Contains(out.String(), "answer-42") {
			t.Errorf("attach -it: %q, %v; want the shell's answer-42", out.String(), err)
		}
		poll(t, ctx, "the shell's exit 3", time.Minute, func(ctx context.Context) (bool, error) {
			p, err := admin.CoreV1().Pods("default").Get(ctx, "tty", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				return false, err
			}
			if code := p.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
				return false, fmt.Errorf("exit code %d, want 3", code)
			}
			return true, nil
		})
		if err := admin.CoreV1().Pods("default").Delete(ctx, "tty", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})

	// Port-forward to the pod's HTTP server, over SPDY and over websockets (SPDY tunneled,
	// as kubectl port-forward does first).
	pfURL := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("streamer").SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(pfURL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, dialer := range map[string]streamhttp.Dialer{
		"spdy":      spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, "POST", pfURL),
		"websocket": ws,
	} {
		t.Run("port-forward over "+name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			var pfOut, pfErr bytes.Buffer
			fw, err := portforward.NewForStreaming(dialer, []string{fmt.Sprintf("0:%d", streamPort)}, stop, ready, &pfOut, &pfErr)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("port-forward ended before it was ready: %v\n%s", err, pfErr.String())
			case <-ctx.Done():
				close(stop)
				t.Fatal(ctx.Err())
			}
			defer func() {
				close(stop)
				if err := <-done; err != nil {
					t.Errorf("port-forward: %v\n%s", err, pfErr.String())
				}
			}()
			ports, err := fw.GetPorts()
			if err != nil || len(ports) != 1 {
				t.Fatalf("ports %v, %v", ports, err)
			}
			for i := range 2 { // two connections over the one stream connection
				resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", ports[0].Local))
				if err != nil {
					t.Fatalf("GET %d through port-forward: %v\n%s", i, err, pfErr.String())
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != "hello through port-forward\n" {
					t.Errorf("GET %d through port-forward: %d %q", i, resp.StatusCode, body)
				}
			}
		})
	}
}

// readWebsocket opens a websocket to u as the e2e framework does and returns what it reads
// until the server closes it; channels strips the channel byte of each message, keeping
// stdout's (1) only.
func readWebsocket(t *testing.T, u *url.URL, cfg *rest.Config, protocol string, channels bool) string {
	t.Helper()
	ws, err := e2ewebsocket.OpenWebSocketForURL(u, cfg, []string{protocol})
	if err != nil {
		t.Fatalf("websocket to %s: %v", u, err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("websocket read: %v (so far %q)", err, buf.String())
		}
		if !channels {
			buf.Write(msg)
			continue
		}
		if len(msg) > 1 && msg[0] == 1 {
			buf.Write(msg[1:])
		}
	}
	return buf.String()
}

// untilWriter keeps what is written and calls done once it holds want.
type untilWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	done func()
}

func (w *untilWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.done()
	}
	return len(p), nil
}

func (w *untilWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
