package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// ServiceAccountClient is the node's access to the service accounts of one namespace: a
// TokenRequest for a pod bound to the node (the Node authorizer allows serviceaccounts/token
// create for those, NodeRestriction requires the pod as the bound object).
type ServiceAccountClient interface {
	// Get reads a service account of a pod bound to the node (the Node authorizer allows it
	// for the UID a PodCertificateRequest names).
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.ServiceAccount, error)
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// The token manager's rules (pkg/kubelet/token/token_manager.go).
const (
	// maxTokenTTL: a token older than this is refreshed whatever its expiry.
	maxTokenTTL = 24 * time.Hour
	// refreshFraction: a token is refreshed once this fraction of its lifetime is left.
	refreshPercent = 20
)

// tokenManager requests and caches the pods' projected service-account tokens, refreshed
// once 80 % of their lifetime passed or 24 hours (the kubelet's requiresRefresh, without its
// random jitter), and drops those that expired (its cleanup).
type tokenManager struct {
	client func(namespace string) ServiceAccountClient
	clock  clock.PassiveClock

	mu    sync.Mutex
	cache map[string]*authenticationv1.TokenRequest
	retry map[string]time.Time // after a failed refresh: not before then
}

func newTokenManager(client func(string) ServiceAccountClient, clk clock.PassiveClock) *tokenManager {
	return &tokenManager{client: client, clock: clk, cache: map[string]*authenticationv1.TokenRequest{}, retry: map[string]time.Time{}}
}

// TokenRequest is the request for a token of pod's service account projected by src: for
// src's audience (the API server's when empty) and expirationSeconds, bound to the pod (the
// kubelet's projected volume plugin, pkg/volume/projected/projected.go).
func TokenRequest(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) *authenticationv1.TokenRequest {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		tr.Spec.Audiences = []string{src.Audience}
	}
	return tr
}

// tokenKey identifies a token: the service account, the pod and the request's spec (the
// kubelet's keyFunc).
func tokenKey(pod *v1.Pod, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	return fmt.Sprintf("%q/%q/%q/%d/%q", pod.Spec.ServiceAccountName, pod.Namespace, strings.Join(tr.Spec.Audiences, ","), exp, pod.UID)
}

// RequiresRefresh reports whether the token tr got must be requested again at now: it is 24
// hours old, or less than 20 % of its lifetime is left (the kubelet's requiresRefresh).
func RequiresRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	iat := exp.Add(-ttl)
	if now.After(iat.Add(maxTokenTTL)) {
		return true
	}
	return now.After(exp.Add(-ttl * refreshPercent / 100))
}

// ServiceAccountToken is the token src projects for pod: cached while fresh, requested from
// the API server otherwise. A failed refresh serves the cached token while it is valid (the
// kubelet's GetServiceAccountToken), asked again errorTTL later.
func (m *tokenManager) ServiceAccountToken(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) ([]byte, error) {
	st, err := m.token(pod, src)
	if err != nil {
		return nil, err
	}
	return []byte(st.Token), nil
}

// token is ServiceAccountToken's, with the token's expiry.
func (m *tokenManager) token(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) (authenticationv1.TokenRequestStatus, error) {
	if m.client == nil {
		return authenticationv1.TokenRequestStatus{}, errors.New("service account tokens: no API client")
	}
	if pod.Spec.ServiceAccountName == "" {
		return authenticationv1.TokenRequestStatus{}, fmt.Errorf("pod %s/%s: no service account", pod.Namespace, pod.Name)
	}
	want := TokenRequest(pod, src)
	key := tokenKey(pod, want)
	now := m.clock.Now()
	m.mu.Lock()
	m.cleanupLocked(now)
	cached, retry := m.cache[key], m.retry[key]
	m.mu.Unlock()
	if cached != nil && (!RequiresRefresh(cached, now) || now.Before(retry)) {
		return cached.Status, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	got, err := m.client(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, want, metav1.CreateOptions{})
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			m.mu.Lock()
			m.retry[key] = now.Add(errorTTL)
			m.mu.Unlock()
			return cached.Status, nil
		}
		return authenticationv1.TokenRequestStatus{}, fmt.Errorf("failed to fetch token: %w", err)
	}
	// The request as sent, with the answer's status: its spec is what refreshes are timed by.
	tr := want.DeepCopy()
	if got.Spec.ExpirationSeconds != nil {
		tr.Spec.ExpirationSeconds = got.Spec.ExpirationSeconds
	}
	tr.Status = got.Status
	m.mu.Lock()
	m.cache[key] = tr
	delete(m.retry, key)
	m.mu.Unlock()
	return tr.Status, nil
}

// cleanupLocked drops the expired tokens (their pods are gone or will get new ones).
func (m *tokenManager) cleanupLocked(now time.Time) {
	for k, tr := range m.cache {
		if !now.Before(tr.Status.ExpirationTimestamp.Time) {
			delete(m.cache, k)
			delete(m.retry, k)
		}
	}
}

// ServiceAccountToken is the projected service-account token src names for pod (worker's
// ClusterObjects).
func (o *Objects) ServiceAccountToken(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) ([]byte, error) {
	return o.tokens.ServiceAccountToken(pod, src)
}

// CSIToken is the token of pod's service account for audience (the API server's when empty)
// and expirationSeconds, bound to the pod, with its expiry: what a CSI driver whose CSIDriver
// has tokenRequests gets (pkg/volume/csi podServiceAccountTokenAttrs), from the same cache as
// the projected tokens.
func (o *Objects) CSIToken(pod *v1.Pod, audience string, expirationSeconds *int64) (authenticationv1.TokenRequestStatus, error) {
	return o.tokens.token(pod, &v1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: expirationSeconds})
}
