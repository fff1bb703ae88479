package controlplane

import (
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

func TestComponentsListenOnLoopbackOnly(t *testing.T) {
	c := Config{Dir: "/run/cp", BinDir: "/bin", Scheduler: true, ControllerManager: true}.withDefaults()
	for _, comp := range components(c, layout(c.Dir)) {
		t.Run(comp.name, func(t *testing.T) {
			for _, a := range comp.args {
				k, v, _ := strings.Cut(a, "=")
				switch {
				case strings.HasSuffix(k, "-urls") || k == "--initial-cluster" || k == "--etcd-servers":
					for _, u := range strings.Split(v, ",") {
						if _, rest, _ := strings.Cut(u, "://"); !strings.HasPrefix(rest, "127.0.0.1:") {
							t.Errorf("%s: %q is not on 127.0.0.1", k, u)
						}
					}
				case k == "--bind-address" || k == "--advertise-address":
					if v != "127.0.0.1" {
						t.Errorf("%s=%s, want 127.0.0.1", k, v)
					}
				case k == "--secure-port" && comp.name != APIServer:
					if v != "0" {
						t.Errorf("%s=%s: only the API server serves", k, v)
					}
				}
			}
		})
	}
}

func TestAPIServerArgs(t *testing.T) {
	c := Config{Dir: "/run/cp", BinDir: "/bin"}.withDefaults()
	args := apiServerArgs(c, layout(c.Dir))
	for _, tc := range []struct {
		name, want string
	}{
		{"node authorizer before RBAC", "--authorization-mode=Node,RBAC"},
		{"node restriction admission", "--enable-admission-plugins=NodeRestriction"},
		{"service range", "--service-cluster-ip-range=10.96.0.0/16"},
		{"client certificates from the run dir's CA", "--client-ca-file=/run/cp/pki/ca.crt"},
		{"service-account signing key", "--service-account-signing-key-file=/run/cp/pki/sa.key"},
		{"service-account verifying key", "--service-account-key-file=/run/cp/pki/sa.pub"},
		{"etcd on loopback", "--etcd-servers=http://127.0.0.1:2379"},
		{"front proxy's client certificate", "--proxy-client-cert-file=/run/cp/pki/front-proxy-client.crt"},
		{"request headers trusted from the front proxy's CA", "--requestheader-client-ca-file=/run/cp/pki/front-proxy-ca.crt"},
		{"request headers from the front proxy only", "--requestheader-allowed-names=front-proxy-client"},
		{"aggregated APIs reached at their endpoints", "--enable-aggregator-routing=true"},
		{"bootstrap tokens authenticate joining nodes", "--enable-bootstrap-token-auth=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(args, tc.want) {
				t.Fatalf("%s missing from %q", tc.want, args)
			}
		})
	}
}

// TestClusterSigningDuration: the controller manager signs for the lifetime asked, else for
// its default.
func TestClusterSigningDuration(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want string
	}{
		{"default", 0, ""},
		{"short-lived certificates", 3 * time.Minute, "--cluster-signing-duration=3m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Dir: "/run/cp", BinDir: "/bin", ControllerManager: true, ClusterSigningDuration: tc.d}.withDefaults()
			var got string
			for _, a := range controllerManagerArgs(c, layout(c.Dir)) {
				if strings.HasPrefix(a, "--cluster-signing-duration=") {
					got = a
				}
			}
			if got != tc.want {
				t.Errorf("signing duration flag %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNodeNetworkArgs: on an address other than loopback the API server binds and advertises
// it and reconciles the "kubernetes" Service's endpoints; with a cluster CIDR the controller
// manager allocates pod CIDRs.
func TestNodeNetworkArgs(t *testing.T) {
	c := Config{Dir: "/run/cp", BinDir: "/bin", Address: "10.250.0.1", ClusterCIDR: "10.244.0.0/16", ControllerManager: true}.withDefaults()
	l := layout(c.Dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bind address", apiServerArgs(c, l), "--bind-address=10.250.0.1"},
		{"advertise address", apiServerArgs(c, l), "--advertise-address=10.250.0.1"},
		{"endpoint reconciler", apiServerArgs(c, l), "--endpoint-reconciler-type=lease"},
		{"allocate node CIDRs", controllerManagerArgs(c, l), "--allocate-node-cidrs=true"},
		{"cluster CIDR", controllerManagerArgs(c, l), "--cluster-cidr=10.244.0.0/16"},
		{"node CIDR mask", controllerManagerArgs(c, l), "--node-cidr-mask-size=24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(tc.args, tc.want) {
				t.Fatalf("%s missing from %q", tc.want, tc.args)
			}
		})
	}
	loop := Config{Dir: "/run/cp", BinDir: "/bin"}.withDefaults()
	if args := apiServerArgs(loop, l); !slices.Contains(args, "--endpoint-reconciler-type=none") {
		t.Errorf("on loopback: no --endpoint-reconciler-type=none in %q", args)
	}
	if args := controllerManagerArgs(loop, l); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--allocate-node-cidrs") }) {
		t.Errorf("without a cluster CIDR: %q allocates node CIDRs", args)
	}
}

func TestCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := newAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	specs := append(controlPlaneCerts(net.IPv4(10, 96, 0, 1), net.IPv4(10, 250, 0, 1)), nodeCert("node-a"))
	for _, s := range specs {
		if err := ca.issue(s); err != nil {
			t.Fatal(err)
		}
	}
	// A second authority over the same dir loads the CA instead of making another (AddNode).
	again, err := newAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.cert.Equal(ca.cert) {
		t.Fatal("newAuthority replaced an existing CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, tc := range []struct {
		name, file, cn, org string
		usage               x509.ExtKeyUsage
		serves              []string // host names or IPs it must be valid for
	}{
		{"API server serving", "apiserver", "kube-apiserver", "", x509.ExtKeyUsageServerAuth, []string{"127.0.0.1", "localhost", "10.96.0.1", "kubernetes.default.svc", "10.250.0.1"}},
		{"admin client", "admin", "kubernetes-admin", "system:masters", x509.ExtKeyUsageClientAuth, nil},
		{"API server to kubelets", "apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters", x509.ExtKeyUsageClientAuth, nil},
		{"scheduler", "scheduler", "system:kube-scheduler", "", x509.ExtKeyUsageClientAuth, nil},
		{"controller manager", "controller-manager", "system:kube-controller-manager", "", x509.ExtKeyUsageClientAuth, nil},
		{"node", "node-node-a", "system:node:node-a", "system:nodes", x509.ExtKeyUsageClientAuth, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := pkiutil.TryLoadCertFromDisk(dir, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != tc.cn || strings.Join(cert.Subject.Organization, ",") != tc.org {
				t.Fatalf("subject CN=%q O=%q, want CN=%q O=%q", cert.Subject.CommonName, cert.Subject.Organization, tc.cn, tc.org)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("verify for %v: %v", tc.usage, err)
			}
			for _, h := range tc.serves {
				if err := cert.VerifyHostname(h); err != nil {
					t.Errorf("not valid for %s: %v", h, err)
				}
			}
		})
	}
}

// TestFrontProxyCertificates: the front proxy's client certificate verifies against its own
// CA and not the cluster's (a client certificate of the cluster CA must not be able to
// assert X-Remote-User to an aggregated API server), and a second run keeps the CA.
func TestFrontProxyCertificates(t *testing.T) {
	dir := t.TempDir()
	if _, err := newAuthority(dir); err != nil {
		t.Fatal(err)
	}
	if err := frontProxyCerts(dir); err != nil {
		t.Fatal(err)
	}
	ca, err := pkiutil.TryLoadCertFromDisk(dir, frontProxyCAName)
	if err != nil {
		t.Fatal(err)
	}
	if err := frontProxyCerts(dir); err != nil {
		t.Fatal(err)
	}
	if again, err := pkiutil.TryLoadCertFromDisk(dir, frontProxyCAName); err != nil || !again.Equal(ca) {
		t.Fatalf("a second run replaced the front proxy's CA (%v)", err)
	}
	client, err := pkiutil.TryLoadCertFromDisk(dir, frontProxyClientName)
	if err != nil {
		t.Fatal(err)
	}
	if client.Subject.CommonName != frontProxyClientName {
		t.Errorf("CN %q, want %q (--requestheader-allowed-names)", client.Subject.CommonName, frontProxyClientName)
	}
	cluster, err := pkiutil.TryLoadCertFromDisk(dir, caName)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		root  *x509.Certificate
		valid bool
	}{
		{"front proxy CA", ca, true},
		{"cluster CA", cluster, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roots := x509.NewCertPool()
			roots.AddCert(tc.root)
			_, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if (err == nil) != tc.valid {
				t.Fatalf("verify: %v, want valid %v", err, tc.valid)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Dir: "/run/cp", BinDir: "/bin", Nodes: []string{"node-a"}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"relative run dir", func(c *Config) { c.Dir = "cp" }, `control plane dir "cp": want an absolute path`},
		{"relative binaries", func(c *Config) { c.BinDir = "build/peer" }, `control plane binaries "build/peer": want an absolute path`},
		{"node name not a DNS subdomain", func(c *Config) { c.Nodes = []string{"Node_A"} }, `node name "Node_A"`},
		{"bad service range", func(c *Config) { c.ServiceCIDR = "10.96.0.0" }, `service CIDR "10.96.0.0"`},
		{"address on a bridge", func(c *Config) { c.Address = "10.250.0.1" }, ""},
		{"address not an IP", func(c *Config) { c.Address = "cp.local" }, `API server address "cp.local"`},
		{"cluster CIDR", func(c *Config) { c.ClusterCIDR = "10.244.0.0/16" }, ""},
		{"bad cluster CIDR", func(c *Config) { c.ClusterCIDR = "10.244.0.0" }, `cluster CIDR "10.244.0.0"`},
		{"node mask wider than the cluster's", func(c *Config) { c.ClusterCIDR, c.NodeCIDRMaskSize = "10.244.0.0/16", 8 }, `node CIDR mask size 8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.withDefaults().validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
