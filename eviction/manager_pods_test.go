package eviction

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// rearmNotifier is a notifier that counts Rearm calls and otherwise waits.
type rearmNotifier struct{ rearms atomic.Int64 }

func (r *rearmNotifier) Name() string { return "rearm" }

func (r *rearmNotifier) Run(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return nil
}

func (r *rearmNotifier) Rearm() { r.rearms.Add(1) }

func TestManagerPodsChangedRearmsAndRunsACycleAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "5Gi"}
		n := &rearmNotifier{}
		m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"}, n, wakeNotifier{ch: make(chan struct{})})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		go m.Run(ctx)
		synctest.Wait()
		check := func(step string, cycles int, rearms int64) {
			t.Helper()
			if got, _ := f.get(); got != cycles {
				t.Errorf("%s: %d cycles, want %d", step, got, cycles)
			}
			if got := n.rearms.Load(); got != rearms {
				t.Errorf("%s: %d re-arms, want %d", step, got, rearms)
			}
		}
		check("start", 1, 0)

		m.PodsChanged()
		synctest.Wait()
		check("one change", 2, 1)
		if d := time.Since(start); d != 0 {
			t.Errorf("the cycle ran %v after the change, want at once", d)
		}

		// A burst while a cycle runs: the cycle started by the first change is stuck in its
		// observation; nine more changes arrive; they coalesce into one more re-arm and cycle.
		gate := make(chan struct{})
		f.set(func(f *fakeNode) { f.block = gate })
		m.PodsChanged()
		synctest.Wait()
		check("burst, first change", 3, 2)
		for range 9 {
			m.PodsChanged()
		}
		close(gate)
		synctest.Wait()
		check("burst coalesced", 4, 3)
		if d := time.Since(start); d != 0 {
			t.Errorf("the burst was handled %v after it, want at once", d)
		}

		// The periodic tick goes on, without re-arming.
		time.Sleep(DefaultMonitoringInterval)
		synctest.Wait()
		check("tick", 5, 3)
	})
}

func TestManagerPodsChangedDuringCleanupNeedsNoExtraCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "500Mi", cleanup: 3 * time.Second,
			pods: []ActivePod{activePod("hog", defaultPriority, "")}, usage: map[string]string{"hog": "400Mi"}}
		n := &rearmNotifier{}
		m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"}, n)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)
		synctest.Wait()
		if _, ev := f.get(); len(ev) != 1 {
			t.Fatalf("evicted %v, want the hog", ev)
		}
		f.set(func(f *fakeNode) { f.available = "5Gi" })
		// The controller reports the evicted pod's change while the loop waits for its cleanup.
		m.PodsChanged()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got, _ := f.get(); got != 2 {
			t.Errorf("%d cycles, want 2: the cycle after the cleanup handles the change", got)
		}
		if got := n.rearms.Load(); got != 1 {
			t.Errorf("%d re-arms, want 1", got)
		}
	})
}
