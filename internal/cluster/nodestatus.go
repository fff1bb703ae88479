package cluster

import (
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/slices"
)

// The well-known node labels the kubelet sets (k8s.io/api/core/v1 well_known_labels.go).
const (
	LabelHostname = v1.LabelHostname // kubernetes.io/hostname
	LabelOS       = v1.LabelOSStable // kubernetes.io/os
	LabelArch     = v1.LabelArchStable
)

// NodeInputs is everything the Node object is made of, gathered by the agent from where each
// number lives: capacity and allocatable are the ones enforced on kubepods.slice, the
// conditions are rendered from the health tracker (the eviction manager's pressure included).
type NodeInputs struct {
	Name string
	// Hostname is the kubernetes.io/hostname label and the Hostname address.
	Hostname string
	OS, Arch string
	// Labels are the configured labels ([cluster] labels).
	Labels map[string]string
	// Taints are the configured taints, registered with the Node ([cluster] taints).
	Taints      []v1.Taint
	Capacity    v1.ResourceList
	Allocatable v1.ResourceList
	Conditions  []v1.NodeCondition
	// InternalIPs are the node's addresses (the pods' hostIPs and, on the host network, podIPs).
	InternalIPs []string
	Info        v1.NodeSystemInfo
	// KubeletPort is the kubelet API's port (status.daemonEndpoints.kubeletEndpoint): the API
	// server proxies logs, exec and stats there. 0: the kubelet API is off.
	KubeletPort int32
	// Settling is set while a critical health component has not reported since the start:
	// the node's readiness is not known yet (HoldStatus).
	Settling bool
}

// nodeLabels are the well-known labels plus the configured ones (the kubelet's initialNode:
// the configured labels are applied first, the well-known ones win).
func nodeLabels(in NodeInputs) map[string]string {
	labels := maps.Clone(in.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelHostname] = in.Hostname
	labels[LabelOS] = in.OS
	labels[LabelArch] = in.Arch
	return labels
}

// pressureTaints are the NoSchedule taints of the pressure conditions that are true (the
// node lifecycle controller's TaintNodesByCondition, pkg/controller/nodelifecycle: the
// condition → node.kubernetes.io/<x>-pressure).
func pressureTaints(conds []v1.NodeCondition) []v1.Taint {
	keys := map[v1.NodeConditionType]string{
		v1.NodeMemoryPressure: v1.TaintNodeMemoryPressure,
		v1.NodeDiskPressure:   v1.TaintNodeDiskPressure,
		v1.NodePIDPressure:    v1.TaintNodePIDPressure,
	}
	var out []v1.Taint
	for _, c := range conds {
		if k, ok := keys[c.Type]; ok && c.Status == v1.ConditionTrue {
			out = append(out, v1.Taint{Key: k, Effect: v1.TaintEffectNoSchedule})
		}
	}
	return out
}

// InitialNode is the Node slicelet registers (pkg/kubelet/kubelet_node_status.go,
// initialNode): labels, the configured taints plus the pressure taints of the moment (a node
// may not change its own taints afterwards — NodeRestriction refuses it — so later pressure
// taints are the node lifecycle controller's, from the conditions in the status), and the
// status of NodeStatus.
func InitialNode(in NodeInputs, now time.Time) *v1.Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Labels: nodeLabels(in)}}
	taints := append(append([]v1.Taint{}, in.Taints...), pressureTaints(in.Conditions)...)
	if len(taints) > 0 {
		node.Spec.Taints = taints
	}
	node.Status = NodeStatus(in, nil, now)
	return node
}

// NodeStatus is the status the node reports (pkg/kubelet/nodestatus/setters.go): addresses,
// capacity and allocatable, nodeInfo, and the conditions with their heartbeat at now and
// their transition time kept from old while the status is unchanged. Conditions in old that
// slicelet does not report (another component's) are kept.
func NodeStatus(in NodeInputs, old *v1.NodeStatus, now time.Time) v1.NodeStatus {
	st := v1.NodeStatus{NodeInfo: in.Info}
	if old != nil {
		st.Capacity, st.Allocatable = Resources(in.Capacity, in.Allocatable, old.Capacity, old.Allocatable)
	} else {
		st.Capacity, st.Allocatable = Resources(in.Capacity, in.Allocatable, nil, nil)
	}
	for _, ip := range in.InternalIPs {
		st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: in.Hostname})
	oldConds := map[v1.NodeConditionType]v1.NodeCondition{}
	if old != nil {
		st.Images, st.VolumesInUse, st.VolumesAttached, st.DaemonEndpoints = old.Images, old.VolumesInUse, old.VolumesAttached, old.DaemonEndpoints
		for _, c := range old.Conditions {
			oldConds[c.Type] = c
		}
	}
	if in.KubeletPort > 0 {
		st.DaemonEndpoints.KubeletEndpoint.Port = in.KubeletPort
	}
	ours := map[v1.NodeConditionType]bool{}
	for _, c := range in.Conditions {
		c.LastHeartbeatTime = metav1.NewTime(now)
		if prev, ok := oldConds[c.Type]; ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		ours[c.Type] = true
		st.Conditions = append(st.Conditions, c)
	}
	if old != nil {
		for _, c := range old.Conditions {
			if !ours[c.Type] {
				st.Conditions = append(st.Conditions, c)
			}
		}
	}
	return st
}

// Resources are the capacity and allocatable the node reports, the kubelet's way
// (pkg/kubelet/nodestatus/setters.go MachineInfo, which never blindly overwrites the capacity,
// "in case opaque resources are being advertised"): the reported capacity is the old one with
// the node's own resources (capacity) set over it, so a resource someone else advertised in the
// Node's status (an extended resource patched in by an operator or a test) is kept; the
// allocatable is the old one without the extended resources no longer in the capacity, with the
// node's own allocatable over it and, for a resource of the capacity the node does not compute,
// its capacity (the kubelet subtracts reservations from the node's own resources only).
func Resources(capacity, allocatable, oldCapacity, oldAllocatable v1.ResourceList) (v1.ResourceList, v1.ResourceList) {
	capOut := oldCapacity.DeepCopy()
	if capOut == nil {
		capOut = v1.ResourceList{}
	}
	for k, v := range capacity {
		capOut[k] = v.DeepCopy()
	}
	allocOut := oldAllocatable.DeepCopy()
	if allocOut == nil {
		allocOut = v1.ResourceList{}
	}
	for k := range allocOut {
		if _, ok := capOut[k]; !ok && slices.IsExtendedResourceName(k) {
			delete(allocOut, k)
		}
	}
	for k, v := range capOut {
		if a, ok := allocatable[k]; ok {
			allocOut[k] = a.DeepCopy()
		} else {
			allocOut[k] = v.DeepCopy()
		}
	}
	for k, v := range allocatable {
		allocOut[k] = v.DeepCopy()
	}
	return capOut, allocOut
}

// NodeStatusChanged reports whether new differs from old other than in the conditions'
// heartbeat times (the kubelet's nodeStatusHasChanged, pkg/kubelet/kubelet_node_status.go): a
// change is sent at once, the rest only every report period.
func NodeStatusChanged(old, new v1.NodeStatus) bool {
	strip := func(s v1.NodeStatus) v1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !apiequality.Semantic.DeepEqual(strip(old), strip(new))
}

// missingLabels are the labels of in that the existing node lacks or has with another value (the
// kubelet's updateDefaultLabels on a node that was registered before); nil when none.
func missingLabels(in NodeInputs, existing map[string]string) map[string]string {
	var out map[string]string
	for k, v := range nodeLabels(in) {
		if cur, ok := existing[k]; !ok || cur != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
