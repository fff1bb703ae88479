package crirt

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

// The fake's streaming server answers every request with a URL naming it.

func (f *fakeCRI) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, req)
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:1234/exec/token1"}, nil
}

func (f *fakeCRI) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, req)
	return &runtimeapi.AttachResponse{Url: "http://127.0.0.1:1234/attach/token2"}, nil
}

func (f *fakeCRI) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, req)
	if len(req.Port) > 0 && req.Port[0] == 1 {
		return &runtimeapi.PortForwardResponse{Url: "/relative"}, nil
	}
	return &runtimeapi.PortForwardResponse{Url: "http://127.0.0.1:1234/portforward/token3"}, nil
}

func (f *fakeCRI) ExecSync(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, req)
	return f.execSync, nil
}

// TestStreamURL: which CRI request each streaming request becomes, on a pod of two running
// containers, and the kubelet's errors for what it cannot find.
func TestStreamURL(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"), app("side"))
	e.sync(t, pod)
	ids := map[string]string{}
	var sandbox string
	e.cri.mu.Lock()
	for id, c := range e.cri.containers {
		ids[c.c.Metadata.Name] = id
		sandbox = c.c.PodSandboxId
	}
	e.cri.mu.Unlock()
	exec := pods.StreamRequest{Kind: pods.StreamExec, Namespace: "default", Pod: "web", Container: "main", Command: []string{"ls", "-l"}, Stdout: true, Stderr: true}
	tests := []struct {
		name    string
		req     pods.StreamRequest
		want    proto.Message // nil: no streaming call
		wantURL string
		wantErr string
	}{
		{name: "exec", req: exec, want: &runtimeapi.ExecRequest{ContainerId: ids["main"], Cmd: []string{"ls", "-l"}, Stdout: true, Stderr: true},
			wantURL: "http://127.0.0.1:1234/exec/token1"},
		{name: "exec with the pod's UID", req: with(exec, func(r *pods.StreamRequest) {
			r.UID = "u1"
			r.Container = "side"
			r.Stdin, r.TTY, r.Stderr = true, true, false
		}),
			want:    &runtimeapi.ExecRequest{ContainerId: ids["side"], Cmd: []string{"ls", "-l"}, Stdin: true, Stdout: true, Tty: true},
			wantURL: "http://127.0.0.1:1234/exec/token1"},
		{name: "exec with another UID", req: with(exec, func(r *pods.StreamRequest) { r.UID = "u2" }), wantErr: `container not found ("main")`},
		{name: "exec in an unknown container", req: with(exec, func(r *pods.StreamRequest) { r.Container = "nope" }), wantErr: `container not found ("nope")`},
		{name: "attach takes the container's tty, not the request's",
			req:     pods.StreamRequest{Kind: pods.StreamAttach, Namespace: "default", Pod: "web", Container: "main", Stdout: true, TTY: true},
			want:    &runtimeapi.AttachRequest{ContainerId: ids["main"], Stdout: true},
			wantURL: "http://127.0.0.1:1234/attach/token2"},
		{name: "port-forward with websocket ports", req: pods.StreamRequest{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web", Ports: []int32{80, 8080}},
			want: &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: []int32{80, 8080}}, wantURL: "http://127.0.0.1:1234/portforward/token3"},
		{name: "port-forward over SPDY names no ports", req: pods.StreamRequest{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web", UID: "u1"},
			want: &runtimeapi.PortForwardRequest{PodSandboxId: sandbox}, wantURL: "http://127.0.0.1:1234/portforward/token3"},
		{name: "port-forward with another UID", req: pods.StreamRequest{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web", UID: "u2"},
			wantErr: `pod not found ("web_default")`},
		{name: "a relative URL from the runtime", req: pods.StreamRequest{Kind: pods.StreamPortForward, Namespace: "default", Pod: "web", Ports: []int32{1}},
			want: &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: []int32{1}}, wantErr: `streaming url "/relative": want an absolute http or https URL`},
		{name: "an unknown kind", req: pods.StreamRequest{Kind: "run"}, wantErr: `stream kind "run"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.cri.mu.Lock()
			e.cri.streams = nil
			e.cri.mu.Unlock()
			u, err := e.back.StreamURL(t.Context(), pod, tc.req)
			e.cri.mu.Lock()
			got := e.cri.streams
			e.cri.mu.Unlock()
			if tc.want == nil && len(got) > 0 || tc.want != nil && (len(got) != 1 || !proto.Equal(got[0], tc.want)) {
				t.Errorf("runtime got %v, want %v", got, tc.want)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || u.String() != tc.wantURL {
				t.Fatalf("url %v, %v; want %s", u, err, tc.wantURL)
			}
		})
	}

	// Port-forward goes to a ready sandbox before a newer one that is not (the kubelet's
	// getSandboxIDByPodUID); a pod without sandboxes is an error.
	other := fakePod("u3", v1.RestartPolicyAlways, app("main"))
	e.cri.mu.Lock()
	labels := map[string]string{worker.LabelManaged: "true", worker.LabelPodUID: "u3"}
	e.cri.sandboxes["sb-old-ready"] = &fakeSandbox{sb: &runtimeapi.PodSandbox{Id: "sb-old-ready", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1, Labels: labels}}
	e.cri.sandboxes["sb-new-notready"] = &fakeSandbox{sb: &runtimeapi.PodSandbox{Id: "sb-new-notready", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 2, Labels: labels}}
	e.cri.streams = nil
	e.cri.mu.Unlock()
	if _, err := e.back.StreamURL(t.Context(), other, pods.StreamRequest{Kind: pods.StreamPortForward}); err != nil {
		t.Fatal(err)
	}
	e.cri.mu.Lock()
	got := e.cri.streams
	e.cri.mu.Unlock()
	if want := (&runtimeapi.PortForwardRequest{PodSandboxId: "sb-old-ready"}); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("port-forward with a ready and a newer sandbox: %v, want %v", got, want)
	}
	if _, err := e.back.StreamURL(t.Context(), fakePod("u4", v1.RestartPolicyAlways, app("main")), pods.StreamRequest{Kind: pods.StreamPortForward}); err == nil || !strings.Contains(err.Error(), "pod u4: no pod sandbox found") {
		t.Errorf("port-forward to a pod without sandboxes: %v", err)
	}

	// RunInContainer: ExecSync, stdout then stderr; a non-zero exit is an error.
	for _, tc := range []struct {
		name    string
		resp    *runtimeapi.ExecSyncResponse
		want    string
		wantErr string
	}{
		{name: "exit 0", resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("out\n"), Stderr: []byte("err\n")}, want: "out\nerr\n"},
		{name: "exit 3", resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("out\n"), Stderr: []byte("bad\n"), ExitCode: 3}, want: "out\nbad\n",
			wantErr: "command 'cat /etc/hostname' exited with 3: bad"},
	} {
		t.Run("run "+tc.name, func(t *testing.T) {
			e.cri.mu.Lock()
			e.cri.execSync, e.cri.streams = tc.resp, nil
			e.cri.mu.Unlock()
			out, err := e.back.RunInContainer(t.Context(), pod, "main", []string{"cat", "/etc/hostname"})
			if string(out) != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("RunInContainer = %q, %v; want %q, %q", out, err, tc.want, tc.wantErr)
			}
			e.cri.mu.Lock()
			defer e.cri.mu.Unlock()
			want := &runtimeapi.ExecSyncRequest{ContainerId: ids["main"], Cmd: []string{"cat", "/etc/hostname"}}
			if len(e.cri.streams) != 1 || !proto.Equal(e.cri.streams[0], want) {
				t.Errorf("runtime got %v, want %v", e.cri.streams, want)
			}
		})
	}
}

func with(r pods.StreamRequest, f func(*pods.StreamRequest)) pods.StreamRequest {
	f(&r)
	return r
}
