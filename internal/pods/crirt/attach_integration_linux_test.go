package crirt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// TestIntegrationAttachStdinTTY runs containers with stdin, stdinOnce and tty against containerd
// and attaches to them through its streaming server as the kubelet API's /attach proxies
// kubectl to it: a shell on a terminal reads what the client types and its output (echo
// included) comes back on the one stream a terminal has and is logged as stdout; without a
// terminal, stdinOnce closes the container's standard input when the first client leaves, so
// the process reads its end of file and exits.
func TestIntegrationAttachStdinTTY(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)

	shell := v1.Container{Name: "shell", Image: testImage, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh"},
		Stdin: true, StdinOnce: true, TTY: true}
	reader := container("reader", "read line; echo got:$line; cat >/dev/null; echo stdin-closed")
	reader.Stdin, reader.StdinOnce = true, true
	pod := itPod("attach", "it-attach-1", shell, reader)
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	slice := it.slice(t, pod)
	syncUntil(t, rt, pod, slice, "both running", func(st v1.PodStatus, err error) bool {
		return running(st, err) && len(st.ContainerStatuses) == 2 && st.ContainerStatuses[1].State.Running != nil
	})

	// attach opens an attach session on the container's streaming URL over a websocket
	// (v4.channel.k8s.io: a frame's first byte is its channel, 0 stdin, 1 stdout, 2 stderr, 3
	// the status), as the kubelet API proxies kubectl to it. The request's tty is ignored:
	// the container's own decides; as kubectl does, a client of a container on a terminal asks
	// for no stderr (a terminal has one stream: the runtime refuses both, "tty and stderr
	// cannot both be true", with the kubelet as with slicelet).
	attach := func(t *testing.T, name string, tty bool) *websocket.Conn {
		t.Helper()
		u, err := rt.back.StreamURL(t.Context(), pod, pods.StreamRequest{Kind: pods.StreamAttach, Namespace: pod.Namespace,
			Pod: pod.Name, Container: name, Stdin: true, Stdout: true, Stderr: !tty})
		if err != nil {
			t.Fatalf("StreamURL: %v", err)
		}
		ws := *u
		ws.Scheme = "ws"
		cfg, err := websocket.NewConfig(ws.String(), "http://"+u.Host)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Protocol = []string{"v4.channel.k8s.io"}
		conn, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatalf("attach to %s: %v", name, err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		return conn
	}
	send := func(t *testing.T, conn *websocket.Conn, in string) {
		t.Helper()
		if err := websocket.Message.Send(conn, append([]byte{0}, in...)); err != nil {
			t.Fatalf("stdin: %v", err)
		}
	}
	// readUntil reads the session's output (stdout and stderr) until it contains want or the
	// session ends.
	readUntil := func(conn *websocket.Conn, want string) string {
		var out strings.Builder
		for !strings.Contains(out.String(), want) {
			var frame []byte
			if err := websocket.Message.Receive(conn, &frame); err != nil {
				break
			}
			if len(frame) > 1 && (frame[0] == 1 || frame[0] == 2) {
				out.Write(frame[1:])
			}
		}
		return out.String()
	}

	t.Run("shell on a terminal", func(t *testing.T) {
		conn := attach(t, "shell", true)
		defer conn.Close()
		send(t, conn, "echo answer-$((6*7))\nexit 3\n")
		// exit ends the shell, which ends the session.
		if out := readUntil(conn, "\x00never"); !strings.Contains(out, "answer-42") {
			t.Errorf("attach output %q, want the shell's answer-42", out)
		}
		st := syncUntil(t, rt, pod, slice, "shell exited", func(st v1.PodStatus, err error) bool {
			return err == nil && len(st.ContainerStatuses) == 2 && st.ContainerStatuses[0].State.Terminated != nil
		})
		if code := st.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
			t.Errorf("shell exit code %d, want 3 (its exit command)", code)
		}
		// A terminal has one stream: everything is logged as stdout, the echo of the input
		// included.
		path := filepath.Join(it.logs, "default_attach_it-attach-1", "shell", "0.log")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), " stdout ") || strings.Contains(string(raw), " stderr ") || !strings.Contains(string(raw), "answer-42") {
			t.Errorf("CRI log %s = %q, want the session on stdout only", path, raw)
		}
		var logs bytes.Buffer
		if err := rt.Logs(t.Context(), pod, "shell", pods.LogOptions{}, &logs); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "echo answer-$((6*7))") || !strings.Contains(logs.String(), "answer-42") {
			t.Errorf("Logs = %q, want the session", logs.String())
		}
	})

	t.Run("stdinOnce without a terminal", func(t *testing.T) {
		conn := attach(t, "reader", false)
		send(t, conn, "hello\n")
		if out := readUntil(conn, "got:hello"); !strings.Contains(out, "got:hello") {
			t.Errorf("attach output %q, want got:hello", out)
		}
		// The client leaves: with stdinOnce the runtime closes the container's standard input.
		conn.Close()
		st := syncUntil(t, rt, pod, slice, "reader exited", func(st v1.PodStatus, err error) bool {
			return err == nil && len(st.ContainerStatuses) == 2 && st.ContainerStatuses[1].State.Terminated != nil
		})
		if code := st.ContainerStatuses[1].State.Terminated.ExitCode; code != 0 {
			t.Errorf("reader exit code %d, want 0 (it read its end of file)", code)
		}
		var logs bytes.Buffer
		if err := rt.Logs(t.Context(), pod, "reader", pods.LogOptions{}, &logs); err != nil {
			t.Fatal(err)
		}
		if got, want := logs.String(), "got:hello\nstdin-closed\n"; got != want {
			t.Errorf("Logs = %q, want %q (the client's line, then the end of file stdinOnce gives when it leaves)", got, want)
		}
	})

	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}
