// Package admission decides whether a pod may run on the node, the way the kubelet's admit
// handlers do: the eviction manager's node-pressure check first, then the predicate admit
// handler (pod OS, resource fit against allocatable, max pods). It is pure: no I/O, no clock.
//
// Resource fit follows pkg/kubelet/lifecycle/predicate.go and the scheduler's noderesources
// FitsRequest: the pod's requests are component-helpers PodRequests (init containers, sidecars,
// overhead, pod-level resources) taken as they are — the scheduler's non-zero defaults for
// missing requests are a scoring device and play no part in admission.
package admission

import (
	"cmp"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// Rejection reasons, exactly as the kubelet writes them into the pod status.
const (
	// ReasonEvicted is the eviction manager's reason for a pod refused under node pressure.
	ReasonEvicted = "Evicted"
	// ReasonOutOfCPU and the following are the predicate handler's InsufficientResource reasons;
	// any other resource gets "OutOf" + its name (OutOfhugepages-2Mi).
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonOutOfPods             = "OutOfpods"
	// InsufficientResourcePrefix starts the reason of every resource shortage.
	InsufficientResourcePrefix = "OutOf"
	// ReasonSupplementalGroupsPolicyNotSupported rejects a pod asking for
	// supplementalGroupsPolicy Strict on a node whose runtime does not apply it.
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"
	// ReasonPodOSNotSupported rejects a pod whose spec.os.name is not the node's OS.
	ReasonPodOSNotSupported = "PodOSNotSupported"
	// ReasonPodOSSelectorNodeLabelDoesNotMatch rejects a pod whose kubernetes.io/os label names
	// another OS.
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	// ReasonNodeAffinity rejects a pod whose spec.nodeSelector or required node affinity does
	// not match the Node (the scheduler plugin's name, pkg/scheduler/framework/plugins/nodeaffinity).
	ReasonNodeAffinity = "NodeAffinity"
	// messageNodeAffinity is the predicate handler's message for it (PredicateFailureError,
	// "Predicate %s failed: %s" with the plugin's ErrReasonPod).
	messageNodeAffinity = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	// ReasonNodePorts rejects a pod asking for a host port (IP, protocol) a pod of the node
	// holds (the scheduler plugin's name, pkg/scheduler/framework/plugins/nodeports).
	ReasonNodePorts = "NodePorts"
	// messageNodePorts is its message (the plugin's ErrReason).
	messageNodePorts = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	// ReasonTaintToleration rejects a pod from the API server that does not tolerate a
	// NoExecute taint of the Node (the scheduler plugin's name).
	ReasonTaintToleration = "TaintToleration"
	// messageTaintToleration is its message (the plugin's ErrReasonNotMatch).
	messageTaintToleration = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
)

// SystemCriticalPriority is the kubelet's scheduling.SystemCriticalPriority: pods at or above
// it are critical (eviction.SystemCriticalPriority).
const SystemCriticalPriority = eviction.SystemCriticalPriority

// NodeState is what admission looks at.
type NodeState struct {
	// Allocatable is node allocatable (slices.NodeAllocatable) plus "pods" = max_pods (see
	// WithMaxPods). A resource missing from it counts as zero, except extended resources
	// (example.com/foo), whose requests are ignored when the node does not have them, as the
	// kubelet does.
	Allocatable v1.ResourceList
	// Pods are the pods already admitted and still active (not terminal, not being deleted).
	Pods []*v1.Pod
	// Conditions are the node conditions that are true now, in the order the eviction manager
	// reports them (MemoryPressure, DiskPressure, PIDPressure). Empty means no pressure.
	Conditions []v1.NodeConditionType
	// OS is the node's operating system for the pod OS checks; empty means runtime.GOOS.
	OS string
	// SupplementalGroupsPolicy reports whether the runtime applies supplementalGroupsPolicy
	// Strict (the Node's status.features.supplementalGroupsPolicy to the kubelet), asked only
	// for a pod that asks for Strict; nil or false, such a pod is rejected at admission.
	SupplementalGroupsPolicy func() bool
	// PriorityClasses are the configured [eviction.priority_classes], which resolve
	// priorityClassName for IsCriticalPod besides the built-in classes.
	PriorityClasses map[string]int32
	// Node is the Node object a pod's spec.nodeSelector and required node affinity are matched
	// against (cluster mode: the registered Node, its name for matchFields and its labels). Nil
	// when there is none (stand-alone): then pods with either were refused at validation.
	Node *v1.Node
}

// Decision is the outcome of Admit. A rejected pod carries the kubelet's reason and message and
// is to be shown with them (phase Failed), never dropped silently.
type Decision struct {
	Admit   bool
	Reason  string
	Message string
}

// WithMaxPods returns a copy of allocatable with "pods" set to maxPods.
func WithMaxPods(allocatable v1.ResourceList, maxPods int32) v1.ResourceList {
	out := make(v1.ResourceList, len(allocatable)+1)
	for name, q := range allocatable {
		out[name] = q.DeepCopy()
	}
	out[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
	return out
}

// Admit decides whether pod may start next to node.Pods. The checks run in the kubelet's order
// and the first failure is returned:
//
//  1. Node pressure (eviction manager): with no condition every pod passes; critical pods
//     (IsCriticalPod) always pass; under MemoryPressure alone, non-BestEffort pods pass and a
//     BestEffort pod passes only if it tolerates node.kubernetes.io/memory-pressure:NoSchedule;
//     anything else is rejected with reason "Evicted" and message
//     "The node had condition: [MemoryPressure]. ".
//  2. Pod OS: a kubernetes.io/os label or spec.os.name naming another OS; then
//     supplementalGroupsPolicy Strict on a runtime that does not apply it (reason
//     "SupplementalGroupsPolicyNotSupported").
//  3. Resource fit: pod count against allocatable "pods" first ("Too many pods"), then cpu,
//     memory, ephemeral-storage and the scalar resources (hugepages-<size>, extended resources
//     the node has) in name order, each rejected when the pod's request is positive and larger
//     than allocatable minus what node.Pods request. Reason "OutOf<resource>", message
//     "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1900"
//     (cpu in millicores, everything else in units).
//  4. Node affinity, with a Node: spec.nodeSelector and the required node affinity matched
//     with component-helpers' nodeaffinity, as the scheduler's AdmissionCheck that the
//     predicate handler calls (pkg/scheduler/eventhandlers.go): reason "NodeAffinity".
//  5. Host ports (HostPortsFit): a host port another pod of the node holds, reason
//     "NodePorts".
//  6. With a Node, for a pod from the API server (not a static pod): the Node's NoExecute
//     taints it does not tolerate (generalFilter): reason "TaintToleration".
//
// Not checked: spec.nodeName (the cluster source lists the pods bound to this node by it).
func Admit(pod *v1.Pod, node NodeState) Decision {
	if d, ok := admitPressure(pod, node.Conditions, node.PriorityClasses); !ok {
		return d
	}
	if d, ok := admitOS(pod, node.OS); !ok {
		return d
	}
	if d, ok := admitSupplementalGroupsPolicy(pod, node.SupplementalGroupsPolicy); !ok {
		return d
	}
	if short := Fit(pod, node.Allocatable, node.Pods); len(short) > 0 {
		s := short[0]
		return Decision{Reason: s.Reason(), Message: s.Error()}
	}
	if node.Node != nil {
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node.Node); !ok {
			return Decision{Reason: ReasonNodeAffinity, Message: messageNodeAffinity}
		}
	}
	if !HostPortsFit(pod, node.Pods) {
		return Decision{Reason: ReasonNodePorts, Message: messageNodePorts}
	}
	if node.Node != nil {
		noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
		if pod.Annotations[pods.AnnotationSource] == pods.SourceCluster {
			if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Logger{}, node.Node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); untolerated {
				return Decision{Reason: ReasonTaintToleration, Message: messageTaintToleration}
			}
		}
	}
	return Decision{Admit: true}
}

// HostPortsFit reports whether none of pod's host ports is held by one of pods (the
// scheduler's nodeports.Fits, which the kubelet's admission runs in AdmissionCheck): the
// ports of the containers and sidecars (restartable init containers) with a hostPort; an
// empty hostIP is 0.0.0.0 and an empty protocol TCP; two ports of the same protocol and number
// conflict when their IPs are equal or either is 0.0.0.0 (HostPortInfo.CheckConflict).
func HostPortsFit(pod *v1.Pod, pods []*v1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return true
	}
	type protoPort struct {
		proto string
		port  int32
	}
	used := map[protoPort]map[string]bool{} // the IPs holding each protocol and port
	for _, p := range pods {
		for _, hp := range hostPorts(p) {
			k := protoPort{hp.Protocol, hp.HostPort}
			if used[k] == nil {
				used[k] = map[string]bool{}
			}
			used[k][hp.HostIP] = true
		}
	}
	for _, hp := range want {
		ips := used[protoPort{hp.Protocol, hp.HostPort}]
		if len(ips) > 0 && (hp.HostIP == bindAll || ips[bindAll] || ips[hp.HostIP]) {
			return false
		}
	}
	return true
}

// bindAll is the host IP of a port bound on every address (the scheduler's
// DefaultBindAllHostIP).
const bindAll = "0.0.0.0"

// hostPort is one host port a pod holds, its IP and protocol defaulted.
type hostPort struct {
	HostIP, Protocol string
	HostPort         int32
}

// hostPorts are the host ports of pod's containers and restartable init containers (the
// scheduler's util.GetHostPorts).
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{HostIP: cmp.Or(p.HostIP, bindAll), Protocol: cmp.Or(string(p.Protocol), string(v1.ProtocolTCP)), HostPort: p.HostPort}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; lifecycle.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// AdmitAll admits pods one by one in the order given (the kubelet admits in creation order;
// the caller decides the order), each admitted pod counting against the ones after it. It
// returns one decision per pod, in the same order.
func AdmitAll(pods []*v1.Pod, node NodeState) []Decision {
	out := make([]Decision, len(pods))
	admitted := append([]*v1.Pod(nil), node.Pods...)
	for i, pod := range pods {
		n := node
		n.Pods = admitted
		out[i] = Admit(pod, n)
		if out[i].Admit {
			admitted = append(admitted, pod)
		}
	}
	return out
}

// IsCriticalPod reports whether a pod passes node-pressure admission whatever the node
// conditions: its priority (eviction.PodPriority: spec.priority, else the priorityClassName's
// value from the built-in classes or classes) is at least SystemCriticalPriority. It is the
// eviction manager's eviction.IsCritical, so admission and eviction agree on what is critical.
//
// Difference from the kubelet: its IsCriticalPod also treats every static pod (config source
// other than "api") and every mirror pod as critical. In slicelet the manifest directory is the
// normal way to run pods, so manifest-directory pods are admitted under pressure, and evicted,
// like any other pod unless their priority makes them critical (docs/eviction.md).
func IsCriticalPod(pod *v1.Pod, classes map[string]int32) bool {
	return eviction.IsCritical(pod, classes)
}

// admitPressure is the eviction manager's Admit.
func admitPressure(pod *v1.Pod, conditions []v1.NodeConditionType, classes map[string]int32) (Decision, bool) {
	if len(conditions) == 0 || IsCriticalPod(pod, classes) {
		return Decision{Admit: true}, true
	}
	if len(conditions) == 1 && conditions[0] == v1.NodeMemoryPressure {
		if slices.QOSClass(pod) != v1.PodQOSBestEffort {
			return Decision{Admit: true}, true
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		// The zero logr.Logger discards; comparison operators (alpha) stay off as in the kubelet.
		if corev1helpers.TolerationsTolerateTaint(logr.Logger{}, pod.Spec.Tolerations, taint, false) {
			return Decision{Admit: true}, true
		}
	}
	// The kubelet formats the condition slice with %v: "[MemoryPressure DiskPressure]", and
	// the message ends with ". " (trailing space included).
	return Decision{Reason: ReasonEvicted, Message: fmt.Sprintf("The node had condition: %v. ", conditions)}, false
}

// admitSupplementalGroupsPolicy is the predicate handler's supplementalGroupsPolicy check
// (pkg/kubelet/lifecycle/predicate.go rejectPodAdmissionBasedOnSupplementalGroupsPolicy, the
// feature being GA): Strict on a node whose runtime does not apply it is rejected.
func admitSupplementalGroupsPolicy(pod *v1.Pod, supported func() bool) (Decision, bool) {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
		return Decision{Admit: true}, true
	}
	if supported != nil && supported() {
		return Decision{Admit: true}, true
	}
	return Decision{Reason: ReasonSupplementalGroupsPolicyNotSupported,
		Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)}, false
}

// admitOS is the predicate handler's OS label and OS field checks.
func admitOS(pod *v1.Pod, nodeOS string) (Decision, bool) {
	if nodeOS == "" {
		nodeOS = runtime.GOOS
	}
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != nodeOS {
		return Decision{Reason: ReasonPodOSSelectorNodeLabelDoesNotMatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}, false
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return Decision{Reason: ReasonPodOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}, false
	}
	return Decision{Admit: true}, true
}

// Shortage is one resource the pod does not fit in (the kubelet's InsufficientResourceError).
type Shortage struct {
	Resource v1.ResourceName
	// Requested is the pod's request, Used the sum of the admitted pods' requests, Capacity
	// allocatable: millicores for cpu, units (bytes, pods) otherwise.
	Requested, Used, Capacity int64
}

// Reason is the kubelet's admission reason: OutOfcpu, OutOfmemory, OutOfephemeral-storage,
// OutOfpods, OutOf<name> for the rest.
func (s Shortage) Reason() string {
	switch s.Resource {
	case v1.ResourceCPU:
		return ReasonOutOfCPU
	case v1.ResourceMemory:
		return ReasonOutOfMemory
	case v1.ResourceEphemeralStorage:
		return ReasonOutOfEphemeralStorage
	case v1.ResourcePods:
		return ReasonOutOfPods
	}
	return InsufficientResourcePrefix + string(s.Resource)
}

// Error is the kubelet's message for the shortage.
func (s Shortage) Error() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		s.Resource, s.Requested, s.Used, s.Capacity)
}

// request is a pod's (or the node's) resources in the scheduler's integer units.
type request struct {
	milliCPU, memory, ephemeral int64
	scalar                      map[v1.ResourceName]int64
}

// toRequest converts a resource list the way the scheduler's Resource.Add does: cpu in
// millicores, memory and ephemeral-storage in bytes, scalar resources (hugepages, extended,
// kubernetes.io/-prefixed, attachable volumes) in units; anything else is ignored.
func toRequest(rl v1.ResourceList) request {
	r := request{scalar: map[v1.ResourceName]int64{}}
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.memory += q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeral += q.Value()
		default:
			if isScalarResourceName(name) {
				r.scalar[name] += q.Value()
			}
		}
	}
	return r
}

func (r *request) add(o request) {
	r.milliCPU += o.milliCPU
	r.memory += o.memory
	r.ephemeral += o.ephemeral
	for n, v := range o.scalar {
		r.scalar[n] += v
	}
}

func (r request) zero() bool {
	return r.milliCPU == 0 && r.memory == 0 && r.ephemeral == 0 && len(r.scalar) == 0
}

// Fit returns every resource the pod does not fit in, in the kubelet's order (pods, cpu, memory,
// ephemeral-storage, then scalar resources by name); nil when it fits. admitted are the pods
// already admitted; allocatable needs "pods" (WithMaxPods).
func Fit(pod *v1.Pod, allocatable v1.ResourceList, admitted []*v1.Pod) []Shortage {
	var out []Shortage
	allowedPods := allocatable.Pods().Value()
	if int64(len(admitted))+1 > allowedPods {
		out = append(out, Shortage{Resource: v1.ResourcePods, Requested: 1, Used: int64(len(admitted)), Capacity: allowedPods})
	}

	podReq := toRequest(slices.PodRequestsFor(withoutMissingExtended(pod, allocatable), false))
	// Extended resources the node does not have are dropped from the pod's requests first
	// (removeMissingExtendedResources: cluster-level resources unknown to the node).
	if podReq.zero() {
		return out
	}
	alloc := toRequest(allocatable)
	used := request{scalar: map[v1.ResourceName]int64{}}
	for _, p := range admitted {
		used.add(toRequest(slices.PodRequestsFor(p, false)))
	}

	check := func(name v1.ResourceName, req, used, capacity int64) {
		if req > 0 && req > capacity-used {
			out = append(out, Shortage{Resource: name, Requested: req, Used: used, Capacity: capacity})
		}
	}
	check(v1.ResourceCPU, podReq.milliCPU, used.milliCPU, alloc.milliCPU)
	check(v1.ResourceMemory, podReq.memory, used.memory, alloc.memory)
	check(v1.ResourceEphemeralStorage, podReq.ephemeral, used.ephemeral, alloc.ephemeral)
	// The kubelet ranges over a map here, so with several scalar shortages its first reason is
	// random; slicelet sorts by name to be deterministic.
	names := make([]v1.ResourceName, 0, len(podReq.scalar))
	for n := range podReq.scalar {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, n := range names {
		check(n, podReq.scalar[n], used.scalar[n], alloc.scalar[n])
	}
	return out
}

// withoutMissingExtended returns pod, or a copy whose containers' and init containers' requests
// lack the extended resources allocatable does not list (the kubelet's
// removeMissingExtendedResources; pod-level resources and overhead are left alone, as there).
func withoutMissingExtended(pod *v1.Pod, allocatable v1.ResourceList) *v1.Pod {
	missing := func(cs []v1.Container) bool {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if _, ok := allocatable[name]; !ok && isExtendedResourceName(name) {
					return true
				}
			}
		}
		return false
	}
	if !missing(pod.Spec.Containers) && !missing(pod.Spec.InitContainers) {
		return pod
	}
	cp := pod.DeepCopy()
	filter := func(cs []v1.Container) {
		for i := range cs {
			rl := v1.ResourceList{}
			for name, q := range cs[i].Resources.Requests {
				if _, ok := allocatable[name]; !ok && isExtendedResourceName(name) {
					continue
				}
				rl[name] = q
			}
			cs[i].Resources.Requests = rl
		}
	}
	filter(cp.Spec.Containers)
	filter(cp.Spec.InitContainers)
	return cp
}

// isExtendedResourceName is slices.IsExtendedResourceName (v1helper's).
func isExtendedResourceName(name v1.ResourceName) bool { return slices.IsExtendedResourceName(name) }

// isScalarResourceName is the scheduler's IsScalarResourceName: extended resources, hugepages,
// kubernetes.io/-prefixed native resources and attachable volumes.
func isScalarResourceName(name v1.ResourceName) bool {
	return isExtendedResourceName(name) ||
		strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) ||
		(strings.Contains(string(name), "/") && strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix)) ||
		strings.HasPrefix(string(name), v1.ResourceAttachableVolumesPrefix)
}

// Admitter adapts Admit and CheckPodSecurity to the controller's Admitter interface
// (internal/pods): Node returns the node's current allocatable and conditions; the admitted pods
// come from the controller.
type Admitter struct {
	Node func() NodeState
	// PodSecurity is the level enforced on each pod source ("file", "api"); a source it does
	// not name is privileged (nothing checked).
	PodSecurity map[string]PodSecurity
	// ForPod, when set, is allocatable for admitting one pod (the device manager's: a pod
	// that holds devices already fits as long as the devices held count as allocatable).
	ForPod func(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList
}

// AdmitSecurity implements the controller's Admitter: Pod Security at the source's level.
func (a Admitter) AdmitSecurity(pod *v1.Pod, source string) (ok bool, reason, message string) {
	d := CheckPodSecurity(pod, a.PodSecurity[source])
	return d.Admit, d.Reason, d.Message
}

// Admit implements the controller's Admitter.
func (a Admitter) Admit(pod *v1.Pod, admitted []*v1.Pod) (ok bool, reason, message string) {
	n := a.Node()
	n.Pods = admitted
	if a.ForPod != nil {
		n.Allocatable = a.ForPod(pod, n.Allocatable)
	}
	d := Admit(pod, n)
	return d.Admit, d.Reason, d.Message
}
