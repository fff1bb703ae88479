package cluster

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// addObjectClients sets the clients of the cluster pods' objects on the core/v1 REST client.
func addObjectClients(c *Clients, core rest.Interface, params runtime.ParameterCodec) {
	c.ConfigMaps = func(ns string) ConfigMapClient {
		return &typed[*v1.ConfigMap, *v1.ConfigMapList]{rest: core, params: params, resource: "configmaps", ns: ns, obj: func() *v1.ConfigMap { return &v1.ConfigMap{} }}
	}
	c.Secrets = func(ns string) SecretClient {
		return &typed[*v1.Secret, *v1.SecretList]{rest: core, params: params, resource: "secrets", ns: ns, obj: func() *v1.Secret { return &v1.Secret{} }}
	}
	c.Services = func(ns string) ServiceClient {
		return &typed[*v1.Service, *v1.ServiceList]{rest: core, params: params, resource: "services", ns: ns, obj: func() *v1.Service { return &v1.Service{} }, list: func() *v1.ServiceList { return &v1.ServiceList{} }}
	}
	c.PersistentVolumeClaims = func(ns string) PersistentVolumeClaimClient {
		return &typed[*v1.PersistentVolumeClaim, *v1.PersistentVolumeClaimList]{rest: core, params: params, resource: "persistentvolumeclaims", ns: ns,
			obj: func() *v1.PersistentVolumeClaim { return &v1.PersistentVolumeClaim{} }}
	}
	c.PersistentVolumes = &typed[*v1.PersistentVolume, *v1.PersistentVolumeList]{rest: core, params: params, resource: "persistentvolumes",
		obj: func() *v1.PersistentVolume { return &v1.PersistentVolume{} }}
	c.ServiceAccounts = func(ns string) ServiceAccountClient {
		return &tokenClient{rest: core, params: params, ns: ns}
	}
}

// tokenClient is the serviceaccounts/token subresource of one namespace (the CreateToken of
// client-go's typed core/v1 ServiceAccounts client).
type tokenClient struct {
	rest   rest.Interface
	params runtime.ParameterCodec
	ns     string
}

// Get is GET of the service account name.
func (c *tokenClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.ServiceAccount, error) {
	out := &v1.ServiceAccount{}
	err := c.rest.Get().Namespace(c.ns).Resource("serviceaccounts").Name(name).VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

// CreateToken is POST of a TokenRequest to serviceaccounts/<name>/token.
func (c *tokenClient) CreateToken(ctx context.Context, name string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := c.rest.Post().Namespace(c.ns).Resource("serviceaccounts").Name(name).SubResource("token").
		VersionedParams(&opts, c.params).Body(tr).Do(ctx).Into(out)
	return out, err
}
