package cluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// testCert is a self-signed certificate's DER named cn.
func testCert(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemOf(ders ...[]byte) string {
	var b bytes.Buffer
	for _, d := range ders {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d}))
	}
	return b.String()
}

// TestNormalizeTrustAnchors: the certificates of the bundles, each once, without PEM headers,
// in one order whatever the bundles' order.
func TestNormalizeTrustAnchors(t *testing.T) {
	a, b := testCert(t, "a"), testCert(t, "b")
	sorted := pemOf(a, b)
	if bytes.Compare(a, b) > 0 {
		sorted = pemOf(b, a)
	}
	withHeader := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: a}))
	tests := []struct {
		name    string
		bundles []string
		want    string
	}{
		{"none", nil, ""},
		{"one bundle, two certificates", []string{pemOf(a, b)}, sorted},
		{"the other order", []string{pemOf(b), pemOf(a)}, sorted},
		{"duplicates across bundles", []string{pemOf(a, b), pemOf(b, a), pemOf(a)}, sorted},
		{"headers dropped", []string{withHeader}, pemOf(a)},
		{"text around the blocks", []string{"# comment\n" + pemOf(a) + "trailing"}, pemOf(a)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(NormalizeTrustAnchors(tc.bundles)); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestTrustAnchors: a projection by name or by signer and labels, with the kubelet's errors
// when nothing matches and an empty file when the source is optional.
func TestTrustAnchors(t *testing.T) {
	one, two, other := testCert(t, "one"), testCert(t, "two"), testCert(t, "other")
	ctb := func(name, signer string, labels map[string]string, ders ...[]byte) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemOf(ders...)}}
	}
	cs := fake.NewClientset(
		ctb("plain", "", nil, other),
		ctb("s:alive", "example.com/s", map[string]string{"alive": "true"}, one),
		ctb("s:dead", "example.com/s", map[string]string{"alive": "false"}, two),
		ctb("t:alive", "example.com/t", map[string]string{"alive": "true"}, other),
	)
	o := NewObjects(Clients{ClusterTrustBundles: cs.CertificatesV1().ClusterTrustBundles()}, clocktesting.NewFakePassiveClock(time.Now()))
	signer := "example.com/s"
	tests := []struct {
		name    string
		src     v1.ClusterTrustBundleProjection
		want    []byte
		wantErr string
	}{
		{"by name", v1.ClusterTrustBundleProjection{Name: ptr.To("plain")}, NormalizeTrustAnchors([]string{pemOf(other)}), ""},
		{"missing name", v1.ClusterTrustBundleProjection{Name: ptr.To("none")}, nil, "while getting ClusterTrustBundle"},
		{"missing name, optional", v1.ClusterTrustBundleProjection{Name: ptr.To("none"), Optional: ptr.To(true)}, []byte{}, ""},
		{"signer and labels", v1.ClusterTrustBundleProjection{SignerName: &signer, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}},
			NormalizeTrustAnchors([]string{pemOf(one)}), ""},
		{"signer, empty selector: all its bundles", v1.ClusterTrustBundleProjection{SignerName: &signer, LabelSelector: &metav1.LabelSelector{}},
			NormalizeTrustAnchors([]string{pemOf(one, two)}), ""},
		{"signer, nil selector matches none", v1.ClusterTrustBundleProjection{SignerName: &signer}, nil, "matched zero ClusterTrustBundles"},
		{"signer, nil selector, optional", v1.ClusterTrustBundleProjection{SignerName: &signer, Optional: ptr.To(true)}, []byte{}, ""},
		{"selector matching none", v1.ClusterTrustBundleProjection{SignerName: &signer, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "maybe"}}},
			nil, "matched zero ClusterTrustBundles"},
		{"neither name nor signer", v1.ClusterTrustBundleProjection{}, nil, "requires either name or signerName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := o.TrustAnchors(&tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) || got == nil {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

// TestPCRStatus: a request's outcome is its first terminal condition.
func TestPCRStatus(t *testing.T) {
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Reason: reason, Message: "m"}
	}
	tests := []struct {
		name   string
		conds  []metav1.Condition
		want   PCROutcome
		reason string
	}{
		{"no condition", nil, PCRPending, ""},
		{"other condition", []metav1.Condition{cond("Progressing", "x")}, PCRPending, ""},
		{"issued", []metav1.Condition{cond(certificatesv1.PodCertificateRequestConditionTypeIssued, "Signed")}, PCRIssued, "Signed"},
		{"denied", []metav1.Condition{cond(certificatesv1.PodCertificateRequestConditionTypeDenied, "Policy")}, PCRDenied, "Policy"},
		{"failed", []metav1.Condition{cond(certificatesv1.PodCertificateRequestConditionTypeFailed, "Broken")}, PCRFailed, "Broken"},
		{"first terminal wins", []metav1.Condition{cond("Progressing", "x"), cond(certificatesv1.PodCertificateRequestConditionTypeDenied, "Policy"),
			cond(certificatesv1.PodCertificateRequestConditionTypeIssued, "Signed")}, PCRDenied, "Policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, _ := PCRStatus(&certificatesv1.PodCertificateRequest{Status: certificatesv1.PodCertificateRequestStatus{Conditions: tc.conds}})
			if got != tc.want || reason != tc.reason {
				t.Errorf("got %v %q, want %v %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestNeedsRequest: a request is due before the first issuance and from the refresh time on.
func TestNeedsRequest(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		issued  bool
		refresh time.Time
		want    bool
	}{
		{"never issued", false, time.Time{}, true},
		{"fresh", true, now.Add(time.Minute), false},
		{"refresh time reached", true, now, true},
		{"refresh overdue", true, now.Add(-time.Hour), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsRequest(tc.issued, tc.refresh, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPodCertificate: the first ask makes a request naming the pod, its service account and
// the node with their UIDs and the key's proof; asks until it is issued fail "not issued
// yet"; then the key and chain are served, the old ones still while a refresh is pending; a
// denied request fails for good; a forgotten pod starts over.
func TestPodCertificate(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"},
		Spec: v1.PodSpec{ServiceAccountName: "sa", NodeName: "node-1"}}
	cs := fake.NewClientset(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: "ns", UID: "sa-uid"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}})
	n := 0
	cs.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		req := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		n++
		req.Name = req.GenerateName + string(rune('a'+n-1))
		return false, nil, nil
	})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := NewObjects(Clients{Nodes: cs.CoreV1().Nodes(), ServiceAccounts: func(ns string) ServiceAccountClient { return cs.CoreV1().ServiceAccounts(ns) },
		PodCertificateRequests: func(ns string) PodCertificateRequestClient { return cs.CertificatesV1().PodCertificateRequests(ns) }}, clk)
	o.podCerts.jitter = func() time.Duration { return 0 }
	src := &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", MaxExpirationSeconds: ptr.To(int32(3600)),
		UserAnnotations: map[string]string{"k": "v"}}
	ask := func() ([]byte, []byte, error) { return o.PodCertificate(pod, "creds", 1, src) }
	pcr := func(name string) *certificatesv1.PodCertificateRequest {
		t.Helper()
		r, err := cs.CertificatesV1().PodCertificateRequests("ns").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	setStatus := func(r *certificatesv1.PodCertificateRequest, typ, chain string, refresh time.Time) {
		t.Helper()
		r.Status = certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: typ, Reason: "R", Message: "M"}},
			CertificateChain: chain, BeginRefreshAt: &metav1.Time{Time: refresh}, NotAfter: &metav1.Time{Time: refresh.Add(time.Hour)}}
		if _, err := cs.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(t.Context(), r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	if _, _, err := ask(); err == nil || !strings.Contains(err.Error(), "not issued yet") {
		t.Fatalf("first ask: %v", err)
	}
	r := pcr("req-a")
	s := r.Spec
	if s.PodName != "web" || s.PodUID != "pod-uid" || s.ServiceAccountName != "sa" || s.ServiceAccountUID != "sa-uid" || s.NodeName != "node-1" ||
		s.NodeUID != "node-uid" || s.SignerName != "example.com/s" || *s.MaxExpirationSeconds != 3600 || s.UnverifiedUserAnnotations["k"] != "v" ||
		len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != "pod-uid" {
		t.Errorf("request %+v", r)
	}
	csr, err := x509.ParseCertificateRequest(s.StubPKCS10Request)
	if err != nil || csr.CheckSignature() != nil {
		t.Fatalf("proof of possession: %v", err)
	}
	if _, _, err := ask(); err == nil || !strings.Contains(err.Error(), "not issued yet") || n != 1 {
		t.Fatalf("pending: %v, %d requests", err, n)
	}
	chain1 := pemOf(testCert(t, "leaf-1"))
	setStatus(r, certificatesv1.PodCertificateRequestConditionTypeIssued, chain1, clk.Now().Add(30*time.Minute))
	key, chain, err := ask()
	if err != nil || string(chain) != chain1 {
		t.Fatalf("issued: %q %v", chain, err)
	}
	block, _ := pem.Decode(key)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key %q", key)
	}
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil || !priv.(ed25519.PrivateKey).Public().(ed25519.PublicKey).Equal(csr.PublicKey) {
		t.Fatalf("the key is not the proof's: %v", err)
	}
	// Refresh: a new request, the old credential served until it is issued.
	clk.SetTime(clk.Now().Add(31 * time.Minute))
	if _, c, err := ask(); err != nil || string(c) != chain1 || n != 2 {
		t.Fatalf("refreshing: %q %v, %d requests", c, err, n)
	}
	chain2 := pemOf(testCert(t, "leaf-2"))
	setStatus(pcr("req-b"), certificatesv1.PodCertificateRequestConditionTypeIssued, chain2, clk.Now().Add(30*time.Minute))
	if k, c, err := ask(); err != nil || string(c) != chain2 || bytes.Equal(k, key) {
		t.Fatalf("refreshed: %q %v", c, err)
	}
	// Another source of the pod, denied.
	if _, _, err := o.PodCertificate(pod, "creds", 2, src); err == nil {
		t.Fatal("no request yet")
	}
	setStatus(pcr("req-c"), certificatesv1.PodCertificateRequestConditionTypeDenied, "", clk.Now())
	for range 2 {
		if _, _, err := o.PodCertificate(pod, "creds", 2, src); err == nil || !strings.Contains(err.Error(), `permanently denied: reason="R" message="M"`) {
			t.Fatalf("denied: %v", err)
		}
	}
	// The pod gone, its records go.
	o.podCerts.forget(nil)
	if _, _, err := ask(); err == nil || n != 4 {
		t.Fatalf("after forgetting: %v, %d requests", err, n)
	}
}

// TestGenerateKeyAndProof: every elliptic key type of the API (RSA ones are slow to make) makes a key whose proof verifies; an
// unknown one is refused.
func TestGenerateKeyAndProof(t *testing.T) {
	for _, kt := range []string{"ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519", "unknown"} {
		t.Run(kt, func(t *testing.T) {
			_, csr, err := GenerateKeyAndProof(kt)
			if kt == "unknown" {
				if err == nil {
					t.Fatal("an unknown key type was accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			req, err := x509.ParseCertificateRequest(csr)
			if err != nil || req.CheckSignature() != nil {
				t.Errorf("proof: %v", err)
			}
		})
	}
}
