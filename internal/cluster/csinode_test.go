package cluster

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestCSINodeInfo: a driver's registration creates the node's CSINode (owned by the Node)
// with its entry, and the Node's node ID annotation and topology labels; a second driver is
// added beside it; a deregistration removes the entry and the annotation's key.
func TestCSINodeInfo(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid",
		Annotations: map[string]string{"other": "kept"}}})
	ci := NewCSINodeInfo(Clients{Nodes: cs.CoreV1().Nodes(), CSINodes: cs.StorageV1().CSINodes()}, "node-a")
	if err := ci.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	cn, err := cs.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.Spec.Drivers) != 0 || len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != "node-uid" || cn.OwnerReferences[0].Kind != "Node" {
		t.Errorf("initial CSINode %+v", cn)
	}

	if err := ci.InstallDriver(ctx, "hostpath.csi.k8s.io", "node-a", 0, map[string]string{"topology.hostpath.csi/node": "node-a"}); err != nil {
		t.Fatal(err)
	}
	if err := ci.InstallDriver(ctx, "io.kubernetes.storage.mock", "mock-id", 16, nil); err != nil {
		t.Fatal(err)
	}
	cn, _ = cs.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	if len(cn.Spec.Drivers) != 2 {
		t.Fatalf("drivers %+v", cn.Spec.Drivers)
	}
	hp, mock := cn.Spec.Drivers[0], cn.Spec.Drivers[1]
	if hp.Name != "hostpath.csi.k8s.io" || hp.NodeID != "node-a" || len(hp.TopologyKeys) != 1 || hp.TopologyKeys[0] != "topology.hostpath.csi/node" || hp.Allocatable != nil {
		t.Errorf("hostpath entry %+v", hp)
	}
	if mock.NodeID != "mock-id" || mock.Allocatable == nil || *mock.Allocatable.Count != 16 {
		t.Errorf("mock entry %+v", mock)
	}
	node, _ := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if got := node.Annotations[AnnotationCSINodeID]; got != `{"hostpath.csi.k8s.io":"node-a","io.kubernetes.storage.mock":"mock-id"}` {
		t.Errorf("node ID annotation %q", got)
	}
	if node.Labels["topology.hostpath.csi/node"] != "node-a" || node.Annotations["other"] != "kept" {
		t.Errorf("node labels %v annotations %v", node.Labels, node.Annotations)
	}

	for _, d := range []string{"hostpath.csi.k8s.io", "io.kubernetes.storage.mock"} {
		if err := ci.UninstallDriver(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	cn, _ = cs.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	node, _ = cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if len(cn.Spec.Drivers) != 0 {
		t.Errorf("drivers left %+v", cn.Spec.Drivers)
	}
	if _, ok := node.Annotations[AnnotationCSINodeID]; ok || node.Annotations["other"] != "kept" {
		t.Errorf("annotations after deregistration %v", node.Annotations)
	}
}

func TestWithDriver(t *testing.T) {
	n := int32(4)
	base := []storagev1.CSINodeDriver{{Name: "a", NodeID: "1", TopologyKeys: []string{}, Allocatable: &storagev1.VolumeNodeResources{Count: &n}}}
	for _, tc := range []struct {
		name    string
		driver  string
		nodeID  string
		max     int64
		changed bool
		count   int
	}{
		{"the same entry", "a", "1", 4, false, 1},
		{"a new node ID", "a", "2", 4, true, 1},
		{"a new volume limit", "a", "1", 8, true, 1},
		{"another driver", "b", "1", 0, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := WithDriver(base, tc.driver, tc.nodeID, tc.max, nil)
			if changed != tc.changed || len(out) != tc.count {
				t.Errorf("changed %v, %d drivers; want %v, %d", changed, len(out), tc.changed, tc.count)
			}
		})
	}
}

func TestNodeIDAnnotation(t *testing.T) {
	for _, tc := range []struct{ name, existing, driver, id, want string }{
		{"first driver", "", "a", "n1", `{"a":"n1"}`},
		{"second driver", `{"a":"n1"}`, "b", "n2", `{"a":"n1","b":"n2"}`},
		{"last driver removed", `{"a":"n1"}`, "a", "", ""},
		{"garbage replaced", `not json`, "a", "n1", `{"a":"n1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NodeIDAnnotation(tc.existing, tc.driver, tc.id)
			if err != nil || got != tc.want {
				t.Errorf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
