package podstats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/eviction"
)

// DefaultInterval is how often the Sampler samples: the kubelet's housekeeping interval, which
// bounds how fresh its summary's numbers are.
const DefaultInterval = 10 * time.Second

// PodReader is what the Sampler reads (*Reader).
type PodReader interface {
	ReadPod(ctx context.Context, pod *v1.Pod, podCgroup string) (PodUsage, error)
	ReadNode() (Usage, error)
}

// retainer is a PodReader that keeps something per pod (*Reader: its containers' names) and
// is told which pods are still active.
type retainer interface {
	Retain(keep map[types.UID]bool)
}

// PodLister lists the active pods with their cgroups (internal/pods.Controller).
type PodLister interface {
	ActivePods() []eviction.ActivePod
}

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	// Reader reads the pods' and the node's cgroups.
	Reader PodReader
	// Pods lists the pods to sample.
	Pods PodLister
	// Interval is the time between samples; 0 means DefaultInterval.
	Interval time.Duration
	// Clock is the clock; nil means the real one.
	Clock clock.WithTicker
	// Logger receives sampling problems at Debug; nil discards.
	Logger *slog.Logger
}

// sample is one reading with its time.
type sample[T any] struct {
	at    time.Time
	usage T
}

// history is the last two samples of one thing.
type history[T any] struct {
	prev, last *sample[T]
}

func (h *history[T]) add(s sample[T]) {
	h.prev, h.last = h.last, &s
}

// podHistory is a pod's samples and who it is.
type podHistory struct {
	namespace, name string
	history[PodUsage]
}

// Sampler samples every active pod and the node at an interval and turns the last two samples
// into metrics as metrics-server does: memory is the last working set, CPU the usage between
// the two samples divided by the time between them. Something sampled once has no metrics yet.
type Sampler struct {
	o     SamplerOptions
	clock clock.WithTicker
	log   *slog.Logger

	mu   sync.Mutex
	pods map[types.UID]*podHistory
	node history[Usage]
}

// NewSampler returns a sampler; Run starts it.
func NewSampler(o SamplerOptions) (*Sampler, error) {
	if o.Reader == nil || o.Pods == nil {
		return nil, errors.New("pod stats sampler: reader and pods are required")
	}
	if o.Interval < 0 {
		return nil, fmt.Errorf("pod stats sampler: interval %v is negative", o.Interval)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	s := &Sampler{o: o, clock: o.Clock, log: o.Logger, pods: map[types.UID]*podHistory{}}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Run samples at once and then every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := s.clock.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Sample reads every active pod and the node once. A pod that cannot be read now keeps its
// earlier samples; a pod no longer active is forgotten.
func (s *Sampler) Sample(ctx context.Context) {
	active := s.o.Pods.ActivePods()
	type read struct {
		uid  types.UID
		pod  *v1.Pod
		smp  sample[PodUsage]
		read bool
	}
	reads := make([]read, 0, len(active))
	for _, p := range active {
		r := read{uid: p.Pod.UID, pod: p.Pod}
		if p.CgroupPath != "" {
			u, err := s.o.Reader.ReadPod(ctx, p.Pod, p.CgroupPath)
			if err != nil {
				s.log.Debug("pod stats unavailable", "pod", p.Pod.Namespace+"/"+p.Pod.Name, "pod_uid", string(p.Pod.UID), "pod_cgroup", p.CgroupPath, "error", err)
			} else {
				r.smp, r.read = sample[PodUsage]{at: s.clock.Now(), usage: u}, true
			}
		}
		reads = append(reads, r)
	}
	node, nodeErr := s.o.Reader.ReadNode()
	if nodeErr != nil {
		s.log.Debug("node stats unavailable", "error", nodeErr)
	}
	now := s.clock.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	keep := make(map[types.UID]bool, len(reads))
	for _, r := range reads {
		keep[r.uid] = true
		h, ok := s.pods[r.uid]
		if !ok {
			h = &podHistory{namespace: r.pod.Namespace, name: r.pod.Name}
			s.pods[r.uid] = h
		}
		if r.read {
			h.add(r.smp)
		}
	}
	for uid := range s.pods {
		if !keep[uid] {
			delete(s.pods, uid)
		}
	}
	if r, ok := s.o.Reader.(retainer); ok {
		r.Retain(keep)
	}
	if nodeErr == nil {
		s.node.add(sample[Usage]{at: now, usage: node})
	}
}

// cores is the CPU used between two cumulative readings dt apart, in nanocores, as
// metrics-server computes it; ok is false when the count went backwards (a new cgroup).
func cores(prev, last time.Duration, dt time.Duration) (*resource.Quantity, bool) {
	if dt <= 0 || last < prev {
		return nil, false
	}
	nano := float64(last-prev) / dt.Seconds()
	if nano > math.MaxInt64 {
		return nil, false
	}
	return resource.NewScaledQuantity(int64(nano), resource.Nano), true
}

// PodMetrics returns the metrics of every pod sampled at least twice, as metrics-server serves
// them (metrics.k8s.io/v1beta1 PodMetrics), sorted by namespace and name. Each container
// sampled in both samples in the same cgroup is listed with its CPU (cores between the samples)
// and memory (the last working set); a pod without such a container is left out.
func (s *Sampler) PodMetrics() []metricsv1beta1.PodMetrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []metricsv1beta1.PodMetrics{}
	for _, h := range s.pods {
		if h.prev == nil {
			continue
		}
		dt := h.last.at.Sub(h.prev.at)
		prev := map[string]ContainerUsage{}
		for _, c := range h.prev.usage.Containers {
			prev[c.Name] = c
		}
		var containers []metricsv1beta1.ContainerMetrics
		for _, c := range h.last.usage.Containers {
			p, ok := prev[c.Name]
			if !ok || p.Cgroup != c.Cgroup {
				continue
			}
			cpu, ok := cores(p.CPU, c.CPU, dt)
			if !ok {
				continue
			}
			containers = append(containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: v1.ResourceList{
				v1.ResourceCPU:    *cpu,
				v1.ResourceMemory: *resource.NewQuantity(c.MemoryWorkingSet, resource.BinarySI),
			}})
		}
		if len(containers) == 0 {
			continue
		}
		out = append(out, metricsv1beta1.PodMetrics{
			TypeMeta:   metav1.TypeMeta{Kind: "PodMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
			ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: h.name, CreationTimestamp: metav1.NewTime(h.last.at)},
			Timestamp:  metav1.NewTime(h.last.at),
			Window:     metav1.Duration{Duration: dt},
			Containers: containers,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// NodeMetrics returns the node's metrics (metrics.k8s.io/v1beta1 NodeMetrics named name): CPU
// between the last two samples and the last working set of the root cgroup; ok is false
// until the node was sampled twice.
func (s *Sampler) NodeMetrics(name string) (metricsv1beta1.NodeMetrics, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node.prev == nil {
		return metricsv1beta1.NodeMetrics{}, false
	}
	dt := s.node.last.at.Sub(s.node.prev.at)
	cpu, ok := cores(s.node.prev.usage.CPU, s.node.last.usage.CPU, dt)
	if !ok {
		return metricsv1beta1.NodeMetrics{}, false
	}
	return metricsv1beta1.NodeMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(s.node.last.at)},
		Timestamp:  metav1.NewTime(s.node.last.at),
		Window:     metav1.Duration{Duration: dt},
		Usage: v1.ResourceList{
			v1.ResourceCPU:    *cpu,
			v1.ResourceMemory: *resource.NewQuantity(s.node.last.usage.MemoryWorkingSet, resource.BinarySI),
		},
	}, true
}
