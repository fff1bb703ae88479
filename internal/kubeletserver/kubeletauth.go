package kubeletserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The kubelet's defaults for its delegated authentication and authorization
// (pkg/kubelet/apis/config/v1beta1/defaults.go: authentication.webhook.cacheTTL,
// authorization.webhook.cacheAuthorizedTTL and cacheUnauthorizedTTL), and the number of
// entries each cache keeps (the least recently used go first).
const (
	TokenCacheTTL        = 2 * time.Minute
	AuthorizedCacheTTL   = 5 * time.Minute
	UnauthorizedCacheTTL = 30 * time.Second
	authCacheSize        = 1024
)

// TokenReviewer creates TokenReviews (client-go's typed authentication/v1 client).
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AccessReviewer creates SubjectAccessReviews (client-go's typed authorization/v1 client).
type AccessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// User is who made a request to the kubelet API.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authorizationv1.ExtraValue
}

// The anonymous user (k8s.io/apiserver/pkg/authentication/user).
const (
	anonymousUser  = "system:anonymous"
	anonymousGroup = "system:unauthenticated"
	// authenticatedGroup is added to every authenticated user, as the API server does.
	authenticatedGroup = "system:authenticated"
)

// Attributes are the verb and the nodes subresources a request to the kubelet API
// needs (pkg/kubelet/server/auth.go, GetRequestAttributes): the verb from the HTTP method,
// the subresource from the path — the fine-grained one first (pods, healthz, configz), then
// stats, metrics, log, checkpoint, statusz, or proxy for every other path. The request is
// allowed when the user may do any of them.
func Attributes(method, path string) (verb string, subresources []string) {
	switch method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet, http.MethodHead:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	switch {
	case isSubpath(path, "/allocatedPods"), isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/checkpoint"):
		subresources = append(subresources, "checkpoint")
	case isSubpath(path, "/statusz"):
		subresources = append(subresources, "statusz")
	case isSubpath(path, "/flagz"):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	return verb, subresources
}

// isSubpath says whether path is prefix or below it.
func isSubpath(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// ttlCache is an LRU cache of bounded size whose entries expire.
type ttlCache[V any] struct {
	clock clock.PassiveClock
	c     *lru.Cache
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](clk clock.PassiveClock, size int) *ttlCache[V] {
	return &ttlCache[V]{clock: clk, c: lru.New(size)}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	var zero V
	e, ok := c.c.Get(key)
	if !ok {
		return zero, false
	}
	ent := e.(ttlEntry[V])
	if !c.clock.Now().Before(ent.expires) {
		c.c.Remove(key)
		return zero, false
	}
	return ent.v, true
}

func (c *ttlCache[V]) add(key string, v V, ttl time.Duration) {
	c.c.Add(key, ttlEntry[V]{v: v, expires: c.clock.Now().Add(ttl)})
}

// errUnauthenticated is a request without acceptable credentials.
var errUnauthenticated = errors.New("unauthenticated")

// auth authenticates and authorizes the kubelet API's requests as the kubelet's
// delegated authentication and authorization do (pkg/kubelet/server/auth.go and the API
// server's webhook token authenticator and authorizer): a verified client certificate (its
// common name is the user, its organizations the groups), else a bearer token reviewed by
// the API server, else anonymous when allowed; then a SubjectAccessReview on the node.
type delegatedAuth struct {
	node      string
	anonymous bool
	tokens    TokenReviewer
	access    AccessReviewer
	tokenHits *ttlCache[*User]
	decisions *ttlCache[authorizationv1.SubjectAccessReviewStatus]
}

func newDelegatedAuth(node string, anonymous bool, tokens TokenReviewer, access AccessReviewer, clk clock.PassiveClock) *delegatedAuth {
	return &delegatedAuth{node: node, anonymous: anonymous, tokens: tokens, access: access,
		tokenHits: newTTLCache[*User](clk, authCacheSize),
		decisions: newTTLCache[authorizationv1.SubjectAccessReviewStatus](clk, authCacheSize)}
}

// authenticate is who made r; errUnauthenticated when nobody acceptable did.
func (a *delegatedAuth) authenticate(ctx context.Context, r *http.Request) (*User, error) {
	// The TLS handshake verified the chain against the client CA (VerifyClientCertIfGiven).
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		return &User{Name: c.Subject.CommonName, Groups: append(slices.Clone(c.Subject.Organization), authenticatedGroup)}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || strings.TrimSpace(token) == "" || a.tokens == nil {
			return nil, errUnauthenticated
		}
		return a.reviewToken(ctx, strings.TrimSpace(token))
	}
	if a.anonymous {
		return &User{Name: anonymousUser, Groups: []string{anonymousGroup}}, nil
	}
	return nil, errUnauthenticated
}

// reviewToken asks the API server who token is, cached by the token's hash (only successful
// reviews are cached, as the webhook token authenticator caches them).
func (a *delegatedAuth) reviewToken(ctx context.Context, token string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if u, ok := a.tokenHits.get(key); ok {
		return u, nil
	}
	rev, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	if !rev.Status.Authenticated {
		return nil, errUnauthenticated
	}
	u := &User{Name: rev.Status.User.Username, UID: rev.Status.User.UID, Groups: rev.Status.User.Groups}
	for k, v := range rev.Status.User.Extra {
		if u.Extra == nil {
			u.Extra = map[string]authorizationv1.ExtraValue{}
		}
		u.Extra[k] = authorizationv1.ExtraValue(v)
	}
	a.tokenHits.add(key, u, TokenCacheTTL)
	return u, nil
}

// authorize says whether u may make a request with method to path: allowed when the API
// server allows any of its attributes (the kubelet tries the fine-grained subresource first,
// then the coarse one). reason is the API server's for a refusal.
func (a *delegatedAuth) authorize(ctx context.Context, u *User, method, path string) (allowed bool, reason string, err error) {
	verb, subresources := Attributes(method, path)
	for _, sub := range subresources {
		spec := authorizationv1.SubjectAccessReviewSpec{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: a.node}}
		st, err := a.review(ctx, spec)
		if err != nil {
			return false, "", err
		}
		if st.Allowed {
			return true, "", nil
		}
		reason = st.Reason
	}
	return false, reason, nil
}

// review is one SubjectAccessReview, cached by its spec (allowed for AuthorizedCacheTTL,
// denied for UnauthorizedCacheTTL; errors are not cached).
func (a *delegatedAuth) review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	key := spec.String()
	if st, ok := a.decisions.get(key); ok {
		return st, nil
	}
	if a.access == nil {
		return authorizationv1.SubjectAccessReviewStatus{}, errors.New("subject access review: no API client")
	}
	rev, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("subject access review: %w", err)
	}
	ttl := UnauthorizedCacheTTL
	if rev.Status.Allowed {
		ttl = AuthorizedCacheTTL
	}
	a.decisions.add(key, rev.Status, ttl)
	return rev.Status, nil
}
