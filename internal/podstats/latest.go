package podstats

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
)

// Latest is the last sample of one thing, with the CPU rate between its last two samples
// (what the kubelet's summary API reports as usageNanoCores).
type Latest[T any] struct {
	// At is when the last sample was read.
	At time.Time
	// Usage is the last sample.
	Usage T
	// NanoCores is the CPU used between the last two samples, in billionths of a core; nil
	// until sampled twice (or when the count went backwards).
	NanoCores *uint64
	// ContainerNanoCores are the containers' rates, by name, for the containers sampled twice
	// in the same cgroup.
	ContainerNanoCores map[string]uint64
}

// PodLatest is one pod's last sample.
type PodLatest struct {
	Namespace, Name string
	UID             types.UID
	Latest[PodUsage]
}

// nanoCores is cores as a count, or nil.
func nanoCores(prev, last, dt time.Duration) *uint64 {
	q, ok := cores(prev, last, dt)
	if !ok {
		return nil
	}
	n := uint64(q.ScaledValue(-9))
	return &n
}

// LatestNode is the node's last sample; ok is false until it was sampled.
func (s *Sampler) LatestNode() (Latest[Usage], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node.last == nil {
		return Latest[Usage]{}, false
	}
	out := Latest[Usage]{At: s.node.last.at, Usage: s.node.last.usage}
	if s.node.prev != nil {
		out.NanoCores = nanoCores(s.node.prev.usage.CPU, s.node.last.usage.CPU, s.node.last.at.Sub(s.node.prev.at))
	}
	return out, true
}

// LatestPods are the last samples of the pods sampled at least once, sorted by namespace and
// name (the samples the Sampler keeps: nothing is read here).
func (s *Sampler) LatestPods() []PodLatest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PodLatest, 0, len(s.pods))
	for uid, h := range s.pods {
		if h.last == nil {
			continue
		}
		p := PodLatest{Namespace: h.namespace, Name: h.name, UID: uid, Latest: Latest[PodUsage]{At: h.last.at, Usage: h.last.usage}}
		if h.prev != nil {
			dt := h.last.at.Sub(h.prev.at)
			p.NanoCores = nanoCores(h.prev.usage.CPU, h.last.usage.CPU, dt)
			prev := map[string]ContainerUsage{}
			for _, c := range h.prev.usage.Containers {
				prev[c.Name] = c
			}
			for _, c := range h.last.usage.Containers {
				if pc, ok := prev[c.Name]; ok && pc.Cgroup == c.Cgroup {
					if n := nanoCores(pc.CPU, c.CPU, dt); n != nil {
						if p.ContainerNanoCores == nil {
							p.ContainerNanoCores = map[string]uint64{}
						}
						p.ContainerNanoCores[c.Name] = *n
					}
				}
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// SampledPodUsage is the pod's last sample as the eviction manager reads a pod
// (eviction.SampledUsage): its working set, its process count (pids.current) and its
// containers' working sets, in ReadPod's order. ok is false when the pod has no sample of
// p.CgroupPath taken at or after since, or its sample has no process count (no pids
// controller: the manager counts the processes itself).
func (s *Sampler) SampledPodUsage(p eviction.ActivePod, since time.Time) (eviction.PodUsage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.pods[p.Pod.UID]
	if !ok || h.last == nil || h.last.at.Before(since) {
		return eviction.PodUsage{}, false
	}
	u := &h.last.usage
	if u.Cgroup != p.CgroupPath || !u.Stats.HasThreads {
		return eviction.PodUsage{}, false
	}
	out := eviction.PodUsage{Memory: *resource.NewQuantity(u.MemoryWorkingSet, resource.BinarySI), Processes: u.Stats.Threads}
	if len(u.Containers) > 0 {
		out.Containers = make([]eviction.ContainerUsage, len(u.Containers))
		for i, c := range u.Containers {
			out.Containers[i] = eviction.ContainerUsage{Name: c.Name, Memory: resource.NewQuantity(c.MemoryWorkingSet, resource.BinarySI)}
		}
	}
	return out, true
}
