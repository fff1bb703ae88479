package csi

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
	"k8s.io/utils/ptr"
)

func TestBlockPaths(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"staging", BlockStagingPath("/var/lib/kubelet/plugins", "pv-1"), "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1"},
		{"publish", BlockPublishPath("/var/lib/kubelet/plugins", "pv-1", "uid-a"), "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pv-1/uid-a"},
		{"data", blockDataDir("/var/lib/kubelet/plugins", "pv-1"), "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/pv-1/data"},
		{"pod's link", PodDeviceMapPath("/var/lib/kubelet/pods", "uid-a", "pv-1"), "/var/lib/kubelet/pods/uid-a/volumeDevices/kubernetes.io~csi/pv-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
		})
	}
}

// TestBlockVolume: a Block persistent volume is staged and published as a device at the
// kubelet's volumeDevices paths, with the block capability; each pod gets a link to its
// published device; the volume is unstaged after the last pod's teardown only.
func TestBlockVolume(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
	pv := csiPV("pv-blk", "3")
	pv.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	vol, _ := FromPod(testPod("a", nil), &v1.Volume{Name: "disk"}, pv, false)
	ctx := context.Background()
	plugins, pods := filepath.Join(e.root, "plugins"), filepath.Join(e.root, "pods")

	linkA, err := e.m.SetUpBlock(ctx, testPod("a", nil), vol)
	if err != nil {
		t.Fatal(err)
	}
	if want := PodDeviceMapPath(pods, "uid-a", "pv-blk"); linkA != want {
		t.Errorf("device path %s, want %s", linkA, want)
	}
	if target, err := os.Readlink(linkA); err != nil || target != BlockPublishPath(plugins, "pv-blk", "uid-a") {
		t.Errorf("link to %q (%v), want the published device", target, err)
	}
	if !exists(BlockStagingPath(plugins, "pv-blk")) || !exists(BlockPublishPath(plugins, "pv-blk", "uid-a")) {
		t.Error("not staged and published at the block paths")
	}
	want := map[string]string{"specVolID": "pv-blk", "volumeHandle": "3", "driverName": mockDriver, "nodeName": "node-a",
		"attachmentID": AttachmentName("3", mockDriver, "node-a")}
	if got := readVolData(t, blockDataDir(plugins, "pv-blk")); !maps.Equal(got, want) {
		t.Errorf("vol_data.json %v, want %v", got, want)
	}
	// Set up again (a later sync, a restart): the same link.
	if again, err := e.m.SetUpBlock(ctx, testPod("a", nil), vol); err != nil || again != linkA {
		t.Errorf("set up again: %s, %v", again, err)
	}
	linkB, err := e.m.SetUpBlock(ctx, testPod("b", nil), vol)
	if err != nil {
		t.Fatal(err)
	}
	// Its stats: NodeGetVolumeStats of the device published for the pod (the mock answers
	// only for a path it published the volume at).
	if u, driver, err := e.m.VolumeStats(ctx, linkA); err != nil || driver != mockDriver || u != (Usage{Capacity: 100 << 30}) {
		t.Errorf("block volume stats %+v from %q: %v", u, driver, err)
	}

	if err := e.m.TearDown(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(pods, "uid-a", "volumeDevices")) || exists(BlockPublishPath(plugins, "pv-blk", "uid-a")) {
		t.Error("pod a's link or published device left")
	}
	if !exists(BlockStagingPath(plugins, "pv-blk")) || !exists(linkB) {
		t.Error("pod a's teardown unstaged the volume pod b uses")
	}
	if err := e.m.TearDown(ctx, "uid-b"); err != nil {
		t.Fatal(err)
	}
	if exists(BlockStagingPath(plugins, "pv-blk")) || exists(filepath.Join(blockPluginDir(plugins), "pv-blk")) ||
		exists(filepath.Join(blockPluginDir(plugins), "publish", "pv-blk")) {
		t.Error("staging, data or publish directory left after the last pod")
	}

	inline, _ := FromPod(testPod("c", nil), &v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: mockDriver}}}, nil, false)
	if _, err := e.m.SetUpBlock(ctx, testPod("c", nil), inline); err == nil {
		t.Error("an inline volume set up as a block device")
	}
}
