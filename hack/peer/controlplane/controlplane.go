// Package controlplane runs a local Kubernetes control plane for tests, benchmarks and demos:
// etcd and kube-apiserver, optionally kube-scheduler and kube-controller-manager, the binaries
// `make peer-build` caches under build/peer/<version>, all on 127.0.0.1, with a generated PKI.
//
// Every component runs as a transient systemd service (systemd-run) started through a [Runner]:
// the commands run inside the network namespace where the node agents run, because the test
// sandbox (internal/testharness/sandbox) has a private one and its 127.0.0.1 is not the
// machine's. A test already inside the sandbox (systemdtest) uses [Local]; a process outside
// hands in the sandbox instance (its Command method) and a [NetnsDialer] for its own clients.
//
// The run dir holds everything: pki/ (the CA, serving and client certificates, the
// service-account key pair), etcd/ (the data), admin.conf, scheduler.conf,
// controller-manager.conf, nodes/<name>.conf and the state file [Open] reads.
package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

// Defaults of [Config].
const (
	DefaultEtcdPort      = 2379
	DefaultEtcdPeerPort  = 2380
	DefaultAPIServerPort = 6443
	DefaultServiceCIDR   = "10.96.0.0/16"
	DefaultUnitPrefix    = "peer-cp-"
	DefaultReadyTimeout  = 90 * time.Second
)

// stateFile records, in the run dir, the units a control plane started, for [Open].
const stateFile = "controlplane.json"

// Runner makes the commands the control plane runs: systemd-run, systemctl and journalctl, in
// the namespaces of the node agents. *sandbox.Instance implements it; [Local] runs them as they
// are.
type Runner interface {
	Command(ctx context.Context, name string, args ...string) *exec.Cmd
}

// Local is the [Runner] of a process that already runs where the control plane should (inside
// the sandbox, as systemdtest runs tests).
type Local struct{}

// Command is exec.CommandContext.
func (Local) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}

// Config configures [Start]. Zero fields take the defaults.
type Config struct {
	// Dir is the run dir (absolute); it must be visible and writable at the same path where the
	// Runner's commands run. Start refuses a dir that holds a control plane already.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-scheduler and kube-controller-manager (absolute,
	// visible where the Runner's commands run), e.g. build/peer/v1.37.2.
	BinDir string
	// Runner runs the commands; [Local] when nil.
	Runner Runner
	// Dial connects this process's clients (the readiness wait, [ControlPlane.Client]) to the
	// API server; nil dials in this process's own network namespace. See [NetnsDialer].
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Nodes get a client certificate (CN=system:node:<name>, O=system:nodes) and a kubeconfig
	// each; [ControlPlane.AddNode] adds more later.
	Nodes []string
	// Scheduler and ControllerManager also run those components.
	Scheduler, ControllerManager bool
	// Ports on 127.0.0.1 (the API server's on Address).
	EtcdPort, EtcdPeerPort, APIServerPort int
	// Address is the API server's bind and advertise address, 127.0.0.1 when empty. Another
	// address (one the harness gave the control plane's namespace on a bridge the nodes share)
	// lets nodes in other network namespaces reach it, and turns the endpoint reconciler on: the
	// "kubernetes" Service then has the API server as its endpoint, so pods reach it.
	Address string
	// ClusterCIDR, when set, makes kube-controller-manager allocate each node a pod CIDR of
	// NodeCIDRMaskSize bits (24 when zero) out of it (--allocate-node-cidrs), as the CNI agents
	// that route between nodes expect.
	ClusterCIDR string
	// NodeCIDRMaskSize is --node-cidr-mask-size.
	NodeCIDRMaskSize int
	// ServiceCIDR is the service cluster IP range.
	ServiceCIDR string
	// ClusterSigningDuration is the lifetime of the certificates the controller manager signs
	// (--cluster-signing-duration); zero: its default, a year.
	ClusterSigningDuration time.Duration
	// UnitPrefix prefixes the transient services' names.
	UnitPrefix string
	// ReadyTimeout bounds the wait for the API server's /readyz.
	ReadyTimeout time.Duration
	// Log receives progress; discarded when nil.
	Log *slog.Logger
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Runner == nil {
		c.Runner = Local{}
	}
	if c.EtcdPort == 0 {
		c.EtcdPort = DefaultEtcdPort
	}
	if c.EtcdPeerPort == 0 {
		c.EtcdPeerPort = DefaultEtcdPeerPort
	}
	if c.APIServerPort == 0 {
		c.APIServerPort = DefaultAPIServerPort
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = DefaultServiceCIDR
	}
	if c.Address == "" {
		c.Address = "127.0.0.1"
	}
	if c.ClusterCIDR != "" && c.NodeCIDRMaskSize == 0 {
		c.NodeCIDRMaskSize = 24
	}
	if c.UnitPrefix == "" {
		c.UnitPrefix = DefaultUnitPrefix
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks the configuration; errors name the field and value.
func (c Config) validate() error {
	if !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("control plane dir %q: want an absolute path", c.Dir)
	}
	if !filepath.IsAbs(c.BinDir) {
		return fmt.Errorf("control plane binaries %q: want an absolute path", c.BinDir)
	}
	for _, n := range c.Nodes {
		if err := validNodeName(n); err != nil {
			return err
		}
	}
	if _, _, err := net.ParseCIDR(c.ServiceCIDR); err != nil {
		return fmt.Errorf("service CIDR %q: %w", c.ServiceCIDR, err)
	}
	if net.ParseIP(c.Address) == nil {
		return fmt.Errorf("API server address %q: not an IP address", c.Address)
	}
	if c.ClusterCIDR != "" {
		_, cluster, err := net.ParseCIDR(c.ClusterCIDR)
		if err != nil {
			return fmt.Errorf("cluster CIDR %q: %w", c.ClusterCIDR, err)
		}
		if ones, bits := cluster.Mask.Size(); c.NodeCIDRMaskSize < ones || c.NodeCIDRMaskSize > bits {
			return fmt.Errorf("node CIDR mask size %d: want between the cluster CIDR's %d and %d", c.NodeCIDRMaskSize, ones, bits)
		}
	}
	return nil
}

// validNodeName checks a node name as the API server does (a DNS subdomain).
func validNodeName(n string) error {
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Errorf("node name %q: %s", n, strings.Join(errs, "; "))
	}
	return nil
}

// ControlPlane is a started control plane.
type ControlPlane struct {
	cfg    Config
	l      layout
	server string
	// units are the transient services started, in start order.
	units []string
}

// state is the run dir's record of a started control plane.
type state struct {
	Server     string   `json:"server"`
	UnitPrefix string   `json:"unit_prefix"`
	Units      []string `json:"units"`
}

// Start generates the PKI and the kubeconfigs in cfg.Dir, starts the components as transient
// services and waits until the API server reports ready (/readyz), at most cfg.ReadyTimeout.
// On failure it stops what it started and the error carries the failing unit's last log lines.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for _, c := range []string{Etcd, APIServer, Scheduler, ControllerManager} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, c)); err != nil {
			return nil, fmt.Errorf("control plane binaries: %w (make peer-build)", err)
		}
	}
	l := layout(cfg.Dir)
	if _, err := os.Stat(l.state()); err == nil {
		return nil, fmt.Errorf("control plane dir %s: holds a control plane already (%s); stop it first", cfg.Dir, stateFile)
	}
	cp := &ControlPlane{cfg: cfg, l: l, server: "https://" + net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.APIServerPort))}
	began := time.Now()
	if err := cp.writeFiles(); err != nil {
		return nil, err
	}
	for _, c := range components(cfg, l) {
		if err := cp.startUnit(ctx, c); err != nil {
			return nil, errors.Join(err, cp.Stop(context.WithoutCancel(ctx)))
		}
	}
	if err := cp.waitReady(ctx); err != nil {
		return nil, errors.Join(err, cp.Stop(context.WithoutCancel(ctx)))
	}
	if err := cp.ensureDefaultServiceAccount(ctx); err != nil {
		return nil, errors.Join(err, cp.Stop(context.WithoutCancel(ctx)))
	}
	cfg.Log.Info("control plane ready", "server", cp.server, "dir", cfg.Dir, "units", cp.units, "took", time.Since(began).Round(time.Millisecond))
	return cp, nil
}

// Open returns the control plane recorded in cfg.Dir by an earlier Start (another process's),
// to stop it or to read its kubeconfigs.
func Open(cfg Config) (*ControlPlane, error) {
	cfg = cfg.withDefaults()
	l := layout(cfg.Dir)
	data, err := os.ReadFile(l.state())
	if err != nil {
		return nil, fmt.Errorf("control plane dir %s: %w", cfg.Dir, err)
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("control plane state %s: %w", l.state(), err)
	}
	cfg.UnitPrefix = s.UnitPrefix
	return &ControlPlane{cfg: cfg, l: l, server: s.Server, units: s.Units}, nil
}

// writeFiles writes the PKI and the kubeconfigs.
func (cp *ControlPlane) writeFiles() error {
	ca, err := newAuthority(cp.l.pki())
	if err != nil {
		return err
	}
	_, svc, err := net.ParseCIDR(cp.cfg.ServiceCIDR)
	if err != nil {
		return fmt.Errorf("service CIDR %q: %w", cp.cfg.ServiceCIDR, err)
	}
	first := slices.Clone(svc.IP.To4())
	if first == nil {
		first = slices.Clone(svc.IP)
	}
	first[len(first)-1]++
	for _, s := range controlPlaneCerts(first, net.ParseIP(cp.cfg.Address)) {
		if err := ca.issue(s); err != nil {
			return err
		}
	}
	if err := serviceAccountKeys(cp.l.pki()); err != nil {
		return err
	}
	if err := frontProxyCerts(cp.l.pki()); err != nil {
		return err
	}
	for _, user := range []string{adminName, schedulerName, controllerManagerName} {
		if err := cp.writeKubeconfig(cp.l.kubeconfig(user), user, user); err != nil {
			return err
		}
	}
	for _, n := range cp.cfg.Nodes {
		if err := cp.addNode(ca, n); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the certificate name, embedding the CA, the client
// certificate and its key.
func (cp *ControlPlane) writeKubeconfig(path, user, name string) error {
	read := func(p string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return b, nil
	}
	ca, err := read(cp.l.crt(caName))
	if err != nil {
		return err
	}
	crt, err := read(cp.l.crt(name))
	if err != nil {
		return err
	}
	key, err := read(cp.l.key(name))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	kc := kubeconfigutil.CreateWithCerts(cp.server, "peer", user, ca, key, crt)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

// AddNode issues a node's client certificate and writes its kubeconfig (also on a running
// control plane); it returns the kubeconfig's path.
func (cp *ControlPlane) AddNode(node string) (string, error) {
	if err := validNodeName(node); err != nil {
		return "", err
	}
	ca, err := newAuthority(cp.l.pki())
	if err != nil {
		return "", err
	}
	if err := cp.addNode(ca, node); err != nil {
		return "", err
	}
	return cp.NodeKubeconfig(node), nil
}

func (cp *ControlPlane) addNode(ca *authority, node string) error {
	s := nodeCert(node)
	if err := ca.issue(s); err != nil {
		return err
	}
	return cp.writeKubeconfig(cp.l.nodeKubeconfig(node), NodeUser(node), s.name)
}

// Server is the API server's URL (https://<Address>:<port>).
func (cp *ControlPlane) Server() string { return cp.server }

// Dir is the run dir.
func (cp *ControlPlane) Dir() string { return cp.cfg.Dir }

// CAFile is the cluster CA certificate (it also verifies the API server's serving certificate).
func (cp *ControlPlane) CAFile() string { return cp.l.crt(caName) }

// AdminKubeconfig is the kubeconfig of a cluster admin (O=system:masters).
func (cp *ControlPlane) AdminKubeconfig() string { return cp.l.kubeconfig(adminName) }

// NodeKubeconfig is the kubeconfig of a node given in Config.Nodes or to AddNode.
func (cp *ControlPlane) NodeKubeconfig(node string) string { return cp.l.nodeKubeconfig(node) }

// Units are the transient services running the components, in start order.
func (cp *ControlPlane) Units() []string { return slices.Clone(cp.units) }

// RESTConfig loads a kubeconfig of the run dir as a client configuration that dials with
// Config.Dial.
func (cp *ControlPlane) RESTConfig(kubeconfig string) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.Dial = cp.cfg.Dial
	return rc, nil
}

// Client is a clientset for a kubeconfig of the run dir.
func (cp *ControlPlane) Client(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := cp.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cs, nil
}

// startUnit starts a component as a transient service and records it. A component that exits
// with an error is started again, as the kubelet restarts kubeadm's static control-plane pods:
// the controller manager and the scheduler give up when the API server is not healthy within
// their own wait (kube-controller-manager's is 10 s), which a slow or emulated machine passes
// while the API server starts. Five failures in a minute fail the unit for good, and waitReady
// reports it with its journal.
func (cp *ControlPlane) startUnit(ctx context.Context, c component) error {
	unit := cp.cfg.unit(c.name)
	args := append([]string{"--quiet", "--unit=" + unit, "--collect",
		"--property=Type=exec", "--property=KillMode=mixed", "--property=TimeoutStopSec=15s",
		"--property=Restart=on-failure", "--property=RestartSec=2s",
		"--property=StartLimitIntervalSec=60s", "--property=StartLimitBurst=5",
		"--description=peer control plane: " + c.name, "--",
		filepath.Join(cp.cfg.BinDir, c.name)}, c.args...)
	if out, err := cp.cfg.Runner.Command(ctx, "systemd-run", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("control plane: starting %s: %w: %s", unit, err, strings.TrimSpace(string(out)))
	}
	cp.units = append(cp.units, unit)
	cp.cfg.Log.Debug("control plane unit started", "unit", unit)
	return cp.saveState()
}

// saveState records the started units in the run dir.
func (cp *ControlPlane) saveState() error {
	data, err := json.Marshal(state{Server: cp.server, UnitPrefix: cp.cfg.UnitPrefix, Units: cp.units})
	if err != nil {
		return fmt.Errorf("control plane state: %w", err)
	}
	if err := os.WriteFile(cp.l.state(), data, 0o600); err != nil {
		return fmt.Errorf("control plane state: %w", err)
	}
	return nil
}

// waitReady polls /readyz with the admin credentials until it answers ok, a unit stops or fails
// (then the error carries its journal), or ReadyTimeout passes.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	cs, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	var last error
	polls := 0
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, cp.cfg.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if last == nil {
			return true, nil
		}
		if polls++; polls%10 == 0 { // about once a second, look for a unit that died
			return false, cp.checkUnits(ctx)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("control plane not ready (%s /readyz: %v): %w%s", cp.server, last, err, cp.journals(context.WithoutCancel(ctx)))
	}
	return nil
}

// ensureDefaultServiceAccount creates the default namespace's "default" service account, which
// the ServiceAccount admission plugin requires of every pod there: the controller manager makes
// it too, but only a moment after start, and it may not run at all.
func (cp *ControlPlane) ensureDefaultServiceAccount(ctx context.Context) error {
	cs, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: metav1.NamespaceDefault}}
	if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("control plane: default service account: %w", err)
	}
	return nil
}

// checkUnits fails when a started unit is no longer active.
func (cp *ControlPlane) checkUnits(ctx context.Context) error {
	args := append([]string{"show", "--property=Id,ActiveState,Result"}, cp.units...)
	out, err := cp.cfg.Runner.Command(ctx, "systemctl", args...).Output()
	if err != nil {
		return fmt.Errorf("control plane: systemctl show: %w", err)
	}
	for _, block := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		props := map[string]string{}
		for _, line := range strings.Split(block, "\n") {
			k, v, _ := strings.Cut(line, "=")
			props[k] = v
		}
		if s := props["ActiveState"]; s != "active" && s != "activating" {
			return fmt.Errorf("control plane: %s is %s (result %s)", props["Id"], s, props["Result"])
		}
	}
	return nil
}

// journals are the last log lines of every started unit, for an error message.
func (cp *ControlPlane) journals(ctx context.Context) string {
	var b strings.Builder
	for _, u := range cp.units {
		out, _ := cp.cfg.Runner.Command(ctx, "journalctl", "--unit="+u, "--lines=15", "--no-pager", "--output=cat").CombinedOutput()
		fmt.Fprintf(&b, "\n--- %s:\n%s", u, strings.TrimSpace(string(out)))
	}
	return b.String()
}

// Stop stops the components in reverse start order (systemctl stop waits for each to exit,
// SIGKILL after 15 s) and removes the state record; the run dir's files stay.
func (cp *ControlPlane) Stop(ctx context.Context) error {
	var errs []error
	for _, u := range slices.Backward(cp.units) {
		if out, err := cp.cfg.Runner.Command(ctx, "systemctl", "stop", u).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("control plane: stopping %s: %w: %s", u, err, strings.TrimSpace(string(out))))
		}
	}
	cp.units = nil
	if err := os.Remove(cp.l.state()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("control plane state: %w", err))
	}
	return errors.Join(errs...)
}

// CertFiles are the paths of a certificate and its key under the run dir's pki directory, for
// name "ca", "admin", "apiserver", "apiserver-kubelet-client", "scheduler", "controller-manager",
// "sa" (key only) or "node-<name>".
func (cp *ControlPlane) CertFiles(name string) (crt, key string) {
	return pkiutil.PathsForCertAndKey(cp.l.pki(), name)
}
