package controlplane

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

// Component names: each runs as the transient service <UnitPrefix><name>.service.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
)

// layout is where a run dir keeps its files.
type layout string

func (l layout) pki() string      { return filepath.Join(string(l), "pki") }
func (l layout) etcdData() string { return filepath.Join(string(l), "etcd") }

// kubeconfig is the kubeconfig of a control-plane user (admin, scheduler, controller-manager).
func (l layout) kubeconfig(user string) string { return filepath.Join(string(l), user+".conf") }

// nodeKubeconfig is the kubeconfig of a node.
func (l layout) nodeKubeconfig(node string) string {
	return filepath.Join(string(l), "nodes", node+".conf")
}
func (l layout) state() string { return filepath.Join(string(l), stateFile) }

func (l layout) crt(name string) string { c, _ := pkiutil.PathsForCertAndKey(l.pki(), name); return c }
func (l layout) key(name string) string { _, k := pkiutil.PathsForCertAndKey(l.pki(), name); return k }

// loopbackURL is scheme://127.0.0.1:port.
func loopbackURL(scheme string, port int) string {
	return scheme + "://127.0.0.1:" + strconv.Itoa(port)
}

// etcdArgs: one member on loopback, plain HTTP (only processes of the same network namespace
// reach it; the API server is its only client), data in the run dir. The data is thrown away
// with the run dir, so fsync is skipped: tests and benchmarks do not wait for the disk.
func etcdArgs(c Config, l layout) []string {
	peer := loopbackURL("http", c.EtcdPeerPort)
	client := loopbackURL("http", c.EtcdPort)
	return []string{
		"--name=peer",
		"--data-dir=" + l.etcdData(),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=peer=" + peer,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

// apiServerArgs: TLS on loopback only, client certificates from the run dir's CA, the Node and
// RBAC authorizers with the NodeRestriction admission plugin (so a node's credentials reach only
// its own Node and the objects of its pods), service-account tokens signed with the run dir's
// key. On loopback the endpoint reconciler is off: the "kubernetes" service cannot have a
// loopback endpoint (Endpoints validation refuses 127.0.0.0/8), and no pod there needs it; on
// another Address it is kube-apiserver's default (lease), as on any cluster.
//
// Aggregated API servers (metrics-server) are served as kubeadm configures it: the front
// proxy's client certificate and the request-header flags, which kube-apiserver publishes in
// the extension-apiserver-authentication ConfigMap for them to trust. It routes to their
// endpoints' addresses rather than to their Services' cluster IPs: the control plane runs in
// a network namespace of its own without kube-proxy, where only the nodes' pod CIDRs are
// routed (as on a cluster whose control plane is not a node).
func apiServerArgs(c Config, l layout) []string {
	reconciler := "lease"
	if ip := net.ParseIP(c.Address); ip == nil || ip.IsLoopback() {
		reconciler = "none"
	}
	return []string{
		"--bind-address=" + c.Address,
		"--advertise-address=" + c.Address,
		"--secure-port=" + strconv.Itoa(c.APIServerPort),
		"--etcd-servers=" + loopbackURL("http", c.EtcdPort),
		"--tls-cert-file=" + l.crt(apiServerName),
		"--tls-private-key-file=" + l.key(apiServerName),
		"--client-ca-file=" + l.crt(caName),
		"--kubelet-client-certificate=" + l.crt(apiServerKubeletName),
		"--kubelet-client-key=" + l.key(apiServerKubeletName),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--authorization-mode=Node,RBAC",
		// Nodes joining with a bootstrap token (BootstrapToken), as kubeadm's control plane.
		"--enable-bootstrap-token-auth=true",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(l.pki(), serviceAccountName+".pub"),
		"--service-account-signing-key-file=" + l.key(serviceAccountName),
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--endpoint-reconciler-type=" + reconciler,
		"--allow-privileged=true",
		"--profiling=false",
		"--requestheader-client-ca-file=" + l.crt(frontProxyCAName),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.crt(frontProxyClientName),
		"--proxy-client-key-file=" + l.key(frontProxyClientName),
		"--enable-aggregator-routing=true",
	}
}

// schedulerArgs: its own identity's kubeconfig, no serving port (nothing reads its metrics here),
// no leader election (one replica).
func schedulerArgs(_ Config, l layout) []string {
	return []string{
		"--kubeconfig=" + l.kubeconfig(schedulerName),
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	}
}

// controllerManagerArgs: its own identity's kubeconfig, one service account per controller (as
// kubeadm runs it), the run dir's CA for CSR signing and the root CA of service-account token
// volumes, no serving port, no leader election.
func controllerManagerArgs(c Config, l layout) []string {
	var cidrs []string
	if c.ClusterCIDR != "" {
		cidrs = []string{"--allocate-node-cidrs=true", "--cluster-cidr=" + c.ClusterCIDR,
			"--node-cidr-mask-size=" + strconv.Itoa(c.NodeCIDRMaskSize)}
	}
	if c.ClusterSigningDuration > 0 {
		cidrs = append(cidrs, "--cluster-signing-duration="+c.ClusterSigningDuration.String())
	}
	return append(cidrs,
		"--kubeconfig="+l.kubeconfig(controllerManagerName),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+l.key(serviceAccountName),
		"--root-ca-file="+l.crt(caName),
		"--cluster-signing-cert-file="+l.crt(caName),
		"--cluster-signing-key-file="+l.key(caName),
		"--service-cluster-ip-range="+c.ServiceCIDR,
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	)
}

// components are the components c runs, in start order, each with its arguments.
func components(c Config, l layout) []component {
	out := []component{
		{name: Etcd, args: etcdArgs(c, l)},
		{name: APIServer, args: apiServerArgs(c, l)},
	}
	if c.Scheduler {
		out = append(out, component{name: Scheduler, args: schedulerArgs(c, l)})
	}
	if c.ControllerManager {
		out = append(out, component{name: ControllerManager, args: controllerManagerArgs(c, l)})
	}
	return out
}

// component is one process of the control plane.
type component struct {
	name string
	args []string
}

// unit is the transient service of a component.
func (c Config) unit(name string) string { return fmt.Sprintf("%s%s.service", c.UnitPrefix, name) }
