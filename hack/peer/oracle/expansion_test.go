package main

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestClaimExpansionStatusOracle: the claim status slicelet's node expansion writes (its patch
// applied by client-go's fake API server) is the status the kubelet's own resize_util writes, at
// each step: in progress, finished, failed, infeasible.
func TestClaimExpansionStatusOracle(t *testing.T) {
	base := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", ResourceVersion: "1"},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound,
			Capacity:                  v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AllocatedResources:        v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
			AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending},
			Conditions: []v1.PersistentVolumeClaimCondition{
				{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
				{Type: "Other", Status: v1.ConditionTrue},
			}},
	}
	size := resource.MustParse("2Gi")
	boom := errors.New("boom")
	for _, tc := range []struct {
		name        string
		kubelet     func(*v1.PersistentVolumeClaim, *fake.Clientset) (*v1.PersistentVolumeClaim, error)
		slicelet    func(*v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim
		withVersion bool
	}{
		{"in progress", func(p *v1.PersistentVolumeClaim, c *fake.Clientset) (*v1.PersistentVolumeClaim, error) {
			return volumeutil.MarkNodeExpansionInProgress(p, c)
		}, lifecycle.ExpansionInProgress, true},
		{"finished", func(p *v1.PersistentVolumeClaim, c *fake.Clientset) (*v1.PersistentVolumeClaim, error) {
			return volumeutil.MarkNodeExpansionFinishedWithRecovery(p, size, c)
		}, func(p *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
			return lifecycle.ExpansionFinished(p, size)
		}, true},
		{"failed", func(p *v1.PersistentVolumeClaim, c *fake.Clientset) (*v1.PersistentVolumeClaim, error) {
			return volumeutil.MarkNodeExpansionFailedCondition(p, c, boom)
		}, func(p *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
			return lifecycle.ExpansionFailed(p, boom, false, metav1.Now())
		}, false},
		{"infeasible", func(p *v1.PersistentVolumeClaim, c *fake.Clientset) (*v1.PersistentVolumeClaim, error) {
			return volumeutil.MarkNodeExpansionInfeasible(p, c, boom)
		}, func(p *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
			return lifecycle.ExpansionFailed(p, boom, true, metav1.Now())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(base.DeepCopy())
			want, err := tc.kubelet(base.DeepCopy(), kc)
			if err != nil {
				t.Fatal(err)
			}
			sc := fake.NewClientset(base.DeepCopy())
			patch, err := lifecycle.ClaimStatusPatch(base, tc.slicelet(base), tc.withVersion)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sc.CoreV1().PersistentVolumeClaims("ns").Patch(context.Background(), "data", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []*v1.PersistentVolumeClaim{want, got} {
				for i := range p.Status.Conditions {
					p.Status.Conditions[i].LastTransitionTime = metav1.Time{}
				}
			}
			if !equality.Semantic.DeepEqual(got.Status, want.Status) {
				t.Errorf("status\n got %+v\nwant %+v\npatch %s", got.Status, want.Status, patch)
			}
		})
	}
}
