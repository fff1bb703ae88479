package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
	"k8s.io/utils/ptr"
)

// TestExpandFailureOf: the driver's answers as the kubelet's expander classifies them.
func TestExpandFailureOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want ExpandFailure
	}{
		{"in use", status.Error(codes.FailedPrecondition, "published"), ExpandInUse},
		{"invalid argument", status.Error(codes.InvalidArgument, "x"), ExpandInfeasible},
		{"out of range", status.Error(codes.OutOfRange, "x"), ExpandInfeasible},
		{"not found", status.Error(codes.NotFound, "x"), ExpandInfeasible},
		{"internal", status.Error(codes.Internal, "x"), ExpandFinal},
		{"timeout (uncertain, final as the kubelet's wrapped error)", status.Error(codes.DeadlineExceeded, "x"), ExpandFinal},
		{"not a gRPC error", errors.New("x"), ExpandFinal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := expandFailureOf(tc.err); got != tc.want {
				t.Errorf("expandFailureOf = %v, want %v", got, tc.want)
			}
			wrapped := fmt.Errorf("volume: %w", &ExpandError{tc.want, tc.err})
			if got := FailureOf(wrapped); got != tc.want {
				t.Errorf("FailureOf(wrapped) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeExpand: NodeExpandVolume reaches the e2e mock driver with the kubelet's request (the
// publish and staging paths of a filesystem volume, the published device and block staging
// path of a block one, the capacity, the capability, the expand secret); a driver without
// EXPAND_VOLUME is ExpandNotSupported, an unknown volume ExpandInfeasible, a driver not
// registered ExpandTransient.
func TestNodeExpand(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true, NodeExpansionRequired: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
	e.api.secrets = map[string]*v1.Secret{"kube-system/expand": {Data: map[string][]byte{"key": []byte("s3cret")}}}
	pv := csiPV("pv-data", "1")
	pv.Spec.CSI.NodeExpandSecretRef = &v1.SecretReference{Namespace: "kube-system", Name: "expand"}
	pod := testPod("a", nil)
	vol, _ := FromPod(pod, &v1.Volume{Name: "data"}, pv, false)
	ctx := context.Background()
	if _, err := e.m.SetUp(ctx, pod, vol); err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("2Gi")
	for _, block := range []bool{false, true} {
		if err := e.m.NodeExpand(ctx, pod, vol, block, size); err != nil {
			t.Fatalf("block %v: %v", block, err)
		}
	}
	if len(e.driver.expands) != 2 {
		t.Fatalf("%d NodeExpandVolume calls, want 2", len(e.driver.expands))
	}
	fsReq, blockReq := e.driver.expands[0], e.driver.expands[1]
	wantFS := ExpandRequest(filepath.Join(e.root, "plugins"), filepath.Join(e.root, "pods"), "uid-a", vol, false, size)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"fs volume path", fsReq.GetVolumePath(), filepath.Join(e.root, "pods", "uid-a", "volumes", "kubernetes.io~csi", "pv-data", "mount")},
		{"fs staging path", fsReq.GetStagingTargetPath(), DeviceMountPath(filepath.Join(e.root, "plugins"), mockDriver, "1")},
		{"fs request", fsReq.String(), func() string { wantFS.Secrets = map[string]string{"key": "s3cret"}; return wantFS.String() }()},
		{"capacity", fsReq.GetCapacityRange().GetRequiredBytes(), int64(2 << 30)},
		{"fs type", fsReq.GetVolumeCapability().GetMount().GetFsType(), "ext4"},
		{"access mode", fsReq.GetVolumeCapability().GetAccessMode().GetMode(), csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{"block volume path", blockReq.GetVolumePath(), BlockPublishPath(filepath.Join(e.root, "plugins"), "pv-data", "uid-a")},
		{"block staging path", blockReq.GetStagingTargetPath(), BlockStagingPath(filepath.Join(e.root, "plugins"), "pv-data")},
		{"block capability", blockReq.GetVolumeCapability().GetBlock() != nil, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !maps.Equal(fsReq.GetSecrets(), map[string]string{"key": "s3cret"}) {
		t.Errorf("secrets %v", fsReq.GetSecrets())
	}

	unknown := vol
	unknown.Handle = "no-such-volume"
	if err := e.m.NodeExpand(ctx, pod, unknown, false, size); FailureOf(err) != ExpandInfeasible {
		t.Errorf("unknown volume: %v (%v), want infeasible", err, FailureOf(err))
	}
	other := vol
	other.Driver = "other.csi.k8s.io"
	if err := e.m.NodeExpand(ctx, pod, other, false, size); FailureOf(err) != ExpandTransient {
		t.Errorf("driver not registered: %v, want transient", err)
	}

	plain := newEnv(t, service.Config{DisableAttach: true})
	plain.api.drivers = e.api.drivers
	if err := plain.m.NodeExpand(ctx, pod, vol, false, size); FailureOf(err) != ExpandNotSupported || err.Error() != "NodeExpand is not supported by the CSI driver "+mockDriver {
		t.Errorf("driver without EXPAND_VOLUME: %v", err)
	}
}
