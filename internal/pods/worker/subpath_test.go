package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestSubPathMounts: a subPathExpr expanded from the container's env mounts that directory of
// the volume, created; an unusable one holds the container with CreateContainerConfigError
// (the Variable Expansion conformance specs).
func TestSubPathMounts(t *testing.T) {
	tests := []struct {
		name    string
		env     []v1.EnvVar
		expr    string
		link    string // a symbolic link "escape" in the volume pointing there, made first
		want    string // the mount's host path, relative to the volume
		wantErr string // the waiting message's start
	}{
		{name: "expanded and created", env: []v1.EnvVar{{Name: "A", Value: "mypath"}, {Name: "POD_NAME", Value: "p"}}, expr: "$(A)/$(POD_NAME)", want: "mypath/p"},
		{name: "missing variable", env: []v1.EnvVar{{Name: "POD_NAME", Value: "p"}}, expr: "$(A)/$(POD_NAME)",
			wantErr: `container app: volume mount "work": missing value for A`},
		{name: "backsteps", env: []v1.EnvVar{{Name: "POD_NAME", Value: ".."}}, expr: "$(POD_NAME)",
			wantErr: "container app: volume mount \"work\": unable to provision SubPath `..`: must not contain '..'"},
		{name: "absolute", env: []v1.EnvVar{{Name: "POD_NAME", Value: "/tmp"}}, expr: "$(POD_NAME)",
			wantErr: "container app: volume mount \"work\": error SubPath `/tmp` must not be an absolute path"},
		{name: "a link out of the volume", expr: "escape/x", link: "/",
			wantErr: `failed to create subPath directory for volumeMount "work" of container "app": subPath "escape/x" leaves its volume`},
		{name: "a link inside the volume", expr: "escape/x", link: "inner", want: "inner/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRT()
			dir := t.TempDir()
			w, _ := newTestWorker(t, f, dir)
			pod := testPod("sp-1", v1.RestartPolicyNever, "app")
			pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			pod.Spec.Containers[0].Env = tt.env
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "work", MountPath: "/sub", SubPathExpr: tt.expr}, {Name: "work", MountPath: "/all"}}
			vol := w.volumePath("sp-1", emptyDirPlugin, "work")
			if tt.link != "" {
				if err := os.MkdirAll(filepath.Join(vol, "inner"), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tt.link, filepath.Join(vol, "escape")); err != nil {
					t.Fatal(err)
				}
			}
			st := mustSync(t, w, pod)
			if tt.wantErr != "" {
				wt := st.ContainerStatuses[0].State.Waiting
				if wt == nil || wt.Reason != lifecycle.ReasonCreateContainerConfigError || !strings.HasPrefix(wt.Message, tt.wantErr) {
					t.Errorf("state %+v, want CreateContainerConfigError %q", st.ContainerStatuses[0].State, tt.wantErr)
				}
				if _, err := os.Stat("/x"); err == nil && tt.link == "/" {
					t.Error("a directory was made outside the volume")
				}
				return
			}
			if len(f.configs) != 1 {
				t.Fatalf("%d containers created, want 1", len(f.configs))
			}
			for _, cfg := range f.configs {
				realVol, _ := filepath.EvalSymlinks(vol)
				want := map[string]string{"/sub": filepath.Join(realVol, tt.want), "/all": vol}
				for _, m := range cfg.Mounts {
					if want[m.ContainerPath] != m.HostPath {
						t.Errorf("mount %s from %s, want %s", m.ContainerPath, m.HostPath, want[m.ContainerPath])
					}
				}
				if fi, err := os.Stat(want["/sub"]); err != nil || !fi.IsDir() {
					t.Errorf("sub-path not created: %v", err)
				}
			}
		})
	}
}
