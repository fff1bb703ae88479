package worker

import (
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fakeMounter records tmpfs mounts by directory, and devices' mounts (device, fstype and
// options) by directory.
type fakeMounter struct {
	mu      sync.Mutex
	mounted map[string]int64
	mounts  int
	devices map[string]string
}

func (m *fakeMounter) FormatAndMount(device, dir, fstype string, options []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.devices == nil {
		m.devices = map[string]string{}
	}
	m.devices[dir] = device + " " + fstype + " " + strings.Join(options, ",")
	m.mounted[dir] = 0
	m.mounts++
	return nil
}

func (m *fakeMounter) MountTmpfs(dir string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounted[dir] = size
	m.mounts++
	return nil
}

func (m *fakeMounter) Unmount(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mounted, dir)
	return nil
}

func (m *fakeMounter) IsMountPoint(dir string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounted[dir]
	return ok, nil
}

// TestMemoryVolume: a memory-backed emptyDir is a tmpfs mounted once, sized to the pod's memory
// limit, and unmounted when the pod is forgotten (the Container Runtime "should run with the
// expected status" conformance spec's volume).
func TestMemoryVolume(t *testing.T) {
	f := newFakeRT()
	m := &fakeMounter{mounted: map[string]int64{}}
	w, _ := newTestWorkerWith(t, f, "", func(o *Options) {
		o.Mounter = m
		o.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("4Gi")}
	})
	pod := testPod("mv-1", v1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	mustSync(t, w, pod)
	mustSync(t, w, pod)
	want := map[string]int64{w.volumePath("mv-1", emptyDirPlugin, "mem"): 256 << 20}
	if !maps.Equal(m.mounted, want) || m.mounts != 1 {
		t.Errorf("mounted %v (%d mounts), want %v once", m.mounted, m.mounts, want)
	}
	if _, err := w.KillPod(t.Context(), pod, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Forget(t.Context(), "mv-1"); err != nil {
		t.Fatal(err)
	}
	if len(m.mounted) != 0 {
		t.Errorf("still mounted after Forget: %v", slices.Collect(maps.Keys(m.mounted)))
	}
}

// TestEmptyDirMode: with a runtime of images an emptyDir is 0777, with an fsGroup 0777 and
// setgid in that group (the EmptyDir conformance specs' "-rwxrwxrwx").
func TestEmptyDirMode(t *testing.T) {
	tests := []struct {
		name    string
		fsGroup *int64
		want    fs.FileMode
	}{
		{name: "no fsGroup", want: fs.ModeDir | 0o777},
		{name: "fsGroup", fsGroup: new(int64(os.Getgid())), want: fs.ModeDir | fs.ModeSetgid | 0o777},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRT()
			w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Images = presentImages{} })
			pod := testPod("em-1", v1.RestartPolicyNever, "app")
			pod.Spec.Containers[0].Image = "busybox"
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tt.fsGroup}
			pod.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
			mustSync(t, w, pod)
			fi, err := os.Stat(w.volumePath("em-1", emptyDirPlugin, "v"))
			if err != nil || fi.Mode() != tt.want {
				t.Errorf("mode %v, %v; want %v", fi.Mode(), err, tt.want)
			}
		})
	}
}
