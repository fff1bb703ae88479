//go:build !nocluster

package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/sys/userns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/buildinfo"
	"github.com/slicelet/slicelet/internal/cluster"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/kubeletserver"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

// clusterMode is cluster mode as the daemon runs it (*cluster.Member; the build tag nocluster
// leaves it out of the binary).
type clusterMode interface {
	Run(ctx context.Context)
	// Kick tells it the pod controller's pods changed: their statuses go to the API server
	// now, not at its next periodic sync.
	Kick()
	// Node is the node's Node object (registered, else as it registers): the pods' node
	// selectors and affinity are admitted against it.
	Node() *v1.Node
}

// clusterNode is cluster mode's Node for admission; nil in stand-alone mode.
func (d *daemon) clusterNode() *v1.Node {
	if d.cluster == nil {
		return nil
	}
	return d.cluster.Node()
}

// clusterConn is cluster mode's connection to the API server, made in the daemon's base
// phase: the node's credentials, the clients, and the cluster's objects and event forwarder,
// which the pod worker is built with. A nil one is stand-alone mode.
type clusterConn struct {
	creds   *cluster.Credentials
	clients cluster.Clients
	objs    *cluster.Objects
	events  *cluster.Events
	// stop ends the client certificate manager and its transport's looks.
	stop context.CancelFunc
}

// newClusterConn builds cluster mode's clients when [cluster] enabled is set (nil, nil
// otherwise), their request metrics going to kubelet's families. A kubeconfig that does not
// load refuses the start. With rotate_certificates, the node's client certificate is the
// certificate manager's (requested in the background with the bootstrap kubeconfig when there
// is none), and its families are served.
func newClusterConn(ctx context.Context, cfg *config.Config, nodeName string, kubelet *metrics.KubeletFamilies, log *slog.Logger) (*clusterConn, error) {
	if !cfg.Cluster.Enabled {
		return nil, nil
	}
	// client-go keeps the first registration: before any client is made.
	cluster.RegisterClientMetrics(kubelet)
	cc := cfg.Cluster
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	creds, err := cluster.LoadCredentials(mctx, cluster.CredentialOptions{Kubeconfig: cc.Kubeconfig, BootstrapKubeconfig: cc.BootstrapKubeconfig,
		CertDir: cfg.ClusterCertDir(), NodeName: nodeName, Rotate: cc.RotateCertificates, Metrics: certificateMetrics(kubelet),
		Logger: log.With("component", "certificates"), Exit: func(reason string) { exitForBootstrap(log, reason) }})
	if err != nil {
		stop()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	clients, err := cluster.NewClientsForConfig(creds.Config)
	if err != nil {
		stop()
		return nil, fmt.Errorf("cluster: kubeconfig %s: %w", cc.Kubeconfig, err)
	}
	return &clusterConn{creds: creds, clients: clients, objs: cluster.NewObjects(clients, clock.RealClock{}), events: cluster.NewEvents(), stop: stop}, nil
}

// close stops the certificate managers' work.
func (c *clusterConn) close() {
	if c == nil {
		return
	}
	if c.creds.Manager != nil {
		c.creds.Manager.Stop()
	}
	c.stop()
}

// exitForBootstrap ends slicelet when its client certificate stayed missing or expired while
// the API server answers (the kubelet's rotating transport does the same): systemd restarts
// it (Restart=on-failure) into the bootstrap. The pods keep running meanwhile.
func exitForBootstrap(log *slog.Logger, reason string) {
	log.Error("exiting", "reason", reason)
	os.Exit(1)
}

// certificateMetrics routes the certificate managers' metrics to the kubelet's families.
func certificateMetrics(k *metrics.KubeletFamilies) cluster.CertificateMetrics {
	return cluster.CertificateMetrics{
		Client: func(current func() *tls.Certificate) certificate.Counter {
			if c := k.ClientCertificateManager(current); c != nil {
				return c
			}
			return nil
		},
		Server: func(current func() *tls.Certificate) (certificate.Counter, certificate.Histogram) {
			c, h := k.ServerCertificateManager(current)
			if c == nil || h == nil {
				return nil, nil
			}
			return c, h
		},
	}
}

// objects are the cluster pods' objects for the pod worker; nil in stand-alone mode.
func (c *clusterConn) objects() worker.ClusterObjects {
	if c == nil {
		return nil
	}
	return c.objs
}

// recorder sends the cluster pods' events to the API server; nil in stand-alone mode.
func (c *clusterConn) recorder() worker.EventRecorder {
	if c == nil {
		return nil
	}
	return c.events
}

// newCluster builds cluster mode over d's connection (nil in stand-alone mode). Its Node
// reports the capacity and allocatable slicelet enforces on kubepods.slice (d.capa, d.alloc,
// max pods) and the conditions rendered from the health tracker, as `slicectl node` shows
// them.
func newCluster(d *daemon) (clusterMode, error) {
	if d.conn == nil {
		return nil, nil
	}
	cc, log := d.cfg.Cluster, d.log
	taints, err := cc.RegisterTaints()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	name := d.nodeName
	ips := d.nodeIPs
	if cc.NodeIP != "" {
		ips = []string{cc.NodeIP}
	}
	// The kubelet API first: the Node reports its port only when it listens.
	var srv *kubeletserver.Server
	var serving certificate.Manager
	if cc.KubeletPort != 0 {
		if srv, serving, err = newKubeletServer(d, name, ips, log); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	kubeletPort := int32(0)
	if srv != nil {
		kubeletPort = int32(cc.KubeletPort)
	}
	info := nodeSystemInfo()
	// The runtime's version is asked until it answers (a CRI runtime may not be up yet when
	// slicelet starts; the Node says "unknown" meanwhile), then kept.
	var (
		versionMu      sync.Mutex
		runtimeVersion string
	)
	versionOf := func() string {
		versionMu.Lock()
		defer versionMu.Unlock()
		if runtimeVersion == "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			v, err := d.prt.version(ctx)
			cancel()
			if err != nil {
				return d.rt.Name() + "://unknown"
			}
			runtimeVersion = v
		}
		return runtimeVersion
	}
	maxPods := *resource.NewQuantity(int64(d.cfg.Node.MaxPods), resource.DecimalSI)
	inputs := func() cluster.NodeInputs {
		capacity := withDevices(d.capa.ResourceList(), d.devices, false)
		capacity[v1.ResourcePods] = maxPods
		alloc := withDevices(d.alloc, d.devices, true)
		alloc[v1.ResourcePods] = maxPods
		st := withoutWarnable(d.health.State(), cluster.Warnable)
		return cluster.NodeInputs{Name: name, Hostname: name, OS: goruntime.GOOS, Arch: goruntime.GOARCH,
			Labels: cc.Labels, Taints: taints, Capacity: capacity, Allocatable: alloc,
			Conditions:  nodeConditions(st),
			InternalIPs: ips, Info: withRuntimeVersion(info, versionOf()), KubeletPort: kubeletPort,
			Settling: settling(st)}
	}
	log.Info("cluster mode", "node", name, "kubeconfig", cc.Kubeconfig)
	member := cluster.New(cluster.Options{Clients: d.conn.clients, NodeName: name, Node: inputs, Controller: d.ctrl,
		Validate: manifest.Validate, HostNetwork: d.cfg.Runtime.Network != config.NetworkCNI,
		AllocatableEnforced: slices.Contains(d.cfg.Node.EnforceNodeAllocatable, "pods"),
		Objects:             d.conn.objs, Events: d.conn.events,
		Health: d.health, Clock: d.clock, Logger: log.With("component", "cluster")})
	if srv == nil {
		return member, nil
	}
	return &withKubeletAPI{Member: member, srv: srv, serving: serving, health: d.health, log: log}, nil
}

// withoutWarnable is st without w: the cluster warnable says whether the API server can be
// reached, which the Node's conditions sent there need not repeat.
func withoutWarnable(st health.State, w *health.Warnable) health.State {
	out := st
	out.Warnables = nil
	for _, ws := range st.Warnables {
		if ws.Warnable != w {
			out.Warnables = append(out.Warnables, ws)
		}
	}
	return out
}

// nodeSystemInfo is the Node's nodeInfo (pkg/kubelet/nodestatus/setters.go, MachineInfo and
// VersionInfo) less the container runtime's version (withRuntimeVersion): the kernel (uname),
// the OS image (/etc/os-release PRETTY_NAME), the machine ID and a kubelet version that says
// slicelet (see kubeletVersion).
func nodeSystemInfo() v1.NodeSystemInfo {
	info := v1.NodeSystemInfo{OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
		KubeletVersion: kubeletVersion(buildinfo.Version), OSImage: osImage("/etc/os-release")}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	if id, err := os.ReadFile("/etc/machine-id"); err == nil {
		info.MachineID = strings.TrimSpace(string(id))
	}
	// Whether slicelet runs in a user namespace, as the kubelet says with KubeletInUserNamespace
	// (on by default; pkg/kubelet/kubelet_node_status_linux.go, runningInUserNS).
	info.RunningInUserNamespace = ptr.To(userns.RunningInUserNS())
	return info
}

// withRuntimeVersion is info with the container runtime's name://version.
func withRuntimeVersion(info v1.NodeSystemInfo, version string) v1.NodeSystemInfo {
	info.ContainerRuntimeVersion = version
	return info
}

// osImage is PRETTY_NAME of an os-release file, "Linux" when it has none.
func osImage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "Linux"
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return "Linux"
}
