package kubeletserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/pods"
)

func TestKubeletAttributes(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantVerb           string
		wantSubs           []string
	}{
		{name: "container logs are proxy", method: "GET", path: "/containerLogs/default/p/c", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "stats summary", method: "GET", path: "/stats/summary", wantVerb: "get", wantSubs: []string{"stats"}},
		{name: "stats root", method: "GET", path: "/stats", wantVerb: "get", wantSubs: []string{"stats"}},
		{name: "a prefix is not a subpath", method: "GET", path: "/statsx", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "node logs are log", method: "GET", path: "/logs/syslog", wantVerb: "get", wantSubs: []string{"log"}},
		{name: "metrics", method: "GET", path: "/metrics/cadvisor", wantVerb: "get", wantSubs: []string{"metrics"}},
		{name: "pods: fine-grained pods, then proxy", method: "GET", path: "/pods", wantVerb: "get", wantSubs: []string{"pods", "proxy"}},
		{name: "healthz: fine-grained healthz, then proxy", method: "GET", path: "/healthz", wantVerb: "get", wantSubs: []string{"healthz", "proxy"}},
		{name: "configz", method: "GET", path: "/configz", wantVerb: "get", wantSubs: []string{"configz", "proxy"}},
		{name: "exec is create on proxy", method: "POST", path: "/exec/default/p/c", wantVerb: "create", wantSubs: []string{"proxy"}},
		{name: "HEAD is get", method: "HEAD", path: "/healthz", wantVerb: "get", wantSubs: []string{"healthz", "proxy"}},
		{name: "PUT is update", method: "PUT", path: "/x", wantVerb: "update", wantSubs: []string{"proxy"}},
		{name: "PATCH is patch", method: "PATCH", path: "/x", wantVerb: "patch", wantSubs: []string{"proxy"}},
		{name: "DELETE is delete", method: "DELETE", path: "/x", wantVerb: "delete", wantSubs: []string{"proxy"}},
		{name: "checkpoint", method: "POST", path: "/checkpoint/ns/p/c", wantVerb: "create", wantSubs: []string{"checkpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			verb, subs := Attributes(tc.method, tc.path)
			if verb != tc.wantVerb || !slices.Equal(subs, tc.wantSubs) {
				t.Errorf("Attributes(%s, %s) = %q %v, want %q %v", tc.method, tc.path, verb, subs, tc.wantVerb, tc.wantSubs)
			}
		})
	}
}

// testCA is a certificate authority for client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client is a TLS client certificate for user in groups, signed by ca.
func (ca *testCA) client(t *testing.T, user string, groups ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fakeReviews answers TokenReviews (token "good" is user "token-user") and
// SubjectAccessReviews (admin and token-user may do anything on node-1), counting them.
type fakeReviews struct{ tokens, access atomic.Int32 }

type fakeTokens struct{ f *fakeReviews }

func (f fakeTokens) Create(_ context.Context, r *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.f.tokens.Add(1)
	out := r.DeepCopy()
	if r.Spec.Token == "good" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "token-user"}}
	}
	return out, nil
}

type fakeAccess struct{ f *fakeReviews }

func (f fakeAccess) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.f.access.Add(1)
	out := r.DeepCopy()
	ra := r.Spec.ResourceAttributes
	out.Status.Allowed = (r.Spec.User == "admin" || r.Spec.User == "token-user") && ra.Resource == "nodes" && ra.Name == "node-1"
	if !out.Status.Allowed {
		out.Status.Reason = "no RBAC policy matched"
	}
	return out, nil
}

func TestKubeletServer(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "test-ca"), newTestCA(t, "other-ca")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	reviews := &fakeReviews{}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pod := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	srv, err := New(Options{NodeName: "node-1", CertDir: filepath.Join(dir, "pki"), Hosts: []string{"127.0.0.1"},
		ClientCAFile: caFile, Tokens: fakeTokens{reviews}, Access: fakeAccess{reviews}, Clock: clk,
		Pods: func() []v1.Pod { return []v1.Pod{pod} },
		Logs: func(_ context.Context, ns, name, container string, opts pods.LogOptions, w io.Writer) error {
			if ns != "default" || name != "web" || container != "main" {
				return fmt.Errorf("pod %s/%s container %s: %w", ns, name, container, ErrNotFound)
			}
			_, err := fmt.Fprintf(w, "hello tail=%d follow=%v\n", opts.TailLines, opts.Follow)
			return err
		},
		Summary: func() statsv1alpha1.Summary {
			return statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: "node-1"}}
		},
		Healthz: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki", "kubelet.crt")); err != nil {
		t.Fatalf("self-signed pair not kept in the cert dir: %v", err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.TLS = srv.TLSConfig()
	ts.StartTLS()
	defer ts.Close()

	clientWith := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
	}
	forced := func(c tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }}}}
	}
	admin := clientWith(ca.client(t, "admin", "system:masters"))
	tests := []struct {
		name       string
		client     *http.Client
		path       string
		token      string
		wantStatus int
		wantBody   string
		wantErr    bool // the TLS handshake fails
		exact      bool // the body is wantBody exactly
	}{
		{name: "no credentials are unauthorized", client: clientWith(), path: "/pods", wantStatus: http.StatusUnauthorized},
		{name: "client certificate of the CA", client: admin, path: "/pods", wantStatus: http.StatusOK, wantBody: `"kind":"PodList"`},
		{name: "another node's certificate is forbidden", client: clientWith(ca.client(t, "system:node:node-2", "system:nodes")), path: "/pods",
			wantStatus: http.StatusForbidden, wantBody: "user=system:node:node-2"},
		{name: "a certificate of another CA is not offered: unauthorized", client: clientWith(other.client(t, "admin")), path: "/pods", wantStatus: http.StatusUnauthorized},
		{name: "a certificate of another CA forced on the server fails the handshake", client: forced(other.client(t, "admin")), path: "/pods", wantErr: true},
		{name: "a good bearer token", client: clientWith(), token: "good", path: "/healthz", wantStatus: http.StatusOK, wantBody: "ok"},
		{name: "a bad bearer token", client: clientWith(), token: "bad", path: "/healthz", wantStatus: http.StatusUnauthorized},
		{name: "logs", client: admin, path: "/containerLogs/default/web/main?tailLines=5", wantStatus: http.StatusOK, wantBody: "hello tail=5 follow=false"},
		{name: "logs followed", client: admin, path: "/containerLogs/default/web/main?follow=true", wantStatus: http.StatusOK, wantBody: "follow=true"},
		{name: "logs limited", client: admin, path: "/containerLogs/default/web/main?limitBytes=5", wantStatus: http.StatusOK, wantBody: "hello", exact: true},
		{name: "logs with a bad parameter", client: admin, path: "/containerLogs/default/web/main?sinceSeconds=-3", wantStatus: http.StatusBadRequest, wantBody: "sinceSeconds"},
		{name: "logs of an unknown pod", client: admin, path: "/containerLogs/default/nope/main", wantStatus: http.StatusNotFound},
		{name: "stats summary", client: admin, path: "/stats/summary", wantStatus: http.StatusOK, wantBody: `"nodeName":"node-1"`},
		{name: "unknown path", client: admin, path: "/no-such-endpoint/default/web", wantStatus: http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, ts.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := tc.client.Do(req)
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %s, want a failed handshake", resp.Status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantBody) || tc.exact && string(body) != tc.wantBody {
				t.Errorf("status %d body %q, want %d containing %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
	var list v1.PodList
	resp, err := admin.Get(ts.URL + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("/pods: %v %+v", err, list)
	}
	resp.Body.Close()

	// The caches: the token and the decisions are reviewed once within their TTLs, again after.
	tokens, access := reviews.tokens.Load(), reviews.access.Load()
	get := func() {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
		req.Header.Set("Authorization", "Bearer good")
		resp, err := clientWith().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	if reviews.tokens.Load() != tokens || reviews.access.Load() != access {
		t.Errorf("reviews %d/%d after a cached request, want %d/%d", reviews.tokens.Load(), reviews.access.Load(), tokens, access)
	}
	clk.Step(AuthorizedCacheTTL)
	get()
	if reviews.tokens.Load() != tokens+1 || reviews.access.Load() != access+1 {
		t.Errorf("reviews %d/%d after the TTLs, want %d/%d", reviews.tokens.Load(), reviews.access.Load(), tokens+1, access+1)
	}
}

func TestPerClientListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &perClientListener{Listener: inner, max: 2, open: map[string]int{}}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := dial(), dial()
	s1, s2 := <-accepted, <-accepted
	// A third connection from the same address is closed at accept: its read sees EOF.
	c3 := dial()
	_ = c3.SetReadDeadline(time.Now().Add(time.Minute)) // a failure, not a hang
	if _, err := c3.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("third connection from one client: %v, want it closed", err)
	}
	// Once one closes, the client may connect again.
	_ = s1.Close()
	c4 := dial()
	s4 := <-accepted
	if got := remoteHost(s4.RemoteAddr()); got != "127.0.0.1" {
		t.Errorf("client %q", got)
	}
	for _, c := range []net.Conn{c1, c2, c3, c4, s2, s4} {
		_ = c.Close()
	}
}

// TestServingCertificate: with a serving certificate manager, each handshake presents its
// current certificate (a rotation shows at the next handshake), none is made on disk, and
// before the first is issued handshakes fail, as the kubelet's.
func TestServingCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "test-ca")
	var current atomic.Pointer[tls.Certificate]
	srv, err := New(Options{NodeName: "node-1", CertDir: filepath.Join(dir, "pki"), ServingCertificate: current.Load,
		Healthz: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki", "kubelet.crt")); err == nil {
		t.Error("a self-signed pair was made beside the serving certificate manager")
	}
	// Not httptest's TLS server: it adds a certificate of its own to the configuration.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = hs.Serve(tls.NewListener(ln, srv.TLSConfig())) }()
	defer hs.Close()
	served := func() (string, error) {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		if err := conn.Handshake(); err != nil {
			return "", err
		}
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	steps := []struct {
		name    string
		cert    *tls.Certificate
		want    string
		wantErr bool
	}{
		{name: "before the first certificate: the handshake fails", wantErr: true},
		{name: "the issued certificate", cert: ptrTo(ca.client(t, "system:node:node-1", "system:nodes")), want: "system:node:node-1"},
		{name: "the rotated certificate", cert: ptrTo(ca.client(t, "system:node:node-1-renewed", "system:nodes")), want: "system:node:node-1-renewed"},
	}
	for _, s := range steps {
		current.Store(s.cert)
		cn, err := served()
		if s.wantErr != (err != nil) || cn != s.want {
			t.Errorf("%s: served %q, error %v", s.name, cn, err)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
