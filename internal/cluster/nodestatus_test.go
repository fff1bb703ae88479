package cluster

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

func cond(t v1.NodeConditionType, s v1.ConditionStatus, reason string) v1.NodeCondition {
	return v1.NodeCondition{Type: t, Status: s, Reason: reason}
}

func testInputs() NodeInputs {
	return NodeInputs{
		Name: "node-1", Hostname: "node-1", OS: "linux", Arch: "amd64",
		Labels:      map[string]string{"example.com/rack": "r1", LabelOS: "windows"},
		Taints:      []v1.Taint{{Key: "dedicated", Value: "slicelet", Effect: v1.TaintEffectNoSchedule}},
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m"), v1.ResourceMemory: resource.MustParse("7Gi"), v1.ResourcePods: resource.MustParse("110")},
		Conditions: []v1.NodeCondition{
			cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID"),
			cond(v1.NodeReady, v1.ConditionTrue, "SliceletReady"),
		},
		InternalIPs: []string{"10.0.0.5", "fd00::5"},
		Info:        v1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "systemd://252", KubeletVersion: "slicelet/v1.2.3"},
	}
}

func TestInitialNode(t *testing.T) {
	tests := []struct {
		name       string
		conditions map[v1.NodeConditionType]v1.ConditionStatus
		wantTaints []string
	}{
		{name: "no pressure: the configured taints", wantTaints: []string{"dedicated=slicelet:NoSchedule"}},
		{name: "memory and PID pressure: their taints too",
			conditions: map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeMemoryPressure: v1.ConditionTrue, v1.NodePIDPressure: v1.ConditionTrue},
			wantTaints: []string{"dedicated=slicelet:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule", "node.kubernetes.io/pid-pressure:NoSchedule"}},
		{name: "disk pressure", conditions: map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeDiskPressure: v1.ConditionTrue},
			wantTaints: []string{"dedicated=slicelet:NoSchedule", "node.kubernetes.io/disk-pressure:NoSchedule"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := testInputs()
			for i, c := range in.Conditions {
				if s, ok := tc.conditions[c.Type]; ok {
					in.Conditions[i].Status = s
				}
			}
			n := InitialNode(in, t0)
			var got []string
			for _, tt := range n.Spec.Taints {
				got = append(got, tt.ToString())
			}
			if len(got) != len(tc.wantTaints) {
				t.Fatalf("taints %v, want %v", got, tc.wantTaints)
			}
			for i := range got {
				if got[i] != tc.wantTaints[i] {
					t.Errorf("taint %d: %s, want %s", i, got[i], tc.wantTaints[i])
				}
			}
			want := map[string]string{"example.com/rack": "r1", LabelOS: "linux", LabelArch: "amd64", LabelHostname: "node-1"}
			if len(n.Labels) != len(want) {
				t.Errorf("labels %v, want %v", n.Labels, want)
			}
			for k, v := range want {
				if n.Labels[k] != v {
					t.Errorf("label %s=%q, want %q (the well-known labels win over configured ones)", k, n.Labels[k], v)
				}
			}
			if q := n.Status.Allocatable[v1.ResourceCPU]; q.MilliValue() != 3500 {
				t.Errorf("allocatable cpu %s, want 3500m", q.String())
			}
		})
	}
}

func TestNodeStatus(t *testing.T) {
	later := t0.Add(time.Minute)
	old := &v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0), LastHeartbeatTime: metav1.NewTime(t0)},
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated"},
	}}
	st := NodeStatus(testInputs(), old, later)
	byType := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range st.Conditions {
		byType[c.Type] = c
	}
	tests := []struct {
		name           string
		typ            v1.NodeConditionType
		wantTransition time.Time
		wantHeartbeat  time.Time
	}{
		{name: "unchanged status keeps its transition time", typ: v1.NodeReady, wantTransition: t0, wantHeartbeat: later},
		{name: "changed status transitions now", typ: v1.NodeMemoryPressure, wantTransition: later, wantHeartbeat: later},
		{name: "new condition transitions now", typ: v1.NodePIDPressure, wantTransition: later, wantHeartbeat: later},
		{name: "another component's condition is kept as it is", typ: v1.NodeNetworkUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := byType[tc.typ]
			if !ok {
				t.Fatalf("no %s condition in %v", tc.typ, st.Conditions)
			}
			if !c.LastTransitionTime.Time.Equal(tc.wantTransition) || !c.LastHeartbeatTime.Time.Equal(tc.wantHeartbeat) {
				t.Errorf("transition %v heartbeat %v, want %v and %v", c.LastTransitionTime, c.LastHeartbeatTime, tc.wantTransition, tc.wantHeartbeat)
			}
		})
	}
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "fd00::5"}, {Type: v1.NodeHostName, Address: "node-1"}}
	if len(st.Addresses) != len(wantAddrs) {
		t.Fatalf("addresses %v, want %v", st.Addresses, wantAddrs)
	}
	for i := range wantAddrs {
		if st.Addresses[i] != wantAddrs[i] {
			t.Errorf("address %d: %v, want %v", i, st.Addresses[i], wantAddrs[i])
		}
	}
	if st.NodeInfo.KubeletVersion != "slicelet/v1.2.3" {
		t.Errorf("nodeInfo %+v", st.NodeInfo)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 0 {
		t.Errorf("kubelet port %d without a kubelet API, want 0", st.DaemonEndpoints.KubeletEndpoint.Port)
	}
	in := testInputs()
	in.KubeletPort = 10250
	if got := NodeStatus(in, old, later).DaemonEndpoints.KubeletEndpoint.Port; got != 10250 {
		t.Errorf("kubelet port %d, want 10250 (status.daemonEndpoints.kubeletEndpoint.Port)", got)
	}
}

func TestNodeStatusChanged(t *testing.T) {
	base := NodeStatus(testInputs(), nil, t0)
	tests := []struct {
		name   string
		mutate func(in *NodeInputs)
		at     time.Time
		want   bool
	}{
		{name: "only the heartbeat moved", mutate: func(*NodeInputs) {}, at: t0.Add(10 * time.Second), want: false},
		{name: "a condition changed", mutate: func(in *NodeInputs) { in.Conditions[0].Status = v1.ConditionTrue }, at: t0.Add(10 * time.Second), want: true},
		{name: "allocatable changed", mutate: func(in *NodeInputs) { in.Allocatable[v1.ResourceCPU] = resource.MustParse("3") }, at: t0, want: true},
		{name: "an address changed", mutate: func(in *NodeInputs) { in.InternalIPs = []string{"10.0.0.6"} }, at: t0, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := testInputs()
			tc.mutate(&in)
			if got := NodeStatusChanged(base, NodeStatus(in, &base, tc.at)); got != tc.want {
				t.Errorf("changed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMissingLabels(t *testing.T) {
	tests := []struct {
		name     string
		existing map[string]string
		want     map[string]string
	}{
		{name: "all there", existing: map[string]string{"example.com/rack": "r1", LabelOS: "linux", LabelArch: "amd64", LabelHostname: "node-1", "other": "x"}},
		{name: "arch differs, rack missing", existing: map[string]string{LabelOS: "linux", LabelArch: "arm64", LabelHostname: "node-1"},
			want: map[string]string{"example.com/rack": "r1", LabelArch: "amd64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := missingLabels(testInputs(), tc.existing)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestResources: the reported capacity and allocatable, the kubelet's way (MachineInfo in
// pkg/kubelet/nodestatus/setters.go): the node's own resources over the old status, a resource
// someone else advertised kept.
func TestResources(t *testing.T) {
	q := resource.MustParse
	own := v1.ResourceList{v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110")}
	ownAlloc := v1.ResourceList{v1.ResourceCPU: q("3500m"), v1.ResourceMemory: q("7Gi"), v1.ResourcePods: q("110")}
	tests := []struct {
		name               string
		oldCap, oldAlloc   v1.ResourceList
		wantCap, wantAlloc v1.ResourceList
	}{
		{name: "first status: the node's own", wantCap: own, wantAlloc: ownAlloc},
		{name: "an extended resource patched into the status (the e2e suite's AddExtendedResource) is kept",
			oldCap:    v1.ResourceList{v1.ResourceCPU: q("4"), "scheduling.k8s.io/foo": q("5")},
			oldAlloc:  v1.ResourceList{v1.ResourceCPU: q("3500m"), "scheduling.k8s.io/foo": q("5")},
			wantCap:   v1.ResourceList{v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110"), "scheduling.k8s.io/foo": q("5")},
			wantAlloc: v1.ResourceList{v1.ResourceCPU: q("3500m"), v1.ResourceMemory: q("7Gi"), v1.ResourcePods: q("110"), "scheduling.k8s.io/foo": q("5")}},
		{name: "in capacity only: allocatable follows the capacity",
			oldCap:    v1.ResourceList{"example.com/dongle": q("3")},
			wantCap:   v1.ResourceList{v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110"), "example.com/dongle": q("3")},
			wantAlloc: v1.ResourceList{v1.ResourceCPU: q("3500m"), v1.ResourceMemory: q("7Gi"), v1.ResourcePods: q("110"), "example.com/dongle": q("3")}},
		{name: "an extended resource removed from the capacity leaves the allocatable",
			oldAlloc:  v1.ResourceList{"scheduling.k8s.io/foo": q("5")},
			wantCap:   own,
			wantAlloc: ownAlloc},
		{name: "the node's own values win over the old ones",
			oldCap:    v1.ResourceList{v1.ResourceCPU: q("2")},
			oldAlloc:  v1.ResourceList{v1.ResourceCPU: q("1")},
			wantCap:   own,
			wantAlloc: ownAlloc},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, a := Resources(own, ownAlloc, tc.oldCap, tc.oldAlloc)
			if !apiequality.Semantic.DeepEqual(c, tc.wantCap) || !apiequality.Semantic.DeepEqual(a, tc.wantAlloc) {
				t.Errorf("capacity %v allocatable %v, want %v and %v", c, a, tc.wantCap, tc.wantAlloc)
			}
		})
	}
	// Through NodeStatus: the next status after the patch keeps the resource, so the patch
	// computed from the old status does not remove it.
	in := testInputs()
	old := NodeStatus(in, nil, t0)
	old.Capacity["scheduling.k8s.io/foo"], old.Allocatable["scheduling.k8s.io/foo"] = q("5"), q("5")
	st := NodeStatus(in, &old, t0.Add(time.Second))
	if got := st.Allocatable["scheduling.k8s.io/foo"]; got.Cmp(q("5")) != 0 {
		t.Errorf("allocatable scheduling.k8s.io/foo = %v, want 5 kept", got.String())
	}
	if NodeStatusChanged(old, st) {
		t.Errorf("status changed: %v to %v", old, st)
	}
}
