package eviction

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// This file is the kubelet's ranking (pkg/kubelet/eviction/helpers.go: buildSignalToRankFunc,
// orderedBy),
// with a reason for each pod's place.

// Candidate is one pod in eviction order.
type Candidate struct {
	// Pod is the pod.
	Pod *v1.Pod `json:"-"`
	// Name is namespace/name.
	Name string `json:"pod"`
	// Priority is the pod's priority (PodPriority).
	Priority int32 `json:"priority"`
	// Critical pods are ranked like the others but never evicted.
	Critical bool `json:"critical,omitempty"`
	// Reason says why the pod has its place: the value each comparator looked at.
	Reason string `json:"reason"`
}

// rankItem is a pod with the numbers its comparators look at, computed once.
type rankItem struct {
	pod      *v1.Pod
	hasStats bool
	priority int32
	critical bool
	// usage is the ranked resource's use: working set, ephemeral storage or inodes.
	usage resource.Quantity
	// request is the request usage is compared with (exceed*Requests).
	request resource.Quantity
	// overRequest is usage minus the request the kubelet subtracts in memory()/disk(): the
	// memory request, or the ephemeral-storage request for both disk resources.
	overRequest resource.Quantity
	processes   int64
}

// cmpBool sorts true first (the kubelet's cmpBool).
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

type cmpFunc func(a, b *rankItem) int

// exceedRequests: no stats first, then usage > request first (exceedMemoryRequests,
// exceedDiskRequests).
func exceedRequests(a, b *rankItem) int {
	if !a.hasStats || !b.hasStats {
		return cmpBool(!a.hasStats, !b.hasStats)
	}
	return cmpBool(a.usage.Cmp(a.request) > 0, b.usage.Cmp(b.request) > 0)
}

// byPriority: lower priority first.
func byPriority(a, b *rankItem) int {
	switch {
	case a.priority == b.priority:
		return 0
	case a.priority > b.priority:
		return 1
	default:
		return -1
	}
}

// byUsageOverRequest: no stats first, then descending usage − request (memory(), disk()).
func byUsageOverRequest(a, b *rankItem) int {
	if !a.hasStats || !b.hasStats {
		return cmpBool(!a.hasStats, !b.hasStats)
	}
	return b.overRequest.Cmp(a.overRequest)
}

// byProcesses: no stats first, then descending process count (process()).
func byProcesses(a, b *rankItem) int {
	if !a.hasStats || !b.hasStats {
		return cmpBool(!a.hasStats, !b.hasStats)
	}
	switch {
	case a.processes == b.processes:
		return 0
	case a.processes > b.processes:
		return -1
	default:
		return 1
	}
}

// orderedBy sorts items by the comparators in turn. The kubelet uses the unstable sort.Sort,
// so pods that compare equal on every comparator come out in no defined order; here the sort
// is stable: such pods keep the order they were given in (one of the kubelet's possible
// orders).
func orderedBy(items []*rankItem, cmps ...cmpFunc) {
	slices.SortStableFunc(items, func(a, b *rankItem) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
}

// Rank orders pods for eviction under the signal's pressure, first to evict first:
//   - memory.available, allocatableMemory.available: rankMemoryPressure = no stats first,
//     then pods whose working set exceeds their memory request, then lower priority, then
//     larger working set − memory request;
//   - pid.available: rankPIDPressure = lower priority, then no stats, then more processes;
//   - nodefs.*, imagefs.*, containerfs.*: rankDiskPressure = no stats first, then usage
//     above its request, then lower priority, then larger usage − ephemeral-storage request
//     (for inodes too, as in the kubelet). Usage is the pod's whole local storage: the
//     single-filesystem layout, where every filesystem signal ranks on root, logs and
//     local volumes.
//
// Critical pods are ranked like the others and marked; the caller must skip them. The
// second result is false for a signal without a ranking.
func Rank(signal Signal, pods []PodStats, classes map[string]int32) ([]Candidate, bool) {
	res, ok := signalToResource[signal]
	if !ok {
		return nil, false
	}
	items := makeRankItems(res, pods, classes)
	switch res {
	case v1.ResourceMemory, v1.ResourceEphemeralStorage, ResourceInodes:
		orderedBy(items, exceedRequests, byPriority, byUsageOverRequest)
	case ResourcePIDs:
		orderedBy(items, byPriority, byProcesses)
	}
	out := make([]Candidate, len(items))
	for i, it := range items {
		out[i] = Candidate{
			Pod:      it.pod,
			Name:     podName(it.pod),
			Priority: it.priority,
			Critical: it.critical,
			Reason:   rankReason(res, it),
		}
	}
	return out, true
}

// makeRankItems computes, once per pod, what the comparators for res look at.
func makeRankItems(res v1.ResourceName, pods []PodStats, classes map[string]int32) []*rankItem {
	items := make([]*rankItem, len(pods))
	zero := *resource.NewQuantity(0, resource.BinarySI)
	for i, p := range pods {
		it := &rankItem{pod: p.Pod, hasStats: p.Usage != nil, priority: PodPriority(p.Pod, classes)}
		it.critical = it.priority >= SystemCriticalPriority
		var reqs v1.ResourceList
		if res != ResourcePIDs {
			// The kubelet's GetResourceRequestQuantity: component-helpers PodRequests (init
			// containers, sidecars, overhead, pod-level resources), zero when not requested.
			reqs = resourcehelper.PodRequests(p.Pod, resourcehelper.PodResourcesOptions{})
		}
		request := func(name v1.ResourceName) resource.Quantity {
			if q, ok := reqs[name]; ok {
				return q
			}
			return zero
		}
		switch res {
		case v1.ResourceMemory:
			it.request = request(v1.ResourceMemory)
			if p.Usage != nil {
				it.usage = p.Usage.Memory.DeepCopy()
			}
			it.overRequest = it.usage.DeepCopy()
			it.overRequest.Sub(it.request)
		case v1.ResourceEphemeralStorage, ResourceInodes:
			it.request = request(res) // zero for inodes: nobody requests inodes
			if p.Usage != nil && p.Usage.NoStorageStats {
				it.hasStats = false // storage not measured: a pod without stats for disk
			}
			if it.hasStats {
				if res == ResourceInodes {
					it.usage = *resource.NewQuantity(p.Usage.Inodes, resource.DecimalSI)
				} else {
					it.usage = p.Usage.EphemeralStorage.DeepCopy()
				}
			}
			it.overRequest = it.usage.DeepCopy()
			it.overRequest.Sub(request(v1.ResourceEphemeralStorage))
		case ResourcePIDs:
			if p.Usage != nil {
				it.processes = p.Usage.Processes
			}
		}
		items[i] = it
	}
	return items
}

// rankReason explains an item's place with the values its comparators used, in comparator
// order.
func rankReason(res v1.ResourceName, it *rankItem) string {
	var parts []string
	prio := fmt.Sprintf("priority %d", it.priority)
	switch res {
	case ResourcePIDs:
		parts = append(parts, prio)
		if it.hasStats {
			parts = append(parts, fmt.Sprintf("%d processes", it.processes))
		} else {
			parts = append(parts, "no stats")
		}
	default:
		if !it.hasStats {
			parts = append(parts, "no stats", prio)
			break
		}
		what := "working set"
		reqName := "memory request"
		switch res {
		case v1.ResourceEphemeralStorage:
			what, reqName = "ephemeral-storage usage", "request"
		case ResourceInodes:
			what, reqName = "inodes used", "inode request"
		}
		if it.usage.Cmp(it.request) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s exceeds %s %s", what, it.usage.String(), reqName, it.request.String()))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s within %s %s", what, it.usage.String(), reqName, it.request.String()))
		}
		parts = append(parts, prio)
		over := it.overRequest.DeepCopy()
		switch {
		case res == ResourceInodes:
			// The kubelet's disk() subtracts the ephemeral-storage request from inodes too.
			parts = append(parts, fmt.Sprintf("inodes used − ephemeral-storage request = %s", over.String()))
		case over.Sign() == 0:
			parts = append(parts, "usage equal to request")
		case over.Sign() > 0:
			parts = append(parts, fmt.Sprintf("usage above request by %s", over.String()))
		default:
			over.Neg()
			parts = append(parts, fmt.Sprintf("usage below request by %s", over.String()))
		}
	}
	if it.critical {
		parts = append(parts, "critical: never evicted")
	}
	return strings.Join(parts, "; ")
}

// podName is namespace/name.
func podName(pod *v1.Pod) string {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + pod.Name
}
