package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// testLogWriter sends log records to t.Log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func evictionTestPod(name string, requests, limits v1.ResourceList, command ...string) pods.Desired {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("evict-it-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Command: command,
			Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}}},
	}
	return pods.Desired{Pod: pod, Source: pods.SourceFile, Origin: name + ".yaml"}
}

// TestIntegrationEvictionEndToEnd: with a node whose kubepods.slice gets a 400 MiB limit and
// memory.available<150Mi (so allocatableMemory.available<150Mi on kubepods.slice), a memory hog
// pod (Burstable, 300 MiB) next to a well-behaved Guaranteed pod: the hog is evicted
// (Failed/Evicted, slice gone, not restarted), the Guaranteed pod keeps running, MemoryPressure
// turns true and back to false after the transition period, and admission refuses a BestEffort
// pod while it is true.
func TestIntegrationEvictionEndToEnd(t *testing.T) {
	env := systemdtest.Require(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
	sd, err := units.Connect(ctx, units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() }) // after the cleanups below (LIFO), which still need it

	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Eviction.Hard = map[string]string{"memory.available": "150Mi"}
	cfg.Eviction.MonitoringInterval = time.Second
	cfg.Eviction.PressureTransitionPeriod = 3 * time.Second
	capacity, err := slices.ReadCapacity("/proc", "/sys", cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	capacity.Memory = 400 << 20 // kubepods.slice's limit: capacity − reservations (none)
	mcfg, err := cfg.SlicesConfig(capacity, sd.Mode().V2())
	if err != nil {
		t.Fatal(err)
	}
	mgr := hierarchy.New(sd, hierarchy.NewCgroupFS(env.CgroupRoot), mcfg, log)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = sd.Stop(context.Background(), s)
		}
	})
	rt, err := newRuntime(ctx, cfg, sd, capacity, mcfg, &record.FakeRecorder{}, worker.Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	alloc := slices.NodeAllocatable(capacity, mcfg.Node.SystemReserved, mcfg.Node.KubeReserved, mcfg.Node.HardEviction)
	tracker := health.New(health.Options{Logger: log})
	admitter := admission.Admitter{Node: func() admission.NodeState {
		return admission.NodeState{Allocatable: admission.WithMaxPods(alloc, cfg.Node.MaxPods), PriorityClasses: cfg.Eviction.PriorityClasses,
			Conditions: eviction.PressureConditions(tracker.State())}
	}}
	records := pods.NewEvictionRecords(filepath.Join(cfg.StateDir, pods.EvictionsDir))
	ctrl := pods.NewController(pods.ControllerOptions{Slices: mgr, Runtime: rt.worker, Admitter: admitter, Logger: log, WantSources: []string{pods.SourceFile}, Evictions: records})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ctrlCtx, stopCtrl := context.WithCancel(ctx)
	ctrlDone := make(chan struct{})
	wg.Go(func() { mgr.Run(ctx) })
	wg.Go(func() { ctrl.Run(ctrlCtx); close(ctrlDone) })

	mem := func(s string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse(s)}
	}
	good := evictionTestPod("steady", mem("50Mi"), mem("50Mi"), "/usr/bin/sleep", "100000")
	// dd fills a 300 MiB buffer (touching every page) and then blocks writing it to a pipe
	// nobody reads: 300 MiB resident until stopped.
	hog := evictionTestPod("hog", v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}, nil,
		"/bin/sh", "-c", "dd if=/dev/zero bs=300M count=1 iflag=fullblock status=none | sleep 100000")
	snap := pods.Snapshot{Source: pods.SourceFile, Pods: []pods.Desired{good}}
	ctrl.Update(snap)
	waitFor(t, 20*time.Second, "the steady pod running", func() bool {
		p, ok := ctrl.Pod("default", "steady")
		return ok && p.Status.Phase == v1.PodRunning
	})

	evm, err := newEvictionManager(evictionOptions{Config: cfg, CgroupRoot: env.CgroupRoot, ProcRoot: "/proc",
		Mode: sd.Mode(), Controller: ctrl, Logger: log, Health: tracker})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { evm.Run(ctx) })
	snap.Pods = append(snap.Pods, hog)
	ctrl.Update(snap)
	waitFor(t, 30*time.Second, "the hog evicted", func() bool {
		p, ok := ctrl.Pod("default", "hog")
		return ok && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
	})
	if !eviction.HasCondition(evm.Conditions(), v1.NodeMemoryPressure) {
		t.Errorf("conditions right after the eviction: %v, want MemoryPressure", evm.Conditions())
	}
	// Admission under MemoryPressure refuses a BestEffort pod.
	be := evictionTestPod("besteffort", nil, nil, "/usr/bin/sleep", "100000")
	ctrl.Update(pods.Snapshot{Source: pods.SourceFile, Pods: append(append([]pods.Desired(nil), snap.Pods...), be)})
	if p, ok := ctrl.Pod("default", "besteffort"); !ok || p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "MemoryPressure") {
		t.Errorf("BestEffort pod under MemoryPressure: %+v", p.Status)
	}

	h, _ := ctrl.Pod("default", "hog")
	if !strings.HasPrefix(h.Status.Message, "The node was low on resource: memory. ") {
		t.Errorf("hog message %q", h.Status.Message)
	}
	// The status turns Failed/Evicted when the stop is issued; the slice goes once it stopped.
	waitFor(t, 30*time.Second, "the hog's slice destroyed", func() bool { return ctrl.PodCleanedUp(string(hog.Pod.UID)) })
	rec, ok := evm.LastEviction()
	if !ok || rec.Pod != "default/hog" || rec.Signal != eviction.SignalAllocatableMemoryAvailable {
		t.Errorf("last eviction %+v", rec)
	}
	waitFor(t, 20*time.Second, "MemoryPressure false after the transition period", func() bool {
		return len(evm.Conditions()) == 0
	})
	var memCond v1.NodeCondition
	for _, c := range nodeConditions(tracker.State()) {
		if c.Type == v1.NodeMemoryPressure {
			memCond = c
		}
	}
	if memCond.Status != v1.ConditionFalse || time.Since(memCond.LastTransitionTime.Time) > 20*time.Second {
		t.Errorf("MemoryPressure condition %+v", memCond)
	}
	p, _ := ctrl.Pod("default", "steady")
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("the Guaranteed pod is %s, want Running", p.Status.Phase)
	}
	// Not restarted: still Failed a few monitoring intervals later.
	if h, _ := ctrl.Pod("default", "hog"); h.Status.Phase != v1.PodFailed {
		t.Errorf("the hog came back: %s", h.Status.Phase)
	}
	t.Logf("STATUS summary: %s", evm.Summary())

	// slicelet restarts (a new controller over the same state): the eviction was on disk, so
	// the hog stays Failed/Evicted and is never started again, while the steady pod is adopted.
	stopCtrl()
	<-ctrlDone
	ctrl = pods.NewController(pods.ControllerOptions{Slices: mgr, Runtime: rt.worker, Admitter: admitter, Logger: log, WantSources: []string{pods.SourceFile}, Evictions: records})
	wg.Go(func() { ctrl.Run(ctx) })
	ctrl.Update(snap)
	waitFor(t, 20*time.Second, "the steady pod adopted after the restart", func() bool {
		p, ok := ctrl.Pod("default", "steady")
		return ok && p.Status.Phase == v1.PodRunning
	})
	time.Sleep(2 * cfg.Eviction.MonitoringInterval)
	if h, ok := ctrl.Pod("default", "hog"); !ok || h.Status.Phase != v1.PodFailed || h.Status.Reason != "Evicted" || !ctrl.PodCleanedUp(string(hog.Pod.UID)) {
		t.Errorf("the evicted hog after a restart: %s/%s, slice gone %v; want Failed/Evicted and no slice", h.Status.Phase, h.Status.Reason, ctrl.PodCleanedUp(string(hog.Pod.UID)))
	}

	// Clean up the pods through the controller; the eviction record goes with the hog.
	ctrl.Update(pods.Snapshot{Source: pods.SourceFile})
	waitFor(t, 30*time.Second, "pods deleted", func() bool { return len(ctrl.Pods()) == 0 })
	if left, err := records.Load(); err != nil || len(left) != 0 {
		t.Errorf("eviction records after the pods were deleted: %v %v", left, err)
	}
}

// waitFor polls cond every 50 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
