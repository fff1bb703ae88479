// Package config is slicelet's TOML configuration: one Config struct, the
// kubelet's defaults in Default, Load for the main file plus config.d drop-ins,
// validation that reports every problem with file:line:column, and Encode for
// `slicelet config print`. docs/config.md documents every key.
package config

import (
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/slices"
)

// DefaultPath is the main configuration file read when no path is given.
const DefaultPath = "/etc/slicelet/config.toml"

// DropInDir is the directory, next to the main file, whose *.toml files are
// applied after it in lexical order.
const DropInDir = "config.d"

// Values of [node] enforce_node_allocatable (the kubelet's enforceNodeAllocatable keys), as
// the slice manager enforces them.
const (
	EnforceNone                       = slices.EnforceNone
	EnforcePods                       = slices.EnforcePods
	EnforceSystemReserved             = slices.EnforceSystemReserved
	EnforceSystemReservedCompressible = slices.EnforceSystemReservedCompressible
	EnforceKubeReserved               = slices.EnforceKubeReserved
	EnforceKubeReservedCompressible   = slices.EnforceKubeReservedCompressible
)

// Values of [cgroups] memory_reservation_policy, as the slice manager applies them.
const (
	MemoryReservationNone              = slices.MemoryReservationNone
	MemoryReservationTieredReservation = slices.MemoryReservationTiered
)

// Values of [log] level (case does not matter, "warning" means warn, empty means info) and
// [log] format (empty means auto). The config only validates them: internal/logging builds the
// logger from the same names, and cmd/slicelet's tests check that the two agree, so config
// needs no logging package.
var (
	LogLevels  = []string{"debug", "info", "warn", "error"}
	LogFormats = []string{"auto", "text", "json", "journal"}
)

// Values of [runtime] type.
const (
	RuntimeSystemd = "systemd"
	RuntimeCRI     = "cri"

	// NetworkHost runs every pod in the node's network namespace (podIP = the node's IP).
	NetworkHost = "host"
	// NetworkCNI gives pods without spec.hostNetwork a network namespace of their own, set up by
	// the CRI runtime's CNI configuration (not slicelet's); their IPs are the sandbox's.
	NetworkCNI = "cni"
)

// Built-in priority classes (k8s.io/api/scheduling): they always exist and
// cannot be redefined in [eviction.priority_classes].
const (
	SystemNodeCritical         = "system-node-critical"
	SystemNodeCriticalValue    = int32(2000001000)
	SystemClusterCritical      = "system-cluster-critical"
	SystemClusterCriticalValue = int32(2000000000)
	// HighestUserDefinablePriority is the largest value a user-defined priority class may have.
	HighestUserDefinablePriority = int32(1000000000)
)

// Config is the whole configuration. Field tags are the TOML key names.
type Config struct {
	// StateDir holds slicelet's state; the filesystem it is on is "nodefs".
	StateDir string `toml:"state_dir"`
	// Node is node allocatable: reservations and what is enforced.
	Node Node `toml:"node"`
	// Cgroups is the kubepods hierarchy and its knobs.
	Cgroups Cgroups `toml:"cgroups"`
	// Eviction is node-pressure eviction.
	Eviction Eviction `toml:"eviction"`
	// GC is image and container garbage collection.
	GC GC `toml:"gc"`
	// Runtime selects how containers are run.
	Runtime Runtime `toml:"runtime"`
	// Systemd tunes the conversation with PID 1.
	Systemd Systemd `toml:"systemd"`
	// Pods is where pods come from.
	Pods Pods `toml:"pods"`
	// API is the local control socket.
	API API `toml:"api"`
	// Metrics is the Prometheus endpoint.
	Metrics Metrics `toml:"metrics"`
	// Devices is where device plugins register and where the PodResources API is served.
	Devices Devices `toml:"devices"`
	// CSI is where CSI node plugins register and where their volumes are staged and published.
	CSI CSI `toml:"csi"`
	// Cluster is cluster mode: the node joins a Kubernetes API server (off by default).
	Cluster Cluster `toml:"cluster"`
	// Log is the logger's level and format.
	Log Log `toml:"log"`

	files []string // files Load read, in order
}

// Node mirrors the kubelet's node-allocatable settings.
type Node struct {
	// MaxPods is the kubelet's maxPods.
	MaxPods int32 `toml:"max_pods"`
	// SystemReserved is the kubelet's systemReserved (cpu, memory, ephemeral-storage, pid).
	SystemReserved corev1.ResourceList `toml:"system_reserved"`
	// KubeReserved is the kubelet's kubeReserved.
	KubeReserved corev1.ResourceList `toml:"kube_reserved"`
	// SystemReservedCgroup is the kubelet's systemReservedCgroup, e.g. "/system.slice".
	SystemReservedCgroup string `toml:"system_reserved_cgroup"`
	// KubeReservedCgroup is the kubelet's kubeReservedCgroup.
	KubeReservedCgroup string `toml:"kube_reserved_cgroup"`
	// EnforceNodeAllocatable is the kubelet's enforceNodeAllocatable.
	EnforceNodeAllocatable []string `toml:"enforce_node_allocatable"`
}

// Cgroups mirrors the kubelet's cgroup settings. The driver is always systemd.
type Cgroups struct {
	// Root is the kubelet's cgroupRoot; kubepods.slice is created under it.
	Root string `toml:"root"`
	// PerQOS is the kubelet's cgroupsPerQOS.
	PerQOS bool `toml:"per_qos"`
	// CPUCFSQuota is the kubelet's cpuCFSQuota.
	CPUCFSQuota bool `toml:"cpu_cfs_quota"`
	// CPUCFSQuotaPeriod is the kubelet's cpuCFSQuotaPeriod.
	CPUCFSQuotaPeriod time.Duration `toml:"cpu_cfs_quota_period"`
	// PodPidsLimit is the kubelet's podPidsLimit; -1 or 0 means no limit.
	PodPidsLimit int64 `toml:"pod_pids_limit"`
	// QOSReserved is the kubelet's qosReserved, e.g. {memory = "50%"}.
	QOSReserved map[string]string `toml:"qos_reserved"`
	// MemoryReservationPolicy is the kubelet's memoryReservationPolicy.
	MemoryReservationPolicy string `toml:"memory_reservation_policy"`
	// MemoryThrottlingFactor is the kubelet's memoryThrottlingFactor; 0 means unset (no memory.high).
	MemoryThrottlingFactor float64 `toml:"memory_throttling_factor"`
}

// Eviction mirrors the kubelet's eviction settings.
type Eviction struct {
	// Hard is the kubelet's evictionHard, signal → "quantity" or "NN%".
	Hard map[string]string `toml:"hard"`
	// Soft is the kubelet's evictionSoft.
	Soft map[string]string `toml:"soft"`
	// SoftGracePeriod is the kubelet's evictionSoftGracePeriod, signal → Go duration.
	SoftGracePeriod map[string]string `toml:"soft_grace_period"`
	// MinimumReclaim is the kubelet's evictionMinimumReclaim.
	MinimumReclaim map[string]string `toml:"minimum_reclaim"`
	// MergeDefaults is the kubelet's mergeDefaultEvictionSettings: default hard
	// thresholds are kept for signals Hard does not name.
	MergeDefaults bool `toml:"merge_defaults"`
	// PressureTransitionPeriod is the kubelet's evictionPressureTransitionPeriod; 0 means 5m.
	PressureTransitionPeriod time.Duration `toml:"pressure_transition_period"`
	// MaxPodGracePeriod is the kubelet's evictionMaxPodGracePeriod (seconds there, a duration here).
	MaxPodGracePeriod time.Duration `toml:"max_pod_grace_period"`
	// MonitoringInterval is how often the eviction manager observes (the kubelet's 10s loop).
	MonitoringInterval time.Duration `toml:"monitoring_interval"`
	// PriorityClasses maps priorityClassName to priority for pods from manifests
	// (there is no API server to resolve them). The built-ins are implicit.
	PriorityClasses map[string]int32 `toml:"priority_classes"`
}

// GC groups the two garbage collectors.
type GC struct {
	// Images is image garbage collection.
	Images ImageGC `toml:"images"`
	// Containers is dead-container garbage collection.
	Containers ContainerGC `toml:"containers"`
}

// ImageGC mirrors the kubelet's ImageGCPolicy and image GC period.
type ImageGC struct {
	// HighThresholdPercent is imageGCHighThresholdPercent; 100 disables disk-based image GC.
	HighThresholdPercent int `toml:"high_threshold_percent"`
	// LowThresholdPercent is imageGCLowThresholdPercent.
	LowThresholdPercent int `toml:"low_threshold_percent"`
	// MinimumAge is imageMinimumGCAge.
	MinimumAge time.Duration `toml:"minimum_age"`
	// MaximumAge is imageMaximumGCAge; 0 disables age-based removal.
	MaximumAge time.Duration `toml:"maximum_age"`
	// Period is how often image GC runs (the kubelet's fixed 5m).
	Period time.Duration `toml:"period"`
}

// ContainerGC mirrors the kubelet's container GCPolicy and period.
type ContainerGC struct {
	// MinimumAge is --minimum-container-ttl-duration.
	MinimumAge time.Duration `toml:"minimum_age"`
	// MaxPerPodContainer is --maximum-dead-containers-per-container; negative means no limit.
	MaxPerPodContainer int `toml:"max_per_pod_container"`
	// MaxContainers is --maximum-dead-containers; negative means no limit.
	MaxContainers int `toml:"max_containers"`
	// Period is how often container GC runs (the kubelet's fixed 1m).
	Period time.Duration `toml:"period"`
}

// Runtime selects the container runtime.
type Runtime struct {
	// Type is "systemd" (built-in) or "cri".
	Type string `toml:"type"`
	// Endpoint is the CRI socket, "unix:///run/containerd/containerd.sock"; cri only.
	Endpoint string `toml:"endpoint"`
	// SandboxImage is the pod sandbox (pause) image; empty means the runtime's default.
	SandboxImage string `toml:"sandbox_image"`
	// Network is "host" (every pod on the node's network) or "cni" (cri only: pods without
	// spec.hostNetwork get the network the runtime's CNI configuration gives their sandbox).
	Network string `toml:"network"`
}

// Systemd tunes the D-Bus conversation with PID 1.
type Systemd struct {
	// JobTimeout bounds every wait for a systemd job.
	JobTimeout time.Duration `toml:"job_timeout"`
}

// Pods says where pods come from.
type Pods struct {
	// ManifestDir holds Pod manifests (YAML or JSON), the kubelet's staticPodPath.
	ManifestDir string `toml:"manifest_dir"`
	// StaticPodUID is how a manifest's pod without metadata.uid gets its UID:
	// StaticPodUIDKubelet or StaticPodUIDMD5.
	StaticPodUID string `toml:"static_pod_uid"`
	// KubeletRootDir is the kubelet's root directory (its --root-dir, /var/lib/kubelet) on a
	// node that moves between the kubelet and slicelet: the pods' emptyDir, configMap, secret,
	// projected and downwardAPI volumes live in <kubelet_root_dir>/pods/<uid>/volumes in the
	// kubelet's layout, so either agent finds what the other left. Empty keeps them in
	// <state_dir>/pods.
	KubeletRootDir string `toml:"kubelet_root_dir"`
	// Security is the Pod Security Standards level enforced at admission, per pod source.
	Security PodSecuritySources `toml:"security"`
}

// Static pod UID schemes ([pods] static_pod_uid).
const (
	// StaticPodUIDKubelet is the kubelet's: a hash of the pod, the node's name and the file's
	// path (pkg/kubelet/config/common.go, applyDefaults), so that the kubelet and slicelet give
	// the same file on the same node the same UID.
	StaticPodUIDKubelet = "kubelet"
	// StaticPodUIDMD5 is slicelet's earlier scheme (an MD5 of the file's path and the defaulted
	// pod as JSON), kept for nodes whose static pods are running under UIDs it gave them.
	StaticPodUIDMD5 = "md5"
)

// Pod Security Standards levels ([pods.security.*] enforce), as the API server's PodSecurity
// admission names them (k8s.io/pod-security-admission/api).
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
	// PodSecurityLatest is the enforce_version that follows the library's newest checks.
	PodSecurityLatest = "latest"
)

// PodSecuritySources is the Pod Security level of each pod source. The sources are the ones
// the kubernetes.io/config.source annotation names: "file" (the manifest directory) and "api".
type PodSecuritySources struct {
	// File applies to pods from the manifest directory.
	File PodSecurity `toml:"file"`
	// API applies to pods applied through the local API (slicectl apply).
	API PodSecurity `toml:"api"`
}

// PodSecurity is one source's enforced level, as the pod-security.kubernetes.io/enforce and
// enforce-version namespace labels give it on a cluster.
type PodSecurity struct {
	// Enforce is "privileged", "baseline" or "restricted".
	Enforce string `toml:"enforce"`
	// EnforceVersion is "latest" or a policy version "v1.N".
	EnforceVersion string `toml:"enforce_version"`
}

// BySource is each source's level and version by source name ("file", "api", as the
// kubernetes.io/config.source annotation names the sources).
func (s PodSecuritySources) BySource() map[string][2]string {
	return map[string][2]string{
		"file": {s.File.Enforce, s.File.EnforceVersion},
		"api":  {s.API.Enforce, s.API.EnforceVersion},
	}
}

// API is the local control socket used by slicectl.
type API struct {
	// Socket is the unix socket path.
	Socket string `toml:"socket"`
	// Group owns the socket; its members may use slicectl.
	Group string `toml:"group"`
}

// Devices is the device manager's sockets: device plugins (the kubelet's device plugin API)
// register on <plugin_dir>/kubelet.sock, and the PodResources API is served on
// pod_resources_socket.
type Devices struct {
	// PluginDir is the device plugin directory (the kubelet's
	// /var/lib/kubelet/device-plugins): the registration socket, the plugins' sockets and the
	// allocations' checkpoint. Empty means <state_dir>/device-plugins.
	PluginDir string `toml:"plugin_dir"`
	// PodResourcesSocket is the PodResources API's socket (the kubelet's
	// /var/lib/kubelet/pod-resources/kubelet.sock). Empty means
	// <state_dir>/pod-resources/kubelet.sock.
	PodResourcesSocket string `toml:"pod_resources_socket"`
}

// DevicePluginDir is devices.plugin_dir, defaulted.
func (c *Config) DevicePluginDir() string {
	if c.Devices.PluginDir != "" {
		return c.Devices.PluginDir
	}
	return filepath.Join(c.StateDir, "device-plugins")
}

// PodResourcesSocket is devices.pod_resources_socket, defaulted.
func (c *Config) PodResourcesSocket() string {
	if c.Devices.PodResourcesSocket != "" {
		return c.Devices.PodResourcesSocket
	}
	return filepath.Join(c.StateDir, "pod-resources", "kubelet.sock")
}

// CSI is the CSI volume plugin's directories, as the kubelet's under its root directory:
// <root_dir>/plugins_registry (drivers' registrars put their registration sockets there),
// <root_dir>/plugins (staging paths, kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount)
// and <root_dir>/pods (publish paths, <uid>/volumes/kubernetes.io~csi/<volume>/mount).
type CSI struct {
	// RootDir is the kubelet's --root-dir for CSI drivers (/var/lib/kubelet). Empty means
	// state_dir.
	RootDir string `toml:"root_dir"`
}

// CSIRootDir is csi.root_dir, defaulted.
func (c *Config) CSIRootDir() string {
	if c.CSI.RootDir != "" {
		return c.CSI.RootDir
	}
	return c.StateDir
}

// Metrics is the Prometheus endpoint.
type Metrics struct {
	// Address is host:port to listen on; empty turns metrics off.
	Address string `toml:"address"`
}

// Cluster is cluster mode: slicelet registers a Node with a Kubernetes API server, renews
// its Lease, runs the pods the scheduler binds to it and reports their status. Off by
// default; stand-alone mode ignores every other key of the table.
type Cluster struct {
	// Enabled turns cluster mode on.
	Enabled bool `toml:"enabled"`
	// Kubeconfig is the kubeconfig file with the API server and the node's credentials
	// (a system:node:<name> client certificate, as the kubelet's). With bootstrap_kubeconfig,
	// slicelet writes it once it has its client certificate (the kubelet's --kubeconfig).
	Kubeconfig string `toml:"kubeconfig"`
	// BootstrapKubeconfig is the kubeconfig of the TLS bootstrap (the kubelet's
	// --bootstrap-kubeconfig, what kubeadm join writes): credentials, a bootstrap token
	// usually, that may only ask for the node's client certificate with a
	// CertificateSigningRequest of signer kubernetes.io/kube-apiserver-client-kubelet. Used
	// while kubeconfig is missing or its certificate expired; needs rotate_certificates.
	BootstrapKubeconfig string `toml:"bootstrap_kubeconfig"`
	// CertDir is where the node's certificates are kept (the kubelet's --cert-dir):
	// kubelet-client-current.pem and kubelet-server-current.pem, links to the dated pairs the
	// certificate managers write, and the self-signed kubelet.crt and kubelet.key. Empty
	// means <state_dir>/pki.
	CertDir string `toml:"cert_dir"`
	// RotateCertificates turns the client certificate manager on (the kubelet's
	// rotateCertificates): the client certificate is requested with a
	// CertificateSigningRequest when there is none, and renewed at 70–90% of its life.
	RotateCertificates bool `toml:"rotate_certificates"`
	// ServerTLSBootstrap has the kubelet API's serving certificate requested from the cluster
	// (signer kubernetes.io/kubelet-serving) and renewed as the client's, instead of a
	// self-signed one (the kubelet's serverTLSBootstrap). Such requests are approved by an
	// operator or an approver of the cluster's, not by the controller manager.
	ServerTLSBootstrap bool `toml:"server_tls_bootstrap"`
	// NodeName is the Node object's name; empty means the host name, lower-cased (the
	// kubelet's --hostname-override default).
	NodeName string `toml:"node_name"`
	// Labels are added to the Node at registration (the kubelet's --node-labels).
	Labels map[string]string `toml:"labels"`
	// Taints are registered with the Node, "key[=value]:Effect" each (the kubelet's
	// registerWithTaints, --register-with-taints syntax).
	Taints []string `toml:"taints"`
	// NodeIP is the Node's InternalIP and the address the kubelet API listens on (the
	// kubelet's --node-ip); empty means the host's global unicast addresses, and the kubelet
	// API listens on all of them.
	NodeIP string `toml:"node_ip"`
	// KubeletPort is the kubelet API's HTTPS port (the kubelet's --port, 10250); 0 turns the
	// kubelet API off.
	KubeletPort int `toml:"kubelet_port"`
	// TLSCertFile and TLSPrivateKeyFile are the kubelet API's serving certificate and key
	// (--tls-cert-file, --tls-private-key-file); both empty means a self-signed pair in the
	// state directory, as the kubelet keeps one in --cert-dir.
	TLSCertFile       string `toml:"tls_cert_file"`
	TLSPrivateKeyFile string `toml:"tls_private_key_file"`
	// ClientCAFile verifies the client certificates of the kubelet API's callers
	// (authentication.x509.clientCAFile); empty means client certificates are not accepted.
	ClientCAFile string `toml:"client_ca_file"`
	// AnonymousAuth lets requests without credentials through as system:anonymous, still
	// subject to authorization (authentication.anonymous.enabled); off by default.
	AnonymousAuth bool `toml:"anonymous_auth"`
	// DNSServers are the cluster DNS servers' IPs (the kubelet's clusterDNS): the nameservers
	// of pods with dnsPolicy ClusterFirst (off the host's network) and
	// ClusterFirstWithHostNet. Empty means such pods fall back to Default, with a
	// MissingClusterDNS event. Read in stand-alone mode too, as the kubelet does.
	DNSServers []string `toml:"dns_servers"`
	// Domain is the cluster's DNS domain (clusterDomain, e.g. cluster.local): the search
	// domains of ClusterFirst pods and the domain of a pod's FQDN (hostname.subdomain).
	Domain string `toml:"domain"`
	// ResolvConf is the host resolver configuration pods start from (resolvConf): dnsPolicy
	// Default, and the search domains after the cluster's. "" means none: Default pods then
	// resolve through the node itself (127.0.0.1), as the kubelet with --resolv-conf="".
	ResolvConf string `toml:"resolv_conf"`
}

// ClusterCertDir is cluster.cert_dir, defaulted.
func (c *Config) ClusterCertDir() string {
	if c.Cluster.CertDir != "" {
		return c.Cluster.CertDir
	}
	return filepath.Join(c.StateDir, "pki")
}

// Log sets the logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `toml:"level"`
	// Format is auto, text, json or journal.
	Format string `toml:"format"`
}

// DefaultEvictionHard returns the kubelet's Linux default evictionHard
// (pkg/kubelet/eviction/defaults_linux.go, applied by the kubelet's config loader when the file
// sets none).
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		string(eviction.SignalMemoryAvailable):   "100Mi",
		string(eviction.SignalNodeFsAvailable):   "10%",
		string(eviction.SignalNodeFsInodesFree):  "5%",
		string(eviction.SignalImageFsAvailable):  "15%",
		string(eviction.SignalImageFsInodesFree): "5%",
	}
}

// Default returns the configuration used when nothing is set: the kubelet's
// defaults for everything the kubelet has, and slicelet's for the rest.
func Default() *Config {
	return &Config{
		StateDir: "/var/lib/slicelet",
		Node: Node{
			MaxPods:                110,
			SystemReserved:         corev1.ResourceList{},
			KubeReserved:           corev1.ResourceList{},
			EnforceNodeAllocatable: []string{EnforcePods},
		},
		Cgroups: Cgroups{
			Root:                    "/",
			PerQOS:                  true,
			CPUCFSQuota:             true,
			CPUCFSQuotaPeriod:       100 * time.Millisecond,
			PodPidsLimit:            -1,
			QOSReserved:             map[string]string{},
			MemoryReservationPolicy: MemoryReservationNone,
		},
		Eviction: Eviction{
			Hard:                     DefaultEvictionHard(),
			Soft:                     map[string]string{},
			SoftGracePeriod:          map[string]string{},
			MinimumReclaim:           map[string]string{},
			PressureTransitionPeriod: 5 * time.Minute,
			MonitoringInterval:       10 * time.Second,
			PriorityClasses:          map[string]int32{},
		},
		GC: GC{
			Images: ImageGC{
				HighThresholdPercent: 85,
				LowThresholdPercent:  80,
				MinimumAge:           2 * time.Minute,
				Period:               5 * time.Minute,
			},
			Containers: ContainerGC{
				MaxPerPodContainer: 1,
				MaxContainers:      -1,
				Period:             time.Minute,
			},
		},
		Runtime: Runtime{Type: RuntimeSystemd, Network: NetworkHost},
		Systemd: Systemd{JobTimeout: 30 * time.Second},
		Pods: Pods{
			ManifestDir:  "/etc/slicelet/pods.d",
			StaticPodUID: StaticPodUIDKubelet,
			// Only root writes the manifest directory; the API's socket group need not be root.
			Security: PodSecuritySources{
				File: PodSecurity{Enforce: PodSecurityPrivileged, EnforceVersion: PodSecurityLatest},
				API:  PodSecurity{Enforce: PodSecurityBaseline, EnforceVersion: PodSecurityLatest},
			},
		},
		API:     API{Socket: "/run/slicelet/slicelet.sock", Group: "slicelet"},
		Metrics: Metrics{Address: "127.0.0.1:10255"},
		Cluster: Cluster{Kubeconfig: "/etc/slicelet/kubeconfig", Labels: map[string]string{}, Taints: []string{}, KubeletPort: 10250, DNSServers: []string{}, ResolvConf: "/etc/resolv.conf"},
		Log:     Log{Level: "info", Format: "auto"},
	}
}

// Files returns the files Load read, main file first, in the order applied.
// It is empty for defaults alone.
func (c *Config) Files() []string { return append([]string(nil), c.files...) }

// EvictionThresholds returns the parsed eviction thresholds, including the
// allocatableMemory.available copies when "pods" is enforced. After a
// successful Load it cannot fail.
func (c *Config) EvictionThresholds() ([]eviction.Threshold, error) {
	e := c.Eviction
	return eviction.ParseThresholdConfig(c.Node.EnforceNodeAllocatable, e.Hard, e.Soft, e.SoftGracePeriod, e.MinimumReclaim)
}

// Enforces reports whether enforce_node_allocatable contains key.
func (n Node) Enforces(key string) bool {
	for _, k := range n.EnforceNodeAllocatable {
		if k == key {
			return true
		}
	}
	return false
}

// QOSReservedMemoryPercent returns the qos_reserved memory percentage (0–100)
// and whether it is set. After a successful Load it is well formed.
func (c Cgroups) QOSReservedMemoryPercent() (int64, bool) {
	v, ok := c.QOSReserved[string(corev1.ResourceMemory)]
	if !ok {
		return 0, false
	}
	p, err := parseQOSPercent(v)
	if err != nil {
		return 0, false
	}
	return p, true
}

// PriorityClassValue resolves a priorityClassName: the built-ins first, then
// [eviction.priority_classes].
func (e Eviction) PriorityClassValue(name string) (int32, bool) {
	switch name {
	case SystemNodeCritical:
		return SystemNodeCriticalValue, true
	case SystemClusterCritical:
		return SystemClusterCriticalValue, true
	}
	v, ok := e.PriorityClasses[name]
	return v, ok
}
