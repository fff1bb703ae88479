package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	stdslices "slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/utils/clock"
)

// KubeletSocket is the registration socket's name in the plugin directory (the kubelet's
// pluginapi.KubeletSocket, /var/lib/kubelet/device-plugins/kubelet.sock).
const KubeletSocket = "kubelet.sock"

// ReasonUnexpectedAdmissionError is the kubelet's admission reason of a pod whose devices
// cannot be allocated (pkg/kubelet/cm/admission).
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// rpcTimeout bounds each call to a plugin but PreStartContainer (the kubelet's dial timeout);
// preStartTimeout is the kubelet's KubeletPreStartContainerRPCTimeoutInSecs.
const (
	rpcTimeout      = 10 * time.Second
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// Options configure a Manager.
type Options struct {
	// Dir is the plugin directory: the registration socket (KubeletSocket), the plugins'
	// sockets and the checkpoint. Required.
	Dir string
	// Dial connects to a plugin's socket; DialUnix when nil.
	Dial func(ctx context.Context, socket string) (Conn, error)
	// OnChange is called (without the manager's lock) when the devices' capacity may have
	// changed: a plugin registered, listed its devices or went away.
	OnChange func()
	// Logger; discarded when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.Clock
}

// Conn is a connection to one plugin: its API, closed when the plugin goes away.
type Conn interface {
	pluginapi.DevicePluginClient
	Close() error
}

// endpoint is one registered plugin.
type endpoint struct {
	resource, socket string
	conn             Conn
	opts             *pluginapi.DevicePluginOptions
}

type allocKey struct{ pod, container, resource string }

// Manager is the device manager. Its methods are safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	// allocMu serialises allocations (admission, a container's re-allocation), which call the
	// plugins without mu held.
	allocMu sync.Mutex

	mu        sync.Mutex
	resources map[string]*Resource
	endpoints map[string]*endpoint
	allocs    map[allocKey]Allocation
	// reuse are the devices the pod being admitted has in init containers that have ended
	// by the time the next container starts (the kubelet's devicesToReuse), by resource.
	reuse    map[string][]string
	reusePod string
	server   *registrationServer
}

// New returns a manager; Start serves the registration socket.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Dial == nil {
		opts.Dial = DialUnix
	}
	return &Manager{opts: opts, log: opts.Logger, resources: map[string]*Resource{}, endpoints: map[string]*endpoint{},
		allocs: map[allocKey]Allocation{}, reuse: map[string][]string{}}
}

// Dir is the plugin directory.
func (m *Manager) Dir() string { return m.opts.Dir }

// LoadCheckpoint reads the allocations of the last run from the checkpoint: the pods keep
// their devices, and the resources that were registered stay in the node's capacity with no
// device until their plugins register again (or StopGracePeriod passes). A corrupt checkpoint
// is an error; the manager then starts with no allocation, as the kubelet does.
func (m *Manager) LoadCheckpoint() error {
	allocs, registered, err := ReadCheckpoint(checkpointPath(m.opts.Dir))
	if err != nil {
		return err
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range allocs {
		m.allocs[allocKey{a.PodUID, a.Container, a.Resource}] = a
	}
	for _, name := range registered {
		if _, ok := m.resources[name]; !ok {
			m.resources[name] = &Resource{Devices: map[string]*pluginapi.Device{}, Stopped: now}
		}
	}
	return nil
}

// Capacity is the devices' part of the node's capacity and allocatable (Capacity); a resource
// gone for longer than StopGracePeriod is forgotten.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	capacity, allocatable, deleted := Capacity(m.resources, m.opts.Clock.Now())
	for _, name := range deleted {
		delete(m.resources, name)
		delete(m.endpoints, name)
	}
	m.mu.Unlock()
	if len(deleted) > 0 {
		m.log.Info("device plugin resources dropped: their plugins did not come back", "resources", deleted)
		m.writeCheckpoint()
	}
	return capacity, allocatable
}

// isDevice reports whether name is the device manager's: a resource a plugin registered (or
// that the checkpoint names), or one devices were allocated from. mu must be held.
func (m *Manager) isDeviceLocked(name string) bool {
	if _, ok := m.resources[name]; ok {
		return true
	}
	for k := range m.allocs {
		if k.resource == name {
			return true
		}
	}
	return false
}

// AdmissionAllocatable is allocatable for admitting pod: a pod that holds devices already
// fits next to the others even before their plugins registered again (AdmissionAllocatable).
func (m *Manager) AdmissionAllocatable(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	has := false
	held := map[string]int{}
	for k, a := range m.allocs {
		if k.pod == string(pod.UID) {
			has = true
		}
		held[k.resource] += len(a.IDs())
	}
	return AdmissionAllocatable(allocatable, has, held)
}

// Admit gives an admitted pod its devices (the kubelet's resource allocation admit handler):
// every init container's, then every container's, from the plugins of the resources their
// limits name. active are the pods still running (or admitted) besides pod; when ready (every
// pod source has reported) the devices of pods not among them are freed first. A failure
// rejects the pod with the kubelet's reason UnexpectedAdmissionError and message ("Allocate
// failed due to requested number of devices unavailable for example.com/gpu. Requested: 1,
// Available: 0, which is unexpected"); the devices given to its containers so far are freed.
//
// A pod of the manifest directory or the local API asking for an extended resource no plugin
// registered is refused with the words of an allocation from a resource no plugin registered
// ("cannot allocate unregistered device example.com/gpu"): without a scheduler nothing else
// checked the node has it. The kubelet admits such a static pod and runs it without the device
// (its predicate admit handler notes it should not); a pod from the API server keeps that
// behaviour, an extended resource unknown to the node being a cluster-level one.
func (m *Manager) Admit(ctx context.Context, pod *v1.Pod, static bool, active []*v1.Pod, ready bool) (ok bool, reason, message string) {
	fail := func(err error) (bool, string, string) {
		return false, ReasonUnexpectedAdmissionError, fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)
	}
	if static {
		m.mu.Lock()
		missing := ""
		for _, c := range allContainers(pod) {
			for _, name := range stdslices.Sorted(maps.Keys(c.Resources.Limits)) {
				if v1helper.IsExtendedResourceName(name) && !m.isDeviceLocked(string(name)) && missing == "" {
					missing = string(name)
				}
			}
		}
		m.mu.Unlock()
		if missing != "" {
			return fail(fmt.Errorf("cannot allocate unregistered device %s", missing))
		}
	}
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	if ready {
		m.removeInactive(pod, active)
	}
	m.mu.Lock()
	if m.reusePod != string(pod.UID) {
		m.reusePod, m.reuse = string(pod.UID), map[string][]string{}
	}
	m.mu.Unlock()
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c); err != nil {
			m.release(string(pod.UID))
			return fail(err)
		}
		restartable := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		m.mu.Lock()
		for k, a := range m.allocs {
			if k.pod == string(pod.UID) && k.container == c.Name {
				if restartable {
					m.reuse[k.resource] = without(m.reuse[k.resource], a.IDs())
				} else {
					m.reuse[k.resource] = append(m.reuse[k.resource], a.IDs()...)
				}
			}
		}
		m.mu.Unlock()
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, pod, c); err != nil {
			m.release(string(pod.UID))
			return fail(err)
		}
		m.mu.Lock()
		for k, a := range m.allocs {
			if k.pod == string(pod.UID) && k.container == c.Name {
				m.reuse[k.resource] = without(m.reuse[k.resource], a.IDs())
			}
		}
		m.mu.Unlock()
	}
	return true, "", ""
}

// release frees the devices of pod (an admission that failed half-way).
func (m *Manager) release(podUID string) {
	m.mu.Lock()
	changed := false
	for k := range m.allocs {
		if k.pod == podUID {
			delete(m.allocs, k)
			changed = true
		}
	}
	m.mu.Unlock()
	if changed {
		m.writeCheckpoint()
	}
}

// removeInactive frees the devices of the pods that are neither pod nor among active (the
// kubelet's UpdateAllocatedDevices).
func (m *Manager) removeInactive(pod *v1.Pod, active []*v1.Pod) {
	keep := map[string]bool{string(pod.UID): true}
	for _, p := range active {
		keep[string(p.UID)] = true
	}
	m.mu.Lock()
	var gone []string
	for k := range m.allocs {
		if !keep[k.pod] {
			delete(m.allocs, k)
			if !stdslices.Contains(gone, k.pod) {
				gone = append(gone, k.pod)
			}
		}
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		sort.Strings(gone)
		m.log.Info("devices of pods no longer running freed", "pod_uids", gone)
		m.writeCheckpoint()
	}
}

// allContainers returns pod's init containers and containers.
func allContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// without returns list less the ids.
func without(list, ids []string) []string {
	var out []string
	for _, id := range list {
		if !stdslices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// allocateContainer gives container c of pod the devices its limits ask for (the kubelet's
// allocateContainerResources): Plan, the plugin's preference, Choose, the plugin's Allocate,
// the checkpoint. allocMu must be held.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	m.mu.Lock()
	reqs := Requests(c, m.isDeviceLocked)
	m.mu.Unlock()
	changed := false
	defer func() {
		if changed {
			m.writeCheckpoint()
		}
	}()
	for _, name := range stdslices.Sorted(maps.Keys(reqs)) {
		m.mu.Lock()
		need := Need{Required: reqs[name], Reusable: m.reuse[name]}
		if m.reusePod != string(pod.UID) {
			need.Reusable = nil
		}
		if a, ok := m.allocs[allocKey{string(pod.UID), c.Name, name}]; ok {
			need.Have = a.IDs()
		}
		inUse := map[string]bool{}
		for k, a := range m.allocs {
			if k.resource == name {
				for _, id := range a.IDs() {
					inUse[id] = true
				}
			}
		}
		r := m.resources[name]
		plan, err := Plan(name, r, need, inUse)
		ep := m.endpoints[name]
		var devices map[string]*pluginapi.Device
		if r != nil {
			devices = maps.Clone(r.Devices)
		}
		m.mu.Unlock()
		if err != nil {
			return err
		}
		if plan.Needed == 0 && len(plan.Chosen) == 0 {
			continue
		}
		if ep == nil {
			return fmt.Errorf("unknown Device Plugin %s", name)
		}
		var preferred []string
		if plan.Needed > 0 && ep.opts.GetGetPreferredAllocationAvailable() {
			cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
			resp, err := ep.conn.GetPreferredAllocation(cctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: append(append([]string(nil), plan.Candidates...), plan.Chosen...), MustIncludeDeviceIDs: plan.Chosen, AllocationSize: int32(need.Required)}}})
			cancel()
			if err != nil {
				return fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %v", err)
			}
			if rs := resp.GetContainerResponses(); len(rs) > 0 {
				preferred = rs[0].GetDeviceIDs()
			}
		}
		ids := Choose(plan, preferred)
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		resp, err := ep.conn.Allocate(cctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		cancel()
		if err != nil {
			return err
		}
		if len(resp.GetContainerResponses()) == 0 {
			return fmt.Errorf("no containers return in allocation response %v", resp)
		}
		a := Allocation{PodUID: string(pod.UID), Container: c.Name, Resource: name, DeviceIDs: ByNUMA(ids, devices), Response: resp.GetContainerResponses()[0]}
		m.mu.Lock()
		m.allocs[allocKey{a.PodUID, a.Container, a.Resource}] = a
		m.mu.Unlock()
		changed = true
		m.log.Info("devices allocated", "pod", pod.Namespace+"/"+pod.Name, "pod_uid", string(pod.UID), "container", c.Name, "resource", name, "devices", ids)
	}
	return nil
}

// RunOptions is what a run of container c of pod gets from its devices (the kubelet's
// GetDeviceRunContainerOptions): PreStartContainer is called first for a plugin that asks for
// it; a container without its devices (a pod admitted before its plugin registered again) is
// allocated them now.
func (m *Manager) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*RunOptions, error) {
	m.mu.Lock()
	reqs := Requests(c, m.isDeviceLocked)
	m.mu.Unlock()
	missing := false
	for _, name := range stdslices.Sorted(maps.Keys(reqs)) {
		if reqs[name] == 0 {
			continue
		}
		m.mu.Lock()
		ep := m.endpoints[name]
		a, has := m.allocs[allocKey{string(pod.UID), c.Name, name}]
		m.mu.Unlock()
		if ep == nil {
			return nil, fmt.Errorf("endpoint not found in cache for a registered resource: %s", name)
		}
		if !has {
			missing = true
			continue
		}
		if ep.opts.GetPreStartRequired() {
			cctx, cancel := context.WithTimeout(ctx, preStartTimeout)
			_, err := ep.conn.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: a.IDs()})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("device plugin PreStartContainer rpc failed with err: %v", err)
			}
		}
	}
	if missing {
		m.allocMu.Lock()
		err := m.allocateContainer(ctx, pod, c)
		m.allocMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return MergeRunOptions(m.ContainerAllocations(string(pod.UID), c.Name)), nil
}

// ContainerAllocations returns the allocations of one container, by resource name.
func (m *Manager) ContainerAllocations(podUID, container string) []Allocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Allocation
	for k, a := range m.allocs {
		if k.pod == podUID && k.container == container {
			out = append(out, a)
		}
	}
	stdslices.SortFunc(out, func(a, b Allocation) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}

// Allocatable returns the healthy devices of every resource a plugin serves, by resource.
func (m *Manager) Allocatable() map[string][]*pluginapi.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]*pluginapi.Device{}
	for name, r := range m.resources {
		if !r.Stopped.IsZero() {
			continue
		}
		for _, id := range r.healthy() {
			out[name] = append(out[name], r.Devices[id])
		}
	}
	return out
}

// writeCheckpoint saves the allocations and the registered resources' healthy devices; a
// failure is logged (the kubelet's writeCheckpoint).
func (m *Manager) writeCheckpoint() {
	m.mu.Lock()
	allocs := make([]Allocation, 0, len(m.allocs))
	for _, k := range stdslices.SortedFunc(maps.Keys(m.allocs), func(a, b allocKey) int {
		return strings.Compare(a.pod+"\x00"+a.container+"\x00"+a.resource, b.pod+"\x00"+b.container+"\x00"+b.resource)
	}) {
		allocs = append(allocs, m.allocs[k])
	}
	registered := map[string][]string{}
	for name, r := range m.resources {
		registered[name] = r.healthy()
	}
	m.mu.Unlock()
	if err := WriteCheckpoint(checkpointPath(m.opts.Dir), allocs, registered); err != nil {
		m.log.Error("device checkpoint not written", "error", err)
	}
}

// Register connects a plugin that registered (the kubelet's registration server): the API
// version must be v1beta1, the resource an extended resource's name, the endpoint a socket in
// the plugin directory; then its options are read and its ListAndWatch stream followed until
// it ends.
func (m *Manager) Register(ctx context.Context, r *pluginapi.RegisterRequest) error {
	if !stdslices.Contains(pluginapi.SupportedVersions[:], r.Version) {
		return fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", r.Version, pluginapi.SupportedVersions)
	}
	if !v1helper.IsExtendedResourceName(v1.ResourceName(r.ResourceName)) {
		return fmt.Errorf("the ResourceName %q is invalid", r.ResourceName)
	}
	if r.Endpoint == "" || r.Endpoint != filepath.Base(r.Endpoint) || r.Endpoint == "." || r.Endpoint == ".." || r.Endpoint == KubeletSocket {
		return fmt.Errorf("endpoint %q: must be the name of a socket in %s", r.Endpoint, m.opts.Dir)
	}
	socket := filepath.Join(m.opts.Dir, r.Endpoint)
	dctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	conn, err := m.opts.Dial(dctx, socket)
	if err != nil {
		return fmt.Errorf("failed to dial device plugin: %w", err)
	}
	opts, err := conn.GetDevicePluginOptions(dctx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("failed to get device plugin options: %v", err)
	}
	// The stream outlives the Register call: it ends when the plugin goes away or Stop is called.
	stream, err := conn.ListAndWatch(context.WithoutCancel(ctx), &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("device plugin %s: ListAndWatch: %w", r.ResourceName, err)
	}
	ep := &endpoint{resource: r.ResourceName, socket: socket, conn: conn, opts: opts}
	m.mu.Lock()
	old := m.endpoints[r.ResourceName]
	m.endpoints[r.ResourceName] = ep
	if _, ok := m.resources[r.ResourceName]; !ok {
		m.resources[r.ResourceName] = &Resource{Devices: map[string]*pluginapi.Device{}}
	}
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	m.log.Info("device plugin registered", "resource", r.ResourceName, "socket", socket,
		"pre_start_required", opts.GetPreStartRequired(), "preferred_allocation", opts.GetGetPreferredAllocationAvailable())
	go m.watch(ep, stream)
	return nil
}

// watch follows a plugin's ListAndWatch stream; when it ends the plugin's devices are
// unhealthy until it registers again.
func (m *Manager) watch(ep *endpoint, stream pluginapi.DevicePlugin_ListAndWatchClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			m.mu.Lock()
			current := m.endpoints[ep.resource] == ep
			if current {
				if r := m.resources[ep.resource]; r != nil {
					r.Stopped = m.opts.Clock.Now()
				}
			}
			m.mu.Unlock()
			ep.conn.Close()
			if current {
				m.log.Warn("device plugin went away: its devices are unhealthy until it registers again", "resource", ep.resource, "error", err)
				m.changed()
			}
			return
		}
		m.mu.Lock()
		if m.endpoints[ep.resource] != ep {
			m.mu.Unlock()
			ep.conn.Close()
			return
		}
		devs := map[string]*pluginapi.Device{}
		healthy := 0
		for _, d := range resp.GetDevices() {
			if d == nil || d.ID == "" {
				continue
			}
			devs[d.ID] = d
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		m.resources[ep.resource] = &Resource{Devices: devs}
		m.mu.Unlock()
		m.log.Info("device plugin listed its devices", "resource", ep.resource, "devices", len(devs), "healthy", healthy)
		m.writeCheckpoint()
		m.changed()
	}
}

func (m *Manager) changed() {
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
}

// cleanupDir removes the sockets in the plugin directory (the kubelet's
// CleanupPluginDirectory): plugins watch for the registration socket to be created again and
// then register again, with a new socket of their own.
func cleanupDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
