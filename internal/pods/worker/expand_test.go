package worker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods/csi"
)

// expandCluster is a claim data-0 bound to the CSI volume pv-1 of capacity pvSize, its status
// capacity 1Gi, with the resize status and allocated size given ("" and "": an old resizer).
func expandCluster(pvSize string, resizeStatus v1.ClaimResourceStatus, allocated string) *fakeCluster {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid", ResourceVersion: "7"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(pvSize)}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue}}},
	}
	if resizeStatus != "" {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: resizeStatus}
	}
	if allocated != "" {
		pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse(allocated)}
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{UID: "claim-uid"}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse(pvSize)},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "vol-1"}}}}
	return &fakeCluster{claims: map[string]*v1.PersistentVolumeClaim{"default/data-0": pvc}, volumes: map[string]*v1.PersistentVolume{"pv-1": pv}}
}

// expandPod is a cluster pod mounting the claim data-0.
func expandPod(uid string, readOnly bool) *v1.Pod {
	pod := clusterPod(uid)
	pod.Spec.NodeName = "node-a"
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0", ReadOnly: readOnly}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return pod
}

// claimStatus is the stored claim's status capacity, resize status and condition types.
func claimStatus(cl *fakeCluster) string {
	pvc := cl.claims["default/data-0"]
	c := pvc.Status.Capacity[v1.ResourceStorage]
	var conds []string
	for _, cd := range pvc.Status.Conditions {
		conds = append(conds, string(cd.Type))
	}
	return c.String() + " " + string(pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]) + " [" + strings.Join(conds, ",") + "]"
}

// TestExpandAtMount: a claim whose volume grew is expanded when the pod's volume is set up, as
// the kubelet's expandVolumeDuringMount: with a resizer that records its progress only while
// the claim says NodeResizePending (to the allocated size), with an old one to the volume's
// capacity; the claim's status is written after; a failure keeps the pod from starting and
// marks the claim as the kubelet does.
func TestExpandAtMount(t *testing.T) {
	for _, tc := range []struct {
		name         string
		resizeStatus v1.ClaimResourceStatus
		allocated    string
		readOnly     bool
		expandErr    error
		wantExpands  []string
		wantRunning  bool
		wantStatus   string
		wantEvents   []string
	}{
		{name: "node resize pending", resizeStatus: v1.PersistentVolumeClaimNodeResizePending, allocated: "2Gi",
			wantExpands: []string{"vol-1 block=false 2Gi"}, wantRunning: true, wantStatus: "2Gi  []",
			wantEvents: []string{`Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a`}},
		{name: "controller still resizing", resizeStatus: v1.PersistentVolumeClaimControllerResizeInProgress, allocated: "2Gi",
			wantRunning: true, wantStatus: "1Gi ControllerResizeInProgress [FileSystemResizePending]"},
		{name: "an old resizer", wantExpands: []string{"vol-1 block=false 2Gi"}, wantRunning: true, wantStatus: "2Gi  []",
			wantEvents: []string{`Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a`}},
		{name: "read-only claim", resizeStatus: v1.PersistentVolumeClaimNodeResizePending, allocated: "2Gi", readOnly: true,
			wantRunning: true, wantStatus: "1Gi NodeResizePending [FileSystemResizePending]",
			wantEvents: []string{`Warning FileSystemResizeFailed MountVolume.NodeExpandVolume failed for volume "pv-1" requested read-only file system`}},
		{name: "driver fails", resizeStatus: v1.PersistentVolumeClaimNodeResizePending, allocated: "2Gi",
			expandErr:   &csi.ExpandError{Failure: csi.ExpandFinal, Err: errors.New("Expander.NodeExpand failed to expand the volume : rpc error: code = Internal desc = resize2fs")},
			wantExpands: []string{"vol-1 block=false 2Gi"}, wantStatus: "1Gi NodeResizeInProgress [FileSystemResizePending,NodeResizeError]",
			wantEvents: []string{`Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: MountVolume.Setup failed while expanding volume for volume "pv-1" : Expander.NodeExpand failed to expand the volume : rpc error: code = Internal desc = resize2fs`}},
		{name: "driver says infeasible", resizeStatus: v1.PersistentVolumeClaimNodeResizePending, allocated: "2Gi",
			expandErr:   &csi.ExpandError{Failure: csi.ExpandInfeasible, Err: errors.New("Expander.NodeExpand failed to expand the volume rpc error: code = OutOfRange desc = too big")},
			wantExpands: []string{"vol-1 block=false 2Gi"}, wantStatus: "1Gi NodeResizeInfeasible [FileSystemResizePending,NodeResizeError]"},
		{name: "driver cannot expand in use", resizeStatus: v1.PersistentVolumeClaimNodeResizePending, allocated: "2Gi",
			expandErr:   &csi.ExpandError{Failure: csi.ExpandInUse, Err: errors.New("Expander.NodeExpand failed to expand the volume : rpc error: code = FailedPrecondition desc = published")},
			wantExpands: []string{"vol-1 block=false 2Gi"}, wantRunning: true, wantStatus: "1Gi NodeResizeInProgress [FileSystemResizePending,NodeResizeError]"},
		{name: "old resizer, driver without node expansion", expandErr: &csi.ExpandError{Failure: csi.ExpandNotSupported, Err: errors.New("NodeExpand is not supported by the CSI driver hostpath.csi.k8s.io")},
			wantExpands: []string{"vol-1 block=false 2Gi"}, wantRunning: true, wantStatus: "1Gi  [FileSystemResizePending]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRT()
			cl := expandCluster("2Gi", tc.resizeStatus, tc.allocated)
			plugin := &fakeCSI{dir: t.TempDir(), expandErr: tc.expandErr}
			w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI = cl, plugin })
			st := mustSync(t, w, expandPod("exp-1", tc.readOnly))
			if running(st) != tc.wantRunning {
				t.Errorf("running %v, want %v: %+v", running(st), tc.wantRunning, st)
			}
			if !slices.Equal(plugin.expands, tc.wantExpands) {
				t.Errorf("expansions %q, want %q", plugin.expands, tc.wantExpands)
			}
			if got := claimStatus(cl); got != tc.wantStatus {
				t.Errorf("claim status %q, want %q", got, tc.wantStatus)
			}
			got := drain(events)
			for _, want := range tc.wantEvents {
				if !slices.Contains(got, want) {
					t.Errorf("events %q, want %q", got, want)
				}
			}
		})
	}
}

// TestExpandOnline: a running pod's claim grown later is expanded in place at a sync once
// expandCheckPeriod passed, once; a driver that cannot expand a published volume is not asked
// again while the pod has it.
func TestExpandOnline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		cl := expandCluster("1Gi", "", "")
		plugin := &fakeCSI{dir: t.TempDir()}
		ops := &volumeOps{n: map[string]int{}}
		w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI, o.VolumeMetrics = cl, plugin, ops })
		pod := expandPod("exp-2", false)
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("not running: %+v", st)
		}
		drain(events)
		// The resizer grew the volume and waits for the node.
		pvc := cl.claims["default/data-0"]
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
		pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse("3Gi")}
		cl.volumes["pv-1"].Spec.Capacity[v1.ResourceStorage] = resource.MustParse("3Gi")
		mustSync(t, w, pod)
		if len(plugin.expands) != 0 {
			t.Errorf("expanded before expandCheckPeriod: %q", plugin.expands)
		}
		time.Sleep(expandCheckPeriod)
		mustSync(t, w, pod)
		if want := []string{"vol-1 block=false 3Gi"}; !slices.Equal(plugin.expands, want) {
			t.Errorf("expansions %q, want %q", plugin.expands, want)
		}
		if got, want := claimStatus(cl), "3Gi  []"; got != want {
			t.Errorf("claim status %q, want %q", got, want)
		}
		if got, want := drain(events), `Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a`; !slices.Contains(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
		time.Sleep(expandCheckPeriod)
		mustSync(t, w, pod)
		if len(plugin.expands) != 1 {
			t.Errorf("expanded again once the claim has its size: %q", plugin.expands)
		}

		// Grown again; the driver cannot expand it while it is published.
		pvc = cl.claims["default/data-0"]
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
		pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse("4Gi")}
		cl.volumes["pv-1"].Spec.Capacity[v1.ResourceStorage] = resource.MustParse("4Gi")
		plugin.expandErr = &csi.ExpandError{Failure: csi.ExpandInUse, Err: status.Error(codes.FailedPrecondition, "volume is published")}
		time.Sleep(expandCheckPeriod)
		if st := mustSync(t, w, pod); !running(st) {
			t.Errorf("a failed online expansion stopped the pod: %+v", st)
		}
		time.Sleep(expandCheckPeriod)
		mustSync(t, w, pod)
		if len(plugin.expands) != 2 {
			t.Errorf("a volume the driver cannot expand in use was asked again: %q", plugin.expands)
		}
		if got, want := claimStatus(cl), "3Gi NodeResizeInProgress [NodeResizeError]"; got != want {
			t.Errorf("claim status %q, want %q", got, want)
		}
		// Each online expansion timed as the kubelet's volume_fs_resize operation.
		counts := ops.counts()
		if counts["kubernetes.io/csi volume_fs_resize"] != 2 || counts["kubernetes.io/csi volume_fs_resize failed"] != 0 {
			t.Errorf("volume operations %v, want two volume_fs_resize", counts)
		}
	})
}

// TestExpandCheckKeepsRepublish: the expansion check of a claim's CSI volume at a sync keeps
// what the republish of the same sync recorded, so a driver that requires republishing is
// published again once per republishPeriod, not at every sync.
func TestExpandCheckKeepsRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		cl := expandCluster("1Gi", "", "")
		plugin := &fakeCSI{dir: t.TempDir(), republish: true}
		w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster, o.CSI = cl, plugin })
		pod := expandPod("exp-3", false)
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("not running: %+v", st)
		}
		time.Sleep(republishPeriod)
		mustSync(t, w, pod)
		mustSync(t, w, pod)
		if len(plugin.setUps) != 2 {
			t.Errorf("published %d times in one republishPeriod, want 2 (the set up and one republish)", len(plugin.setUps))
		}
	})
}
