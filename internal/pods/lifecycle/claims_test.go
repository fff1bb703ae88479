package lifecycle

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestClaimVolumes(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-uid"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	pvcVol := &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}
	roVol := &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0", ReadOnly: true}}}
	ephVol := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	bound := func() *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid"},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	}
	pv := func(src v1.PersistentVolumeSource) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src, ClaimRef: &v1.ObjectReference{UID: "claim-uid"}}}
	}
	hostPath := v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/pv-1"}}
	block := v1.PersistentVolumeBlock
	now := metav1.Now()
	controller := true

	if name, ok := ClaimName(pod, ephVol); !ok || name != "web-scratch" {
		t.Errorf("ephemeral claim name = %q %v, want web-scratch", name, ok)
	}
	if _, ok := ClaimName(pod, &v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}); ok {
		t.Error("an emptyDir has a claim")
	}

	tests := []struct {
		name     string
		v        *v1.Volume
		pvc      func() *v1.PersistentVolumeClaim
		pvcErr   error
		pv       *v1.PersistentVolume
		pvErr    error
		wantPath string
		wantRO   bool
		wantErr  string
	}{
		{"a hostPath volume", pvcVol, bound, nil, pv(hostPath), nil, "/srv/pv-1", false, ""},
		{"read-only claim", roVol, bound, nil, pv(hostPath), nil, "/srv/pv-1", true, ""},
		{"a local volume", pvcVol, bound, nil, pv(v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disks/ssd1"}}), nil, "/mnt/disks/ssd1", false, ""},
		{"the claim is missing", pvcVol, func() *v1.PersistentVolumeClaim { return nil }, errors.New(`persistentvolumeclaims "data-0" not found`), nil, nil, "", false,
			`error processing PVC default/data-0: failed to fetch PVC from API server: persistentvolumeclaims "data-0" not found`},
		{"the claim is pending", pvcVol, func() *v1.PersistentVolumeClaim { c := bound(); c.Status.Phase = v1.ClaimPending; return c }, nil, nil, nil, "", false,
			"error processing PVC default/data-0: PVC is not bound"},
		{"the claim is being deleted", pvcVol, func() *v1.PersistentVolumeClaim { c := bound(); c.DeletionTimestamp = &now; return c }, nil, nil, nil, "", false,
			"error processing PVC default/data-0: PVC is being deleted"},
		{"an ephemeral claim of another pod", ephVol, bound, nil, pv(hostPath), nil, "", false,
			"PVC default/data-0 was not created for pod default/web (pod is not owner)"},
		{"an ephemeral claim of this pod", ephVol, func() *v1.PersistentVolumeClaim {
			c := bound()
			c.OwnerReferences = []metav1.OwnerReference{{UID: types.UID("pod-uid"), Controller: &controller}}
			return c
		}, nil, pv(hostPath), nil, "/srv/pv-1", false, ""},
		{"the volume is bound to another claim", pvcVol, bound, nil, func() *v1.PersistentVolume { p := pv(hostPath); p.Spec.ClaimRef.UID = "other"; return p }(), nil, "", false,
			"error processing PVC default/data-0: found PV object pv-1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID claim-uid"},
		{"a block volume in volumeMounts", pvcVol, bound, nil, func() *v1.PersistentVolume { p := pv(hostPath); p.Spec.VolumeMode = &block; return p }(), nil, "", false,
			"volume data has volumeMode Block, but is specified in volumeMounts"},
		{"a CSI volume: its driver publishes it, the caller's path", roVol, bound, nil, pv(v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}), nil, "", true, ""},
		{"a volume slicelet has no plugin for", pvcVol, bound, nil, pv(v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}), nil, "", false,
			"persistent volume pv-1: slicelet mounts hostPath, local and CSI persistent volumes only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim, _ := ClaimName(pod, tt.v)
			if tt.v == ephVol {
				claim = "data-0" // the fixture's claim
			}
			pvc := tt.pvc()
			pvName, err := BoundVolume(pod, tt.v, claim, pvc, tt.pvcErr)
			var path string
			var ro bool
			if err == nil {
				if pvName != "pv-1" {
					t.Fatalf("bound volume %q", pvName)
				}
				path, ro, err = ClaimedVolume(pod, tt.v, claim, pvc, tt.pv, tt.pvErr)
			}
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || path != tt.wantPath || ro != tt.wantRO {
				t.Errorf("got %q ro=%v %v, want %q ro=%v", path, ro, err, tt.wantPath, tt.wantRO)
			}
		})
	}
}

func TestVolumeNodeAffinity(t *testing.T) {
	affinity := func(values ...string) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-pv"}, Spec: v1.PersistentVolumeSpec{
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: values}},
			}}}},
		}}
	}
	for _, tc := range []struct {
		name   string
		pv     *v1.PersistentVolume
		labels map[string]string
		want   string
	}{
		{"no affinity", &v1.PersistentVolume{}, nil, ""},
		{"this node", affinity("node-a"), map[string]string{"kubernetes.io/hostname": "node-a"}, ""},
		{"another node", affinity("node-b"), map[string]string{"kubernetes.io/hostname": "node-a"},
			`MountVolume.NodeAffinity check failed for volume "local-pv" : no matching NodeSelectorTerms`},
		{"no labels known yet", affinity("node-a"), nil, `MountVolume.NodeAffinity check failed for volume "local-pv" : no matching NodeSelectorTerms`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VolumeNodeAffinity(tc.pv, tc.labels)
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Errorf("= %v, want %q", err, tc.want)
			}
		})
	}
}

// TestClaimedVolumeMode: a claim's volume mode against its use, as the kubelet's desired
// state populator checks it: Filesystem in volumeMounts, Block in volumeDevices (of any
// container, init and ephemeral ones included); a volume used by none passes.
func TestClaimedVolumeMode(t *testing.T) {
	block, fs := v1.PersistentVolumeBlock, v1.PersistentVolumeFilesystem
	mount := func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}} }
	device := func(c *v1.Container) { c.VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}} }
	for _, tc := range []struct {
		name     string
		mode     *v1.PersistentVolumeMode
		init     func(*v1.Container)
		app      func(*v1.Container)
		eph      func(*v1.Container)
		wantPath string
		wantErr  string
	}{
		{name: "unset mode in volumeMounts", app: mount, wantPath: "/dev/sdb"},
		{name: "Filesystem in volumeMounts", mode: &fs, app: mount, wantPath: "/dev/sdb"},
		{name: "Block in volumeDevices", mode: &block, app: device, wantPath: "/dev/sdb"},
		{name: "Block used by no container", mode: &block, wantPath: "/dev/sdb"},
		{name: "Block in an init container's volumeMounts", mode: &block, init: mount, app: device, wantErr: "volume data has volumeMode Block, but is specified in volumeMounts"},
		{name: "Filesystem in volumeDevices", mode: &fs, app: device, wantErr: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		{name: "unset mode in an ephemeral container's volumeDevices", eph: device, wantErr: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "pod-uid"}, Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "app"}},
				EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}}}}
			for _, f := range []struct {
				apply func(*v1.Container)
				c     *v1.Container
			}{{tc.init, &pod.Spec.InitContainers[0]}, {tc.app, &pod.Spec.Containers[0]}, {tc.eph, (*v1.Container)(&pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)}} {
				if f.apply != nil {
					f.apply(f.c)
				}
			}
			vol := &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}
			pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid"}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}
			pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{VolumeMode: tc.mode, ClaimRef: &v1.ObjectReference{UID: "claim-uid"},
				PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/dev/sdb"}}}}
			path, _, err := ClaimedVolume(pod, vol, "data-0", pvc, pv, nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || path != tc.wantPath {
				t.Errorf("path %q, %v; want %q", path, err, tc.wantPath)
			}
		})
	}
}

// TestLocalDeviceMount: a local volume in Filesystem mode on a block device is mounted at the
// kubelet's device mount path with its fsType (ext4 unset), ro for a read-only claim, then
// its mountOptions; a directory, a Block volume and other sources are given as they are.
func TestLocalDeviceMount(t *testing.T) {
	xfs, block := "xfs", v1.PersistentVolumeBlock
	pv := func(fsType *string, mode *v1.PersistentVolumeMode, opts ...string) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-pv"}, Spec: v1.PersistentVolumeSpec{VolumeMode: mode, MountOptions: opts,
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/dev/loop3", FSType: fsType}}}}
	}
	mounts := LocalDeviceMountsDir("/var/lib/kubelet/plugins")
	for _, tc := range []struct {
		name             string
		pv               *v1.PersistentVolume
		isBlock, ro, ok  bool
		fsType, wantOpts string
	}{
		{name: "device, fsType unset", pv: pv(nil, nil), isBlock: true, ok: true, fsType: "ext4"},
		{name: "device with fsType, read-only claim and mount options", pv: pv(&xfs, nil, "noatime"), isBlock: true, ro: true, ok: true,
			fsType: "xfs", wantOpts: "ro,noatime"},
		{name: "a directory", pv: pv(nil, nil), isBlock: false},
		{name: "a Block volume", pv: pv(nil, &block), isBlock: true},
		{name: "a hostPath volume", pv: &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
			HostPath: &v1.HostPathVolumeSource{Path: "/dev/loop3"}}}}, isBlock: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := LocalDeviceMount(tc.pv, tc.isBlock, tc.ro, mounts)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			want := LocalDevice{Device: "/dev/loop3", Dir: "/var/lib/kubelet/plugins/kubernetes.io/local-volume/mounts/local-pv", FSType: tc.fsType}
			if tc.wantOpts != "" {
				want.Options = strings.Split(tc.wantOpts, ",")
			}
			if !reflect.DeepEqual(d, want) {
				t.Errorf("= %+v, want %+v", d, want)
			}
		})
	}
}
