package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods/csi"
)

// fakeCSI is the CSI plugin as the worker sees it: it publishes each volume at a directory of
// its own and records the calls.
type fakeCSI struct {
	dir       string
	setUps    []csi.Volume
	tearDown  []string
	setUpErr  error
	downErr   error
	republish bool
	expands   []string // NodeExpand calls: handle, block, size
	expandErr error
}

func (f *fakeCSI) SetUp(_ context.Context, pod *v1.Pod, vol csi.Volume) (string, error) {
	f.setUps = append(f.setUps, vol)
	if f.setUpErr != nil {
		return "", f.setUpErr
	}
	p := filepath.Join(f.dir, string(pod.UID), vol.SpecName)
	return p, os.MkdirAll(p, 0o750)
}

func (f *fakeCSI) SetUpBlock(_ context.Context, pod *v1.Pod, vol csi.Volume) (string, error) {
	f.setUps = append(f.setUps, vol)
	if f.setUpErr != nil {
		return "", f.setUpErr
	}
	return filepath.Join(f.dir, string(pod.UID), "devices", vol.SpecName), nil
}

func (f *fakeCSI) NodeExpand(_ context.Context, _ *v1.Pod, vol csi.Volume, block bool, size resource.Quantity) error {
	f.expands = append(f.expands, fmt.Sprintf("%s block=%v %s", vol.Handle, block, size.String()))
	return f.expandErr
}

func (f *fakeCSI) RequiresRepublish(string) bool { return f.republish }

func (f *fakeCSI) TearDown(_ context.Context, uid string) error {
	f.tearDown = append(f.tearDown, uid)
	return f.downErr
}

// TestClusterPodCSI: a cluster pod's CSI volumes — a claim bound to a CSI persistent volume
// and an inline csi volume — are set up once through the CSI plugin and mounted from the
// paths it returns (the inline one read-only as it says); a failure waits with FailedMount
// and starts nothing; the pod's end tears them down, and a teardown that fails keeps the
// pod's volumes.
func TestClusterPodCSI(t *testing.T) {
	f := newFakeRT()
	cl := &fakeCluster{
		claims: map[string]*v1.PersistentVolumeClaim{"default/data-0": {ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid"},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
		volumes: map[string]*v1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{UID: "claim-uid"},
				PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "vol-1"}}}}},
	}
	plugin := &fakeCSI{dir: t.TempDir(), setUpErr: errors.New("driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers")}
	w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI = cl, plugin })
	pod := clusterPod("csi-1")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "hostpath.csi.k8s.io", ReadOnly: ptr(true)}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "scratch", MountPath: "/scratch"}}

	st := mustSync(t, w, pod)
	if running(st) || f.callsTo("CreateContainer") != 0 {
		t.Fatalf("a pod whose CSI driver is not registered started: %+v", st)
	}
	want := []string{
		`Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: MountVolume.SetUp failed for volume "pv-1" : driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers`,
		`Warning FailedMount MountVolume.SetUp failed for volume "scratch" : driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers`,
	}
	if got := drain(events); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	plugin.setUpErr, plugin.setUps = nil, nil
	if st := mustSync(t, w, pod); !running(st) {
		t.Fatalf("not running once the driver is there: %+v", st)
	}
	if len(plugin.setUps) != 2 || plugin.setUps[0].SpecName != "pv-1" || plugin.setUps[0].Handle != "vol-1" ||
		plugin.setUps[1].SpecName != "scratch" || plugin.setUps[1].Handle != csi.EphemeralHandle("csi-1", "scratch") {
		t.Errorf("set ups %+v", plugin.setUps)
	}
	mounts := map[string]bool{}
	for _, m := range f.onlyConfig(t).Mounts {
		mounts[m.ContainerPath+"="+m.HostPath] = m.Readonly
	}
	for path, ro := range map[string]bool{
		"/data=" + filepath.Join(plugin.dir, "csi-1", "pv-1"):       false,
		"/scratch=" + filepath.Join(plugin.dir, "csi-1", "scratch"): true,
	} {
		if got, ok := mounts[path]; !ok || got != ro {
			t.Errorf("mounts %v: want %s read-only %v", mounts, path, ro)
		}
	}
	mustSync(t, w, pod)
	if len(plugin.setUps) != 2 {
		t.Errorf("volumes set up again at a later sync: %d set ups", len(plugin.setUps))
	}
	wantStats := []StatsVolume{
		{Name: "data", Plugin: "kubernetes.io/csi", Path: filepath.Join(plugin.dir, "csi-1", "pv-1"), Claim: "data-0"},
		{Name: "scratch", Plugin: "kubernetes.io/csi", Path: filepath.Join(plugin.dir, "csi-1", "scratch")},
	}
	if got := w.StatsVolumes(pod); !slices.Equal(got, wantStats) {
		t.Errorf("stats volumes %+v, want %+v", got, wantStats)
	}

	plugin.downErr = errors.New("rpc error: NodeUnpublishVolume of volume vol-1: busy")
	if err := os.MkdirAll(w.volumePath("csi-1", emptyDirPlugin, "other"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := w.KillPod(t.Context(), pod, 0); err == nil {
		t.Errorf("KillPod hid a failed CSI teardown")
	}
	if _, err := os.Stat(w.volumePath("csi-1", emptyDirPlugin, "other")); err != nil {
		t.Errorf("the pod's volumes were removed though its CSI volumes are still published: %v", err)
	}
	plugin.downErr = nil
	if _, err := w.KillPod(t.Context(), pod, 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plugin.tearDown, []string{"csi-1", "csi-1"}) {
		t.Errorf("teardowns %q", plugin.tearDown)
	}
	if _, err := os.Stat(filepath.Dir(w.volumePath("csi-1", emptyDirPlugin, "other"))); !os.IsNotExist(err) {
		t.Errorf("the pod's volumes are left after its teardown: %v", err)
	}
	if got := w.StatsVolumes(pod); len(got) != 0 {
		t.Errorf("stats volumes after the teardown %+v, want none", got)
	}
}

// TestClusterPodBlockVolume: a claim bound to a Block persistent volume is mapped through the
// CSI plugin's block mapper and reaches the container as a CRI device at its devicePath
// ("mrw"; "r" for a read-only claim); a hostPath volume in Block mode, which has no block
// mapper, keeps the pod waiting with FailedMount.
func TestClusterPodBlockVolume(t *testing.T) {
	block := v1.PersistentVolumeBlock
	pv := func(src v1.PersistentVolumeSource) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: v1.PersistentVolumeSpec{VolumeMode: &block, ClaimRef: &v1.ObjectReference{UID: "claim-uid"}, PersistentVolumeSource: src}}
	}
	for _, tc := range []struct {
		name     string
		src      v1.PersistentVolumeSource
		readOnly bool
		perm     string
		wantErr  string
	}{
		{name: "csi", src: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "vol-1"}}, perm: "mrw"},
		{name: "csi, read-only claim", src: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "vol-1"}}, readOnly: true, perm: "r"},
		{name: "hostPath", src: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/dev/loop0"}},
			wantErr: `MapVolume.MapPodDevice failed for volume "pv-1" : persistent volume pv-1: only local and CSI volumes can be block devices (volumeMode Block)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRT()
			cl := &fakeCluster{
				claims: map[string]*v1.PersistentVolumeClaim{"default/disk-0": {ObjectMeta: metav1.ObjectMeta{Name: "disk-0", Namespace: "default", UID: "claim-uid"},
					Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
				volumes: map[string]*v1.PersistentVolume{"pv-1": pv(tc.src)},
			}
			plugin := &fakeCSI{dir: t.TempDir()}
			w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI = cl, plugin })
			pod := clusterPod("blk-1")
			pod.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "disk-0", ReadOnly: tc.readOnly}}}}
			pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
			st := mustSync(t, w, pod)
			if tc.wantErr != "" {
				want := "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[disk], unattached volumes=[disk], failed to process volumes=[disk]: " + tc.wantErr
				if got := drain(events); running(st) || !slices.Contains(got, want) {
					t.Errorf("running %v, events %q; want waiting with %q", running(st), got, want)
				}
				return
			}
			if !running(st) {
				t.Fatalf("not running: %+v", st)
			}
			if len(plugin.setUps) != 1 || plugin.setUps[0].Handle != "vol-1" || plugin.setUps[0].ReadOnly != tc.readOnly {
				t.Errorf("set ups %+v", plugin.setUps)
			}
			cfg := f.onlyConfig(t)
			want := filepath.Join(plugin.dir, "blk-1", "devices", "pv-1")
			if len(cfg.Devices) != 1 || cfg.Devices[0].ContainerPath != "/dev/xvda" || cfg.Devices[0].HostPath != want || cfg.Devices[0].Permissions != tc.perm {
				t.Errorf("devices %v, want %s at /dev/xvda %q", cfg.Devices, want, tc.perm)
			}
			wantStats := []StatsVolume{{Name: "disk", Plugin: "kubernetes.io/csi", Path: want, Claim: "disk-0", Block: true}}
			if got := w.StatsVolumes(pod); !slices.Equal(got, wantStats) {
				t.Errorf("stats volumes %+v, want %+v", got, wantStats)
			}
		})
	}
}

// TestCSIRepublish: a CSI volume whose driver requires republishing is published again at a
// sync once republishPeriod passed, not before; a failed republish is a FailedMount event and
// the pod keeps running; a driver that does not ask is published once.
func TestCSIRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		plugin := &fakeCSI{dir: t.TempDir(), republish: true}
		w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI = &fakeCluster{}, plugin })
		pod := clusterPod("rep-1")
		pod.Spec.Volumes = []v1.Volume{{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}}}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets"}}
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("not running: %+v", st)
		}
		time.Sleep(republishPeriod - time.Second)
		mustSync(t, w, pod)
		if len(plugin.setUps) != 1 {
			t.Errorf("published %d times before the period, want 1", len(plugin.setUps))
		}
		time.Sleep(time.Second)
		mustSync(t, w, pod)
		if len(plugin.setUps) != 2 {
			t.Errorf("published %d times after the period, want 2", len(plugin.setUps))
		}
		drain(events)
		plugin.setUpErr = errors.New("rpc error: NodePublishVolume: unavailable")
		time.Sleep(republishPeriod)
		if st := mustSync(t, w, pod); !running(st) {
			t.Errorf("a failed republish stopped the pod: %+v", st)
		}
		want := `Warning FailedMount MountVolume.SetUp failed for volume "secrets" : rpc error: NodePublishVolume: unavailable`
		if got := drain(events); !slices.Contains(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
		plugin.setUpErr, plugin.republish = nil, false
		n := len(plugin.setUps)
		time.Sleep(republishPeriod)
		mustSync(t, w, pod)
		if len(plugin.setUps) != n {
			t.Errorf("published again for a driver that does not ask")
		}
	})
}
