// Package devices is the node's device manager: the kubelet's device plugin API (v1beta1,
// k8s.io/kubelet/pkg/apis/deviceplugin) and the PodResources API (v1) served over unix sockets,
// as pkg/kubelet/cm/devicemanager does it. Device plugins register on the registration socket;
// their devices (ListAndWatch) become extended resources of the node's capacity and
// allocatable; an admitted pod's containers get devices (GetPreferredAllocation, Allocate), kept
// in the kubelet's checkpoint (kubelet_internal_checkpoint) so they survive a restart; a
// container's run gets the plugin's env, mounts, device nodes, annotations and CDI devices
// (PreStartContainer first when the plugin asks for it).
//
// The decisions (which devices, what capacity, what a container's run gets) are pure
// functions of this file; the gRPC boundary is small (plugin.go) and faked in the tests.
package devices

import (
	"cmp"
	"fmt"
	"maps"
	stdslices "slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// StopGracePeriod is how long a resource whose plugin went away (or that is known only from
// the checkpoint, before its plugin registered again) stays in the node's capacity, as zero
// devices for a plugin that never came back (the kubelet's endpointStopGracePeriod).
const StopGracePeriod = 5 * time.Minute

// Resource is what the manager knows of one extended resource.
type Resource struct {
	// Devices are the plugin's devices by ID, as its last ListAndWatch response listed them.
	Devices map[string]*pluginapi.Device
	// Stopped is when the plugin's connection ended (or when slicelet started, for a resource
	// known only from the checkpoint); zero while a plugin serves it.
	Stopped time.Time
}

// healthy returns the IDs of the healthy devices, sorted.
func (r *Resource) healthy() []string {
	var out []string
	for id, d := range r.Devices {
		if d.Health == pluginapi.Healthy {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// expired reports whether the resource's plugin has been gone longer than StopGracePeriod.
func (r *Resource) expired(now time.Time) bool {
	return !r.Stopped.IsZero() && now.Sub(r.Stopped) > StopGracePeriod
}

// Capacity is the node's capacity and allocatable of the device plugins' resources (the
// kubelet's GetCapacity): capacity counts every device, allocatable the healthy ones; a
// resource whose plugin went away counts none of them once it is gone (its devices were marked
// unhealthy) and is dropped (listed in deleted) after StopGracePeriod, reported that once with
// capacity and allocatable 0: the kubelet sets a removed device plugin's capacity to 0 and keeps
// it in the Node's status (pkg/kubelet/nodestatus/setters.go MachineInfo), which keeps the
// resources it does not compute itself.
func Capacity(resources map[string]*Resource, now time.Time) (capacity, allocatable v1.ResourceList, deleted []string) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for _, name := range stdslices.Sorted(maps.Keys(resources)) {
		r := resources[name]
		if r.expired(now) {
			deleted = append(deleted, name)
			capacity[v1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
			allocatable[v1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
			continue
		}
		healthy := int64(len(r.healthy()))
		if !r.Stopped.IsZero() {
			healthy = 0
		}
		capacity[v1.ResourceName(name)] = *resource.NewQuantity(int64(len(r.Devices)), resource.DecimalSI)
		allocatable[v1.ResourceName(name)] = *resource.NewQuantity(healthy, resource.DecimalSI)
	}
	return capacity, allocatable, deleted
}

// Allocation is the devices of one resource given to one container, and what the plugin's
// Allocate answered for them.
type Allocation struct {
	PodUID, Container, Resource string
	// DeviceIDs are the devices by NUMA node (-1: a device without topology), as the
	// kubelet's checkpoint keeps them.
	DeviceIDs map[int64][]string
	// Response is the plugin's answer for the container.
	Response *pluginapi.ContainerAllocateResponse
}

// IDs returns the allocation's device IDs, sorted.
func (a Allocation) IDs() []string {
	var out []string
	for _, ids := range a.DeviceIDs {
		out = append(out, ids...)
	}
	sort.Strings(out)
	return stdslices.Compact(out)
}

// noTopology is the checkpoint's NUMA node of a device without topology (the kubelet's
// nodeWithoutTopology).
const noTopology = -1

// ByNUMA groups ids by the NUMA nodes devices names for them (noTopology for none).
func ByNUMA(ids []string, devices map[string]*pluginapi.Device) map[int64][]string {
	out := map[int64][]string{}
	for _, id := range ids {
		d := devices[id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			out[noTopology] = append(out[noTopology], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			out[n.ID] = append(out[n.ID], id)
		}
	}
	return out
}

// Need is what one container asks of one resource (the kubelet's devicesToAllocate, before
// the plugin is asked for its preference).
type Need struct {
	// Required is the container's limit of the resource (requests equal limits for extended
	// resources).
	Required int
	// Have are the devices the container already has (a container restarted, or a pod
	// admitted again after a restart); nil when none.
	Have []string
	// Reusable are devices an init container of the same pod held and let go, given first.
	Reusable []string
}

// Available is the result of Plan: the devices still to choose (Needed of Candidates), or
// nothing to do.
type Available struct {
	// Needed is how many devices are still to be chosen; 0 means the container has them.
	Needed int
	// Chosen are the devices already taken (from Reusable).
	Chosen []string
	// Candidates are the free healthy devices the rest may come from, sorted.
	Candidates []string
}

// Plan decides what a container's allocation of a resource needs, with the kubelet's errors:
// a changed request of a container that has devices, a resource no plugin registered, no
// healthy device, devices that are no longer healthy, or too few free devices ("requested
// number of devices unavailable for example.com/gpu. Requested: 2, Available: 1"). inUse are
// the devices other containers hold.
func Plan(resourceName string, r *Resource, need Need, inUse map[string]bool) (Available, error) {
	needed := need.Required
	if need.Have != nil {
		if len(need.Have) != need.Required {
			return Available{}, fmt.Errorf("container changed request for resource %q from %d to %d", resourceName, len(need.Have), need.Required)
		}
		// The container has its devices (a restart of the container or of slicelet): nothing
		// to allocate. The kubelet checks their health first only for a container it does not
		// find running; a running one keeps them.
		return Available{}, nil
	}
	if r == nil {
		return Available{}, fmt.Errorf("cannot allocate unregistered device %s", resourceName)
	}
	healthy := r.healthy()
	if !r.Stopped.IsZero() {
		healthy = nil
	}
	if len(healthy) == 0 {
		return Available{}, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", resourceName)
	}
	if needed == 0 {
		return Available{}, nil
	}
	out := Available{Needed: needed}
	taken := map[string]bool{}
	for _, id := range stdslices.Sorted(stdslices.Values(need.Reusable)) {
		if out.Needed == 0 {
			break
		}
		if !taken[id] {
			taken[id] = true
			out.Chosen = append(out.Chosen, id)
			out.Needed--
		}
	}
	if out.Needed == 0 {
		return out, nil
	}
	for _, id := range healthy {
		if !inUse[id] && !taken[id] {
			out.Candidates = append(out.Candidates, id)
		}
	}
	if len(out.Candidates) < out.Needed {
		return Available{}, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", resourceName, out.Needed, len(out.Candidates))
	}
	return out, nil
}

// Choose completes a Plan: the plugin's preferred devices first (those among the candidates,
// in its order), then the candidates in order, until Needed are chosen (the kubelet's
// allocateRemainingFrom over the preferred, then the remaining devices). It returns every
// device of the container's allocation, sorted.
func Choose(a Available, preferred []string) []string {
	chosen := append([]string(nil), a.Chosen...)
	taken := map[string]bool{}
	for _, id := range chosen {
		taken[id] = true
	}
	candidate := map[string]bool{}
	for _, id := range a.Candidates {
		candidate[id] = true
	}
	needed := a.Needed
	for _, list := range [][]string{preferred, a.Candidates} {
		for _, id := range list {
			if needed == 0 {
				break
			}
			if candidate[id] && !taken[id] {
				taken[id] = true
				chosen = append(chosen, id)
				needed--
			}
		}
	}
	sort.Strings(chosen)
	return chosen
}

// Requests returns the device plugin resources a container's limits ask for, by name, with
// their counts (the kubelet allocates by limits: extended resources are not overcommitted, so
// requests equal limits). isDevice says which resources are the device manager's: a resource
// a plugin registered, or one devices were allocated from.
func Requests(c *v1.Container, isDevice func(string) bool) map[string]int {
	out := map[string]int{}
	for name, q := range c.Resources.Limits {
		if isDevice(string(name)) {
			out[string(name)] = int(q.Value())
		}
	}
	return out
}

// RunOptions is what a container's run gets from its allocations (the kubelet's
// DeviceRunContainerOptions).
type RunOptions struct {
	Envs        []EnvVar
	Mounts      []*pluginapi.Mount
	Devices     []*pluginapi.DeviceSpec
	Annotations []EnvVar
	CDIDevices  []string
}

// EnvVar is one name and value (an environment variable or an annotation).
type EnvVar struct{ Name, Value string }

// MergeRunOptions merges the plugins' answers for one container (allocations by resource name), as
// the kubelet's deviceRunContainerOptions: the first setting of an env variable, a mount or
// device path in the container, an annotation or a CDI device wins. Resources are taken in
// name order (the kubelet ranges over a map), each answer's envs and annotations by name.
func MergeRunOptions(allocs []Allocation) *RunOptions {
	stdslices.SortFunc(allocs, func(a, b Allocation) int { return cmp.Compare(a.Resource, b.Resource) })
	opts := &RunOptions{}
	envs, mounts, devs, annotations, cdi := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, a := range allocs {
		resp := a.Response
		if resp == nil {
			continue
		}
		for _, k := range stdslices.Sorted(maps.Keys(resp.Envs)) {
			if !envs[k] {
				envs[k] = true
				opts.Envs = append(opts.Envs, EnvVar{k, resp.Envs[k]})
			}
		}
		for _, d := range resp.Devices {
			if d != nil && !devs[d.ContainerPath] {
				devs[d.ContainerPath] = true
				opts.Devices = append(opts.Devices, d)
			}
		}
		for _, m := range resp.Mounts {
			if m != nil && !mounts[m.ContainerPath] {
				mounts[m.ContainerPath] = true
				opts.Mounts = append(opts.Mounts, m)
			}
		}
		for _, k := range stdslices.Sorted(maps.Keys(resp.Annotations)) {
			if !annotations[k] {
				annotations[k] = true
				opts.Annotations = append(opts.Annotations, EnvVar{k, resp.Annotations[k]})
			}
		}
		for _, d := range resp.CdiDevices {
			if d != nil && !cdi[d.Name] {
				cdi[d.Name] = true
				opts.CDIDevices = append(opts.CDIDevices, d.Name)
			}
		}
	}
	return opts
}

// AdmissionAllocatable is allocatable for admitting pod (the kubelet's
// sanitizeNodeAllocatable): a pod that holds devices already (admitted again after a restart,
// before its plugin registered again) fits as long as what the node's pods hold is counted as
// allocatable. allocated counts the devices held, by resource.
func AdmissionAllocatable(allocatable v1.ResourceList, hasDevices bool, allocated map[string]int) v1.ResourceList {
	if !hasDevices {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for name, n := range allocated {
		q, ok := out[v1.ResourceName(name)]
		if ok && q.Value() >= int64(n) {
			continue
		}
		out[v1.ResourceName(name)] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return stdslices.Sorted(maps.Keys(m)) }
