package podstats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
)

func TestVolumeSourceOf(t *testing.T) {
	for _, tc := range []struct {
		plugin string
		block  bool
		want   volumeSource
	}{
		{"kubernetes.io/empty-dir", false, sourceDu},
		{"kubernetes.io/configmap", false, sourceDu},
		{"kubernetes.io/secret", false, sourceDu},
		{"kubernetes.io/downward-api", false, sourceDu},
		{"kubernetes.io/projected", false, sourceDu},
		{"kubernetes.io/local-volume", false, sourceStatFS},
		{"kubernetes.io/csi", false, sourceCSI},
		{"kubernetes.io/host-path", false, sourceNone},
		{"kubernetes.io/image", false, sourceNone},
		{"", false, sourceNone},
		{"kubernetes.io/local-volume", true, sourceBlock},
		{"kubernetes.io/csi", true, sourceCSI},
		{"kubernetes.io/host-path", true, sourceNone},
	} {
		t.Run(fmt.Sprintf("%s block=%v", tc.plugin, tc.block), func(t *testing.T) {
			if got := volumeSourceOf(tc.plugin, tc.block); got != tc.want {
				t.Errorf("volumeSourceOf(%q, %v) = %d, want %d", tc.plugin, tc.block, got, tc.want)
			}
		})
	}
}

// volumeWorld is the pods, their volumes and what the filesystem and a CSI driver say of them.
type volumeWorld struct {
	mu       sync.Mutex
	pods     []eviction.ActivePod
	volumes  map[types.UID][]Volume
	fs       map[string]VolumeUsage // statfs by path
	du       map[string]eviction.DiskUsage
	csi      map[string]VolumeUsage
	csiErr   error
	observed []string
}

func (w *volumeWorld) ActivePods() []eviction.ActivePod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.pods)
}

func (w *volumeWorld) options() VolumeStatsOptions {
	return VolumeStatsOptions{
		Pods: w,
		Volumes: func(pod *v1.Pod) []Volume {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.volumes[pod.UID]
		},
		CSI: func(_ context.Context, path string) (VolumeUsage, string, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.csiErr != nil {
				return VolumeUsage{}, "csi.example.com", w.csiErr
			}
			u, ok := w.csi[path]
			if !ok {
				return VolumeUsage{}, "csi.example.com", errors.New("volume not published")
			}
			return u, "csi.example.com", nil
		},
		Observe: func(source string, _ time.Duration) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.observed = append(w.observed, source)
		},
		statFS: func(path string) (VolumeUsage, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			u, ok := w.fs[path]
			if !ok {
				return VolumeUsage{}, errors.New("statfs " + path + ": no such file or directory")
			}
			return u, nil
		},
		du: func(_ context.Context, path string, _ int) (eviction.DiskUsage, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.du[path], nil
		},
	}
}

// measurements counts the measurements observed.
func (w *volumeWorld) measurements() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.observed)
}

func volumePod(name string) eviction.ActivePod {
	return eviction.ActivePod{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}}
}

// TestVolumeStatsMeasure: each volume is measured by its plugin's way — du and statfs for
// emptyDir and object volumes, statfs for local, the driver for CSI, nothing for hostPath —
// local ephemeral ones listed first; a volume that cannot be measured, or whose driver
// cannot tell, is left out; a pod no longer active is forgotten.
func TestVolumeStatsMeasure(t *testing.T) {
	disk := VolumeUsage{Capacity: 1000, Available: 600, Used: 350, Inodes: 100, InodesFree: 70, InodesUsed: 30}
	w := &volumeWorld{
		pods: []eviction.ActivePod{volumePod("a"), volumePod("b")},
		volumes: map[types.UID][]Volume{
			"uid-a": {
				{Name: "data", Plugin: "kubernetes.io/csi", Path: "/pods/a/csi/pv-1/mount", Claim: "data-a"},
				{Name: "host", Plugin: "kubernetes.io/host-path", Path: "/srv"},
				{Name: "local", Plugin: "kubernetes.io/local-volume", Path: "/mnt/disk1", Claim: "local-a"},
				{Name: "scratch", Plugin: "kubernetes.io/empty-dir", Path: "/pods/a/scratch", LocalEphemeral: true},
				{Name: "token", Plugin: "kubernetes.io/projected", Path: "/pods/a/token"},
				{Name: "gone", Plugin: "kubernetes.io/empty-dir", Path: "/pods/a/gone", LocalEphemeral: true},
			},
			"uid-b": {{Name: "data", Plugin: "kubernetes.io/csi", Path: "/pods/b/csi/pv-2/mount", Claim: "data-b"}},
		},
		fs:  map[string]VolumeUsage{"/pods/a/scratch": disk, "/pods/a/token": disk, "/mnt/disk1": disk},
		du:  map[string]eviction.DiskUsage{"/pods/a/scratch": {Bytes: 4096, Inodes: 3}, "/pods/a/token": {Bytes: 8192, Inodes: 5}},
		csi: map[string]VolumeUsage{"/pods/a/csi/pv-1/mount": {Capacity: 5 << 30}},
	}
	synctest.Test(t, func(t *testing.T) {
		vs, err := NewVolumeStats(w.options())
		if err != nil {
			t.Fatal(err)
		}
		vs.Measure(t.Context())
		now := time.Now()
		got, ok := vs.Pod("uid-a")
		if !ok {
			t.Fatal("pod a not measured")
		}
		want := PodVolumeStats{Namespace: "ns", Name: "a", UID: "uid-a", Volumes: []VolumeStat{
			{Volume: w.volumes["uid-a"][3], At: now, VolumeUsage: VolumeUsage{Capacity: 1000, Available: 600, Used: 4096, Inodes: 100, InodesFree: 70, InodesUsed: 3}},
			{Volume: w.volumes["uid-a"][0], At: now, VolumeUsage: VolumeUsage{Capacity: 5 << 30}},
			{Volume: w.volumes["uid-a"][2], At: now, VolumeUsage: disk},
			{Volume: w.volumes["uid-a"][4], At: now, VolumeUsage: VolumeUsage{Capacity: 1000, Available: 600, Used: 8192, Inodes: 100, InodesFree: 70, InodesUsed: 5}},
		}}
		if got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID || !slices.Equal(got.Volumes, want.Volumes) {
			t.Errorf("pod a:\n got %+v\nwant %+v", got, want)
		}
		if b, ok := vs.Pod("uid-b"); !ok || len(b.Volumes) != 0 {
			t.Errorf("pod b, whose volume cannot be measured: %+v %v, want measured with no volumes", b, ok)
		}
		slices.Sort(w.observed)
		if want := []string{"csi.example.com", "csi.example.com", "du", "du", "du", "statfs"}; !slices.Equal(w.observed, want) {
			t.Errorf("observed sources %q, want %q", w.observed, want)
		}

		// A driver that cannot tell leaves its volumes out; pod b is gone.
		w.csiErr = ErrVolumeStatsNotSupported
		w.pods = w.pods[:1]
		time.Sleep(time.Second)
		vs.Measure(t.Context())
		got, _ = vs.Pod("uid-a")
		if len(got.Volumes) != 3 || slices.ContainsFunc(got.Volumes, func(s VolumeStat) bool { return s.Plugin == "kubernetes.io/csi" }) {
			t.Errorf("volumes with a driver that cannot tell: %+v", got.Volumes)
		}
		if !got.Volumes[0].At.Equal(now.Add(time.Second)) {
			t.Errorf("measured at %v, want %v", got.Volumes[0].At, now.Add(time.Second))
		}
		if _, ok := vs.Pod("uid-b"); ok {
			t.Error("pod b kept after it left")
		}
		if all := vs.Pods(); len(all) != 1 || all[0].UID != "uid-a" {
			t.Errorf("pods %+v", all)
		}
	})
}

// TestVolumeStatsRun: Run measures at once, then once per period.
func TestVolumeStatsRun(t *testing.T) {
	w := &volumeWorld{pods: []eviction.ActivePod{volumePod("a")},
		volumes: map[types.UID][]Volume{"uid-a": {{Name: "local", Plugin: "kubernetes.io/local-volume", Path: "/mnt/disk1"}}},
		fs:      map[string]VolumeUsage{"/mnt/disk1": {Capacity: 10}}}
	synctest.Test(t, func(t *testing.T) {
		vs, err := NewVolumeStats(w.options())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { vs.Run(ctx); close(done) }()
		synctest.Wait()
		if n := w.measurements(); n != 1 {
			t.Fatalf("measurements at start: %d, want 1", n)
		}
		time.Sleep(DefaultVolumeStatsPeriod - time.Nanosecond)
		synctest.Wait()
		if n := w.measurements(); n != 1 {
			t.Errorf("measurements before a period: %d, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := w.measurements(); n != 2 {
			t.Errorf("measurements after a period: %d, want 2", n)
		}
		cancel()
		<-done
	})
}

// TestVolumeStatsFilesystem: an emptyDir-like directory measured on the real filesystem:
// its files' blocks and inodes, its filesystem's capacity; a directory that is not there is
// not measured.
func TestVolumeStatsFilesystem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scratch")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	pod := volumePod("a")
	vs, err := NewVolumeStats(VolumeStatsOptions{Pods: &volumeWorld{pods: []eviction.ActivePod{pod}}, Volumes: func(*v1.Pod) []Volume {
		return []Volume{{Name: "scratch", Plugin: "kubernetes.io/empty-dir", Path: dir}, {Name: "missing", Plugin: "kubernetes.io/empty-dir", Path: dir + "-not-there"}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	vs.Measure(t.Context())
	got, _ := vs.Pod(pod.Pod.UID)
	if len(got.Volumes) != 1 || got.Volumes[0].Name != "scratch" {
		t.Fatalf("volumes %+v, want scratch only", got.Volumes)
	}
	u := got.Volumes[0].VolumeUsage
	// The blocks a file holds right after its write depend on the filesystem (delayed
	// allocation, compression); the directories hold some on every one.
	if u.InodesUsed != 3 || u.Used <= 0 || u.Capacity <= 0 || u.Available > u.Capacity || u.Inodes < u.InodesFree {
		t.Errorf("usage %+v: want 3 inodes, some bytes used, a filesystem's capacity", u)
	}
}

func TestNewVolumeStatsRefuses(t *testing.T) {
	if _, err := NewVolumeStats(VolumeStatsOptions{}); err == nil {
		t.Error("no pods or volumes: no error")
	}
	if _, err := NewVolumeStats(VolumeStatsOptions{Pods: &volumeWorld{}, Volumes: func(*v1.Pod) []Volume { return nil }, Period: -time.Second}); err == nil {
		t.Error("negative period: no error")
	}
}

// TestBlockVolumeStats: a local block volume's capacity is its device's size (the kubelet's
// metricsBlock: seek to the end), nothing else; a CSI block volume asks its driver; a device
// that cannot be opened leaves the volume out.
func TestBlockVolumeStats(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "loop7")
	if err := os.WriteFile(dev, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &volumeWorld{
		pods: []eviction.ActivePod{volumePod("a")},
		volumes: map[types.UID][]Volume{"uid-a": {
			{Name: "raw", Plugin: "kubernetes.io/local-volume", Path: dev, Claim: "raw-a", Block: true},
			{Name: "gone", Plugin: "kubernetes.io/local-volume", Path: filepath.Join(dir, "nodev"), Claim: "gone-a", Block: true},
			{Name: "disk", Plugin: "kubernetes.io/csi", Path: "/pods/a/volumeDevices/kubernetes.io~csi/pv-9", Claim: "disk-a", Block: true},
		}},
		csi: map[string]VolumeUsage{"/pods/a/volumeDevices/kubernetes.io~csi/pv-9": {Capacity: 5 << 30}},
	}
	synctest.Test(t, func(t *testing.T) {
		o := w.options()
		o.blockSize = nil // the real one
		vs, err := NewVolumeStats(o)
		if err != nil {
			t.Fatal(err)
		}
		vs.Measure(t.Context())
		got, _ := vs.Pod("uid-a")
		want := []VolumeStat{
			{Volume: w.volumes["uid-a"][0], At: time.Now(), VolumeUsage: VolumeUsage{Capacity: 3 << 20}},
			{Volume: w.volumes["uid-a"][2], At: time.Now(), VolumeUsage: VolumeUsage{Capacity: 5 << 30}},
		}
		if !slices.Equal(got.Volumes, want) {
			t.Errorf("volumes\n got %+v\nwant %+v", got.Volumes, want)
		}
		slices.Sort(w.observed)
		if want := []string{"block", "block", "csi.example.com"}; !slices.Equal(w.observed, want) {
			t.Errorf("observed sources %q, want %q", w.observed, want)
		}
	})
}
