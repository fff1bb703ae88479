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

func TestManagerPodsChangedRearmsAtOnceAndSpacesCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "5Gi"}
		n := &rearmNotifier{}
		m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"}, n, wakeNotifier{ch: make(chan struct{})})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
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

		// A change right after a cycle re-arms at once; its cycle comes PodsChangedSpacing
		// after the last one started.
		m.PodsChanged()
		synctest.Wait()
		check("change right after a cycle", 1, 1)
		time.Sleep(PodsChangedSpacing)
		synctest.Wait()
		check("change right after a cycle, spaced", 2, 1)

		// A change after a quiet spell runs its cycle at once.
		time.Sleep(PodsChangedSpacing)
		changed := time.Now()
		m.PodsChanged()
		synctest.Wait()
		check("one change", 3, 2)
		if d := time.Since(changed); d != 0 {
			t.Errorf("the cycle ran %v after the change, want at once", d)
		}

		// A burst while a cycle runs: the cycle started by the first change is stuck in its
		// observation; nine more changes arrive; they coalesce into one more re-arm (at once)
		// and one more cycle (spaced).
		time.Sleep(PodsChangedSpacing)
		gate := make(chan struct{})
		f.set(func(f *fakeNode) { f.block = gate })
		burst := time.Now()
		m.PodsChanged()
		synctest.Wait()
		check("burst, first change", 4, 3)
		for range 9 {
			m.PodsChanged()
		}
		close(gate)
		synctest.Wait()
		check("burst, re-armed", 4, 4)
		time.Sleep(PodsChangedSpacing)
		synctest.Wait()
		check("burst coalesced", 5, 4)
		if d := time.Since(burst); d != PodsChangedSpacing {
			t.Errorf("the burst was handled %v after it, want %v", d, PodsChangedSpacing)
		}

		// The periodic tick goes on, without re-arming.
		time.Sleep(DefaultMonitoringInterval)
		synctest.Wait()
		check("tick", 6, 4)
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
