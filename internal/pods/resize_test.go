package pods

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// cpuNode admits pods while their cpu requests fit in 2 cores.
type cpuNode struct{ maxPods }

func (cpuNode) Admit(pod *v1.Pod, admitted []*v1.Pod) (bool, string, string) {
	var used int64
	for _, p := range append([]*v1.Pod{pod}, admitted...) {
		for _, c := range p.Spec.Containers {
			used += c.Resources.Requests.Cpu().MilliValue()
		}
	}
	if used > 2000 {
		return false, "OutOfcpu", "Node didn't have enough resource: cpu"
	}
	return true, "", ""
}

func withCPURequest(d Desired, cpu string) Desired {
	p := d.Pod.DeepCopy()
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}
	d.Pod = p
	return d
}

// TestResizeAllocation: a resize that fits is what the pod runs with at once; one that can
// never fit (Infeasible) or not next to the other pods (Deferred) leaves the pod with its
// allocated resources and the PodResizePending condition; a Deferred one is allocated once the
// other pod is gone.
func TestResizeAllocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: cpuNode{10}, WantSources: []string{SourceCluster}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		web, other := desired(SourceCluster, "web", "uid-web"), withCPURequest(desired(SourceCluster, "other", "uid-other"), "1")
		update := func(webCPU string, pods ...Desired) {
			c.Update(Snapshot{Source: SourceCluster, Pods: append([]Desired{withCPURequest(web, webCPU)}, pods...)})
			time.Sleep(2 * busyResync)
			synctest.Wait()
		}
		check := func(step, wantCPU, wantReason string) {
			t.Helper()
			p, _ := c.Pod("default", "web")
			if got := p.Spec.Containers[0].Resources.Requests.Cpu(); got.String() != wantCPU {
				t.Errorf("%s: the pod runs with %s cpu, want %s", step, got, wantCPU)
			}
			reason := ""
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodResizePending {
					reason = cond.Reason
				}
			}
			if reason != wantReason {
				t.Errorf("%s: PodResizePending %q, want %q", step, reason, wantReason)
			}
		}
		update("500m", other)
		check("admitted", "500m", "")
		update("800m", other)
		check("a resize that fits", "800m", "")
		update("3", other)
		check("an infeasible resize", "800m", "Infeasible")
		update("1500m", other)
		check("a deferred resize", "800m", "Deferred")
		update("1500m")
		check("the other pod gone", "1500m", "")
	})
}

// TestCompletedPodsDoNotCount: a pod that completed stays listed but no longer counts against
// the node at admission (the kubelet's filterOutInactivePods).
func TestCompletedPodsDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}, phase: v1.PodSucceeded}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(1), WantSources: []string{SourceCluster}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		done := desired(SourceCluster, "done", "uid-done")
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{done}})
		synctest.Wait()
		if p, _ := c.Pod("default", "done"); p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("first pod %s", p.Status.Phase)
		}
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{done, desired(SourceCluster, "next", "uid-next")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "next"); p.Status.Phase == v1.PodFailed {
			t.Errorf("second pod refused (%s: %s): the completed one still counted", p.Status.Reason, p.Status.Message)
		}
		if _, ok := c.Pod("default", "done"); !ok {
			t.Error("the completed pod is no longer listed")
		}
	})
}

// TestTerminatingPodsCount: a pod being deleted still counts against the node at admission
// until its containers are stopped and it is gone, as in the kubelet (filterOutInactivePods
// keeps a pod whose termination was requested until its pod worker knows it terminated).
func TestTerminatingPodsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(1), SourceCluster)
		release := make(chan struct{})
		rt.onKill = func(uid string) {
			if uid == "uid-old" {
				<-release
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		old := desired(SourceCluster, "old", "uid-old")
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{old}})
		synctest.Wait()
		if p, _ := c.Pod("default", "old"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("first pod %s", p.Status.Phase)
		}
		// old is deleted; its containers take their grace period to stop.
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{desired(SourceCluster, "during", "uid-during")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "during"); p.Status.Phase != v1.PodFailed || p.Status.Reason != "OutOfpods" {
			t.Errorf("a pod arriving while the other terminates: %s %s, want Failed OutOfpods", p.Status.Phase, p.Status.Reason)
		}
		close(release)
		synctest.Wait()
		if _, ok := c.Pod("default", "old"); ok {
			t.Fatal("the deleted pod is still listed after its containers stopped")
		}
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{desired(SourceCluster, "after", "uid-after")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "after"); p.Status.Phase == v1.PodFailed {
			t.Errorf("a pod arriving after the other was gone refused (%s: %s)", p.Status.Reason, p.Status.Message)
		}
	})
}

// TestStatusShowsTheSyncedGeneration: the status carries the generation of the pod it was
// made from; a newer generation (a resize) shows only once a sync of it returned.
func TestStatusShowsTheSyncedGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceCluster)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		web := withCPURequest(desired(SourceCluster, "web", "uid-web"), "500m")
		web.Pod.Generation = 1
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{web}})
		synctest.Wait()
		if p, _ := c.Pod("default", "web"); p.Status.ObservedGeneration != 1 {
			t.Fatalf("observedGeneration %d after the first sync, want 1", p.Status.ObservedGeneration)
		}
		gate := make(chan struct{})
		rt.mu.Lock()
		rt.gate = gate
		rt.mu.Unlock()
		resized := withCPURequest(web, "800m")
		resized.Pod.Generation = 2
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{resized}})
		synctest.Wait()
		if p, _ := c.Pod("default", "web"); p.Generation != 2 || p.Status.ObservedGeneration != 1 {
			t.Errorf("while the resize's sync runs: generation %d observedGeneration %d, want 2 and 1", p.Generation, p.Status.ObservedGeneration)
		}
		close(gate)
		synctest.Wait()
		if p, _ := c.Pod("default", "web"); p.Status.ObservedGeneration != 2 {
			t.Errorf("observedGeneration %d after the resize's sync, want 2", p.Status.ObservedGeneration)
		}
	})
}
