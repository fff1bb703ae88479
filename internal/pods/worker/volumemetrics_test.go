package worker

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// volumeOps is a VolumeMetrics counting operations by "plugin operation failed".
type volumeOps struct {
	mu sync.Mutex
	n  map[string]int
}

func (v *volumeOps) VolumeOperation(plugin, operation string, _ time.Duration, failed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := plugin + " " + operation
	if failed {
		key += " failed"
	}
	v.n[key]++
}

func (v *volumeOps) counts() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.n)
}

// TestVolumeMetrics: each volume's setup is timed once for the pod (an object volume again
// when its files change), by the kubelet's plugin name; MountedVolumes counts what is set up
// until the pod's volumes are released.
func TestVolumeMetrics(t *testing.T) {
	f := newFakeRT()
	ops := &volumeOps{n: map[string]int{}}
	objs := testObjects()
	w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Objects = objs; o.VolumeMetrics = ops })
	pod := testPod("vm-1", v1.RestartPolicyNever, "app")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}},
	}
	mustSync(t, w, pod)
	mustSync(t, w, pod)
	want := map[string]int{"kubernetes.io/empty-dir volume_mount": 1, "kubernetes.io/host-path volume_mount": 1, "kubernetes.io/configmap volume_mount": 1}
	if got := ops.counts(); !maps.Equal(got, want) {
		t.Errorf("operations after two syncs %v, want %v", got, want)
	}
	if got := w.MountedVolumes(); !maps.Equal(got, map[string]int{"kubernetes.io/empty-dir": 1, "kubernetes.io/host-path": 1, "kubernetes.io/configmap": 1}) {
		t.Errorf("mounted %v", got)
	}
	// Each set-up volume is listed for its stats, by plugin, where it is on the node.
	wantStats := []StatsVolume{
		{Name: "scratch", Plugin: "kubernetes.io/empty-dir", Path: w.volumePath("vm-1", emptyDirPlugin, "scratch"), LocalEphemeral: true},
		{Name: "host", Plugin: "kubernetes.io/host-path", Path: pod.Spec.Volumes[1].HostPath.Path},
		{Name: "config", Plugin: "kubernetes.io/configmap", Path: w.volumePath("vm-1", "kubernetes.io/configmap", "config"), LocalEphemeral: true},
	}
	if got := w.StatsVolumes(pod); !slices.Equal(got, wantStats) {
		t.Errorf("stats volumes %+v, want %+v", got, wantStats)
	}
	if _, err := w.KillPod(t.Context(), pod, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.releaseVolumes("vm-1"); err != nil {
		t.Fatal(err)
	}
	if got := w.MountedVolumes(); len(got) != 0 {
		t.Errorf("mounted after release %v, want none", got)
	}
	if got := w.StatsVolumes(pod); len(got) != 0 {
		t.Errorf("stats volumes after release %+v, want none", got)
	}
}
