package eviction_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	stdslices "slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// hogEnv makes the test binary a memory hog instead of running tests: it allocates the MiB it
// names, 4 MiB every 10 ms, touching every page, then waits to be stopped.
const hogEnv = "SLICELET_EVICTION_TEST_HOG_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(hogEnv); v != "" {
		os.Exit(runHog(v))
	}
	os.Exit(systemdtest.Main(m))
}

var hogMemory [][]byte

func runHog(v string) int {
	mib, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := 0; i < mib; i += 4 {
		b := make([]byte, 4<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		hogMemory = append(hogMemory, b)
		time.Sleep(10 * time.Millisecond)
	}
	select {}
}

// recordingEvictor stops the hog's unit and records when the stop was issued.
type recordingEvictor struct {
	sd   *units.Manager
	unit string
	at   chan time.Time
}

func (e *recordingEvictor) EvictPod(ctx context.Context, pod *v1.Pod, _ time.Duration, _ string, _ map[string]string) error {
	e.at <- time.Now()
	return e.sd.Stop(ctx, e.unit)
}
func (e *recordingEvictor) PodCleanedUp(string) bool { return true }

type onePod struct{ p eviction.ActivePod }

func (o onePod) ActivePods() []eviction.ActivePod { return []eviction.ActivePod{o.p} }

// reaction runs one eviction manager against a real memory hog in kubepods.slice and returns
// the time from allocatableMemory.available crossing the threshold to the hog's stop being
// issued.
func reaction(t testing.TB, sd *units.Manager, root string, pollingOnly bool, name string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	mode := sd.Mode()
	const kubepods = "kubepods.slice"
	thresholds := []eviction.Threshold{{Signal: eviction.SignalAllocatableMemoryAvailable,
		Operator: eviction.OpLessThan, Value: eviction.ThresholdValue{Quantity: resource.NewQuantity(128<<20, resource.BinarySI)}}}
	src := eviction.Sources{CgroupRoot: root, ProcRoot: "/proc", Mode: mode, KubepodsCgroup: "/" + kubepods}

	unit := "hog-" + name + ".service"
	ev := &recordingEvictor{sd: sd, unit: unit, at: make(chan time.Time, 4)}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "hog-" + "uid"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "hog"}}}}
	firstCycle := make(chan struct{})
	var once sync.Once
	var notifiers []eviction.Notifier
	if !pollingOnly {
		notifiers = eviction.PressureNotifiers(src, thresholds, slog.Default())
	}
	m, err := eviction.NewManager(eviction.ManagerOptions{
		Config:  eviction.Config{Thresholds: thresholds, PressureTransitionPeriod: time.Second},
		Sources: src, Pods: onePod{eviction.ActivePod{Pod: pod, CgroupPath: "/" + kubepods + "/" + unit}},
		Evictor: ev, Notifiers: notifiers, MonitoringInterval: eviction.DefaultMonitoringInterval,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Observe: func(now time.Time) (eviction.Observations, []eviction.Unavailable) {
			defer once.Do(func() { close(firstCycle) })
			return src.Observe(now)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.Run(ctx) })
	// The loop logs through t: it must have returned before the test does.
	defer func() {
		cancel()
		wg.Wait()
	}()
	<-firstCycle

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	props := []units.Property{
		{Name: "Slice", Value: kubepods},
		{Name: "ExecStart", Value: []units.Exec{{Path: exe, Args: []string{exe}}}},
		{Name: "Environment", Value: []string{hogEnv + "=200"}},
	}
	if mode.V2() {
		// cgroup v2: throttle the hog just above the threshold so that it stalls on memory
		// (PSI counts reclaim stalls, not usage).
		props = append(props, slices.SliceProperties(slices.ResourceConfig{Unified: map[string]string{"memory.high": strconv.Itoa(150 << 20)}}, mode)...)
	}
	crossed := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			o, err := eviction.ReadAllocatableMemory(root, mode, "/"+kubepods, time.Now())
			if err == nil && o.Available.Value() < 128<<20 {
				crossed <- time.Now()
				return
			}
			// ≈0.1 ms resolution: the kernel's notification can beat this poller, so a
			// reaction time at or below it reads as ~0 (or slightly negative).
			time.Sleep(100 * time.Microsecond)
		}
	}()
	if err := sd.StartService(ctx, unit, props); err != nil {
		t.Fatalf("start %s: %v", unit, err)
	}
	defer func() { _ = sd.Stop(context.Background(), unit) }()
	var at, cross time.Time
	select {
	case cross = <-crossed:
		select {
		case at = <-ev.at:
		case <-time.After(30 * time.Second):
			t.Fatal("the hog was not evicted within 30s")
		}
	case at = <-ev.at:
		// The kernel's notification beat the crossing poller and the hog is being stopped:
		// the reaction is below the poller's resolution.
		select {
		case cross = <-crossed:
		case <-time.After(time.Second):
			t.Logf("%s mode: evicted before the crossing poller saw the crossing", name)
			cross = at
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hog neither crossed the threshold nor was evicted within 30s")
	}
	d := at.Sub(cross)
	t.Logf("%s mode: threshold crossed at %s, stop issued %v later", name, cross.Format(time.StampMicro), d)
	return d
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// kubepodsForHog starts kubepods.slice limited to 256 MiB (the hog's 200 MiB crosses
// allocatableMemory.available<128Mi) and returns the PSI file that event mode relies on.
func kubepodsForHog(t testing.TB, sd *units.Manager, root string) string {
	t.Helper()
	limit := int64(256 << 20)
	if err := sd.StartSlice(t.Context(), "kubepods.slice", slices.SliceProperties(slices.ResourceConfig{Memory: &limit}, sd.Mode())); err != nil {
		t.Fatalf("start kubepods.slice: %v", err)
	}
	t.Cleanup(func() { _ = sd.Stop(context.Background(), "kubepods.slice") })
	if sd.Mode() == units.ModeUnified {
		return filepath.Join(root, "kubepods.slice", "memory.pressure")
	}
	return filepath.Join(root, "unified", "kubepods.slice", "memory.pressure")
}

// TestIntegrationPressureEventsWakeTheLoop: a real memory hog under kubepods.slice crossing
// allocatableMemory.available<128Mi is evicted before the 10 s tick in event mode (the only
// timing asserted); the polling-only run is the kubelet's behaviour, for comparison. The
// measured numbers come from BenchmarkEvictionReaction (docs/benchmarks.md).
func TestIntegrationPressureEventsWakeTheLoop(t *testing.T) {
	env := systemdtest.Require(t)
	sd, err := units.Connect(t.Context(), units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	psi := kubepodsForHog(t, sd, env.CgroupRoot)
	event := reaction(t, sd, env.CgroupRoot, false, "event")
	_, perr := os.Stat(psi)
	t.Logf("%s: %s exists: %v", env.Where, psi, perr == nil)
	if event >= eviction.DefaultMonitoringInterval {
		t.Errorf("event mode reacted in %v, not before the %v tick", event, eviction.DefaultMonitoringInterval)
	}
	polling := reaction(t, sd, env.CgroupRoot, true, "polling")
	t.Logf("%s (%v): threshold crossing → stop issued: event mode %v, polling-only %v", env.Where, sd.Mode(), event, polling)
}

// BenchmarkEvictionReaction is the eviction benchmark: the time from allocatableMemory.available
// crossing the threshold (a real memory hog in kubepods.slice) to the victim's stop being
// issued, in event mode (PSI / memcg threshold notifiers) and polling-only mode (the 10 s tick)
// in the same run, one round of each per iteration. Reported: the median and maximum of each mode in ms,
// and the speedup (polling median / event median).
func BenchmarkEvictionReaction(b *testing.B) {
	env := systemdtest.Require(b)
	sd, err := units.Connect(b.Context(), units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		b.Fatal(err)
	}
	defer sd.Close()
	kubepodsForHog(b, sd, env.CgroupRoot)
	var event, polling []time.Duration
	// b.Loop: the function runs once, so kubepods.slice is set up once for all rounds.
	for b.Loop() {
		event = append(event, reaction(b, sd, env.CgroupRoot, false, "event"))
		polling = append(polling, reaction(b, sd, env.CgroupRoot, true, "polling"))
	}
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	median := func(ds []time.Duration) time.Duration {
		s := stdslices.Clone(ds)
		stdslices.Sort(s)
		return s[len(s)/2]
	}
	em, pm := median(event), median(polling)
	b.ReportMetric(msOf(em), "event-p50-ms")
	b.ReportMetric(msOf(stdslices.Max(event)), "event-max-ms")
	b.ReportMetric(msOf(pm), "polling-p50-ms")
	b.ReportMetric(msOf(stdslices.Max(polling)), "polling-max-ms")
	// An event-mode reaction below the crossing poller's 0.1 ms resolution counts as 0.1 ms.
	b.ReportMetric(float64(pm)/float64(max(em, 100*time.Microsecond)), "speedup-x")
	b.Logf("%s (%v): event %v, polling %v", env.Where, sd.Mode(), event, polling)
}
