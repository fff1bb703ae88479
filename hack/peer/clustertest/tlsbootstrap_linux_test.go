package clustertest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// bootstrapToken is the node's bootstrap token (kubeadm's id.secret form).
const bootstrapToken = "abcdef.0123456789abcdef"

// signingDuration is the controller manager's certificate lifetime: the signer backdates
// NotBefore 5 minutes, so a certificate lives 8 minutes and is renewed 0.6–2.2 minutes after
// it is issued (70–90% of its life).
const signingDuration = 3 * time.Minute

// TestSliceletNodeTLSBootstrap: a slicelet node joins as kubeadm join makes a kubelet join —
// with only a bootstrap kubeconfig (a bootstrap token; kubeadm's token Secret and RBAC
// bindings) — gets its client certificate through a CertificateSigningRequest the controller
// manager approves and signs, writes its kubeconfig and kubelet-client-current.pem, becomes
// Ready, and renews the short-lived certificate (signed for signingDuration) before it
// expires, keeping the node Ready and its Lease renewed with the new certificate. With
// server_tls_bootstrap its serving certificate is requested too, approved here as an operator
// would, and served by the kubelet API (verified against the cluster CA). /metrics serves the
// kubelet's certificate manager families: the same names, types, help and label names as a
// kubelet joining the same way afterwards (--bootstrap-kubeconfig, --rotate-certificates,
// --rotate-server-certificates) on the same node.
func TestSliceletNodeTLSBootstrap(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandboxFor(t, "^TestSliceletNodeTLSBootstrap$", 15*time.Minute)
		return
	}
	work, bin, slicelet := os.Getenv(workEnv), os.Getenv(binEnv), os.Getenv(sliceletEnv)
	ctx, cancel := context.WithTimeout(t.Context(), 13*time.Minute)
	defer cancel()
	nodeDir := filepath.Join(work, "node")
	kubeconfig, certDir := filepath.Join(nodeDir, "kubelet.conf"), filepath.Join(nodeDir, "pki")
	boot := filepath.Join(nodeDir, "bootstrap-kubelet.conf")
	c := startClusterNode(t, ctx, work, bin, slicelet, controlplane.Config{ControllerManager: true, ClusterSigningDuration: signingDuration},
		func(cp *controlplane.ControlPlane) string {
			admin, err := cp.Client(cp.AdminKubeconfig())
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.BootstrapToken(ctx, admin, bootstrapToken, time.Hour, boot); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("[cluster]\nenabled = true\nnode_name = %q\nkubeconfig = %q\nbootstrap_kubeconfig = %q\ncert_dir = %q\n"+
				"rotate_certificates = true\nserver_tls_bootstrap = true\nnode_ip = \"127.0.0.1\"\nclient_ca_file = %q\n",
				nodeName, kubeconfig, boot, certDir, cp.CAFile())
		})
	cp, admin := c.cp, c.admin

	// The operator's part: approve the node's serving certificate requests.
	go approveServing(ctx, admin)

	// The client certificate: requested with the bootstrap token, approved and signed by the
	// controller manager.
	poll(t, ctx, "bootstrap CSR issued", 4*time.Minute, func(ctx context.Context) (bool, error) {
		csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
				csr.Spec.Username == "system:bootstrap:abcdef" && len(csr.Status.Certificate) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	poll(t, ctx, "node Ready", 4*time.Minute, func(ctx context.Context) (bool, error) { return nodeReady(ctx, admin) })
	first := currentClientCert(t, certDir)
	if first.Subject.CommonName != "system:node:"+nodeName || !slices.Equal(first.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("client certificate subject %s, want CN=system:node:%s, O=system:nodes", first.Subject, nodeName)
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Errorf("kubeconfig not written: %v", err)
	}
	t.Logf("client certificate %x, valid %s to %s", first.SerialNumber, first.NotBefore.Format(time.TimeOnly), first.NotAfter.Format(time.TimeOnly))

	// The rotation: a new certificate before the first expires, asked with the first
	// (selfnodeclient auto-approval).
	var second *x509.Certificate
	poll(t, ctx, "client certificate rotated", 4*time.Minute, func(context.Context) (bool, error) {
		second = currentClientCert(t, certDir)
		return second.SerialNumber.Cmp(first.SerialNumber) != 0, nil
	})
	rotated := time.Now()
	t.Logf("rotated to %x, valid to %s", second.SerialNumber, second.NotAfter.Format(time.TimeOnly))
	if !rotated.Before(first.NotAfter) {
		t.Errorf("rotated at %s, after the first certificate expired (%s)", rotated, first.NotAfter)
	}
	renewal := false
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range csrs.Items {
		renewal = renewal || csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
			csr.Spec.Username == "system:node:"+nodeName && len(csr.Status.Certificate) > 0
	}
	if !renewal {
		t.Error("no renewal CSR by system:node:" + nodeName)
	}
	// The node goes on with the new certificate: its Lease is renewed after the rotation.
	poll(t, ctx, "lease renewed after the rotation", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		return l.Spec.RenewTime.After(rotated.Add(time.Second)), nil
	})
	if ready, _ := nodeReady(ctx, admin); !ready {
		t.Error("node not Ready after the rotation")
	}

	// The kubelet API serves the certificate the cluster signed, for the node's address.
	admincfg, err := cp.RESTConfig(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(admincfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 10 * time.Second}
	var body string
	poll(t, ctx, "kubelet API served with the cluster-signed certificate", time.Minute, func(context.Context) (bool, error) {
		resp, err := client.Get("https://127.0.0.1:10250/metrics")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, nil
		}
		leaf := resp.TLS.PeerCertificates[0]
		if leaf.Subject.CommonName != "system:node:"+nodeName {
			return false, fmt.Errorf("served certificate %s", leaf.Subject)
		}
		body = string(b)
		return true, nil
	})
	sliceletFamilies := checkCertificateFamilies(t, body)

	// The same families on a kubelet node joining the same way, in the same harness: same
	// names, types and label names.
	if err := c.agent.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const kubeletNode = "kubelet-node"
	addNodeIP(t, ctx)
	kdir := filepath.Join(work, "kubelet-node")
	kubelet, err := c.node.StartAgent(ctx, peerrun.AgentOptions{Kind: peerrun.Kubelet, Binary: filepath.Join(bin, "kubelet"), ManifestDir: c.manifests,
		NodeName: kubeletNode, ExtraArgs: []string{"--kubeconfig=" + filepath.Join(kdir, "kubelet.conf"), "--bootstrap-kubeconfig=" + boot,
			// An address for its serving certificate: the kubelet requests none without an IP
			// (pkg/kubelet/certificate/kubelet.go), the sandbox has no default route, and the
			// kubelet refuses a loopback node IP.
			"--rotate-certificates", "--rotate-server-certificates", "--node-ip=" + sideBySideNodeIP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx := context.WithoutCancel(ctx)
		if t.Failed() {
			t.Logf("the kubelet's journal:\n%s", kubelet.Journal(stopCtx, 60))
		}
		_ = kubelet.Stop(stopCtx)
	})
	// The admin's client certificate (the kubelet answers 401 without one); the kubelet's
	// serving certificate names the node's addresses, which need not include 127.0.0.1.
	kubeletTLS := tlsConfig.Clone()
	kubeletTLS.InsecureSkipVerify = true
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: kubeletTLS}, Timeout: 10 * time.Second}
	var kubeletFamilies map[string]*dto.MetricFamily
	poll(t, ctx, "kubelet node serving its certificate families with both certificates", 4*time.Minute, func(context.Context) (bool, error) {
		resp, err := insecure.Get("https://127.0.0.1:10250/metrics")
		if err != nil {
			t.Logf("kubelet /metrics: %v", err)
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Logf("kubelet /metrics: %s %v", resp.Status, err)
			return false, nil
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		if kubeletFamilies, err = parser.TextToMetricFamilies(strings.NewReader(string(b))); err != nil {
			return false, err
		}
		for _, name := range []string{"kubelet_certificate_manager_client_ttl_seconds", "kubelet_certificate_manager_server_ttl_seconds"} {
			f := kubeletFamilies[name]
			if f == nil || len(f.GetMetric()) == 0 || math.IsInf(f.GetMetric()[0].GetGauge().GetValue(), 1) {
				return false, nil
			}
		}
		return true, nil
	})
	for name := range certificateFamilies {
		k, s := kubeletFamilies[name], sliceletFamilies[name]
		switch {
		case k == nil:
			t.Errorf("%s: not served by the kubelet", name)
		case s == nil:
			t.Errorf("%s: not served by slicelet", name)
		case k.GetType() != s.GetType() || k.GetHelp() != s.GetHelp() || !slices.Equal(labelNames(k), labelNames(s)):
			t.Errorf("%s: kubelet %s %q %v, slicelet %s %q %v", name, k.GetType(), k.GetHelp(), labelNames(k), s.GetType(), s.GetHelp(), labelNames(s))
		default:
			t.Logf("%s: %s, labels %v, as the kubelet's", name, s.GetType(), labelNames(s))
		}
	}
}

// labelNames are the label names of a family's series, sorted, each once.
func labelNames(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			out = append(out, l.GetName())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nodeReady says whether the node is Ready.
func nodeReady(ctx context.Context, admin kubernetes.Interface) (bool, error) {
	n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return false, nil
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue, nil
		}
	}
	return false, nil
}

// currentClientCert is the certificate of <certDir>/kubelet-client-current.pem, which must be
// a link to a dated pair.
func currentClientCert(t *testing.T, certDir string) *x509.Certificate {
	t.Helper()
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil {
		t.Fatalf("kubelet-client-current.pem: %v", err)
	}
	if !strings.HasPrefix(filepath.Base(target), "kubelet-client-") || filepath.Base(target) == "kubelet-client-current.pem" {
		t.Fatalf("kubelet-client-current.pem links to %s, want kubelet-client-<date>.pem", target)
	}
	data, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			t.Fatalf("%s: no certificate", current)
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// approveServing approves the nodes' kubelet-serving requests as an operator would
// (kubectl certificate approve), until ctx ends.
func approveServing(ctx context.Context, admin kubernetes.Interface) {
	for ctx.Err() == nil {
		csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, csr := range csrs.Items {
				if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || !strings.HasPrefix(csr.Spec.Username, "system:node:") || len(csr.Status.Conditions) > 0 {
					continue
				}
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "ClusterTest", Message: "approved by the test"})
				_, _ = admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// certificateFamilies are the kubelet's certificate manager families with their types
// (pkg/kubelet/certificate/kubelet.go, cmd/kubelet/app/server.go), none labelled.
var certificateFamilies = map[string]dto.MetricType{
	"kubelet_certificate_manager_client_ttl_seconds":             dto.MetricType_GAUGE,
	"kubelet_certificate_manager_client_expiration_renew_errors": dto.MetricType_COUNTER,
	"kubelet_certificate_manager_server_ttl_seconds":             dto.MetricType_GAUGE,
	"kubelet_server_expiration_renew_errors":                     dto.MetricType_COUNTER,
	"kubelet_certificate_manager_server_rotation_seconds":        dto.MetricType_HISTOGRAM,
}

// checkCertificateFamilies checks a /metrics scrape has the certificate manager families with
// the kubelet's types and no labels, and finite TTLs within the signing duration; it returns the
// scrape's families.
func checkCertificateFamilies(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range certificateFamilies {
		f, ok := families[name]
		if !ok {
			t.Errorf("%s not served", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %s, want a %s", name, f.GetType(), typ)
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				t.Errorf("%s has labels %v, want none", name, m.GetLabel())
			}
		}
		if strings.HasSuffix(name, "_ttl_seconds") {
			v := f.GetMetric()[0].GetGauge().GetValue()
			if v <= 0 || v > signingDuration.Seconds() {
				t.Errorf("%s = %v, want (0, %v]", name, v, signingDuration.Seconds())
			}
		}
	}
	return families
}
