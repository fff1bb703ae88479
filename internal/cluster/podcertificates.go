package cluster

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// PodCertificateRequestClient is the node's access to the PodCertificateRequests of one
// namespace: create (NodeRestriction admits only requests for its own pods) and get of its
// own requests (the Node authorizer).
type PodCertificateRequestClient interface {
	Create(ctx context.Context, req *certificatesv1.PodCertificateRequest, opts metav1.CreateOptions) (*certificatesv1.PodCertificateRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.PodCertificateRequest, error)
}

// The pod certificate manager's timing (pkg/kubelet/podcertificate/podcertificatemanager.go).
const (
	// pcrAbandonAfter: a request not found this long after its creation is taken as deleted
	// and a new one is made (assumeDeletedThreshold, plus the jitter).
	pcrAbandonAfter = 10 * time.Minute
	// maxCertJitter bounds the random delay added to a refresh and to the abandonment of a
	// request, so that the pods of a node do not ask their signer at once.
	maxCertJitter = 5 * time.Minute
	// maxCertificateChain bounds the chain a request may bring (the API's own limit on
	// status.certificateChain is 100 KiB).
	maxCertificateChain = 1 << 20
)

// podCertKey identifies one podCertificate source of a pod (the kubelet's projectionKey).
type podCertKey struct {
	namespace, pod, uid, volume string
	source                      int
}

// podCertRecord is the state of one podCertificate source: the credential issued (key and
// chain; none before the first issuance), the request outstanding (its name and key), or
// the permanent denial or failure of the last request.
type podCertRecord struct {
	mu sync.Mutex

	key, chain     []byte
	beginRefreshAt time.Time
	notAfter       time.Time

	pendingKey []byte
	pendingPCR string
	abandonAt  time.Time

	final error
}

// PCROutcome is what a PodCertificateRequest's conditions say of it.
type PCROutcome int

// The outcomes of a request: none of its terminal conditions yet, or one of them (the first
// listed wins, as in the kubelet).
const (
	PCRPending PCROutcome = iota
	PCRIssued
	PCRDenied
	PCRFailed
)

// PCRStatus is the outcome of pcr, with the reason and message of the condition that decided
// it.
func PCRStatus(pcr *certificatesv1.PodCertificateRequest) (PCROutcome, string, string) {
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			return PCRDenied, c.Reason, c.Message
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			return PCRFailed, c.Reason, c.Message
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			return PCRIssued, c.Reason, c.Message
		}
	}
	return PCRPending, "", ""
}

// NeedsRequest reports whether a new PodCertificateRequest is due at now for a source with no
// request outstanding: none was issued yet, or the credential reached its refresh time.
func NeedsRequest(issued bool, beginRefreshAt, now time.Time) bool {
	return !issued || !now.Before(beginRefreshAt)
}

// podCertificates issues the pods' podCertificate projections (the kubelet's
// podcertificate.IssuingManager, driven by the pods' syncs instead of an informer: a sync
// while a request is outstanding reads it). A source's credential is a private key of its
// keyType made here, and the chain a signer issues for a PodCertificateRequest naming the pod,
// its service account and the node, with the key's proof of possession; it is requested
// again from its beginRefreshAt on, the old one served until the new one is issued.
type podCertificates struct {
	requests        func(namespace string) PodCertificateRequestClient
	serviceAccounts func(namespace string) ServiceAccountClient
	nodes           NodeClient
	clock           clock.PassiveClock
	jitter          func() time.Duration

	mu      sync.Mutex
	records map[podCertKey]*podCertRecord
	nodeUID map[string]types.UID
}

func newPodCertificates(c Clients, clk clock.PassiveClock) *podCertificates {
	return &podCertificates{requests: c.PodCertificateRequests, serviceAccounts: c.ServiceAccounts, nodes: c.Nodes, clock: clk,
		jitter:  func() time.Duration { return time.Duration(mathrand.Int64N(int64(maxCertJitter))) },
		records: map[podCertKey]*podCertRecord{}, nodeUID: map[string]types.UID{}}
}

// PodCertificate is the private key (PEM, PKCS#8) and certificate chain of the podCertificate
// source at index of pod's volume, once issued (worker's ClusterObjects): the kubelet's
// GetPodCertificateCredentialBundle, its errors' wording included.
func (o *Objects) PodCertificate(pod *v1.Pod, volume string, index int, src *v1.PodCertificateProjection) ([]byte, []byte, error) {
	return o.podCerts.credential(pod, volume, index, src)
}

func (m *podCertificates) credential(pod *v1.Pod, volume string, index int, src *v1.PodCertificateProjection) ([]byte, []byte, error) {
	if m.requests == nil {
		return nil, nil, errors.New("pod certificates need an API server's PodCertificateRequests")
	}
	k := podCertKey{namespace: pod.Namespace, pod: pod.Name, uid: string(pod.UID), volume: volume, source: index}
	m.mu.Lock()
	rec := m.records[k]
	if rec == nil {
		rec = &podCertRecord{}
		m.records[k] = rec
	}
	m.mu.Unlock()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := m.advance(ctx, pod, src, rec); err != nil {
		if rec.chain == nil {
			return nil, nil, err
		}
		// A failed refresh keeps the credential issued before.
	}
	if rec.final != nil {
		return nil, nil, rec.final
	}
	if rec.chain == nil {
		return nil, nil, errors.New("credential bundle is not issued yet")
	}
	return rec.key, rec.chain, nil
}

// advance moves rec on at now: it reads the outstanding request, or makes one when it is due.
func (m *podCertificates) advance(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection, rec *podCertRecord) error {
	if rec.final != nil {
		return nil
	}
	now := m.clock.Now()
	if rec.pendingPCR != "" {
		pcr, err := m.requests(pod.Namespace).Get(ctx, rec.pendingPCR, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && now.After(rec.abandonAt) {
			name := rec.pendingPCR
			rec.pendingPCR, rec.pendingKey = "", nil
			return fmt.Errorf("PodCertificateRequest %q appears to have been deleted", pod.Namespace+"/"+name)
		}
		if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+rec.pendingPCR, err)
		}
		outcome, reason, message := PCRStatus(pcr)
		switch outcome {
		case PCRDenied:
			rec.final = fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", reason, message)
		case PCRFailed:
			rec.final = fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", reason, message)
		case PCRIssued:
			chain := CleanCertificateChain([]byte(pcr.Status.CertificateChain))
			if len(chain) == 0 || len(chain) > maxCertificateChain {
				rec.final = fmt.Errorf("PodCertificateRequest %q was issued with a certificate chain of %d bytes", pod.Namespace+"/"+pcr.Name, len(chain))
				break
			}
			rec.key, rec.chain = rec.pendingKey, chain
			rec.notAfter = timeOf(pcr.Status.NotAfter)
			rec.beginRefreshAt = timeOf(pcr.Status.BeginRefreshAt).Add(m.jitter())
		}
		if outcome != PCRPending {
			rec.pendingPCR, rec.pendingKey = "", nil
		}
		return nil
	}
	if !NeedsRequest(rec.chain != nil, rec.beginRefreshAt, now) {
		return nil
	}
	key, pcr, err := m.request(ctx, pod, src)
	if err != nil {
		return err
	}
	rec.pendingKey, rec.pendingPCR = key, pcr.Name
	rec.abandonAt = pcr.CreationTimestamp.Add(pcrAbandonAfter + m.jitter())
	return nil
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// request makes a key pair of src's type and a PodCertificateRequest for it (the kubelet's
// createPodCertificateRequest): owned by the pod, naming the pod, its service account and the
// node with their UIDs.
func (m *podCertificates) request(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection) ([]byte, *certificatesv1.PodCertificateRequest, error) {
	sa, err := m.serviceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while fetching service account: %w", err)
	}
	nodeUID, err := m.node(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, nil, fmt.Errorf("while getting node object: %w", err)
	}
	priv, csr, err := GenerateKeyAndProof(src.KeyType)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating keypair: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while PEM-encoding private key: while marshaling key to PKCS#8: %w", err)
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(pod.Spec.NodeName), NodeUID: nodeUID,
			MaxExpirationSeconds: src.MaxExpirationSeconds, StubPKCS10Request: csr,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	out, err := m.requests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while creating on API: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), out, nil
}

// node is the UID of the Node name, read once.
func (m *podCertificates) node(ctx context.Context, name string) (types.UID, error) {
	m.mu.Lock()
	uid, ok := m.nodeUID[name]
	m.mu.Unlock()
	if ok {
		return uid, nil
	}
	if m.nodes == nil {
		return "", apierrors.NewNotFound(v1.Resource("nodes"), name)
	}
	n, err := m.nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.nodeUID[name] = n.UID
	m.mu.Unlock()
	return n.UID, nil
}

// forget drops the records of the pods not in run (the kubelet's ForgetPod).
func (m *podCertificates) forget(run []pods.Desired) {
	keep := make(map[string]bool, len(run))
	for _, d := range run {
		keep[string(d.Pod.UID)] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.records {
		if !keep[k.uid] {
			delete(m.records, k)
		}
	}
}

// GenerateKeyAndProof makes a private key of keyType (RSA3072, RSA4096, ECDSAP256, ECDSAP384,
// ECDSAP521, ED25519) and a PKCS#10 request signed by it, its proof of possession (the
// kubelet's generateKeyAndProof).
func GenerateKeyAndProof(keyType string) (crypto.PrivateKey, []byte, error) {
	var (
		priv crypto.PrivateKey
		err  error
	)
	switch keyType {
	case "RSA3072":
		priv, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		priv, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		priv, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("while generating %s key: %w", keyType, err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return priv, csr, nil
}

// CleanCertificateChain is the PEM blocks of in re-encoded as CERTIFICATE blocks without
// headers, in their order (the kubelet's cleanCertificateChain).
func CleanCertificateChain(in []byte) []byte {
	var out bytes.Buffer
	rest := in
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
	}
	return out.Bytes()
}
