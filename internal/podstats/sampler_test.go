package podstats

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
)

const mib = 1 << 20

// fakeWorld is the pods and their cumulative usage, changed by the test between samples.
type fakeWorld struct {
	mu    sync.Mutex
	pods  []eviction.ActivePod
	usage map[types.UID]PodUsage
	node  Usage
	reads int
}

func (w *fakeWorld) ActivePods() []eviction.ActivePod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]eviction.ActivePod(nil), w.pods...)
}

func (w *fakeWorld) ReadPod(_ context.Context, pod *v1.Pod, _ string) (PodUsage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	u, ok := w.usage[pod.UID]
	if !ok {
		return PodUsage{}, fmt.Errorf("pod %s: %w", pod.Name, eviction.ErrUnavailable)
	}
	u.Containers = append([]ContainerUsage(nil), u.Containers...)
	return u, nil
}

func (w *fakeWorld) ReadNode() (Usage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.node, nil
}

func (w *fakeWorld) set(f func(w *fakeWorld)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func activePod(ns, name, uid string) eviction.ActivePod {
	return eviction.ActivePod{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}, CgroupPath: "/kubepods.slice/" + uid}
}

func ctr(name, cgroup string, ws int64, cpu time.Duration) ContainerUsage {
	return ContainerUsage{Name: name, Cgroup: cgroup, Usage: Usage{MemoryWorkingSet: ws, CPU: cpu}}
}

// podLines renders pod metrics as kubectl top shows them: millicores and Mi.
func podLines(list []metricsv1beta1.PodMetrics) string {
	var b strings.Builder
	for _, p := range list {
		fmt.Fprintf(&b, "%s/%s window=%v:", p.Namespace, p.Name, p.Window.Duration)
		for _, c := range p.Containers {
			fmt.Fprintf(&b, " %s %dm %dMi", c.Name, c.Usage.Cpu().MilliValue(), c.Usage.Memory().Value()/mib)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestSampler: metrics need two samples; CPU is the usage between them over the time between
// them (metrics-server's rate); memory is the last working set; a container whose cgroup
// changed (restarted) or whose count went backwards has no rate; a pod that is gone is
// forgotten. The loop samples at once and then every interval of the injected clock.
func TestSampler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWorld{
			pods: []eviction.ActivePod{activePod("default", "web", "u1"), activePod("team", "cache", "u2"), activePod("default", "starting", "u3")},
			usage: map[types.UID]PodUsage{
				"u1": {Containers: []ContainerUsage{ctr("app", "/a-1", 80*mib, 1*time.Second), ctr("hog", "/h-1", 512*mib, 4*time.Second)}},
				"u2": {Containers: []ContainerUsage{ctr("c1", "/c", 56*mib, 10*time.Second)}},
			},
			node: Usage{MemoryWorkingSet: 5 << 30, CPU: 100 * time.Second},
		}
		w.pods[2].CgroupPath = "" // no slice yet: not read
		s, err := NewSampler(SamplerOptions{Reader: w, Pods: w, Interval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)

		synctest.Wait() // the first sample, taken at once
		if got := s.PodMetrics(); len(got) != 0 {
			t.Fatalf("metrics after one sample: %v", podLines(got))
		}
		if _, ok := s.NodeMetrics("node1"); ok {
			t.Fatal("node metrics after one sample")
		}

		w.set(func(w *fakeWorld) {
			w.usage["u1"] = PodUsage{Containers: []ContainerUsage{ctr("app", "/a-1", 90*mib, 1500*time.Millisecond), ctr("hog", "/h-1", 600*mib, 14*time.Second)}}
			w.usage["u2"] = PodUsage{Containers: []ContainerUsage{ctr("c1", "/c-restarted", 10*mib, 1*time.Second)}}
			w.node = Usage{MemoryWorkingSet: 6 << 30, CPU: 120 * time.Second}
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := "default/web window=10s: app 50m 90Mi hog 1000m 600Mi\n"
		if got := podLines(s.PodMetrics()); got != want {
			t.Errorf("pod metrics:\n%s\nwant:\n%s", got, want)
		}
		n, ok := s.NodeMetrics("node1")
		if !ok || n.Name != "node1" || n.Usage.Cpu().MilliValue() != 2000 || n.Usage.Memory().Value() != 6<<30 || n.Window.Duration != 10*time.Second {
			t.Errorf("node metrics: %+v", n)
		}

		// web goes away: forgotten; cache's restarted container now has two samples.
		w.set(func(w *fakeWorld) {
			w.pods = w.pods[1:2]
			w.usage["u2"] = PodUsage{Containers: []ContainerUsage{ctr("c1", "/c-restarted", 12*mib, 6*time.Second)}}
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := podLines(s.PodMetrics()); got != "team/cache window=10s: c1 500m 12Mi\n" {
			t.Errorf("after web left:\n%s", got)
		}
	})
}

// TestSamplerRunsOnTheInterval: under synctest, the loop takes one sample at start and one per
// interval.
func TestSamplerRunsOnTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWorld{pods: []eviction.ActivePod{activePod("default", "web", "u1")},
			usage: map[types.UID]PodUsage{"u1": {Containers: []ContainerUsage{ctr("app", "/a", 1, 0)}}}}
		s, err := NewSampler(SamplerOptions{Reader: w, Pods: w})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go s.Run(ctx)
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if reads := func() int { w.mu.Lock(); defer w.mu.Unlock(); return w.reads }(); reads != 3 {
			t.Errorf("%d samples in 25s at the default 10s interval, want 3", reads)
		}
		cancel()
	})
}
