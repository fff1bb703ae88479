package cluster

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons of the node's events, the kubelet's (pkg/kubelet/events/event.go).
const (
	EventStarting                = "Starting"
	EventNodeAllocatableEnforced = "NodeAllocatableEnforced"
)

// conditionEvents are the events' reasons of the kubelet's node conditions, by condition
// and status (pkg/kubelet/nodestatus/setters.go: MemoryPressureCondition,
// DiskPressureCondition, PIDPressureCondition, ReadyCondition).
var conditionEvents = map[v1.NodeConditionType]map[v1.ConditionStatus]string{
	v1.NodeMemoryPressure: {v1.ConditionTrue: "NodeHasInsufficientMemory", v1.ConditionFalse: "NodeHasSufficientMemory"},
	v1.NodeDiskPressure:   {v1.ConditionTrue: "NodeHasDiskPressure", v1.ConditionFalse: "NodeHasNoDiskPressure"},
	v1.NodePIDPressure:    {v1.ConditionTrue: "NodeHasInsufficientPID", v1.ConditionFalse: "NodeHasSufficientPID"},
	v1.NodeReady:          {v1.ConditionTrue: "NodeReady", v1.ConditionFalse: "NodeNotReady", v1.ConditionUnknown: "NodeNotReady"},
}

// ConditionEvents are the reasons of the events the kubelet records for the node's
// conditions conds, given the statuses it recorded events for before (seen, by type; updated):
// one for each of its conditions that is new or whose status changed, in conds' order.
// slicelet's own conditions have none.
func ConditionEvents(seen map[v1.NodeConditionType]v1.ConditionStatus, conds []v1.NodeCondition) []string {
	var out []string
	for _, c := range conds {
		reasons, ok := conditionEvents[c.Type]
		if !ok {
			continue
		}
		if prev, ok := seen[c.Type]; ok && prev == c.Status {
			continue
		}
		seen[c.Type] = c.Status
		if r := reasons[c.Status]; r != "" {
			out = append(out, r)
		}
	}
	return out
}

// nodeRef is the kubelet's reference to its Node in events: kind Node, the node's name as
// its UID, no namespace (so the events are in default) (pkg/kubelet/kubelet.go, nodeRef).
func nodeRef(node string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
}

// nodeEventf records a Normal event about the node; nothing before the broadcaster started.
func (e *Events) nodeEventf(node, reason, messageFmt string, args ...any) {
	e.mu.Lock()
	r := e.recorder
	e.mu.Unlock()
	if r != nil {
		r.Eventf(nodeRef(node), v1.EventTypeNormal, reason, messageFmt, args...)
	}
}

// nodeConditionEvents records the kubelet's events for the node's conditions that are new
// or changed since the last call ("Node NAME status is now: NodeReady",
// pkg/kubelet/kubelet_node_status.go, recordNodeStatusEvent).
func (e *Events) nodeConditionEvents(node string, conds []v1.NodeCondition) {
	e.mu.Lock()
	r := e.recorder
	if e.nodeConds == nil {
		e.nodeConds = map[v1.NodeConditionType]v1.ConditionStatus{}
	}
	var reasons []string
	if r != nil {
		reasons = ConditionEvents(e.nodeConds, conds)
	}
	e.mu.Unlock()
	for _, reason := range reasons {
		r.Eventf(nodeRef(node), v1.EventTypeNormal, reason, "Node %s status is now: %s", node, reason)
	}
}
