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
		// e2e's SetNodeSelection (the lifecycle hook specs): the node's name as a field
		// selector; admission matches it against the Node.
		{name: "a pod with node affinity and a node selector", mutate: func(p *v1.Pod) {
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-a"}}}}}}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if errs := ValidateAPIPod(manifest.Validate)(apiPod("web-85d956d49d-x2x7q", tc.mutate)); len(errs) > 0 {
				t.Errorf("refused: %v", errs.ToAggregate())
			}
		})
	}
}
