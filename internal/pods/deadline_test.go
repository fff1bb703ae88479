package pods

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestActiveDeadline: a pod past spec.activeDeadlineSeconds (counted from its startTime) is
// stopped and Failed with reason DeadlineExceeded and a Normal event, at its deadline; a
// deadline set on a running pod (an API update) takes effect at once, not at the next steady
// resync.
func TestActiveDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}, started: time.Now()}
		log := &podEvents{pods: map[string]*v1.Pod{}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceCluster}, Recorder: log})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		limited := desired(SourceCluster, "limited", "uid-limited")
		limited.Pod.Spec.ActiveDeadlineSeconds = new(int64(90))
		updated := desired(SourceCluster, "updated", "uid-updated")
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{limited, updated}})
		synctest.Wait()

		time.Sleep(89 * time.Second)
		synctest.Wait()
		if p, _ := c.Pod("default", "limited"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("before its deadline: %s %s", p.Status.Phase, p.Status.Reason)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		p, _ := c.Pod("default", "limited")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("after its deadline: %s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		if fmt.Sprint(rt.killed, s.destroyed, rt.forgot) != "[uid-limited] [uid-limited] [uid-limited]" {
			t.Errorf("killed %v destroyed %v forgot %v", rt.killed, s.destroyed, rt.forgot)
		}
		if log.pods["DeadlineExceeded"] == nil {
			t.Error("no DeadlineExceeded event")
		}

		// 91 s after its start the other pod gets a 5 s deadline (the e2e spec's update).
		short := desired(SourceCluster, "updated", "uid-updated")
		short.Pod.Spec.ActiveDeadlineSeconds = new(int64(5))
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{limited, short}})
		time.Sleep(2 * busyResync)
		synctest.Wait()
		if p, _ := c.Pod("default", "updated"); p.Status.Reason != "DeadlineExceeded" {
			t.Errorf("a deadline set on a running pod: %s %s, want it failed within seconds", p.Status.Phase, p.Status.Reason)
		}
		synced := rt.syncs("uid-limited")
		time.Sleep(2 * steadyResync)
		synctest.Wait()
		if rt.syncs("uid-limited") != synced || len(rt.killed) != 2 {
			t.Errorf("a failed pod was synced again (%d → %d) or killed again (%v)", synced, rt.syncs("uid-limited"), rt.killed)
		}
	})
}
