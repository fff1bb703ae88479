package cluster

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The clients below are the methods slicelet calls, with the signatures of client-go's typed
// clients (k8s.io/client-go/kubernetes/typed/core/v1 and coordination/v1): a typed client,
// and so the fake clientset in tests, satisfies them.

// NodeClient is the node's access to its Node object.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	// List and Watch are of this node only (a field selector on its name): the Node as
	// others change it (labels, taints) for admission.
	List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
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
	// Events and Scheme, when set, send the cluster pods' events to the API server (Scheme
	// names the kinds of the objects events are about).
	Events func(namespace string) EventClient
	Scheme *runtime.Scheme
	// ConfigMaps, Secrets, ServiceAccounts and Services serve the cluster pods' objects
	// (objects.go, tokens.go, services.go); nil ones serve nothing.
	ConfigMaps      func(namespace string) ConfigMapClient
	Secrets         func(namespace string) SecretClient
	ServiceAccounts func(namespace string) ServiceAccountClient
	Services        func(namespace string) ServiceClient
	// RuntimeClasses resolves the pods' runtimeClassName (objects.go); nil: none exists.
	RuntimeClasses RuntimeClassClient
	// PersistentVolumeClaims and PersistentVolumes give the pods' claims their volumes
	// (objects.go); nil ones find none.
	PersistentVolumeClaims func(namespace string) PersistentVolumeClaimClient
	PersistentVolumes      PersistentVolumeClient
	// CSIDrivers, VolumeAttachments and CSINodes serve the CSI volume plugin (csinode.go,
	// objects.go); nil ones find none.
	CSIDrivers        CSIDriverClient
	VolumeAttachments VolumeAttachmentClient
	CSINodes          CSINodeClient
	// ClusterTrustBundles and PodCertificateRequests serve the clusterTrustBundle and
	// podCertificate projections (trustbundles.go, podcertificates.go); nil ones serve none.
	ClusterTrustBundles    ClusterTrustBundleClient
	PodCertificateRequests func(namespace string) PodCertificateRequestClient
}

// NewClients builds the clients from a kubeconfig file: client-go's REST client (what the
// generated typed clients are made of) over a scheme holding only the groups the node speaks
// (core/v1, coordination.k8s.io/v1). The generated clientset's scheme
// (k8s.io/client-go/kubernetes/scheme) registers every API group at init, a cost stand-alone
// mode would pay too.
func NewClients(kubeconfig string) (Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return Clients{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	clients, err := NewClientsForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return clients, nil
}

// NewClientsForConfig builds the clients from a client configuration (Credentials.Config), as
// NewClients.
func NewClientsForConfig(in *rest.Config) (Clients, error) {
	cfg := rest.CopyConfig(in)
	cfg.UserAgent = userAgent()
	configureTransport(cfg)
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	// authentication.k8s.io/v1 for the TokenRequests of serviceaccounts/token.
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	// node.k8s.io/v1 for the pods' RuntimeClasses.
	if err := nodev1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	// storage.k8s.io/v1 for the CSI volume plugin: CSIDrivers, VolumeAttachments, CSINode.
	if err := storagev1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	// certificates.k8s.io/v1 for the projected ClusterTrustBundles and pod certificates.
	if err := certificatesv1.AddToScheme(scheme); err != nil {
		return Clients{}, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)
	params := runtime.NewParameterCodec(scheme)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Clients{}, err
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
	// Events have a client and a rate limit of their own (the kubelet's event client,
	// eventRecordQPS 50 and eventBurst 100): the events of pods starting together do not
	// hold back their status patches.
	eventsREST, err := restFor("/api", v1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	clients := Clients{
		Nodes: &typed[*v1.Node, *v1.NodeList]{rest: core, params: params, resource: "nodes", obj: func() *v1.Node { return &v1.Node{} }, list: func() *v1.NodeList { return &v1.NodeList{} }},
		Pods: func(ns string) PodClient {
			return &typed[*v1.Pod, *v1.PodList]{rest: core, params: params, resource: "pods", ns: ns, obj: func() *v1.Pod { return &v1.Pod{} }, list: func() *v1.PodList { return &v1.PodList{} }}
		},
		Events: func(ns string) EventClient {
			return &typed[*v1.Event, *v1.EventList]{rest: eventsREST, params: params, resource: "events", ns: ns, obj: func() *v1.Event { return &v1.Event{} }}
		},
		Scheme: scheme,
		Leases: func(ns string) LeaseClient {
			return &typed[*coordinationv1.Lease, *coordinationv1.LeaseList]{rest: coord, params: params, resource: "leases", ns: ns, obj: func() *coordinationv1.Lease { return &coordinationv1.Lease{} }}
		},
	}
	addObjectClients(&clients, core, params)
	node, err := restFor("/apis", nodev1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	clients.RuntimeClasses = &typed[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]{rest: node, params: params, resource: "runtimeclasses",
		obj: func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} }}
	storage, err := restFor("/apis", storagev1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	clients.CSIDrivers = &typed[*storagev1.CSIDriver, *storagev1.CSIDriverList]{rest: storage, params: params, resource: "csidrivers",
		obj: func() *storagev1.CSIDriver { return &storagev1.CSIDriver{} }}
	clients.VolumeAttachments = &typed[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList]{rest: storage, params: params, resource: "volumeattachments",
		obj: func() *storagev1.VolumeAttachment { return &storagev1.VolumeAttachment{} }}
	clients.CSINodes = &typed[*storagev1.CSINode, *storagev1.CSINodeList]{rest: storage, params: params, resource: "csinodes",
		obj: func() *storagev1.CSINode { return &storagev1.CSINode{} }}
	certs, err := restFor("/apis", certificatesv1.SchemeGroupVersion)
	if err != nil {
		return Clients{}, err
	}
	clients.ClusterTrustBundles = &typed[*certificatesv1.ClusterTrustBundle, *certificatesv1.ClusterTrustBundleList]{rest: certs, params: params,
		resource: "clustertrustbundles", obj: func() *certificatesv1.ClusterTrustBundle { return &certificatesv1.ClusterTrustBundle{} },
		list: func() *certificatesv1.ClusterTrustBundleList { return &certificatesv1.ClusterTrustBundleList{} }}
	clients.PodCertificateRequests = func(ns string) PodCertificateRequestClient {
		return &typed[*certificatesv1.PodCertificateRequest, *certificatesv1.PodCertificateRequestList]{rest: certs, params: params,
			resource: "podcertificaterequests", ns: ns, obj: func() *certificatesv1.PodCertificateRequest { return &certificatesv1.PodCertificateRequest{} }}
	}
	return clients, nil
}

// The kubelet's API client settings (pkg/kubelet/apis/config/v1beta1/defaults.go
// kubeAPIQPS and kubeAPIBurst; cmd/kubelet/app/server.go's content type, protobuf for the
// built-in types).
const (
	// ClientQPS and ClientBurst bound the requests per second to the API server: client-go's
	// own default (5, burst 10) makes the status patches of 30 pods that start together wait
	// seconds for the rate limiter.
	ClientQPS   = 50
	ClientBurst = 100
	// ContentTypeProtobuf is what requests are sent and answers asked for in; JSON stays
	// acceptable (a patch is sent in its own patch type).
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
)

// configureTransport gives cfg the kubelet's rate limits and content types.
func configureTransport(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = ClientQPS, ClientBurst
	cfg.ContentType = ContentTypeProtobuf
	cfg.AcceptContentTypes = ContentTypeProtobuf + "," + runtime.ContentTypeJSON
}

// typed is one resource's client on client-go's REST client: the request each method of a
// generated typed client makes (k8s.io/client-go/gentype, type.go), without gentype itself,
// which links client-go's fake machinery (k8s.io/client-go/testing, managed fields,
// structured-merge-diff) into the daemon.
type typed[T runtime.Object, L runtime.Object] struct {
	rest     rest.Interface
	params   runtime.ParameterCodec
	resource string
	ns       string
	obj      func() T
	list     func() L
}

// Get is GET on the object.
func (c *typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := c.obj()
	err := c.rest.Get().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).Name(name).
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

// List is GET on the collection.
func (c *typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := c.list()
	err := c.rest.Get().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).
		VersionedParams(&opts, c.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

// Watch is a watch of the collection.
func (c *typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).
		VersionedParams(&opts, c.params).Timeout(timeout(opts)).Watch(ctx)
}

// Create is POST of the object.
func (c *typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := c.obj()
	err := c.rest.Post().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).
		VersionedParams(&opts, c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update is PUT of the object.
func (c *typed[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := c.obj()
	name := ""
	if m, ok := any(obj).(metav1.Object); ok {
		name = m.GetName()
	}
	err := c.rest.Put().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).Name(name).
		VersionedParams(&opts, c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch is PATCH of the object or one of its subresources.
func (c *typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := c.obj()
	err := c.rest.Patch(pt).NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, c.params).Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete is DELETE of the object.
func (c *typed[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.rest.Delete().NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource).Name(name).Body(&opts).Do(ctx).Error()
}

// timeout is a list or watch's timeoutSeconds as a duration (0: none).
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
