package cluster

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/internal/manifest"
)

// TestValidateAPIPodControllersPods: the pods a ReplicaSet (a Deployment's), a Job or a
// StatefulSet creates keep their generateName and owner reference; the node runs them.
func TestValidateAPIPodControllersPods(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
	}{
		{name: "a ReplicaSet's pod", mutate: func(p *v1.Pod) {
			p.GenerateName = "web-85d956d49d-"
			p.Labels = map[string]string{"app": "web", "pod-template-hash": "85d956d49d"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-85d956d49d", UID: "rs-uid",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		}},
		{name: "a bare pod", mutate: func(*v1.Pod) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if errs := ValidateAPIPod(manifest.Validate)(apiPod("web-85d956d49d-x2x7q", tc.mutate)); len(errs) > 0 {
				t.Errorf("refused: %v", errs.ToAggregate())
			}
		})
	}
}
