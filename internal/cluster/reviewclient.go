package cluster

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TokenReviewer creates TokenReviews (client-go's typed authentication/v1 client).
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AccessReviewer creates SubjectAccessReviews (client-go's typed authorization/v1 client).
type AccessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// NewReviewClients builds the clients of the kubelet API's delegated authentication and
// authorization from the node's kubeconfig: TokenReviews (authentication.k8s.io/v1) and
// SubjectAccessReviews (authorization.k8s.io/v1), over a scheme holding only those two groups
// (as NewClients, without the generated clientset's every group). A node's credentials may
// create both: the Node authorizer applies the system:node role's rules
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, NodeRules).
func NewReviewClients(kubeconfig string) (TokenReviewer, AccessReviewer, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	tokens, access, err := NewReviewClientsForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return tokens, access, nil
}

// NewReviewClientsForConfig builds the review clients from a client configuration
// (Credentials.Config), as NewReviewClients.
func NewReviewClientsForConfig(in *rest.Config) (TokenReviewer, AccessReviewer, error) {
	cfg := rest.CopyConfig(in)
	cfg.UserAgent = userAgent()
	scheme := runtime.NewScheme()
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	params := runtime.NewParameterCodec(scheme)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	restFor := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := *cfg
		c.APIPath, c.GroupVersion = "/apis", &gv
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		return rest.RESTClientForConfigAndClient(&c, httpClient)
	}
	authn, err := restFor(authenticationv1.SchemeGroupVersion)
	if err != nil {
		return nil, nil, err
	}
	authz, err := restFor(authorizationv1.SchemeGroupVersion)
	if err != nil {
		return nil, nil, err
	}
	return &typed[*authenticationv1.TokenReview, *authenticationv1.TokenReview]{rest: authn, params: params, resource: "tokenreviews",
			obj: func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} }},
		&typed[*authorizationv1.SubjectAccessReview, *authorizationv1.SubjectAccessReview]{rest: authz, params: params, resource: "subjectaccessreviews",
			obj: func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} }},
		nil
}
