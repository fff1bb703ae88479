package cluster

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

// The clients below are the methods slicelet calls, with the signatures of client-go's typed
// clients (k8s.io/client-go/kubernetes/typed/core/v1 and coordination/v1): a typed client,
// and so the fake clientset in tests, satisfies them.

// NodeClient is the node's access to its Node object.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
}

// PodClient is the node's access to the pods of one namespace (all namespaces for the list
// and watch of the pods bound to the node).
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// LeaseClient is the node's access to its Lease in kube-node-lease.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Clients are the API clients cluster mode uses. A clientset gives them as
// Clients{Nodes: cs.CoreV1().Nodes(), Pods: func(ns string) PodClient { return cs.CoreV1().Pods(ns) }, ...}.
type Clients struct {
	Nodes  NodeClient
	Pods   func(namespace string) PodClient
	Leases func(namespace string) LeaseClient
}

// NewClients builds the clients from a kubeconfig file. It uses client-go's generic typed
// client (gentype, what the generated clientset is made of) over a scheme holding only the
// groups the node speaks (core/v1, coordination.k8s.io/v1): the generated clientset's scheme
// (k8s.io/client-go/kubernetes/scheme) registers every API group at init, a cost stand-alone
// mode would pay too.
func NewClients(kubeconfig string) (Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return Clients{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "slicelet/" + buildinfo.Version
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)
	params := runtime.NewParameterCodec(scheme)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	restFor := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := *cfg
		c.APIPath, c.GroupVersion = apiPath, &gv
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		return rest.RESTClientForConfigAndClient(&c, httpClient)
	}
	core, err := restFor("/api", v1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	coord, err := restFor("/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	return Clients{
		Nodes: gentype.NewClientWithList[*v1.Node, *v1.NodeList]("nodes", core, params, "",
			func() *v1.Node { return &v1.Node{} }, func() *v1.NodeList { return &v1.NodeList{} }),
		Pods: func(ns string) PodClient {
			return gentype.NewClientWithList[*v1.Pod, *v1.PodList]("pods", core, params, ns,
				func() *v1.Pod { return &v1.Pod{} }, func() *v1.PodList { return &v1.PodList{} })
		},
		Leases: func(ns string) LeaseClient {
			return gentype.NewClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList]("leases", coord, params, ns,
				func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
		},
	}, nil
}
