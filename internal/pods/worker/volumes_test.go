package worker

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestVolumesBeforeSandbox: the pod's volumes are set up before its sandbox is made, as the
// kubelet's SyncPod waits for every volume before the runtime makes the sandbox: a hostPath
// that fails its type check leaves the pod in ContainerCreating with no sandbox and one
// FailedMount event in the kubelet's words, over several syncs; once the path is there the pod
// starts.
func TestVolumesBeforeSandbox(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		path    string
		typ     v1.HostPathType
		fix     func(path string) error // makes the path right; nil: the pod starts at once
		wantErr string                  // the FailedMount event's message
	}{
		{name: "missing socket", path: filepath.Join(dir, "docker.sock"), typ: v1.HostPathSocket,
			fix: func(p string) error { _, err := net.Listen("unix", p); return err },
			wantErr: `MountVolume.SetUp failed for volume "host" : hostPath type check failed, ` + filepath.Join(dir, "docker.sock") +
				` is not a socket file, unable to determine its type: path "` + filepath.Join(dir, "docker.sock") + `" does not exist`},
		{name: "directory that is a file", path: file, typ: v1.HostPathDirectory,
			wantErr: `MountVolume.SetUp failed for volume "host" : hostPath type check failed: ` + file + ` is not a directory, it's a File`},
		{name: "FileOrCreate without its parent", path: filepath.Join(dir, "parent", "lock"), typ: v1.HostPathFileOrCreate,
			fix:     func(p string) error { return os.Mkdir(filepath.Dir(p), 0o755) },
			wantErr: `MountVolume.SetUp failed for volume "host" : open ` + filepath.Join(dir, "parent", "lock") + `: no such file or directory`},
		{name: "DirectoryOrCreate", path: filepath.Join(dir, "made", "here"), typ: v1.HostPathDirectoryOrCreate},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRT()
			w, events := newTestWorkerWith(t, f, "", nil)
			pod := testPod("hp-"+string(rune('a'+i)), v1.RestartPolicyAlways, "app")
			pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: tc.path, Type: &tc.typ}}}}
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/host"}}
			if tc.wantErr == "" {
				if st := mustSync(t, w, pod); !running(st) {
					t.Errorf("status %+v, want running", st)
				}
				return
			}
			for range 2 {
				st := mustSync(t, w, pod)
				if wt := st.ContainerStatuses[0].State.Waiting; wt == nil || wt.Reason != lifecycle.ReasonContainerCreating || st.Phase != v1.PodPending {
					t.Errorf("status %s %+v, want Pending, ContainerCreating", st.Phase, st.ContainerStatuses[0].State)
				}
			}
			if n := f.callsTo("RunPodSandbox"); n != 0 {
				t.Errorf("%d sandboxes made before the volume was set up", n)
			}
			if got, want := drain(events), []string{"Warning FailedMount " + tc.wantErr}; !reflect.DeepEqual(got, want) {
				t.Errorf("events %q, want once %q", got, want)
			}
			if tc.fix == nil {
				return
			}
			if err := tc.fix(tc.path); err != nil {
				t.Fatal(err)
			}
			if st := mustSync(t, w, pod); !running(st) || f.callsTo("RunPodSandbox") != 1 {
				t.Errorf("with the path there: status %+v, %d sandboxes", st, f.callsTo("RunPodSandbox"))
			}
		})
	}
}

// TestKubeletVolumeLayout: with KubeletPodsDir the pod's emptyDir and object volumes live
// where the kubelet keeps them, <pods dir>/<uid>/volumes/kubernetes.io~<plugin>/<name>, and
// the containers mount them from there: what the kubelet left in an emptyDir is the pod's
// data, and a kubelet taking over finds slicelet's. A volume already set up in slicelet's own
// layout stays there. Forgetting the pod removes its directory in the kubelet's layout.
func TestKubeletVolumeLayout(t *testing.T) {
	f := newFakeRT()
	kubeletPods := t.TempDir()
	w, _ := newTestWorkerWith(t, f, t.TempDir(), func(o *Options) { o.Objects = testObjects(); o.KubeletPodsDir = kubeletPods })
	pod := testPod("kl-1", v1.RestartPolicyAlways, "app")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}},
		{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "db"}}},
		{Name: "all", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("app")}}}}}},
		{Name: "old", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	for _, v := range pod.Spec.Volumes {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
	// The kubelet's emptyDir with its data, and a volume of slicelet's own layout.
	kubeletScratch := filepath.Join(kubeletPods, "kl-1", "volumes", "kubernetes.io~empty-dir", "scratch")
	if err := os.MkdirAll(kubeletScratch, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kubeletScratch, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(w.podDir("kl-1"), "volumes", "old")
	if err := os.MkdirAll(own, 0o750); err != nil {
		t.Fatal(err)
	}
	if st := mustSync(t, w, pod); !running(st) {
		t.Fatalf("not running: %+v", st)
	}
	want := map[string]string{
		"/mnt/scratch": kubeletScratch,
		"/mnt/config":  filepath.Join(kubeletPods, "kl-1", "volumes", "kubernetes.io~configmap", "config"),
		"/mnt/creds":   filepath.Join(kubeletPods, "kl-1", "volumes", "kubernetes.io~secret", "creds"),
		"/mnt/all":     filepath.Join(kubeletPods, "kl-1", "volumes", "kubernetes.io~projected", "all"),
		"/mnt/old":     own,
	}
	got := map[string]string{}
	f.mu.Lock()
	for _, cfg := range f.configs {
		for _, m := range cfg.GetMounts() {
			if strings.HasPrefix(m.ContainerPath, "/mnt/") {
				got[m.ContainerPath] = m.HostPath
			}
		}
	}
	f.mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts %v,\n want %v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(kubeletScratch, "data")); err != nil || string(b) != "kept" {
		t.Errorf("the kubelet's emptyDir data: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(want["/mnt/config"], "mode")); err != nil || string(b) != "fast" {
		t.Errorf("configMap volume in the kubelet's layout: %q, %v", b, err)
	}
	if err := w.Forget(t.Context(), "kl-1"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(kubeletPods, "kl-1"), w.podDir("kl-1")} {
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Forget: %v, want it gone", dir, err)
		}
	}
}
