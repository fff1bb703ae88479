package pods

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestControllerFinishedPod: a pod whose containers ended for good has its slice destroyed
// (the kubelet's SyncTerminatedPod destroys the pod cgroup), keeps its status, is not synced
// again, no longer counts for admission, and is deleted as any other pod. After a restart, a
// pod the relist shows finished gets no slice again: its leftovers are stopped (KillPod) and
// its slice destroyed, without a sync.
func TestControllerFinishedPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(1), SourceFile)
		rt.phase = v1.PodSucceeded
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)

		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "job", "uid-job")}})
		synctest.Wait()
		if fmt.Sprint(s.destroyed) != "[uid-job]" || rt.syncs("uid-job") != 1 {
			t.Fatalf("destroyed %v after %d syncs; want the finished pod's slice destroyed after its sync", s.destroyed, rt.syncs("uid-job"))
		}
		if p, _ := c.Pod("default", "job"); p.Status.Phase != v1.PodSucceeded {
			t.Errorf("finished pod's phase %s, want Succeeded", p.Status.Phase)
		}
		time.Sleep(2 * steadyResync)
		changed := make(chan string, 1)
		changed <- "uid-job" // a relist sees its containers change (container GC)
		rt.mu.Lock()
		rt.changed = changed
		rt.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if rt.syncs("uid-job") != 1 || s.ensured["uid-job"] != 1 || len(s.destroyed) != 1 {
			t.Errorf("finished pod synced %d times, slice ensured %d times, destroyed %v: want nothing after it finished", rt.syncs("uid-job"), s.ensured["uid-job"], s.destroyed)
		}
		if s.orphans != 1 {
			t.Errorf("orphan cleanup ran %d times, want once: a finished pod without a slice must not hold it back", s.orphans)
		}
		// It no longer counts: a second pod fits the node of one.
		rt.mu.Lock()
		rt.phase = v1.PodRunning
		rt.mu.Unlock()
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "job", "uid-job"), desired(SourceFile, "web", "uid-web")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "web"); p.Status.Phase != v1.PodRunning {
			t.Errorf("second pod %s %s: a finished pod must not count for admission", p.Status.Phase, p.Status.Reason)
		}
		// Deleted as any pod.
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "web", "uid-web")}})
		synctest.Wait()
		if _, ok := c.Pod("default", "job"); ok || fmt.Sprint(rt.forgot) != "[uid-job]" {
			t.Errorf("finished pod after its delete: listed %v, forgotten %v", ok, rt.forgot)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile)
		rt.adopt = map[string]v1.PodStatus{"uid-job": {Phase: v1.PodFailed}}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "job", "uid-job")}})
		synctest.Wait()
		time.Sleep(2 * steadyResync)
		synctest.Wait()
		if rt.syncs("uid-job") != 0 || s.ensured["uid-job"] != 0 || fmt.Sprint(rt.killed, s.destroyed) != "[uid-job] [uid-job]" {
			t.Errorf("after a restart: %d syncs, slice ensured %d times, killed %v, destroyed %v; want no sync, no slice, one release", rt.syncs("uid-job"), s.ensured["uid-job"], rt.killed, s.destroyed)
		}
		if p, _ := c.Pod("default", "job"); p.Status.Phase != v1.PodFailed {
			t.Errorf("phase %s after a restart, want the relisted Failed", p.Status.Phase)
		}
	})
}
