package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/csi"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/prober"
	"github.com/slicelet/slicelet/slices"
)

// Options configure a Worker. Every dependency is given here; nothing is set later.
type Options struct {
	// Runtime runs the sandboxes and containers. Required.
	Runtime Runtime
	// Images pulls images; nil for a runtime without images (the systemd runtime).
	Images ImageService
	// Recorder receives the kubelet's container events (Created, Started, Killing, BackOff,
	// Failed, Pulling, Pulled): a client-go record.EventRecorder. Required.
	Recorder EventRecorder
	// StateDir holds the pods' records and emptyDir volumes (StateDir/pods/<uid>). Required.
	StateDir string
	// KubeletPodsDir, when set, is the kubelet's pods directory (<root-dir>/pods,
	// /var/lib/kubelet/pods): the pods' emptyDir and object volumes live there in the
	// kubelet's layout (volumePath), where a kubelet taking over the node finds them, and
	// where slicelet finds the kubelet's. Empty keeps them in StateDir.
	KubeletPodsDir string
	// Logger gets state changes; discarded when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.Clock
	// Backoff is the container restart back-off; zero fields take the kubelet's values.
	Backoff lifecycle.Backoff
	// MemoryCapacity is the node's memory in bytes, for the kubelet's OOM score of Burstable
	// containers.
	MemoryCapacity int64
	// Resources are the node's CPU options for container quotas.
	Resources slices.Options
	// HostPageSizes are the hugepage sizes the host supports, in bytes: each container gets a
	// hugetlb limit for every one of them (0 unless it asks for that size).
	HostPageSizes []int64
	// HostNetwork runs every pod in the host's network namespace (no CNI plugin needed); with
	// false only pods with spec.hostNetwork do.
	HostNetwork bool
	// NodeIPs are the node's IPs: the pod IPs of pods in the host's network namespace, where
	// their network probes and hooks go (the loopback when empty).
	NodeIPs []string
	// ProbeMetrics counts probe results; none when nil.
	ProbeMetrics ProbeMetrics
	// RuntimeMetrics counts the runtime's and the image service's calls; none when nil.
	RuntimeMetrics RuntimeMetrics
	// VolumeMetrics times the volumes' setups; none when nil.
	VolumeMetrics VolumeMetrics
	// Objects gives the ConfigMaps and Secrets pods use in env and volumes (pods.Objects);
	// with nil every reference is missing.
	Objects ObjectGetter
	// Cluster gives the pods of cluster mode their ConfigMaps, Secrets, service-account
	// tokens and service variables from the API server; nil without cluster mode.
	Cluster ClusterObjects
	// NodeName is spec.nodeName in the Downward API for pods that have none.
	NodeName string
	// NodeLabels are the registered Node's labels, which a persistent volume's node affinity
	// must match before it is mounted; nil: none known (such a volume waits).
	NodeLabels func() map[string]string
	// Allocatable is the node's allocatable, the Downward API's value of limits a container
	// does not set (the kubelet's defaultPodLimitsForDownwardAPI).
	Allocatable v1.ResourceList
	// SeccompProfileRoot is where Localhost seccomp profiles live (the kubelet's
	// <root-dir>/seccomp): securityContext.seccompProfile.localhostProfile is a path under it.
	// Default StateDir/seccomp.
	SeccompProfileRoot string
	// Mounter mounts the tmpfs of memory-backed emptyDir volumes and the local volumes on
	// block devices; mount(2) and mount-utils when nil.
	Mounter Mounter
	// PluginsDir is the node's plugins directory (the kubelet's <root-dir>/plugins), where
	// local volumes on block devices are mounted (lifecycle.LocalDeviceMountsDir). Default
	// StateDir/plugins.
	PluginsDir string
	// EtcHosts is the node's hosts file, which pods on the host's network get a copy of (with
	// their hostAliases). Default /etc/hosts.
	EtcHosts string
	// DNS is the node's cluster DNS, cluster domain and host resolver configuration: each
	// sandbox gets the pod's resolver configuration from it (PodSandboxConfig.DnsConfig, the
	// kubelet's GetPodDNS) and a pod with a subdomain its FQDN. nil leaves the resolver
	// configuration to the runtime (containerd copies the host's /etc/resolv.conf).
	DNS *lifecycle.NodeDNS
	// Devices gives a container's run what its device plugins answered for its devices
	// (internal/pods/devices); nil: no device plugin.
	Devices Devices
	// CSI sets up and tears down the cluster pods' CSI volumes (internal/pods/csi); nil: a
	// CSI volume waits with FailedMount, as on a node where its driver never registers.
	CSI CSIVolumes
}

// CSIVolumes is the CSI volume plugin as the worker sees it.
type CSIVolumes interface {
	// SetUp stages and publishes the CSI volume vol of pod and returns its path on the node.
	SetUp(ctx context.Context, pod *v1.Pod, vol csi.Volume) (string, error)
	// SetUpBlock stages and publishes the CSI block volume vol of pod and returns the host
	// path of the device its containers get.
	SetUpBlock(ctx context.Context, pod *v1.Pod, vol csi.Volume) (string, error)
	// NodeExpand grows what is on the persistent CSI volume vol (a block volume when block),
	// set up for pod, to newSize (NodeExpandVolume); a failure says how it failed
	// (csi.FailureOf).
	NodeExpand(ctx context.Context, pod *v1.Pod, vol csi.Volume, block bool, newSize resource.Quantity) error
	// RequiresRepublish reports whether the driver wants its volumes published again
	// periodically (CSIDriver requiresRepublish).
	RequiresRepublish(driver string) bool
	// TearDown unpublishes (and unstages when unused) every CSI volume of the pod uid, block
	// volumes too; what
	// it cannot tear down is an error, left for a later try.
	TearDown(ctx context.Context, uid string) error
}

// Devices is the device manager as the worker sees it.
type Devices interface {
	// RunOptions returns what a run of container c of pod gets from its devices: env, mounts,
	// device nodes, annotations and CDI devices (after the plugins' PreStartContainer). An
	// error holds the container in CreateContainerConfigError, as the kubelet's
	// GenerateRunContainerOptions errors do.
	RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*DeviceRunOptions, error)
}

// DeviceRunOptions is what a container's devices add to its CRI configuration (the kubelet's
// DeviceRunContainerOptions): env before the container's own (which win), mounts before the
// volumes', device nodes, annotations, CDI devices (fully qualified names).
type DeviceRunOptions struct {
	Envs        []v1.EnvVar
	Mounts      []DeviceMount
	Devices     []DeviceNode
	Annotations map[string]string
	CDIDevices  []string
}

// DeviceMount is a host path a device plugin mounts in the container.
type DeviceMount struct {
	ContainerPath, HostPath string
	ReadOnly                bool
}

// DeviceNode is a device node a device plugin gives the container, with its cgroup
// permissions ("rwm").
type DeviceNode struct {
	ContainerPath, HostPath, Permissions string
}

// Worker is slicelet's one pod worker (the kubelet's kuberuntime manager: SyncPod,
// computePodActions, KillPod, and the PLEG's relist) over a Runtime. Its methods are safe for
// concurrent use; calls for the same pod are serialized.
type Worker struct {
	opts    Options
	rt      Runtime
	backend Runtime // rt without the metrics wrapper, for its optional interfaces
	log     *slog.Logger
	clock   clock.Clock
	backoff lifecycle.Backoff
	events  EventRecorder
	probes  *prober.Manager

	// changes counts the calls through rt that change sandboxes or containers; listing is
	// the last relist's listing while it serves syncs (listPod).
	changes changes
	listing atomic.Pointer[listing]

	// devMu serializes the mounts and unmounts of local volumes' devices, which pods share.
	devMu sync.Mutex

	mu     sync.Mutex
	pods   map[string]*entry
	status map[string]ContainerStatus // inspected containers by ID, while their state holds
	// termination are the termination messages of exited containers by ID, read once, kept
	// as long as their status is.
	termination map[string]string
	// ips are the IPs of ready sandboxes by ID (sandboxIPs), while they are listed.
	ips map[string][]string
}

// entry is the worker's in-memory side of one pod.
type entry struct {
	mu sync.Mutex // serializes SyncPod, KillPod and Forget of the pod

	// recMu guards rec, waits, backOffSeen, the mount errors and podIPs (short sections; GC
	// takes it without mu).
	recMu       sync.Mutex
	rec         *podRecord // nil until loaded
	waits       map[string]*hold
	backOffSeen map[string]uint32  // container → attempt whose back-off was reported
	mountErr    string             // why object volumes could not be written at the last sync
	claims      map[string]claimed // the claims' and inline csi volumes set up, by volume name
	setUpErr    string             // why emptyDir and hostPath volumes could not be set up at the last start
	podIPs      []string           // the IPs of the sandbox the pod's containers start in, off the host's network
	mounted     map[string]string  // volume → plugin of the volumes set up (MountedVolumes)
	// finished: the pod finished and what it held was released (releaseFinished); guarded
	// by mu, not recMu.
	finished bool

	// guarded by Worker.mu:
	nextSync time.Time
	probeDue bool             // a probe verdict changed since the last sync began
	seen     map[string]State // container ID → state at the last sync or relist; nil: never
}

// hold keeps a container back after its image could not be pulled or it could not be created:
// the kubelet's ErrImagePull/ImagePullBackOff and CreateContainerError, retried with back-off.
type hold struct {
	reason, message string
	until           time.Time
	delay           time.Duration
	// reported: the back-off's events were recorded (reportBackOff).
	reported bool
}

var _ pods.Runtime = (*Worker)(nil)

// New returns a Worker. It reads nothing from the runtime until the first call.
func New(opts Options) (*Worker, error) {
	switch {
	case opts.Runtime == nil:
		return nil, errors.New("pod worker: no container runtime")
	case opts.Recorder == nil:
		return nil, errors.New("pod worker: no event recorder")
	case opts.StateDir == "" || !filepath.IsAbs(opts.StateDir):
		return nil, fmt.Errorf("pod worker: state dir %q: must be an absolute path", opts.StateDir)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SeccompProfileRoot == "" {
		opts.SeccompProfileRoot = filepath.Join(opts.StateDir, "seccomp")
	}
	if opts.Mounter == nil {
		opts.Mounter = hostMounter{}
	}
	if opts.PluginsDir == "" {
		opts.PluginsDir = filepath.Join(opts.StateDir, "plugins")
	}
	if opts.EtcHosts == "" {
		opts.EtcHosts = "/etc/hosts"
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "pods"), 0o750); err != nil {
		return nil, fmt.Errorf("pod worker: state dir: %w", err)
	}
	// The runtime's optional interfaces (SandboxNetwork, imagelessRuntime) are asked of the
	// backend itself: the counting wrapper has none of them.
	backend := opts.Runtime
	if opts.RuntimeMetrics != nil {
		or := observedRuntime{Runtime: opts.Runtime, m: opts.RuntimeMetrics, clock: opts.Clock}
		opts.Runtime = or
		if opts.Images != nil {
			opts.Images = observedImages{ImageService: opts.Images, r: or}
		}
	}
	w := &Worker{
		opts: opts, backend: backend, log: opts.Logger, clock: opts.Clock,
		backoff: opts.Backoff.WithDefaults(), events: opts.Recorder,
		pods: map[string]*entry{}, status: map[string]ContainerStatus{}, termination: map[string]string{}, ips: map[string][]string{},
	}
	w.rt = changingRuntime{Runtime: opts.Runtime, c: &w.changes}
	w.probes = prober.NewManager(opts.Clock, probeReporter{w})
	return w, nil
}

// Close stops the probes and waits for them to end.
func (w *Worker) Close() { w.probes.Close() }

// Name is the runtime's name.
func (w *Worker) Name() string { return w.rt.Name() }

// Validate reports what slicelet cannot run with this runtime: ValidateSpec with the worker's
// network, then the runtime's own refusals.
func (w *Worker) Validate(pod *v1.Pod) field.ErrorList {
	return append(ValidateSpec(pod, w.opts.HostNetwork), w.rt.Validate(pod)...)
}

// ValidateSpec reports what the worker refuses whatever the runtime: probes, lifecycle hooks, env
// sources and object volumes (configMap, secret, projected, downwardAPI) it cannot handle, and the
// security settings no runtime of slicelet can honour (lifecycle.ValidateSecurity; hostNetwork
// says every pod shares the host's network namespace, as the daemon's worker does). It needs no
// runtime, so slicectl explains a pod offline with it.
func ValidateSpec(pod *v1.Pod, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateObjectVolumes(pod)...)
	check := func(p *field.Path, c *v1.Container, init bool) {
		errs = append(errs, validateProbes(p, c, init && !lifecycle.IsSidecar(c))...)
		errs = append(errs, validateEnvSources(p, c)...)
		if init && !lifecycle.IsSidecar(c) && c.Lifecycle != nil && (c.Lifecycle.PostStart != nil || c.Lifecycle.PreStop != nil) {
			// The API's validateInitContainers: hooks belong to containers that keep running.
			errs = append(errs, field.Forbidden(p.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always"))
		} else {
			errs = append(errs, validateHooks(p, c)...)
		}
	}
	spec := field.NewPath("spec")
	for i := range pod.Spec.InitContainers {
		check(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i], true)
	}
	for i := range pod.Spec.Containers {
		check(spec.Child("containers").Index(i), &pod.Spec.Containers[i], false)
	}
	if hostNetwork && !pod.Spec.HostNetwork {
		errs = append(errs, validateOnNodeNetwork(pod)...)
	}
	return append(errs, lifecycle.ValidateSecurity(pod, pod.Spec.HostNetwork || hostNetwork)...)
}

// entry returns the pod's entry, creating it.
func (w *Worker) entry(uid string) *entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pods[uid]
	if e == nil {
		e = &entry{waits: map[string]*hold{}, backOffSeen: map[string]uint32{}}
		w.pods[uid] = e
	}
	return e
}

// record returns the pod's record, loading it once. Call with e.recMu held.
func (w *Worker) record(e *entry, uid string) (*podRecord, error) {
	if e.rec != nil {
		return e.rec, nil
	}
	rec, err := w.loadRecord(uid)
	if err != nil {
		return nil, err
	}
	e.rec = rec
	return rec, nil
}

// NextSync returns when SyncPod must run again for the pod at the latest, because a back-off
// or hold ends then; zero when none is pending.
func (w *Worker) NextSync(uid string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.pods[uid]; e != nil {
		if e.probeDue {
			return w.clock.Now()
		}
		return e.nextSync
	}
	return time.Time{}
}

// checkPod rejects a pod whose UID cannot name anything on the host.
func checkPod(pod *v1.Pod) error {
	if err := slices.ValidateUID(string(pod.UID)); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// Logs writes a container's output (see Runtime.Logs); a container that is not in the pod's
// spec has none.
func (w *Worker) Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, out io.Writer) error {
	if err := checkPod(pod); err != nil {
		return err
	}
	if c, _ := lifecycle.ContainerByName(pod, container); c == nil {
		return fmt.Errorf("pod %s/%s: no container %q: %w", pod.Namespace, pod.Name, container, pods.ErrNoLogs)
	}
	return w.rt.Logs(ctx, pod, container, opts, out)
}

// ExecSync runs cmd in the running instance of a container of the pod (what exec probes and
// hooks use) and waits for it, at most timeout.
func (w *Worker) ExecSync(ctx context.Context, pod *v1.Pod, container string, cmd []string, timeout time.Duration) (ExecResult, error) {
	if err := checkPod(pod); err != nil {
		return ExecResult{}, err
	}
	ctrs, err := w.rt.ListContainers(ctx, string(pod.UID))
	if err != nil {
		return ExecResult{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var run *Container
	for i := range ctrs {
		c := &ctrs[i]
		if c.Name == container && c.State == StateRunning && (run == nil || c.Attempt > run.Attempt) {
			run = c
		}
	}
	if run == nil {
		return ExecResult{}, fmt.Errorf("pod %s/%s: container %s is not running", pod.Namespace, pod.Name, container)
	}
	return w.rt.ExecSync(ctx, run.ID, cmd, timeout)
}

// PodUIDs lists, sorted, the pods that have sandboxes or containers slicelet created in the
// runtime, or a directory in the state dir: another agent's (Foreign) are not slicelet's to
// clean up.
func (w *Worker) PodUIDs(ctx context.Context) ([]string, error) {
	set := map[string]bool{}
	sbs, err := w.rt.ListPodSandbox(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if !sb.Foreign {
			set[sb.PodUID] = true
		}
	}
	ctrs, err := w.rt.ListContainers(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, c := range ctrs {
		if !c.Foreign {
			set[c.PodUID] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(w.opts.StateDir, "pods"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			set[e.Name()] = true
		}
	}
	out := make([]string, 0, len(set))
	for uid := range set {
		if slices.ValidateUID(uid) == nil {
			out = append(out, uid)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Forget drops everything about a deleted pod: its containers and sandboxes in the runtime
// (killed first if they still run), its record, and its emptyDir and object volumes. hostPath
// volumes are never touched. Its events stay with the recorder, which bounds them (as the API
// server keeps a deleted pod's events until they expire).
func (w *Worker) Forget(ctx context.Context, uid string) error {
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	e := w.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	w.probes.Keep(uid, nil)
	ctrs, err := w.rt.ListContainers(ctx, uid)
	if err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	var errs []error
	for _, c := range ctrs {
		if c.State != StateExited {
			if err := w.rt.StopContainer(ctx, c.ID, 0); err != nil {
				errs = append(errs, err)
			}
		}
		if err := w.rt.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	sbs, err := w.rt.ListPodSandbox(ctx, uid)
	if err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	for _, sb := range sbs {
		if err := w.rt.StopPodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := w.rt.RemovePodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := w.unmountVolumes(uid); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := w.removeVolumes(uid); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := os.RemoveAll(w.podDir(uid)); err != nil {
		return fmt.Errorf("pod %s: state: %w", uid, err)
	}
	w.mu.Lock()
	delete(w.pods, uid)
	for _, c := range ctrs {
		delete(w.status, c.ID)
		delete(w.termination, c.ID)
	}
	w.mu.Unlock()
	w.log.Info("pod forgotten", "pod_uid", uid)
	return nil
}
