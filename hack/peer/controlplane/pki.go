package controlplane

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	certutil "k8s.io/client-go/util/cert"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

// keyAlgorithm is every generated key's: ECDSA P-256 keys are made in microseconds where RSA
// 2048 takes tens of milliseconds each on a loaded machine; the API server accepts both for
// serving, client certificates and service-account tokens (ES256).
const keyAlgorithm = kubeadmapi.EncryptionAlgorithmECDSAP256

// certValidity is how long the generated certificates are valid: a run dir is for one test or
// demo, a year is plenty.
const certValidity = 365 * 24 * time.Hour

// Names of the files under the run dir's pki directory (<name>.crt, <name>.key), as kubeadm names
// them where it has a counterpart.
const (
	caName                = "ca"
	apiServerName         = "apiserver"
	apiServerKubeletName  = "apiserver-kubelet-client"
	adminName             = "admin"
	schedulerName         = "scheduler"
	controllerManagerName = "controller-manager"
	serviceAccountName    = "sa"
	// The front proxy: the API server's client certificate towards aggregated API servers
	// (metrics-server), signed by a CA of its own that they trust for the X-Remote-* headers
	// (the extension-apiserver-authentication ConfigMap), as kubeadm makes them.
	frontProxyCAName     = "front-proxy-ca"
	frontProxyClientName = "front-proxy-client"
)

// certSpec is one client or serving certificate the control plane needs: its file name under
// pki, its subject and usages, and the names it serves.
type certSpec struct {
	name         string
	commonName   string
	organization []string
	usages       []x509.ExtKeyUsage
	dnsNames     []string
	ips          []net.IP
}

// NodeUser is the user name of a node's client certificate, the identity the Node authorizer
// and the NodeRestriction admission plugin recognise (group system:nodes).
func NodeUser(node string) string { return "system:node:" + node }

// nodeCertName is the file name under pki of a node's client certificate.
func nodeCertName(node string) string { return "node-" + node }

// nodeCert is the client certificate of a node: CN=system:node:<name>, O=system:nodes
// (plugin/pkg/auth/authorizer/node/node_authorizer.go identifies nodes by that user and group).
func nodeCert(node string) certSpec {
	return certSpec{
		name: nodeCertName(node), commonName: NodeUser(node), organization: []string{"system:nodes"},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// controlPlaneCerts are the certificates of the control plane itself. serviceIP is the first
// address of the service range (the in-cluster "kubernetes" service). The scheduler and the
// controller manager get their own identities, the users the default RBAC policy binds
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go: system:kube-scheduler,
// system:kube-controller-manager); the API server's client certificate towards kubelets is in
// system:masters, so it may reach every kubelet API (logs, exec) without an extra binding.
func controlPlaneCerts(serviceIP, address net.IP) []certSpec {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, serviceIP}
	if address != nil && !address.IsLoopback() {
		ips = append(ips, address)
	}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return []certSpec{
		{
			name: apiServerName, commonName: "kube-apiserver",
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			ips: ips,
		},
		{name: apiServerKubeletName, commonName: "kube-apiserver-kubelet-client", organization: []string{"system:masters"}, usages: client},
		{name: adminName, commonName: "kubernetes-admin", organization: []string{"system:masters"}, usages: client},
		{name: schedulerName, commonName: "system:kube-scheduler", usages: client},
		{name: controllerManagerName, commonName: "system:kube-controller-manager", usages: client},
	}
}

// authority is the cluster CA: it signs every certificate of the run dir, and the controller
// manager signs CSRs with it.
type authority struct {
	dir  string // the pki directory
	cert *x509.Certificate
	key  crypto.Signer
}

// newAuthority creates the CA, or loads it when the pki directory already has one (AddNode on a
// running control plane).
func newAuthority(dir string) (*authority, error) {
	return loadOrCreateAuthority(dir, caName, "slicelet-peer-ca")
}

// frontProxyCerts are the front proxy's CA and its client certificate.
func frontProxyCerts(dir string) error {
	ca, err := loadOrCreateAuthority(dir, frontProxyCAName, frontProxyCAName)
	if err != nil {
		return err
	}
	return ca.issue(certSpec{name: frontProxyClientName, commonName: frontProxyClientName, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// loadOrCreateAuthority loads the CA <name>.crt and .key of the pki directory, or creates it.
func loadOrCreateAuthority(dir, name, commonName string) (*authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki %s: %w", dir, err)
	}
	if pkiutil.CertOrKeyExist(dir, name) {
		cert, key, err := pkiutil.TryLoadCertAndKeyFromDisk(dir, name)
		if err != nil {
			return nil, fmt.Errorf("pki %s: %w", dir, err)
		}
		return &authority{dir: dir, cert: cert, key: key}, nil
	}
	cert, key, err := pkiutil.NewCertificateAuthority(&pkiutil.CertConfig{
		Config:              certutil.Config{CommonName: commonName},
		NotAfter:            time.Now().Add(certValidity),
		EncryptionAlgorithm: keyAlgorithm,
	})
	if err != nil {
		return nil, fmt.Errorf("pki %s: CA %s: %w", dir, name, err)
	}
	if err := pkiutil.WriteCertAndKey(dir, name, cert, key); err != nil {
		return nil, fmt.Errorf("pki %s: CA %s: %w", dir, name, err)
	}
	return &authority{dir: dir, cert: cert, key: key}, nil
}

// issue signs s and writes <name>.crt and <name>.key under the pki directory.
func (a *authority) issue(s certSpec) error {
	cert, key, err := pkiutil.NewCertAndKey(a.cert, a.key, &pkiutil.CertConfig{
		Config: certutil.Config{
			CommonName: s.commonName, Organization: s.organization, Usages: s.usages,
			AltNames: certutil.AltNames{DNSNames: s.dnsNames, IPs: s.ips},
		},
		NotAfter:            time.Now().Add(certValidity),
		EncryptionAlgorithm: keyAlgorithm,
	})
	if err != nil {
		return fmt.Errorf("pki %s: certificate %s: %w", a.dir, s.name, err)
	}
	if err := pkiutil.WriteCertAndKey(a.dir, s.name, cert, key); err != nil {
		return fmt.Errorf("pki %s: certificate %s: %w", a.dir, s.name, err)
	}
	return nil
}

// serviceAccountKeys writes the key pair the API server signs and verifies service-account
// tokens with (sa.key, sa.pub).
func serviceAccountKeys(dir string) error {
	key, err := pkiutil.NewPrivateKey(keyAlgorithm)
	if err != nil {
		return fmt.Errorf("pki %s: service-account key: %w", dir, err)
	}
	if err := pkiutil.WriteKey(dir, serviceAccountName, key); err != nil {
		return fmt.Errorf("pki %s: service-account key: %w", dir, err)
	}
	if err := pkiutil.WritePublicKey(dir, serviceAccountName, key.Public()); err != nil {
		return fmt.Errorf("pki %s: service-account key: %w", dir, err)
	}
	return nil
}
