package csi

import (
	"errors"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// TestPaths: the kubelet's directory layout and names, with hashes computed by sha256sum.
func TestPaths(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"staging path", DeviceMountPath("/var/lib/kubelet/plugins", "hostpath.csi.k8s.io", "vol-1"),
			"/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49/globalmount"},
		{"publish path", PublishPath("/var/lib/kubelet/pods", "u-1", "pv-a"), "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/pv-a/mount"},
		{"attachment name", AttachmentName("vol-1", "hostpath.csi.k8s.io", "node-a"), "csi-" + sha256Hex("vol-1hostpath.csi.k8s.ionode-a")},
		{"ephemeral handle", EphemeralHandle("u-1", "scratch"), "csi-" + sha256Hex("u-1scratch")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if got := sha256Hex("vol-1"); got != "d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49" {
		t.Errorf("sha256(vol-1) = %s", got)
	}
}

func TestPolicy(t *testing.T) {
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	persistent, ephemeral := storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral
	for _, tc := range []struct {
		name    string
		driver  *storagev1.CSIDriver
		vol     Volume
		attach  bool
		modeErr string
		fsGroup bool
	}{
		{name: "no CSIDriver: attach, persistent only, fsGroup on RWO with fsType",
			vol: Volume{Driver: "d", Mode: persistent, FSType: "ext4", AccessModes: rwo}, attach: true, fsGroup: true},
		{name: "no CSIDriver, inline", vol: Volume{Driver: "d", Mode: ephemeral, FSType: "ext4"}, attach: true, fsGroup: true,
			modeErr: `volume mode "Ephemeral" not supported by driver d (no CSIDriver object)`},
		{name: "no fsType: no fsGroup", vol: Volume{Driver: "d", Mode: persistent, AccessModes: rwo}, attach: true},
		{name: "RWX: no fsGroup", vol: Volume{Driver: "d", Mode: persistent, FSType: "xfs", AccessModes: rwx}, attach: true},
		{name: "read-only: no fsGroup", driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)}},
			vol: Volume{Driver: "d", Mode: persistent, ReadOnly: true}, attach: true},
		{name: "File policy", driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)}},
			vol: Volume{Driver: "d", Mode: persistent, AccessModes: rwx}, fsGroup: true},
		{name: "None policy", driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: ptr.To(storagev1.NoneFSGroupPolicy)}},
			vol: Volume{Driver: "d", Mode: persistent, FSType: "ext4", AccessModes: rwo}, attach: true},
		{name: "ephemeral-only driver refuses a persistent volume",
			driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{ephemeral}}},
			vol:    Volume{Driver: "d", Mode: persistent}, attach: true, modeErr: `volume mode "Persistent" not supported by driver d (only supports ["Ephemeral"])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PolicyOf(tc.driver)
			if p.AttachRequired != tc.attach {
				t.Errorf("attach required = %v", p.AttachRequired)
			}
			err := p.CheckMode(tc.vol.Driver, tc.vol.Mode)
			if (err == nil) != (tc.modeErr == "") || (err != nil && err.Error() != tc.modeErr) {
				t.Errorf("mode check = %v, want %q", err, tc.modeErr)
			}
			if got := p.AppliesFSGroup(tc.vol); got != tc.fsGroup {
				t.Errorf("fsGroup applied = %v", got)
			}
		})
	}
}

func TestAccessMode(t *testing.T) {
	for _, tc := range []struct {
		modes []v1.PersistentVolumeAccessMode
		want  csipb.VolumeCapability_AccessMode_Mode
	}{
		{nil, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany, v1.ReadWriteOnce}, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
	} {
		if got := accessMode(tc.modes); got != tc.want {
			t.Errorf("%v → %v, want %v", tc.modes, got, tc.want)
		}
	}
}

func TestPublishContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		va   *storagev1.VolumeAttachment
		err  error
		want string
	}{
		{"read failed", nil, errors.New("forbidden"), "volume attachment a: forbidden"},
		{"not attached", &storagev1.VolumeAttachment{}, nil, "volume attachment a is not attached yet"},
		{"attach error", &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "no disk"}}}, nil,
			"volume attachment a is not attached: no disk"},
		{"attached", &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"device": "/dev/sdb"}}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := PublishContext("a", tc.va, tc.err)
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if err == nil && pc["device"] != "/dev/sdb" {
				t.Errorf("publish context = %v", pc)
			}
		})
	}
}

func TestPathElement(t *testing.T) {
	for name, ok := range map[string]bool{"pv-1": true, "hostpath.csi.k8s.io": true, "": false, ".": false, "..": false, "a/b": false, "../x": false, "a\x00": false} {
		if err := pathElement(name); (err == nil) != ok {
			t.Errorf("pathElement(%q) = %v", name, err)
		}
	}
}
