package worker

import (
	"context"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// presentImages is an ImageService whose images are all present, run as root.
type presentImages struct{}

func (presentImages) ImageStatus(_ context.Context, image *runtimeapi.ImageSpec) (string, error) {
	return "sha256:" + image.Image, nil
}
func (presentImages) ImageUser(context.Context, *runtimeapi.ImageSpec) (*int64, string, error) {
	return nil, "", nil
}
func (presentImages) PullImage(_ context.Context, image *runtimeapi.ImageSpec, _ *runtimeapi.PodSandboxConfig) (string, uint64, error) {
	return "sha256:" + image.Image, 0, nil
}

// TestTerminationMessage: with a runtime of images each run gets an empty, world-writable file at its
// terminationMessagePath; once it exited, its terminated state's message is what the file
// holds, or with FallbackToLogsOnError and a failure the end of its log (the Container Runtime
// blackbox conformance specs).
func TestTerminationMessage(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		policy  v1.TerminationMessagePolicy
		write   string
		logs    string
		code    int32
		wantMsg string
	}{
		{name: "from the file", path: "/dev/termination-log", policy: v1.TerminationMessageReadFile, write: "OK", wantMsg: "OK"},
		{name: "from a custom path, failed", path: "/dev/termination-custom-log", policy: v1.TerminationMessageReadFile, write: "DONE", code: 1, wantMsg: "DONE"},
		{name: "fallback: succeeded, empty", path: "/dev/termination-log", policy: v1.TerminationMessageFallbackToLogsOnError, logs: "ignored\n"},
		{name: "fallback: failed, from the log", path: "/dev/termination-log", policy: v1.TerminationMessageFallbackToLogsOnError, logs: "DONE", code: 1, wantMsg: "DONE"},
		{name: "fallback: failed, the file wins", path: "/dev/termination-log", policy: v1.TerminationMessageFallbackToLogsOnError, write: "file", logs: "log", code: 1, wantMsg: "file"},
		{name: "policy File: the log is not read", path: "/dev/termination-log", policy: v1.TerminationMessageReadFile, logs: "log", code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRT()
			f.logs = tt.logs
			w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Images = presentImages{} })
			pod := testPod("tm-1", v1.RestartPolicyNever, "app")
			pod.Spec.Containers[0].Image = "busybox"
			pod.Spec.Containers[0].TerminationMessagePath = tt.path
			pod.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			mustSync(t, w, pod)
			var host string
			for _, cfg := range f.configs {
				for _, m := range cfg.Mounts {
					if m.ContainerPath == tt.path {
						host = m.HostPath
					}
				}
			}
			if host == "" {
				t.Fatalf("no mount at %s", tt.path)
			}
			if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
				t.Fatalf("termination file %v, %v: want empty, mode 0666", fi, err)
			}
			if tt.write != "" {
				if err := os.WriteFile(host, []byte(tt.write), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			reason := lifecycle.ReasonCompleted
			if tt.code != 0 {
				reason = lifecycle.ReasonError
			}
			f.exit("tm-1", "app", tt.code, reason)
			st := mustSync(t, w, pod)
			term := st.ContainerStatuses[0].State.Terminated
			if term == nil || term.Message != tt.wantMsg {
				t.Errorf("terminated state %+v, want message %q", term, tt.wantMsg)
			}
		})
	}
}

// TestNoTerminationFileWithoutImages: the systemd runtime's containers are host commands: no
// termination message file is mounted into them.
func TestNoTerminationFileWithoutImages(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("tm-2", v1.RestartPolicyNever, "app")
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	mustSync(t, w, pod)
	for _, cfg := range f.configs {
		if len(cfg.Mounts) != 0 {
			t.Errorf("mounts %v, want none", cfg.Mounts)
		}
	}
}
