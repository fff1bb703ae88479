package eviction

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/health"
)

// fakeNode is the world the manager sees: memory available, pods, an evictor.
type fakeNode struct {
	mu        sync.Mutex
	available string // memory.available of 10Gi
	diskAvail string // nodefs.available of 100Gi; "" for none
	pods      []ActivePod
	usage     map[string]string // pod name → working set
	evicted   []string
	cleanAt   map[string]time.Time // pod UID → when it counts as cleaned up
	cleanup   time.Duration
	observes  int
	block     chan struct{} // when set, Observe blocks on it (a hung read)
	reclaimed [][]ReclaimStep
	reclaimTo string // disk available after reclaim
	// lastMessage and lastAnnotations are the last eviction's.
	lastMessage     string
	lastAnnotations map[string]string
}

func (f *fakeNode) observe(now time.Time) (Observations, []Unavailable) {
	f.mu.Lock()
	block := f.block
	f.observes++
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	obs := Observations{SignalMemoryAvailable: {Available: resource.MustParse(f.available), Capacity: resource.MustParse("10Gi"), Time: now}}
	if f.diskAvail != "" {
		obs[SignalNodeFsAvailable] = Observation{Available: resource.MustParse(f.diskAvail), Capacity: resource.MustParse("100Gi"), Time: now}
	}
	return obs, nil
}

func (f *fakeNode) ActivePods() []ActivePod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ActivePod
	for _, p := range f.pods {
		if !contains(f.evicted, p.Pod.Name) {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (f *fakeNode) podUsage(p ActivePod) *PodUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.usage[p.Pod.Name]
	if !ok {
		return nil
	}
	return &PodUsage{Memory: resource.MustParse(u)}
}

func (f *fakeNode) EvictPod(_ context.Context, pod *v1.Pod, _ time.Duration, msg string, ann map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evicted = append(f.evicted, pod.Name)
	f.lastMessage, f.lastAnnotations = msg, ann
	f.cleanAt[string(pod.UID)] = time.Now().Add(f.cleanup)
	return nil
}

func (f *fakeNode) PodCleanedUp(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !time.Now().Before(f.cleanAt[uid])
}

func (f *fakeNode) reclaim(_ context.Context, steps []ReclaimStep) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reclaimed = append(f.reclaimed, steps)
	f.diskAvail = f.reclaimTo
	return nil
}

func (f *fakeNode) set(fn func(f *fakeNode)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeNode) get() (observes int, evicted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.observes, append([]string(nil), f.evicted...)
}

// logBuffer collects log records for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTestManager(t *testing.T, f *fakeNode, hard map[string]string, notifiers ...Notifier) (*Manager, *logBuffer) {
	t.Helper()
	th, err := ParseThresholdConfig(nil, hard, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.cleanAt == nil {
		f.cleanAt = map[string]time.Time{}
	}
	logs := &logBuffer{}
	m, err := NewManager(ManagerOptions{
		Config:    Config{Thresholds: th, PressureTransitionPeriod: time.Minute, PriorityClasses: map[string]int32{"infra": SystemCriticalPriority}},
		Pods:      f,
		Evictor:   f,
		Reclaim:   f.reclaim,
		Notifiers: notifiers,
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe:   f.observe,
		PodUsage:  f.podUsage,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, logs
}

func activePod(name string, prio int32, class string) ActivePod {
	p := newPod(name, prio, []v1.Container{newContainer("c", newResourceList("", "100Mi", ""), nil)}, nil)
	if class != "" {
		p.Spec.Priority = nil
		p.Spec.PriorityClassName = class
	}
	return ActivePod{Pod: p, CgroupPath: "/kubepods.slice/" + name}
}

func TestManagerTicksAtTheMonitoringInterval(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		run      time.Duration
		want     int
	}{
		{"default 10s", 0, 25 * time.Second, 3},
		{"configured 2s", 2 * time.Second, 5 * time.Second, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeNode{available: "5Gi"}
				m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
				if tt.interval > 0 {
					m.interval = tt.interval
				}
				ctx, cancel := context.WithCancel(t.Context())
				go m.Run(ctx)
				time.Sleep(tt.run)
				synctest.Wait()
				if n, _ := f.get(); n != tt.want {
					t.Errorf("%d cycles in %v, want %d", n, tt.run, tt.want)
				}
				cancel()
			})
		})
	}
}

// wakeNotifier calls wake whenever something is sent on ch.
type wakeNotifier struct{ ch chan struct{} }

func (w wakeNotifier) Name() string { return "fake" }
func (w wakeNotifier) Run(ctx context.Context, wake func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.ch:
			wake()
		}
	}
}

type missingNotifier struct{}

func (missingNotifier) Name() string { return "missing" }
func (missingNotifier) Run(context.Context, func()) error {
	return fmt.Errorf("psi: %w", ErrUnavailable)
}

func TestManagerWakesAtOnceOnPressureEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "5Gi", usage: map[string]string{"hog": "4Gi", "ok": "50Mi"}}
		f.pods = []ActivePod{activePod("ok", defaultPriority, ""), activePod("hog", defaultPriority, "")}
		w := wakeNotifier{ch: make(chan struct{})}
		m, logs := newTestManager(t, f, map[string]string{"memory.available": "1Gi"}, w, missingNotifier{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)
		synctest.Wait()
		start := time.Now()

		time.Sleep(3 * time.Second)
		f.set(func(f *fakeNode) { f.available = "500Mi" })
		w.ch <- struct{}{}
		synctest.Wait()
		if _, ev := f.get(); fmt.Sprint(ev) != "[hog]" {
			t.Fatalf("after a pressure event evicted %v, want [hog] at once", ev)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("eviction %v after start, want 3s (no wait for the 10s tick)", got)
		}
		if !strings.Contains(logs.String(), "notifier=missing") {
			t.Errorf("a missing notifier is not logged:\n%s", logs)
		}
	})
}

func TestManagerEvictsOnePodPerCycleAndWaitsForCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "500Mi", cleanup: 3 * time.Second,
			usage: map[string]string{"hog": "4Gi", "big": "2Gi", "crit": "6Gi", "infra": "5Gi"}}
		f.pods = []ActivePod{activePod("big", defaultPriority, ""), activePod("hog", defaultPriority, ""),
			activePod("crit", 0, "system-node-critical"), activePod("infra", 0, "infra")}
		m, logs := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
		met := &fakeMetrics{}
		m.o.Metrics = met
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)
		synctest.Wait()
		if _, ev := f.get(); fmt.Sprint(ev) != "[hog]" {
			t.Fatalf("first cycle evicted %v, want [hog] only (one pod per cycle, critical pods skipped)", ev)
		}
		// Cleanup takes 3s, polled every 1s: the next cycle runs at 3s, not at the 10s tick.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, ev := f.get(); len(ev) != 1 {
			t.Fatalf("evicted %v before the first pod was cleaned up", ev)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, ev := f.get(); fmt.Sprint(ev) != "[hog big]" {
			t.Fatalf("after cleanup evicted %v, want [hog big]", ev)
		}
		// Only critical pods left: never evicted, however long the pressure lasts.
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, ev := f.get(); fmt.Sprint(ev) != "[hog big]" {
			t.Errorf("evicted %v, want no critical pod", ev)
		}
		for _, want := range []string{"evicting pod", "pod=default/hog", "pod_uid=hog", "signal=memory.available", "every pod is critical"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("logs lack %q:\n%s", want, logs)
			}
		}
		rec, ok := m.LastEviction()
		if !ok || rec.Pod != "default/big" || rec.Signal != SignalMemoryAvailable {
			t.Errorf("LastEviction = %+v, %v", rec, ok)
		}
		if !strings.Contains(m.Summary(), "MemoryPressure; 2 evictions, last default/big (memory.available)") {
			t.Errorf("Summary = %q", m.Summary())
		}
		met.mu.Lock()
		defer met.mu.Unlock()
		if fmt.Sprint(met.evicted) != "[memory.available memory.available]" {
			t.Errorf("metrics: evicted %v", met.evicted)
		}
		if got := m.Conditions(); fmt.Sprint(got) != "[MemoryPressure]" {
			t.Errorf("conditions %v, want MemoryPressure only", got)
		}
	})
}

// fakeMetrics records what the manager reports.
type fakeMetrics struct {
	mu      sync.Mutex
	evicted []string
}

func (f *fakeMetrics) Evicted(signal string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evicted = append(f.evicted, signal)
}

func TestManagerNodeConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "5Gi"}
		m, logs := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		// Before the first cycle the conditions exist, false, as the kubelet reports them.
		for c, w := range PressureWarnables {
			if ws := m.Health().Get(w); ws.Status != health.StatusHealthy || !ws.Since.Equal(start) {
				t.Errorf("%s before the first cycle: %+v, want false since the start", c, ws)
			}
		}
		go m.Run(ctx)
		synctest.Wait()
		check := func(name string, wantTrue bool, transition, lastCycle time.Duration) {
			t.Helper()
			got := m.Conditions()
			if HasCondition(got, v1.NodeMemoryPressure) != wantTrue {
				t.Errorf("%s: Conditions = %v, want MemoryPressure %v", name, got, wantTrue)
			}
			for c, w := range PressureWarnables {
				ws := m.Health().Get(w)
				if ws.LastReport.Sub(start) != lastCycle {
					t.Errorf("%s: %s last reported at %v, want at the last cycle, %v", name, c, ws.LastReport.Sub(start), lastCycle)
				}
				if c != v1.NodeMemoryPressure {
					if ws.Status != health.StatusHealthy {
						t.Errorf("%s: %s = %s", name, c, ws.Status)
					}
					continue
				}
				if (ws.Status == health.StatusUnhealthy) != wantTrue || ws.Since.Sub(start) != transition {
					t.Errorf("%s: MemoryPressure %s since %v, want %v since %v", name, ws.Status, ws.Since.Sub(start), wantTrue, transition)
				}
			}
		}
		check("start", false, 0, 0)
		time.Sleep(15 * time.Second)
		f.set(func(f *fakeNode) { f.available = "500Mi" })
		time.Sleep(10 * time.Second) // tick at 20s sees the pressure
		synctest.Wait()
		check("pressure", true, 20*time.Second, 20*time.Second)
		f.set(func(f *fakeNode) { f.available = "5Gi" })
		time.Sleep(20 * time.Second) // ticks at 30s and 40s: relieved, still within the transition period
		synctest.Wait()
		check("within the transition period", true, 20*time.Second, 40*time.Second)
		time.Sleep(40 * time.Second) // last observed at 20s: the 80s tick is 1m after it and clears it
		synctest.Wait()
		check("after the transition period", false, 80*time.Second, 80*time.Second)
		if n := strings.Count(logs.String(), "memory pressure unhealthy") + strings.Count(logs.String(), "memory pressure healthy again"); n != 2 {
			t.Errorf("%d condition change records, want 2:\n%s", n, logs)
		}
	})
}

func TestManagerReclaimsNodeLevelFirst(t *testing.T) {
	tests := []struct {
		name      string
		reclaimTo string
		evicted   string
	}{
		{"reclaim is enough", "50Gi", "[]"},
		{"reclaim is not enough", "5Gi", "[hog]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeNode{available: "5Gi", diskAvail: "5Gi", reclaimTo: tt.reclaimTo, usage: map[string]string{"hog": "1Gi"}}
			f.pods = []ActivePod{activePod("hog", defaultPriority, "")}
			m, _ := newTestManager(t, f, map[string]string{"nodefs.available": "10%"})
			m.Synchronize(t.Context())
			if fmt.Sprint(f.reclaimed) != "[[DeleteAllUnusedContainers DeleteUnusedImages]]" {
				t.Errorf("reclaimed %v", f.reclaimed)
			}
			if _, ev := f.get(); fmt.Sprint(ev) != tt.evicted {
				t.Errorf("evicted %v, want %s", ev, tt.evicted)
			}
		})
	}
}

func TestManagerHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNode{available: "5Gi"}
		m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
		if m.Health().Get(LoopWarnable).Healthy() {
			t.Error("healthy before Run")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		if !m.Health().Get(LoopWarnable).Healthy() {
			t.Error("a ticking loop is unhealthy")
		}
		// A read that hangs stalls the loop: unhealthy once HealthBound passes.
		block := make(chan struct{})
		f.set(func(f *fakeNode) { f.block = block })
		time.Sleep(m.HealthBound())
		synctest.Wait()
		if !m.Health().Get(LoopWarnable).Healthy() {
			t.Error("unhealthy before the bound passed")
		}
		time.Sleep(m.interval + time.Second)
		if m.Health().Get(LoopWarnable).Healthy() {
			t.Errorf("a loop stalled for %v is healthy", m.HealthBound()+m.interval+time.Second)
		}
		close(block)
		f.set(func(f *fakeNode) { f.block = nil })
		synctest.Wait()
		if !m.Health().Get(LoopWarnable).Healthy() {
			t.Error("unhealthy after the loop resumed")
		}
	})
}

func TestNewManagerRejectsBadOptions(t *testing.T) {
	f := &fakeNode{}
	tests := []struct {
		name string
		o    ManagerOptions
	}{
		{"no pods", ManagerOptions{Evictor: f}},
		{"no evictor", ManagerOptions{Pods: f}},
		{"negative interval", ManagerOptions{Pods: f, Evictor: f, MonitoringInterval: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewManager(tt.o); err == nil {
				t.Error("no error")
			}
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkSynchronize1000Pods is one cycle of the manager with 1000 pods under memory
// pressure (fake observations and usage; the real cgroup reads are the readers' benchmarks):
// decision, ranking, message and the eviction call.
func BenchmarkSynchronize1000Pods(b *testing.B) {
	f := &fakeNode{available: "500Mi", usage: map[string]string{}, cleanAt: map[string]time.Time{}}
	for i := range 1000 {
		name := fmt.Sprintf("pod-%04d", i)
		f.pods = append(f.pods, activePod(name, int32(i%3), ""))
		f.usage[name] = fmt.Sprintf("%dMi", 10+i%500)
	}
	th, err := ParseThresholdConfig(nil, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewManager(ManagerOptions{Config: Config{Thresholds: th}, Pods: f, Evictor: f, Observe: f.observe, PodUsage: f.podUsage})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f.set(func(f *fakeNode) { f.evicted = f.evicted[:0] })
		if len(m.Synchronize(b.Context())) != 1 {
			b.Fatal("no eviction")
		}
	}
}

// TestManagerNamesOffendingContainers: with ContainerMemory the eviction message and
// annotations name the containers using more than their request, in the order it gives them,
// exactly as the kubelet's evictionMessage words them; a pod whose containers cannot be read
// is evicted with the node-level sentences only.
func TestManagerNamesOffendingContainers(t *testing.T) {
	hog := newPod("hog", defaultPriority, []v1.Container{
		newContainer("app", newResourceList("", "100Mi", ""), nil),
		newContainer("hog", newResourceList("", "10Mi", ""), nil),
	}, nil)
	tests := []struct {
		name    string
		read    func(context.Context, ActivePod) ([]ContainerUsage, error)
		wantMsg string
		wantAnn map[string]string
	}{
		{name: "measured", read: func(_ context.Context, p ActivePod) ([]ContainerUsage, error) {
			return []ContainerUsage{{Name: "app", Memory: q("50Mi")}, {Name: "hog", Memory: q("3Gi")}}, nil
		},
			wantMsg: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. " +
				"Container hog was using 3Gi, request is 10Mi, has larger consumption of memory. ",
			wantAnn: map[string]string{"offending_containers": "hog", "offending_containers_usage": "3Gi", "starved_resource": "memory"}},
		{name: "unreadable containers", read: func(context.Context, ActivePod) ([]ContainerUsage, error) {
			return nil, fmt.Errorf("gone: %w", ErrUnavailable)
		},
			wantMsg: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. ",
			wantAnn: map[string]string{"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeNode{available: "512Mi", usage: map[string]string{"hog": "3Gi"}}
			f.pods = []ActivePod{{Pod: hog, CgroupPath: "/kubepods.slice/hog"}}
			m, _ := newTestManager(t, f, map[string]string{"memory.available": "1Gi"})
			m.o.ContainerMemory = tt.read
			if got := m.Synchronize(t.Context()); len(got) != 1 {
				t.Fatalf("evicted %v", got)
			}
			if f.lastMessage != tt.wantMsg || !maps.Equal(f.lastAnnotations, tt.wantAnn) {
				t.Errorf("message %q\n   want %q\nannotations %v\n       want %v", f.lastMessage, tt.wantMsg, f.lastAnnotations, tt.wantAnn)
			}
		})
	}
}
