package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// facts are one side's decisions on one input: field → value. A field one side has and the
// other lacks is a difference too.
type facts map[string]string

func (f facts) set(k, v string) { f[k] = v }

func (f facts) setU(k string, v *uint64) {
	if v == nil {
		f[k] = "unset"
		return
	}
	f[k] = strconv.FormatUint(*v, 10)
}

func (f facts) setI(k string, v *int64) {
	if v == nil {
		f[k] = "unset"
		return
	}
	f[k] = strconv.FormatInt(*v, 10)
}

// difference is one field on which slicelet and the kubelet disagree.
type difference struct {
	field, slicelet, kubelet string
	// refusal is slicelet's whole refusal when it refuses a pod the kubelet accepts (slicelet
	// is then its first line, shortened).
	refusal string
	// decoding: slicelet's decision on the kubelet's decoded pod agrees with the kubelet.
	decoding bool
}

// compare lists the fields whose values differ, in field order.
func compare(s, k facts) []difference {
	keys := map[string]bool{}
	for f := range s {
		keys[f] = true
	}
	for f := range k {
		keys[f] = true
	}
	var out []difference
	for _, f := range slices.Sorted(maps.Keys(keys)) {
		sv, sok := s[f]
		kv, kok := k[f]
		if !sok {
			sv = "(none)"
		}
		if !kok {
			kv = "(none)"
		}
		if sv != kv {
			out = append(out, difference{field: f, slicelet: sv, kubelet: kv})
		}
	}
	return out
}

// forEachContainer calls fn for every init container ("init") and regular container
// ("container"); ephemeral containers have no resources.
func forEachContainer(pod *v1.Pod, fn func(kind string, c *v1.Container)) {
	for i := range pod.Spec.InitContainers {
		fn("init", &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		fn("container", &pod.Spec.Containers[i])
	}
}

// nodeSetup is the node both sides decide for: its memory capacity (OOM scores), its
// allocatable (admission) and the host's hugepage sizes (container hugetlb limits).
type nodeSetup struct {
	memoryCapacity int64
	hostPageSizes  []int64
}

// allocatable is what admission fits pods into: 4 CPUs, 16Gi, 100Gi of disk, 1Gi of 2Mi
// hugepages, 110 pods. No extended resources.
func (n nodeSetup) allocatable() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           *resource.NewQuantity(n.memoryCapacity, resource.BinarySI),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-2Mi":             resource.MustParse("1Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
	}
}

// node is the v1.Node the kubelet's admission reads: allocatable as above, linux.
func (n nodeSetup) node() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{v1.LabelOSStable: "linux"}},
		Status:     v1.NodeStatus{Allocatable: n.allocatable(), Capacity: n.allocatable()},
	}
}

// The node DNS both sides form a pod's resolver configuration with: cluster DNS, the cluster
// domain and the host's resolv.conf (written to a file for the kubelet's configurer).
var (
	oracleClusterDNS    = "10.96.0.10"
	oracleClusterDomain = "cluster.local"
	oracleResolvConf    = "# host\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch example.org corp.example.\noptions edns0 timeout:2 ndots:1\n"
)

// setDNS records a resolver configuration; options as a set (the kubelet's come in map order).
func (f facts) setDNS(servers, searches, options []string) {
	o := slices.Clone(options)
	slices.Sort(o)
	f.set("dns.servers", strings.Join(servers, " "))
	f.set("dns.searches", strings.Join(searches, " "))
	f.set("dns.options", strings.Join(o, " "))
}
