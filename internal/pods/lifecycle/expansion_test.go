package lifecycle

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func expansionClaim(status v1.ClaimResourceStatus, capacity, request string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", ResourceVersion: "12"},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: modes,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(request)}}},
		Status: v1.PersistentVolumeClaimStatus{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(capacity)}},
	}
	if status != "" {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: status}
	}
	return pvc
}

// TestCheckExpansion: the kubelet's NodeExpander.runPreCheck cases (node_expander_test.go).
func TestCheckExpansion(t *testing.T) {
	rwx := expansionClaim("", "2Gi", "2Gi", v1.ReadWriteMany)
	notRequired := rwx.DeepCopy()
	notRequired.Annotations = map[string]string{NodeExpansionNotRequired: "true"}
	for _, tc := range []struct {
		name         string
		pvc          *v1.PersistentVolumeClaim
		failedBefore bool
		want         ExpansionCheck
	}{
		{"node resize pending", expansionClaim(v1.PersistentVolumeClaimNodeResizePending, "1Gi", "2Gi"), false, ExpansionCheck{Allowed: true}},
		{"node resize in progress", expansionClaim(v1.PersistentVolumeClaimNodeResizeInProgress, "1Gi", "2Gi"), false, ExpansionCheck{Allowed: true}},
		{"controller resize in progress", expansionClaim(v1.PersistentVolumeClaimControllerResizeInProgress, "1Gi", "2Gi"), false, ExpansionCheck{}},
		{"node resize infeasible", expansionClaim(v1.PersistentVolumeClaimNodeResizeInfeasible, "1Gi", "2Gi"), false, ExpansionCheck{}},
		{"no resize status, not grown", expansionClaim("", "1Gi", "2Gi"), false, ExpansionCheck{}},
		{"already at the size", expansionClaim("", "2Gi", "2Gi", v1.ReadWriteOnce), false, ExpansionCheck{AlreadyUpdated: true}},
		{"ReadWriteMany grown by another node", rwx, false, ExpansionCheck{Allowed: true, AlreadyUpdated: true}},
		{"ReadWriteMany needing no node expansion", notRequired, false, ExpansionCheck{AlreadyUpdated: true}},
		{"request changed after a final failure", expansionClaim(v1.PersistentVolumeClaimNodeResizeInProgress, "1Gi", "3Gi"), true, ExpansionCheck{Allowed: true, InfeasibleOnFailure: true}},
		{"request unchanged after a final failure", expansionClaim(v1.PersistentVolumeClaimNodeResizeInProgress, "1Gi", "2Gi"), true, ExpansionCheck{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckExpansion(tc.pvc, resource.MustParse("2Gi"), tc.failedBefore); got != tc.want {
				t.Errorf("CheckExpansion = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestExpansionOf: needed only when the volume's capacity is larger than the claim's status
// capacity, both known.
func TestExpansionOf(t *testing.T) {
	for _, tc := range []struct {
		name, status, pv string
		want             bool
	}{
		{"grown", "1Gi", "2Gi", true},
		{"same", "2Gi", "2Gi", false},
		{"claim larger (rounded up by the driver)", "3Gi", "2Gi", false},
		{"no status capacity", "", "2Gi", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &v1.PersistentVolumeClaim{}
			if tc.status != "" {
				pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(tc.status)}
			}
			pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(tc.pv)}}}
			if got := ExpansionOf(pvc, pv).Needed; got != tc.want {
				t.Errorf("needed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClaimStatusMarks: the claim's status as the kubelet writes it at each step, and the
// patch that carries it (the resourceVersion added when asked).
func TestClaimStatusMarks(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC))
	pvc := expansionClaim(v1.PersistentVolumeClaimNodeResizePending, "1Gi", "2Gi")
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{
		{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
		{Type: "Other", Status: v1.ConditionTrue},
	}
	for _, tc := range []struct {
		name        string
		updated     *v1.PersistentVolumeClaim
		withVersion bool
		want        string
	}{
		{"in progress", ExpansionInProgress(pvc), true,
			`{"metadata":{"resourceVersion":"12"},"status":{"allocatedResourceStatuses":{"storage":"NodeResizeInProgress"}}}`},
		{"finished", ExpansionFinished(pvc, resource.MustParse("2Gi")), true,
			`{"metadata":{"resourceVersion":"12"},"status":{"$setElementOrder/conditions":[{"type":"Other"}],"allocatedResourceStatuses":null,"capacity":{"storage":"2Gi"},"conditions":[{"$patch":"delete","type":"FileSystemResizePending"}]}}`},
		{"failed", ExpansionFailed(pvc, errors.New("boom"), false, now), false,
			`{"status":{"$setElementOrder/conditions":[{"type":"FileSystemResizePending"},{"type":"Other"},{"type":"NodeResizeError"}],"conditions":[{"lastProbeTime":null,"lastTransitionTime":"2026-11-29T11:00:00Z","message":"failed to expand pvc with boom","status":"True","type":"NodeResizeError"}]}}`},
		{"infeasible", ExpansionFailed(pvc, errors.New("boom"), true, now), false,
			`{"status":{"$setElementOrder/conditions":[{"type":"FileSystemResizePending"},{"type":"Other"},{"type":"NodeResizeError"}],"allocatedResourceStatuses":{"storage":"NodeResizeInfeasible"},"conditions":[{"lastProbeTime":null,"lastTransitionTime":"2026-11-29T11:00:00Z","message":"failed to expand pvc with boom","status":"True","type":"NodeResizeError"}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, err := ClaimStatusPatch(pvc, tc.updated, tc.withVersion)
			if err != nil {
				t.Fatal(err)
			}
			if string(patch) != tc.want {
				t.Errorf("patch\n%s\nwant\n%s", patch, tc.want)
			}
		})
	}
	if pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizePending || len(pvc.Status.Conditions) != 2 {
		t.Errorf("the marks changed the claim they were given: %+v", pvc.Status)
	}
}
