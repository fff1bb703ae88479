package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// rl builds a resource list from name/quantity pairs.
func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// pod returns an API pod with one container per request list (nil = BestEffort container).
func pod(name string, reqs ...v1.ResourceList) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + "x",
		Annotations: map[string]string{"kubernetes.io/config.source": "api"}}}
	for i, r := range reqs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: v1.ResourceRequirements{Requests: r}})
	}
	if len(reqs) == 0 {
		p.Spec.Containers = []v1.Container{{Name: "a"}}
	}
	return p
}

func with(p *v1.Pod, f func(*v1.Pod)) *v1.Pod { f(p); return p }

var always = v1.ContainerRestartPolicyAlways

// nameAffinity is the required node affinity of e2e's SetNodeSelection: the node's name as a
// metadata.name field selector.
func nameAffinity(name string) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{name}}}}}}}}
}

func TestAdmit(t *testing.T) {
	labelled := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"disk": "ssd"}}}
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "evict", Effect: v1.TaintEffectNoExecute}, {Key: "soft", Effect: v1.TaintEffectNoSchedule}}}}
	node := WithMaxPods(rl("cpu", "1900m", "memory", "4Gi", "ephemeral-storage", "10Gi", "hugepages-2Mi", "8Mi"), 3)
	busy := []*v1.Pod{pod("busy", rl("cpu", "500m", "memory", "1Gi", "ephemeral-storage", "1Gi"))}
	tests := []struct {
		name       string
		pod        *v1.Pod
		node       NodeState
		wantReason string
		wantMsg    string
	}{
		{name: "fits", pod: pod("p", rl("cpu", "1", "memory", "1Gi")), node: NodeState{Allocatable: node, Pods: busy}},
		{name: "fits exactly", pod: pod("p", rl("cpu", "1400m", "memory", "3Gi")), node: NodeState{Allocatable: node, Pods: busy}},
		{name: "best effort fits without resources", pod: pod("p"), node: NodeState{Allocatable: node, Pods: busy}},
		{
			name: "out of cpu", pod: pod("p", rl("cpu", "2")), node: NodeState{Allocatable: node, Pods: busy},
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1900",
		},
		{
			name: "out of memory", pod: pod("p", rl("memory", "3Gi"), rl("memory", "1")), node: NodeState{Allocatable: node, Pods: busy},
			wantReason: "OutOfmemory", wantMsg: "Node didn't have enough resource: memory, requested: 3221225473, used: 1073741824, capacity: 4294967296",
		},
		{
			name: "out of ephemeral-storage", pod: pod("p", rl("ephemeral-storage", "9500Mi")), node: NodeState{Allocatable: node, Pods: busy},
			wantReason: "OutOfephemeral-storage", wantMsg: "Node didn't have enough resource: ephemeral-storage, requested: 9961472000, used: 1073741824, capacity: 10737418240",
		},
		{
			name: "out of hugepages-2Mi", pod: pod("p", rl("hugepages-2Mi", "10Mi", "memory", "10Mi")), node: NodeState{Allocatable: node},
			wantReason: "OutOfhugepages-2Mi", wantMsg: "Node didn't have enough resource: hugepages-2Mi, requested: 10485760, used: 0, capacity: 8388608",
		},
		{
			name: "hugepages size the node lacks", pod: pod("p", rl("hugepages-1Gi", "1Gi", "memory", "10Mi")), node: NodeState{Allocatable: node},
			wantReason: "OutOfhugepages-1Gi", wantMsg: "Node didn't have enough resource: hugepages-1Gi, requested: 1073741824, used: 0, capacity: 0",
		},
		{
			name: "extended resource the node lacks is ignored", pod: pod("p", rl("example.com/gpu", "1", "cpu", "100m")), node: NodeState{Allocatable: node},
		},
		{
			name: "extended resource the node has is checked", pod: pod("p", rl("example.com/gpu", "2")),
			node:       NodeState{Allocatable: WithMaxPods(rl("cpu", "1", "example.com/gpu", "1"), 10)},
			wantReason: "OutOfexample.com/gpu", wantMsg: "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1",
		},
		{
			name: "out of pods", pod: pod("p"), node: NodeState{Allocatable: node, Pods: []*v1.Pod{pod("a"), pod("b"), pod("c")}},
			wantReason: "OutOfpods", wantMsg: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
		},
		{
			name: "pods is reported before cpu", pod: pod("p", rl("cpu", "100")), node: NodeState{Allocatable: node, Pods: []*v1.Pod{pod("a"), pod("b"), pod("c")}},
			wantReason: "OutOfpods", wantMsg: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
		},
		{
			name: "no pods in allocatable means no room", pod: pod("p"), node: NodeState{Allocatable: rl("cpu", "1")},
			wantReason: "OutOfpods", wantMsg: "Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0",
		},
		{
			name: "overhead counts", node: NodeState{Allocatable: node, Pods: busy},
			pod:        with(pod("p", rl("cpu", "1300m")), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "200m") }),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 1500, used: 500, capacity: 1900",
		},
		{
			name: "overhead of admitted pods counts", node: NodeState{Allocatable: node,
				Pods: []*v1.Pod{with(pod("o", rl("cpu", "500m")), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "500m") })}},
			pod:        pod("p", rl("cpu", "1")),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 1000, used: 1000, capacity: 1900",
		},
		{
			// A sidecar runs next to the app containers: 1 + 1 = 2 cpus; a plain init container
			// only sets a floor (max(init, sum)).
			name: "sidecar adds to the containers", node: NodeState{Allocatable: node},
			pod: with(pod("p", rl("cpu", "1")), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("cpu", "1")}}}
			}),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1900",
		},
		{
			name: "init container is a floor, not a sum", node: NodeState{Allocatable: node},
			pod: with(pod("p", rl("cpu", "1")), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl("cpu", "1800m")}}}
			}),
		},
		{
			name: "big init container", node: NodeState{Allocatable: node},
			pod: with(pod("p", rl("cpu", "1")), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl("cpu", "2")}}}
			}),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1900",
		},
		{
			name: "pod-level requests win", node: NodeState{Allocatable: node},
			pod: with(pod("p", rl("cpu", "100m")), func(p *v1.Pod) {
				p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "3"), Limits: rl("cpu", "3")}
			}),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 1900",
		},
		{
			name: "limits without requests request nothing (no API-server defaulting)", node: NodeState{Allocatable: node},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("cpu", "5") }),
		},
		{
			name: "memory pressure rejects best effort", pod: pod("p"), node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			wantReason: "Evicted", wantMsg: "The node had condition: [MemoryPressure]. ",
		},
		{
			name: "memory pressure admits burstable", pod: pod("p", rl("memory", "1Mi")), node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		},
		{
			name: "memory pressure admits best effort that tolerates the taint", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}),
		},
		{
			name: "memory pressure: a NoExecute toleration does not help", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
			}),
			wantReason: "Evicted", wantMsg: "The node had condition: [MemoryPressure]. ",
		},
		{
			name: "disk pressure rejects burstable", pod: pod("p", rl("memory", "1Mi")), node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			wantReason: "Evicted", wantMsg: "The node had condition: [DiskPressure]. ",
		},
		{
			name: "memory and disk pressure reject tolerating best effort", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
			}),
			wantReason: "Evicted", wantMsg: "The node had condition: [MemoryPressure DiskPressure]. ",
		},
		{
			name: "pressure rejects a manifest-directory (file) pod: not critical here, unlike the kubelet", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Annotations["kubernetes.io/config.source"] = "file" }),
			wantReason: "Evicted", wantMsg: "The node had condition: [DiskPressure]. ",
		},
		{
			name: "pressure admits a pod of a configured critical class", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}, PriorityClasses: map[string]int32{"infra": 2_000_000_500}},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "infra" }),
		},
		{
			name: "pressure admits a system-node-critical pod", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }),
		},
		{
			name: "pressure admits priority 2000000000", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodePIDPressure}},
			pod: with(pod("p"), func(p *v1.Pod) { prio := int32(2_000_000_000); p.Spec.Priority = &prio }),
		},
		{
			name: "pressure rejects priority just below critical", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodePIDPressure}},
			pod:        with(pod("p"), func(p *v1.Pod) { prio := int32(1_999_999_999); p.Spec.Priority = &prio }),
			wantReason: "Evicted", wantMsg: "The node had condition: [PIDPressure]. ",
		},
		{
			name: "critical pod still needs to fit", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			pod:        with(pod("p", rl("cpu", "2")), func(p *v1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1900",
		},
		{
			name: "pressure is checked before fit", pod: pod("p", rl("cpu", "100")), node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			wantReason: "Evicted", wantMsg: "The node had condition: [DiskPressure]. ",
		},
		{
			name: "os label mismatch", node: NodeState{Allocatable: node, OS: "linux"},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "windows"} }),
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch", wantMsg: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
		},
		{
			name: "os field mismatch", node: NodeState{Allocatable: node, OS: "linux"},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }),
			wantReason: "PodOSNotSupported", wantMsg: "Failed to admit pod as the OS field doesn't match node OS",
		},
		{
			name: "os field linux", node: NodeState{Allocatable: node, OS: "linux"},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Linux} }),
		},
		{
			name: "supplementalGroupsPolicy Strict without the runtime's support", node: NodeState{Allocatable: node},
			pod: with(pod("p"), func(p *v1.Pod) {
				strict := v1.SupplementalGroupsPolicyStrict
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
			}),
			wantReason: "SupplementalGroupsPolicyNotSupported", wantMsg: "SupplementalGroupsPolicy=Strict is not supported in this node",
		},
		{
			name: "supplementalGroupsPolicy Strict, the runtime says no", node: NodeState{Allocatable: node, SupplementalGroupsPolicy: func() bool { return false }},
			pod: with(pod("p"), func(p *v1.Pod) {
				strict := v1.SupplementalGroupsPolicyStrict
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
			}),
			wantReason: "SupplementalGroupsPolicyNotSupported", wantMsg: "SupplementalGroupsPolicy=Strict is not supported in this node",
		},
		{
			name: "supplementalGroupsPolicy Strict with the runtime's support", node: NodeState{Allocatable: node, SupplementalGroupsPolicy: func() bool { return true }},
			pod: with(pod("p"), func(p *v1.Pod) {
				strict := v1.SupplementalGroupsPolicyStrict
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
			}),
		},
		{
			name: "supplementalGroupsPolicy Merge needs no support", node: NodeState{Allocatable: node},
			pod: with(pod("p"), func(p *v1.Pod) {
				merge := v1.SupplementalGroupsPolicyMerge
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &merge}
			}),
		},
		{
			name: "node selector matches", node: NodeState{Allocatable: node, Node: labelled},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
		},
		{
			name: "node selector does not match", node: NodeState{Allocatable: node, Node: labelled},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
			wantReason: "NodeAffinity", wantMsg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "node affinity on the node's name matches", node: NodeState{Allocatable: node, Node: labelled},
			pod: with(pod("p"), func(p *v1.Pod) { p.Spec.Affinity = nameAffinity("node-a") }),
		},
		{
			name: "node affinity on another node's name", node: NodeState{Allocatable: node, Node: labelled},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Spec.Affinity = nameAffinity("node-b") }),
			wantReason: "NodeAffinity", wantMsg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "an untolerated NoExecute taint refuses an API server's pod", node: NodeState{Allocatable: node, Node: tainted},
			pod:        with(pod("p"), func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.source": "cluster"} }),
			wantReason: "TaintToleration", wantMsg: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
		},
		{
			name: "a tolerated NoExecute taint", node: NodeState{Allocatable: node, Node: tainted},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Annotations = map[string]string{"kubernetes.io/config.source": "cluster"}
				p.Spec.Tolerations = []v1.Toleration{{Key: "evict", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
			}),
		},
		{
			name: "static pods ignore the node's taints", node: NodeState{Allocatable: node, Node: tainted},
			pod: with(pod("p"), func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.source": "file"} }),
		},
		{
			name: "resources are checked before node affinity", node: NodeState{Allocatable: node, Node: labelled, Pods: busy},
			pod:        with(pod("p", rl("cpu", "2")), func(p *v1.Pod) { p.Spec.Affinity = nameAffinity("node-b") }),
			wantReason: "OutOfcpu", wantMsg: "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1900",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Admit(tt.pod, tt.node)
			if d.Admit != (tt.wantReason == "") || d.Reason != tt.wantReason || d.Message != tt.wantMsg {
				t.Errorf("Admit = %+v, want reason %q message %q", d, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

func TestFitReportsEveryShortageInOrder(t *testing.T) {
	alloc := WithMaxPods(rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "2Mi", "hugepages-1Gi", "0"), 0)
	p := pod("p", rl("cpu", "2", "memory", "2Gi", "ephemeral-storage", "1", "hugepages-2Mi", "4Mi", "hugepages-1Gi", "1Gi"))
	var got []string
	for _, s := range Fit(p, alloc, nil) {
		got = append(got, s.Reason())
	}
	want := []string{"OutOfpods", "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage", "OutOfhugepages-1Gi", "OutOfhugepages-2Mi"}
	if len(got) != len(want) {
		t.Fatalf("reasons = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("reasons = %v, want %v", got, want)
		}
	}
}

func TestHostPortsFit(t *testing.T) {
	withPorts := func(name string, ports ...v1.ContainerPort) *v1.Pod {
		return with(pod(name), func(p *v1.Pod) { p.Spec.Containers[0].Ports = ports })
	}
	web := withPorts("web", v1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	onIP := withPorts("on-ip", v1.ContainerPort{ContainerPort: 53, HostPort: 5353, HostIP: "10.0.0.1", Protocol: v1.ProtocolUDP})
	sidecar := with(pod("sidecar"), func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always, Ports: []v1.ContainerPort{{ContainerPort: 9, HostPort: 9090}}}}
	})
	initOnly := with(pod("init"), func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "i", Ports: []v1.ContainerPort{{ContainerPort: 9, HostPort: 9191}}}}
	})
	node := []*v1.Pod{web, onIP, sidecar, initOnly}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no host port", withPorts("p", v1.ContainerPort{ContainerPort: 8080}), true},
		{"same port, all addresses", withPorts("p", v1.ContainerPort{ContainerPort: 81, HostPort: 8080}), false},
		{"same port, explicit TCP on an address", withPorts("p", v1.ContainerPort{ContainerPort: 81, HostPort: 8080, HostIP: "10.0.0.2", Protocol: v1.ProtocolTCP}), false},
		{"same port, other protocol", withPorts("p", v1.ContainerPort{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolUDP}), true},
		{"port held on one address, asked on all", withPorts("p", v1.ContainerPort{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP}), false},
		{"port held on one address, asked on the same", withPorts("p", v1.ContainerPort{ContainerPort: 53, HostPort: 5353, HostIP: "10.0.0.1", Protocol: v1.ProtocolUDP}), false},
		{"port held on one address, asked on another", withPorts("p", v1.ContainerPort{ContainerPort: 53, HostPort: 5353, HostIP: "10.0.0.2", Protocol: v1.ProtocolUDP}), true},
		{"a sidecar's port", withPorts("p", v1.ContainerPort{ContainerPort: 9, HostPort: 9090}), false},
		{"an init container's port is not held", withPorts("p", v1.ContainerPort{ContainerPort: 9, HostPort: 9191}), true},
		{"a sidecar of the new pod asks", with(pod("p"), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always, Ports: []v1.ContainerPort{{ContainerPort: 1, HostPort: 8080}}}}
		}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HostPortsFit(tc.pod, node); got != tc.want {
				t.Errorf("HostPortsFit = %v, want %v", got, tc.want)
			}
		})
	}
	d := Admit(withPorts("p", v1.ContainerPort{ContainerPort: 80, HostPort: 8080}), NodeState{Allocatable: WithMaxPods(rl("cpu", "1"), 10), Pods: node})
	if d.Admit || d.Reason != "NodePorts" || d.Message != "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("Admit: %+v", d)
	}
}

func TestAdmitAll(t *testing.T) {
	node := NodeState{Allocatable: WithMaxPods(rl("cpu", "2", "memory", "1Gi"), 3)}
	in := []*v1.Pod{
		pod("a", rl("cpu", "1")),
		pod("b", rl("cpu", "1500m")), // does not fit after a
		pod("c", rl("cpu", "1")),     // fits: b was rejected and takes nothing
		pod("d"),                     // fits: third pod
		pod("e"),                     // fourth pod: OutOfpods
	}
	got := AdmitAll(in, node)
	want := []string{"", "OutOfcpu", "", "", "OutOfpods"}
	for i := range want {
		if got[i].Reason != want[i] || got[i].Admit != (want[i] == "") {
			t.Errorf("pod %s: %+v, want reason %q", in[i].Name, got[i], want[i])
		}
	}
	if len(node.Pods) != 0 {
		t.Errorf("AdmitAll changed the caller's NodeState.Pods: %d pods", len(node.Pods))
	}
}

func TestAdmitter(t *testing.T) {
	a := Admitter{Node: func() NodeState {
		return NodeState{Allocatable: WithMaxPods(rl("cpu", "1"), 1)}
	}}
	if ok, reason, _ := a.Admit(pod("p"), nil); !ok || reason != "" {
		t.Fatalf("Admit on an empty node = %v %q", ok, reason)
	}
	ok, reason, msg := a.Admit(pod("p"), []*v1.Pod{pod("q")})
	if ok || reason != "OutOfpods" || msg != "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1" {
		t.Fatalf("Admit on a full node = %v %q %q", ok, reason, msg)
	}
}

func TestIsCriticalPod(t *testing.T) {
	prio := func(v int32) *int32 { return &v }
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"api pod", pod("p"), false},
		{"file pod is not critical (unlike the kubelet's static pods)", with(pod("p"), func(p *v1.Pod) { p.Annotations["kubernetes.io/config.source"] = "file" }), false},
		{"no source annotation", with(pod("p"), func(p *v1.Pod) { p.Annotations = nil }), false},
		{"mirror annotation alone is not critical", with(pod("p"), func(p *v1.Pod) { p.Annotations[v1.MirrorPodAnnotationKey] = "x" }), false},
		{"file pod with system-node-critical", with(pod("p"), func(p *v1.Pod) {
			p.Annotations["kubernetes.io/config.source"] = "file"
			p.Spec.PriorityClassName = "system-node-critical"
		}), true},
		{"configured class at the bound", with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "infra" }), true},
		{"configured class below the bound", with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "batch" }), false},
		{"system-cluster-critical class", with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }), true},
		{"explicit priority wins over the class", with(pod("p"), func(p *v1.Pod) {
			p.Spec.PriorityClassName = "system-node-critical"
			p.Spec.Priority = prio(5)
		}), false},
		{"user class", with(pod("p"), func(p *v1.Pod) { p.Spec.PriorityClassName = "high" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsCriticalPod(tt.pod, map[string]int32{"infra": 2_000_000_000, "batch": 1000}); got != tt.want {
				t.Errorf("IsCriticalPod = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRegistrySaysWhatAdmissionDoes: a field whose value changes an admission decision is not
// "no node effect" in the registry (docs/pod-fields.md) in the mode where it does: in every
// mode through the entry's handling, in cluster mode (a Node, a pod from the API server)
// through its cluster note.
func TestRegistrySaysWhatAdmissionDoes(t *testing.T) {
	node := rl("cpu", "4", "memory", "4Gi", "pods", "10")
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"disk": "ssd"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoExecute}}}}
	fromCluster := func(p *v1.Pod) *v1.Pod {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "cluster"}
		return p
	}
	for _, tc := range []struct {
		name    string
		path    string
		cluster bool
		node    NodeState
		set     func(*v1.Pod) // the field's value that changes the decision
		base    func() *v1.Pod
	}{
		{name: "memory-pressure toleration", path: "spec.tolerations", node: NodeState{Allocatable: node, Conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			base: func() *v1.Pod { return pod("p") },
			set: func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}},
		{name: "NoExecute toleration", path: "spec.tolerations", cluster: true, node: NodeState{Allocatable: node, Node: tainted},
			base: func() *v1.Pod { return fromCluster(pod("p")) },
			set: func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "db", Effect: v1.TaintEffectNoExecute}}
			}},
		{name: "node selector", path: "spec.nodeSelector", cluster: true, node: NodeState{Allocatable: node, Node: tainted},
			base: func() *v1.Pod {
				return with(fromCluster(pod("p")), func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
				})
			},
			set: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }},
		{name: "node affinity", path: "spec.affinity.nodeAffinity", cluster: true, node: NodeState{Allocatable: node, Node: tainted},
			base: func() *v1.Pod {
				return with(fromCluster(pod("p")), func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
				})
			},
			set: func(p *v1.Pod) { p.Spec.Affinity = nameAffinity("node-b") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, on := Admit(tc.base(), tc.node), Admit(with(tc.base(), tc.set), tc.node)
			if off.Admit == on.Admit {
				t.Fatalf("the field changes nothing at admission (%+v); the case is wrong", off)
			}
			e, ok := podfields.Lookup(tc.path)
			if !ok {
				t.Fatalf("no registry entry for %s", tc.path)
			}
			if e.Handling == podfields.NoEffect && (!tc.cluster || e.Cluster == "") {
				t.Errorf("registry: %s has %q (%s) but admission's decision depends on it (%s / %s)", tc.path, e.Handling, e.Note, off.Reason, on.Reason)
			}
			if tc.cluster && e.Handling != podfields.Implemented && e.Cluster == "" {
				t.Errorf("registry: %s is %q with no cluster-mode note, but a pod from the API server is admitted by it", tc.path, e.Handling)
			}
		})
	}
}
