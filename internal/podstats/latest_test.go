package podstats

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
)

func TestSamplerLatest(t *testing.T) {
	var pods []PodLatest
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWorld{
			pods: []eviction.ActivePod{activePod("default", "web", "u1"), activePod("team", "cache", "u2")},
			usage: map[types.UID]PodUsage{
				"u1": {Usage: Usage{CPU: 2 * time.Second}, Containers: []ContainerUsage{ctr("app", "/a-1", 80*mib, time.Second)}},
				"u2": {Containers: []ContainerUsage{ctr("c1", "/c", 56*mib, 10*time.Second)}},
			},
			node: Usage{MemoryWorkingSet: 5 << 30, CPU: 100 * time.Second},
		}
		s, err := NewSampler(SamplerOptions{Reader: w, Pods: w, Interval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.LatestNode(); ok {
			t.Fatal("node sample before any sampling")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		synctest.Wait()
		w.set(func(w *fakeWorld) {
			w.usage["u1"] = PodUsage{Usage: Usage{CPU: 7 * time.Second}, Containers: []ContainerUsage{ctr("app", "/a-1", 90*mib, 1500*time.Millisecond)}}
			w.usage["u2"] = PodUsage{Containers: []ContainerUsage{ctr("c1", "/c-restarted", 10*mib, time.Second)}}
			w.node = Usage{MemoryWorkingSet: 6 << 30, CPU: 120 * time.Second}
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()

		n, ok := s.LatestNode()
		if !ok || n.Usage.CPU != 120*time.Second || n.NanoCores == nil || *n.NanoCores != 2e9 {
			t.Errorf("node: %+v", n)
		}
		pods = s.LatestPods()
	})
	if len(pods) != 2 {
		t.Fatalf("pods %+v", pods)
	}
	tests := []struct {
		name           string
		got            PodLatest
		wantPod        string
		wantNanoCores  uint64
		wantContainers map[string]uint64
	}{
		{name: "a pod sampled twice has rates, its container too", got: pods[0], wantPod: "default/web", wantNanoCores: 5e8, wantContainers: map[string]uint64{"app": 5e7}},
		{name: "a restarted container (new cgroup) has no rate yet", got: pods[1], wantPod: "team/cache", wantNanoCores: 0, wantContainers: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.got
			if p.Namespace+"/"+p.Name != tc.wantPod || p.NanoCores == nil || *p.NanoCores != tc.wantNanoCores || len(p.ContainerNanoCores) != len(tc.wantContainers) {
				t.Fatalf("%+v, want %s at %d nanocores, containers %v", p, tc.wantPod, tc.wantNanoCores, tc.wantContainers)
			}
			for c, want := range tc.wantContainers {
				if p.ContainerNanoCores[c] != want {
					t.Errorf("container %s: %d nanocores, want %d", c, p.ContainerNanoCores[c], want)
				}
			}
		})
	}
}
