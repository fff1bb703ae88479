package cluster

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// The informers' transforms (cache.TransformFunc) keep of each object what slicelet reads,
// before it is stored: an informer's cache holds its objects for as long as they exist, and
// most of what the API server sends is for others (managedFields alone is often the largest
// part of a pod). Each mutates the freshly decoded object in place or returns a smaller copy,
// and is idempotent, as client-go requires. Anything else (a tombstone) passes unchanged.

// stripPod keeps a pod whole but its managedFields: the spec is run, the labels and
// annotations reach the downward API, the status is compared with the pod's.
func stripPod(obj any) (any, error) {
	if p, ok := obj.(*v1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

// stripNode keeps of this node's Node what admission matches pods against (Member.Node): its
// name, labels and spec (taints). Its status, annotations and managedFields are left out: the
// node status loop reads and writes the Node through the API, not through the informer.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	return &v1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp, Labels: n.Labels},
		Spec: n.Spec,
	}, nil
}

// stripService keeps of a service what its environment variables are made of
// (ServiceEnvVars): its namespace and name, cluster IP and ports (name, port, protocol).
func stripService(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil
	}
	out := &v1.Service{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			DeletionTimestamp: s.DeletionTimestamp},
		Spec: v1.ServiceSpec{ClusterIP: s.Spec.ClusterIP},
	}
	if len(s.Spec.Ports) > 0 {
		out.Spec.Ports = make([]v1.ServicePort, len(s.Spec.Ports))
		for i, p := range s.Spec.Ports {
			out.Spec.Ports[i] = v1.ServicePort{Name: p.Name, Port: p.Port, Protocol: p.Protocol}
		}
	}
	return out, nil
}

// newInformer is an informer over lw of objects like example whose cache keeps what transform
// leaves of each.
func newInformer(lw cache.ListerWatcher, example runtime.Object, description string, transform cache.TransformFunc) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{ObjectDescription: description})
	_ = inf.SetTransform(transform) // before the informer runs: never an error
	return inf
}
