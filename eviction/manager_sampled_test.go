package eviction

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeSamples is a sampler's samples: each pod's working set and when it was sampled.
type fakeSamples struct {
	mu    sync.Mutex
	usage map[string]string    // pod name → sampled working set
	at    map[string]time.Time // pod name → when
	asked int
}

func (s *fakeSamples) SampledPodUsage(p ActivePod, since time.Time) (PodUsage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	u, ok := s.usage[p.Pod.Name]
	if !ok || s.at[p.Pod.Name].Before(since) {
		return PodUsage{}, false
	}
	q := resource.MustParse(u)
	return PodUsage{Memory: q, Containers: []ContainerUsage{{Name: "c", Memory: &q}}}, true
}

// countingReads counts the manager's own reads of pods' cgroups.
type countingReads struct {
	mu         sync.Mutex
	pods, ctrs map[string]int
}

func (c *countingReads) wrap(f *fakeNode, m *Manager) {
	c.pods, c.ctrs = map[string]int{}, map[string]int{}
	m.o.PodUsage = func(p ActivePod) *PodUsage {
		c.mu.Lock()
		c.pods[p.Pod.Name]++
		c.mu.Unlock()
		return f.podUsage(p)
	}
	m.o.ContainerMemory = func(_ context.Context, p ActivePod) ([]ContainerUsage, error) {
		c.mu.Lock()
		c.ctrs[p.Pod.Name]++
		c.mu.Unlock()
		return nil, nil
	}
}

func (c *countingReads) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("pods %v, containers %v", c.pods, c.ctrs)
}

// TestManagerSampledUsage: with the sampler's samples, a cycle that acts on nothing reads no
// pod's cgroup (the sampler's read is the interval's only one); a cycle that would act reads
// every pod now and acts on that, as without samples; a pod without a fresh enough sample is
// read at the cycle.
func TestManagerSampledUsage(t *testing.T) {
	now := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		available string               // memory.available; the hard threshold is 1Gi
		read      map[string]string    // working sets read at the cycle
		sampled   map[string]string    // working sets in the samples
		age       map[string]time.Time // when each was sampled; now when absent
		wantReads string
		wantEvict string
	}{
		{
			name: "idle: every pod from its sample, no read", available: "5Gi",
			read:    map[string]string{"a": "100Mi", "b": "200Mi"},
			sampled: map[string]string{"a": "100Mi", "b": "200Mi"},
			// No pod read, neither its cgroup nor its containers'.
			wantReads: "pods map[], containers map[]", wantEvict: "[]",
		},
		{
			name: "idle: a sample older than 1.5 intervals is read again", available: "5Gi",
			read:      map[string]string{"a": "100Mi", "b": "200Mi"},
			sampled:   map[string]string{"a": "100Mi", "b": "200Mi"},
			age:       map[string]time.Time{"a": now.Add(-16 * time.Second), "b": now.Add(-15 * time.Second)},
			wantReads: "pods map[a:1], containers map[a:1]", wantEvict: "[]",
		},
		{
			name: "idle: a pod never sampled is read", available: "5Gi",
			read:      map[string]string{"a": "100Mi", "b": "200Mi"},
			sampled:   map[string]string{"b": "200Mi"},
			wantReads: "pods map[a:1], containers map[a:1]", wantEvict: "[]",
		},
		{
			// The samples rank a first; the pods read now rank b first: b is evicted, as
			// without samples.
			name: "pressure: every pod read now, the eviction from the reads", available: "500Mi",
			read:      map[string]string{"a": "100Mi", "b": "4Gi"},
			sampled:   map[string]string{"a": "3Gi", "b": "200Mi"},
			wantReads: "pods map[a:1 b:1], containers map[a:1 b:1]", wantEvict: "[b]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, shared := range []bool{false, true} {
				f := &fakeNode{available: tt.available, usage: tt.read}
				f.pods = []ActivePod{activePod("a", defaultPriority, ""), activePod("b", defaultPriority, "")}
				m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
				m.clock = testingclock.NewFakeClock(now)
				var reads countingReads
				reads.wrap(f, m)
				if shared {
					s := &fakeSamples{usage: tt.sampled, at: map[string]time.Time{}}
					for name := range tt.sampled {
						s.at[name] = now
						if at, ok := tt.age[name]; ok {
							s.at[name] = at
						}
					}
					m.o.Sampled = s
				}
				m.Synchronize(t.Context())
				_, ev := f.get()
				if got := fmt.Sprint(ev); got != tt.wantEvict {
					t.Errorf("shared %v: evicted %s, want %s", shared, got, tt.wantEvict)
				}
				want := tt.wantReads
				if !shared {
					want = "pods map[a:1 b:1], containers map[a:1 b:1]" // every pod, every cycle
				}
				if got := reads.String(); got != want {
					t.Errorf("shared %v: read %s, want %s", shared, got, want)
				}
			}
		})
	}
}
