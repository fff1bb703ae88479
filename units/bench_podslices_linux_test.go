package units_test

// The pod slice benchmark: slicelet's path (hierarchy.Manager EnsurePod / DestroyPod over
// the real units.Manager) against the floor, raw go-systemd StartTransientUnit / StopUnit with
// exactly the properties slicelet sends, in the same run. It lives in units/ because only this
// directory may import go-systemd, and in package units_test so that it can import slices. It
// runs inside the throwaway systemd of units' TestMain (internal/testharness/systemdtest); hack/bench runs it
// and writes docs/benchmarks.md.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"runtime"
	stdslices "slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// Environment knobs of BenchmarkPodSlices.
const (
	// benchPodsEnv is the number of pod slices each path creates and destroys per iteration.
	benchPodsEnv = "SLICELET_BENCH_PODS"
	// benchBatchEnv is how many pods one batch holds; the two paths alternate batch by batch.
	benchBatchEnv = "SLICELET_BENCH_BATCH"
	// benchWorkersEnv is the worker count of the concurrent run.
	benchWorkersEnv = "SLICELET_BENCH_WORKERS"
)

// BenchmarkPodSlices creates and destroys N Burstable pod slices (100m/100Mi requests,
// 200m/200Mi limits) through slicelet's path and through the floor, and reports per-operation
// p50/p99, throughput (pods created and destroyed per second of wall time), the CPU systemd
// (PID 1) and this process spend per pod, and the ratio slicelet/floor. The node level
// (kubepods.slice and the QoS slices) is created once; each sub-benchmark's Manager adopts it.
//
// Sub-benchmarks:
//   - "sequential" and "workers=W": both paths in the same run, alternating batch by batch so
//     that machine noise hits both; one operation at a time, or W concurrent workers per path.
//     Both paths' connections are open throughout, so each pays for the other's idle
//     connections (systemd sends every signal to every client of its private socket).
//   - "slicelet-alone": slicelet's path with only its own connection open, as in production, one
//     operation at a time, timing each systemd and cgroupfs call the Manager makes ("bd-"
//     metrics).
//   - "conn-tax": the floor alone, its batches alternately with and without one idle
//     units.Manager connection open: what the other path's connection costs in the same-run
//     rows.
//   - "reduce-cpu": what the CPU reduction before a pod slice's stop costs. Three destroy
//     variants through units.Manager, interleaved batch by batch: SetProperties(CPUShares=2 or
//     CPUWeight=1) then Stop, as DestroyPod does today ("setprops"); the same value written to
//     cgroupfs then Stop ("cgroupfs"); Stop alone ("none").
//   - "population": the floor alone; the cost of a create and a destroy in the first batch (few
//     sibling slices) and the last one (about N siblings).
//
// Run with:
//
//	go test ./units -run '^$' -bench '^BenchmarkPodSlices$' -benchtime 1x
//
// SLICELET_BENCH_PODS (default 1000), SLICELET_BENCH_BATCH (25) and SLICELET_BENCH_WORKERS (8)
// change the shape; with -benchtime Nx every sub-benchmark repeats N times and reports over all
// repetitions.
func BenchmarkPodSlices(b *testing.B) {
	env := systemdtest.Require(b)
	n := envInt(b, benchPodsEnv, 1000)
	batch := min(envInt(b, benchBatchEnv, 25), n)
	workers := envInt(b, benchWorkersEnv, 8)
	capacity, err := slices.ReadCapacity("/proc", "/sys", "")
	if err != nil {
		b.Fatal(err)
	}
	// The systemd CPU metrics read PID 1's counters.
	if comm, err := os.ReadFile("/proc/1/comm"); err != nil || strings.TrimSpace(string(comm)) != "systemd" {
		b.Fatalf("PID 1 is %q (%v), not systemd: the systemd CPU figures would measure something else", strings.TrimSpace(string(comm)), err)
	}
	bn := &podBench{cgroupRoot: env.CgroupRoot, capacity: capacity, n: n, batch: batch, rec: &recorder{}}

	// The node level, created once; the slices outlive the connection that made them.
	ctx := context.Background()
	node := bn.openSlicelet(b)
	bn.mode = node.sd.Mode()
	node.close()
	defer func() {
		sd, err := units.Connect(ctx, units.Options{Logger: slog.New(slog.DiscardHandler), CgroupRoot: env.CgroupRoot})
		if err != nil {
			b.Errorf("cleanup: %v", err)
			return
		}
		defer sd.Close()
		for _, u := range []string{slices.QOSSliceName(v1.PodQOSBurstable), slices.QOSSliceName(v1.PodQOSBestEffort), slices.KubepodsSlice} {
			if err := sd.Stop(ctx, u); err != nil {
				b.Errorf("cleanup: %v", err)
			}
		}
	}()

	b.Logf("pods=%d batch=%d workers=%d mode=%s gomaxprocs=%d", n, batch, workers, bn.mode, runtime.GOMAXPROCS(0))
	b.Run("sequential", func(b *testing.B) { bn.pair(b, 1) })
	b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) { bn.pair(b, workers) })
	b.Run("slicelet-alone", bn.sliceletAlone)
	b.Run("conn-tax", bn.connTax)
	b.Run("reduce-cpu", bn.reduceCPU)
	b.Run("population", bn.population)
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// podBench holds what the runs share.
type podBench struct {
	cgroupRoot string
	capacity   slices.Capacity
	mode       units.Mode
	n          int
	batch      int
	// rec times the Manager's calls; it is off except in slicelet-alone, and off costs an
	// atomic load per call.
	rec *recorder
	// seq makes UIDs unique across iterations and sub-benchmarks.
	seq atomic.Uint32
}

// sliceletEnv is slicelet as the daemon runs it: one units.Manager connection, a hierarchy.Manager
// on it (started: the node level adopted) and its Run loop serving the QoS reconciles that
// EnsurePod and DestroyPod request.
type sliceletEnv struct {
	sd    *units.Manager
	m     *hierarchy.Manager
	close func()
}

func (bn *podBench) openSlicelet(b *testing.B) *sliceletEnv {
	b.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	sd, err := units.Connect(ctx, units.Options{Logger: quiet, CgroupRoot: bn.cgroupRoot})
	if err != nil {
		b.Fatal(err)
	}
	m := hierarchy.New(
		&timedSystemd{Systemd: sd, rec: bn.rec},
		&timedCgroupfs{Cgroupfs: hierarchy.NewCgroupFS(bn.cgroupRoot), rec: bn.rec},
		hierarchy.Config{
			Capacity: bn.capacity,
			Node:     slices.NodeConfig{Enforcement: slices.Enforcement{Pods: true}},
			Pod:      slices.DefaultOptions(),
		}, quiet)
	if err := m.Start(ctx); err != nil {
		sd.Close()
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { m.Run(runCtx); close(ran) }()
	var once sync.Once
	e := &sliceletEnv{sd: sd, m: m, close: func() {
		once.Do(func() {
			stop()
			<-ran
			sd.Close()
		})
	}}
	b.Cleanup(e.close)
	return e
}

// openFloor opens the floor's connection: go-systemd's own, on systemd's private socket like
// units.Manager's.
func (bn *podBench) openFloor(b *testing.B) *sddbus.Conn {
	b.Helper()
	c, err := sddbus.NewSystemdConnectionContext(context.Background())
	if err != nil {
		b.Fatalf("floor connection: %v", err)
	}
	b.Cleanup(c.Close)
	return c
}

// benchPod is the Burstable pod of the benchmark: one container, requests 100m/100Mi, limits
// 200m/200Mi.
func benchPod(name, uid string) *v1.Pod {
	rl := func(cpu, mem string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:      "app",
			Resources: v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("200m", "200Mi")},
		}}},
	}
}

// pods returns n pods with UUID-shaped UIDs (the length of real ones) unique to this call.
func (bn *podBench) pods(n int) []*v1.Pod {
	tag := bn.seq.Add(1)
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = benchPod(fmt.Sprintf("bench-%06d", i), fmt.Sprintf("%08x-0000-4000-8000-%012x", tag, i))
	}
	return out
}

// path is one way of creating and destroying pod slices, with what was measured of it.
type path struct {
	name    string
	unit    func(i int) string
	create  func(ctx context.Context, i int) error
	destroy func(ctx context.Context, i int) error

	createLat, destroyLat   []time.Duration
	createWall, destroyWall time.Duration
	pid1CPU, selfCPU        time.Duration
}

// slicelet returns slicelet's path over pods, through e's Manager.
func slicelet(e *sliceletEnv, pods []*v1.Pod) *path {
	return &path{
		name: "slicelet",
		unit: func(i int) string {
			u, _ := slices.PodSliceName(v1.PodQOSBurstable, string(pods[i].UID))
			return u
		},
		create: func(ctx context.Context, i int) error {
			_, err := e.m.EnsurePod(ctx, pods[i])
			return err
		},
		destroy: func(ctx context.Context, i int) error { return e.m.DestroyPod(ctx, string(pods[i].UID)) },
	}
}

// floorPath returns the floor over pods: go-systemd StartTransientUnit and StopUnit in mode
// "replace", each waiting for its job, with the properties slicelet sends for the pod. The
// properties are built before the clock starts: computing them is slicelet's work, not the
// floor's.
func (bn *podBench) floorPath(c *sddbus.Conn, pods []*v1.Pod) (*path, error) {
	names := make([]string, len(pods))
	props := make([][]sddbus.Property, len(pods))
	for i, pod := range pods {
		var err error
		if names[i], props[i], err = sentProperties(pod, bn.mode); err != nil {
			return nil, err
		}
	}
	job := func(ctx context.Context, op string, name string, start func(chan<- string) (int, error)) error {
		ch := make(chan string, 1)
		if _, err := start(ch); err != nil {
			return fmt.Errorf("floor %s %s: %w", op, name, err)
		}
		select {
		case r := <-ch:
			if r != "done" {
				return fmt.Errorf("floor %s %s: job %s", op, name, r)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("floor %s %s: %w", op, name, ctx.Err())
		}
	}
	return &path{
		name: "floor",
		unit: func(i int) string { return names[i] },
		create: func(ctx context.Context, i int) error {
			return job(ctx, "start", names[i], func(ch chan<- string) (int, error) {
				return c.StartTransientUnitContext(ctx, names[i], "replace", props[i], ch)
			})
		},
		destroy: func(ctx context.Context, i int) error {
			return job(ctx, "stop", names[i], func(ch chan<- string) (int, error) {
				return c.StopUnitContext(ctx, names[i], "replace", ch)
			})
		},
	}, nil
}

// sentProperties returns the unit name and the properties slicelet's EnsurePod sends for a new
// pod slice, in go-systemd's form.
func sentProperties(pod *v1.Pod, mode units.Mode) (string, []sddbus.Property, error) {
	name, props, err := podProperties(pod, mode)
	if err != nil {
		return "", nil, err
	}
	out, err := toDBus(props)
	return name, out, err
}

// podProperties returns the unit name and the properties slicelet's EnsurePod sends for a new
// pod slice: BaseSliceProperties then SliceProperties, as Manager.startSlice builds them.
func podProperties(pod *v1.Pod, mode units.Mode) (string, []units.Property, error) {
	qos := slices.QOSClass(pod)
	name, err := slices.PodSliceName(qos, string(pod.UID))
	if err != nil {
		return "", nil, err
	}
	props := append(slices.BaseSliceProperties(slices.PodSliceDescription(pod), slices.QOSSliceName(qos), mode),
		slices.SliceProperties(slices.PodResources(pod, slices.DefaultOptions()), mode)...)
	return name, props, nil
}

// toDBus converts properties to go-systemd's form. Only the value types slices' properties use
// are accepted: anything else would mean the floor no longer sends what slicelet sends.
func toDBus(props []units.Property) ([]sddbus.Property, error) {
	out := make([]sddbus.Property, 0, len(props))
	for _, p := range props {
		switch p.Value.(type) {
		case bool, string, []string, uint64, int64, uint32, int32:
			out = append(out, sddbus.Property{Name: p.Name, Value: godbus.MakeVariant(p.Value)})
		default:
			return nil, fmt.Errorf("property %s: value type %T not handled by the floor", p.Name, p.Value)
		}
	}
	return out, nil
}

// runBatch runs op on pods [lo, hi) with the given number of workers, appending each
// operation's latency to lat, and returns the batch's wall time and the CPU time systemd (PID 1)
// and this process used meanwhile.
func runBatch(ctx context.Context, op func(context.Context, int) error, lo, hi, workers int, lat *[]time.Duration) (wall, pid1, self time.Duration, err error) {
	var next atomic.Int64
	next.Store(int64(lo))
	per := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	p0, s0 := pid1CPU(), selfCPU()
	began := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= hi {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					errs[w] = err
					return
				}
				per[w] = append(per[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	wall = time.Since(began)
	pid1, self = pid1CPU()-p0, selfCPU()-s0
	for _, l := range per {
		*lat = append(*lat, l...)
	}
	return wall, pid1, self, errors.Join(errs...)
}

// pair creates N pods through both paths, then destroys them all, alternating batches: even
// batches run slicelet first, odd ones the floor first, so neither path always follows the
// other. At the peak 2N pod slices exist, N of each path.
func (bn *podBench) pair(b *testing.B, workers int) {
	ctx := context.Background()
	e, fc := bn.openSlicelet(b), bn.openFloor(b)
	check, err := bn.floorPath(fc, bn.pods(1))
	if err != nil {
		b.Fatal(err)
	}
	bn.checkSameProperties(ctx, b, e, slicelet(e, bn.pods(1)), check)
	var s, f *path
	for b.Loop() {
		si := slicelet(e, bn.pods(bn.n))
		fl, err := bn.floorPath(fc, bn.pods(bn.n))
		if err != nil {
			b.Fatal(err)
		}
		if s == nil {
			s, f = si, fl
		} else {
			// Iterations accumulate into the first pair's measurements.
			s.unit, s.create, s.destroy = si.unit, si.create, si.destroy
			f.unit, f.create, f.destroy = fl.unit, fl.create, fl.destroy
		}
		for _, phase := range []string{"create", "destroy"} {
			for k, lo := 0, 0; lo < bn.n; k, lo = k+1, lo+bn.batch {
				hi := min(lo+bn.batch, bn.n)
				order := []*path{s, f}
				if k%2 == 1 {
					order = []*path{f, s}
				}
				for _, p := range order {
					if err := p.run(ctx, phase, lo, hi, workers); err != nil {
						b.Fatalf("%s %s batch %d: %v", p.name, phase, k, err)
					}
				}
			}
		}
		checkNoneLeft(ctx, b, e.sd)
	}
	pods := bn.n * b.N
	s.report(b, s.name+"-", pods)
	f.report(b, f.name+"-", pods)
	b.ReportMetric(float64(pods), "pods")
	b.ReportMetric((s.createWall+s.destroyWall).Seconds()/(f.createWall+f.destroyWall).Seconds(), "ratio")
	b.ReportMetric(s.createWall.Seconds()/f.createWall.Seconds(), "create-ratio")
	b.ReportMetric(s.destroyWall.Seconds()/f.destroyWall.Seconds(), "destroy-ratio")
}

// run runs phase ("create" or "destroy") on pods [lo, hi) with workers and adds the
// measurements to p.
func (p *path) run(ctx context.Context, phase string, lo, hi, workers int) error {
	op, lat, wall := p.create, &p.createLat, &p.createWall
	if phase == "destroy" {
		op, lat, wall = p.destroy, &p.destroyLat, &p.destroyWall
	}
	w, pid1, self, err := runBatch(ctx, op, lo, hi, workers, lat)
	*wall += w
	p.pid1CPU += pid1
	p.selfCPU += self
	return err
}

// sliceletAlone is slicelet's path with only its own connection open, timing each call.
func (bn *podBench) sliceletAlone(b *testing.B) {
	ctx := context.Background()
	e := bn.openSlicelet(b)
	var s *path
	var createCalls, destroyCalls, qos map[string]callStat
	for b.Loop() {
		si := slicelet(e, bn.pods(bn.n))
		if s == nil {
			s = si
		} else {
			s.unit, s.create, s.destroy = si.unit, si.create, si.destroy
		}
		bn.rec.start()
		if err := s.run(ctx, "create", 0, bn.n, 1); err != nil {
			b.Fatal(err)
		}
		createCalls = merge(createCalls, bn.rec.take("pod"))
		if err := s.run(ctx, "destroy", 0, bn.n, 1); err != nil {
			b.Fatal(err)
		}
		destroyCalls = merge(destroyCalls, bn.rec.take("pod"))
		qos = merge(qos, bn.rec.take("qos"))
		bn.rec.stop()
		checkNoneLeft(ctx, b, e.sd)
	}
	pods := bn.n * b.N
	s.report(b, "", pods)
	b.ReportMetric(float64(pods), "pods")
	perPod := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(pods) }
	for _, ph := range []struct {
		name  string
		wall  time.Duration
		calls map[string]callStat
	}{{"create", s.createWall, createCalls}, {"destroy", s.destroyWall, destroyCalls}} {
		var inCalls time.Duration
		for _, k := range stdslices.Sorted(maps.Keys(ph.calls)) {
			c := ph.calls[k]
			inCalls += c.total
			b.ReportMetric(perPod(c.total), "bd-"+ph.name+"-"+k+"-µs/pod")
			b.ReportMetric(float64(c.count)/float64(pods), "bd-"+ph.name+"-"+k+"-calls/pod")
		}
		b.ReportMetric(perPod(ph.wall-inCalls), "bd-"+ph.name+"-other-µs/pod")
	}
	var qosCalls int
	var qosTime time.Duration
	for _, c := range qos {
		qosCalls += c.count
		qosTime += c.total
	}
	b.ReportMetric(float64(qosCalls), "bd-qos-calls")
	b.ReportMetric(perPod(qosTime), "bd-qos-µs/pod")
}

// connTax measures what one idle slicelet connection costs the floor: the floor's batches run
// alternately with an idle units.Manager connected ("taxed", as in the same-run rows, where the
// other path's connection is open) and without ("untaxed"). The difference estimates how much
// the same-run rows' shared environment adds to both paths.
func (bn *podBench) connTax(b *testing.B) {
	ctx := context.Background()
	fc := bn.openFloor(b)
	var taxed, untaxed *path
	for b.Loop() {
		t, err := bn.floorPath(fc, bn.pods(bn.n))
		if err != nil {
			b.Fatal(err)
		}
		u, err := bn.floorPath(fc, bn.pods(bn.n))
		if err != nil {
			b.Fatal(err)
		}
		t.name, u.name = "taxed", "untaxed"
		if taxed == nil {
			taxed, untaxed = t, u
		} else {
			taxed.unit, taxed.create, taxed.destroy = t.unit, t.create, t.destroy
			untaxed.unit, untaxed.create, untaxed.destroy = u.unit, u.create, u.destroy
		}
		for _, phase := range []string{"create", "destroy"} {
			for k, lo := 0, 0; lo < bn.n; k, lo = k+1, lo+bn.batch {
				hi := min(lo+bn.batch, bn.n)
				order := []*path{taxed, untaxed}
				if k%2 == 1 {
					order = []*path{untaxed, taxed}
				}
				for _, p := range order {
					var idle *units.Manager
					if p == taxed {
						if idle, err = units.Connect(ctx, units.Options{Logger: slog.New(slog.DiscardHandler), CgroupRoot: bn.cgroupRoot}); err != nil {
							b.Fatal(err)
						}
					}
					err := p.run(ctx, phase, lo, hi, 1)
					if idle != nil {
						idle.Close()
					}
					if err != nil {
						b.Fatalf("%s %s batch %d: %v", p.name, phase, k, err)
					}
				}
			}
		}
		left, err := fc.ListUnitsByPatternsContext(ctx, nil, slices.PodSlicePatterns)
		if err != nil {
			b.Fatal(err)
		}
		if len(left) > 0 {
			b.Fatalf("%d pod slices left after destroying all, e.g. %s (%s)", len(left), left[0].Name, left[0].ActiveState)
		}
	}
	pods := bn.n * b.N
	taxed.report(b, "taxed-", pods)
	untaxed.report(b, "untaxed-", pods)
	tw, uw := taxed.createWall+taxed.destroyWall, untaxed.createWall+untaxed.destroyWall
	b.ReportMetric(float64((tw-uw).Microseconds())/float64(pods), "tax-µs/pod")
	b.ReportMetric(float64(pods), "pods")
}

// population measures how systemd's cost per pod slice grows with the number of sibling slices
// already there: the floor alone creates N pods in batches, then destroys them in reverse, and
// the first and last batches of each phase are compared.
func (bn *podBench) population(b *testing.B) {
	ctx := context.Background()
	fc := bn.openFloor(b)
	type batchStat struct{ wall, pid1 time.Duration }
	var createFirst, createLast, destroyFirst, destroyLast batchStat
	batches := (bn.n + bn.batch - 1) / bn.batch
	for b.Loop() {
		f, err := bn.floorPath(fc, bn.pods(bn.n))
		if err != nil {
			b.Fatal(err)
		}
		for k := range batches {
			lo, hi := k*bn.batch, min((k+1)*bn.batch, bn.n)
			var lat []time.Duration
			wall, pid1, _, err := runBatch(ctx, f.create, lo, hi, 1, &lat)
			if err != nil {
				b.Fatal(err)
			}
			per := batchStat{wall / time.Duration(hi-lo), pid1 / time.Duration(hi-lo)}
			if k == 0 {
				createFirst.wall, createFirst.pid1 = createFirst.wall+per.wall, createFirst.pid1+per.pid1
			}
			if k == batches-1 {
				createLast.wall, createLast.pid1 = createLast.wall+per.wall, createLast.pid1+per.pid1
			}
		}
		for k := range batches {
			lo, hi := max(0, bn.n-(k+1)*bn.batch), bn.n-k*bn.batch
			var lat []time.Duration
			wall, pid1, _, err := runBatch(ctx, f.destroy, lo, hi, 1, &lat)
			if err != nil {
				b.Fatal(err)
			}
			per := batchStat{wall / time.Duration(hi-lo), pid1 / time.Duration(hi-lo)}
			if k == 0 {
				destroyFirst.wall, destroyFirst.pid1 = destroyFirst.wall+per.wall, destroyFirst.pid1+per.pid1
			}
			if k == batches-1 {
				destroyLast.wall, destroyLast.pid1 = destroyLast.wall+per.wall, destroyLast.pid1+per.pid1
			}
		}
	}
	µs := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(µs(createFirst.wall), "create-empty-µs")
	b.ReportMetric(µs(createFirst.pid1), "create-empty-pid1-µs")
	b.ReportMetric(µs(createLast.wall), "create-full-µs")
	b.ReportMetric(µs(createLast.pid1), "create-full-pid1-µs")
	b.ReportMetric(µs(destroyFirst.wall), "destroy-full-µs")
	b.ReportMetric(µs(destroyFirst.pid1), "destroy-full-pid1-µs")
	b.ReportMetric(µs(destroyLast.wall), "destroy-empty-µs")
	b.ReportMetric(µs(destroyLast.pid1), "destroy-empty-pid1-µs")
	b.ReportMetric(float64(bn.n), "pods")
	b.ReportMetric(float64(bn.batch), "batch")
}

// reduceCPU measures the variants of the CPU reduction before a pod slice's stop (see
// BenchmarkPodSlices). Slices are created with slicelet's properties through units.Manager.
func (bn *podBench) reduceCPU(b *testing.B) {
	ctx := context.Background()
	e := bn.openSlicelet(b)
	cg := hierarchy.NewCgroupFS(bn.cgroupRoot)
	reduced := slices.SliceProperties(slices.ReducedCPUConfig(), bn.mode)
	file, value := "cpu.shares", strconv.FormatUint(slices.MinShares, 10)
	if bn.mode.V2() {
		file, value = "cpu.weight", "1"
	}
	variants := []struct {
		name   string
		reduce func(ctx context.Context, unit string) error
	}{
		{"setprops", func(ctx context.Context, unit string) error { return e.sd.SetProperties(ctx, unit, reduced) }},
		{"cgroupfs", func(_ context.Context, unit string) error {
			return cg.Write(slices.SliceCgroupPath(unit), "cpu", file, value)
		}},
		{"none", func(context.Context, string) error { return nil }},
	}
	paths := make([]*path, len(variants))
	for b.Loop() {
		for j, v := range variants {
			pods := bn.pods(bn.n)
			names := make([]string, len(pods))
			props := make([][]units.Property, len(pods))
			for i, pod := range pods {
				var err error
				if names[i], props[i], err = podProperties(pod, bn.mode); err != nil {
					b.Fatal(err)
				}
			}
			p := &path{
				name:   v.name,
				unit:   func(i int) string { return names[i] },
				create: func(ctx context.Context, i int) error { return e.sd.StartSlice(ctx, names[i], props[i]) },
				destroy: func(ctx context.Context, i int) error {
					if err := v.reduce(ctx, names[i]); err != nil {
						return err
					}
					return e.sd.Stop(ctx, names[i])
				},
			}
			if paths[j] == nil {
				paths[j] = p
			} else {
				paths[j].unit, paths[j].create, paths[j].destroy = p.unit, p.create, p.destroy
			}
		}
		for _, phase := range []string{"create", "destroy"} {
			for k, lo := 0, 0; lo < bn.n; k, lo = k+1, lo+bn.batch {
				hi := min(lo+bn.batch, bn.n)
				// Rotate the order so that each variant runs first, second and third as often.
				for r := range paths {
					p := paths[(r+k)%len(paths)]
					if err := p.run(ctx, phase, lo, hi, 1); err != nil {
						b.Fatalf("%s %s batch %d: %v", p.name, phase, k, err)
					}
				}
			}
		}
		checkNoneLeft(ctx, b, e.sd)
	}
	pods := float64(bn.n * b.N)
	for _, p := range paths {
		b.ReportMetric(float64(p.destroyWall.Microseconds())/pods, p.name+"-destroy-µs/pod")
		b.ReportMetric(quantileµs(p.destroyLat, 0.50), p.name+"-destroy-p50-µs")
		b.ReportMetric(quantileµs(p.destroyLat, 0.99), p.name+"-destroy-p99-µs")
		b.ReportMetric(float64(p.createWall.Microseconds())/pods, p.name+"-create-µs/pod")
		b.ReportMetric(float64(p.pid1CPU.Microseconds())/pods, p.name+"-pid1-cpu-µs/pod")
	}
	b.ReportMetric(pods, "pods")
}

// checkSameProperties creates one pod through each path, before the measurement, and fails
// unless slicelet sent the resource properties the floor sends and systemd holds the same values
// for both units; then it destroys them again.
func (bn *podBench) checkSameProperties(ctx context.Context, b *testing.B, e *sliceletEnv, s, f *path) {
	b.Helper()
	if err := s.create(ctx, 0); err != nil {
		b.Fatal(err)
	}
	if err := f.create(ctx, 0); err != nil {
		b.Fatal(err)
	}
	ps := e.m.Pods()
	if len(ps) != 1 {
		b.Fatalf("manager knows %d pods, want 1", len(ps))
	}
	want := slices.SliceProperties(slices.PodResources(benchPod("x", "x"), slices.DefaultOptions()), bn.mode)
	if !reflect.DeepEqual(ps[0].Properties, want) {
		b.Fatalf("slicelet sent resource properties %v, the floor sends %v", ps[0].Properties, want)
	}
	if ps[0].Unit != s.unit(0) {
		b.Fatalf("slicelet created %s, want %s", ps[0].Unit, s.unit(0))
	}
	for _, p := range append(want, units.Property{Name: "ControlGroup"}) {
		var got [2]any
		for j, unit := range []string{s.unit(0), f.unit(0)} {
			v, err := e.sd.Property(ctx, unit, "Slice", p.Name)
			if err != nil {
				b.Fatal(err)
			}
			got[j] = v
		}
		if p.Name == "ControlGroup" {
			// Same parent, different leaf.
			got[0], got[1] = pathDir(got[0]), pathDir(got[1])
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			b.Fatalf("systemd holds %s=%v for slicelet's %s but %v for the floor's %s", p.Name, got[0], s.unit(0), got[1], f.unit(0))
		}
	}
	if err := s.destroy(ctx, 0); err != nil {
		b.Fatal(err)
	}
	if err := f.destroy(ctx, 0); err != nil {
		b.Fatal(err)
	}
}

func pathDir(v any) any {
	s, _ := v.(string)
	return s[:max(0, strings.LastIndex(s, "/"))]
}

// checkNoneLeft fails when a pod slice survived its destroy.
func checkNoneLeft(ctx context.Context, b *testing.B, sd *units.Manager) {
	b.Helper()
	left, err := sd.List(ctx, slices.PodSlicePatterns...)
	if err != nil {
		b.Fatal(err)
	}
	if len(left) > 0 {
		b.Fatalf("%d pod slices left after destroying all, e.g. %s (%s)", len(left), left[0].Name, left[0].ActiveState)
	}
}

// report publishes p's measurements over pods, metric names prefixed by prefix.
func (p *path) report(b *testing.B, prefix string, pods int) {
	b.ReportMetric(quantileµs(p.createLat, 0.50), prefix+"create-p50-µs")
	b.ReportMetric(quantileµs(p.createLat, 0.99), prefix+"create-p99-µs")
	b.ReportMetric(quantileµs(p.destroyLat, 0.50), prefix+"destroy-p50-µs")
	b.ReportMetric(quantileµs(p.destroyLat, 0.99), prefix+"destroy-p99-µs")
	b.ReportMetric(float64(pods)/(p.createWall+p.destroyWall).Seconds(), prefix+"pods/s")
	b.ReportMetric(float64(pods)/p.createWall.Seconds(), prefix+"creates/s")
	b.ReportMetric(float64(p.pid1CPU.Microseconds())/float64(pods), prefix+"pid1-cpu-µs/pod")
	b.ReportMetric(float64(p.selfCPU.Microseconds())/float64(pods), prefix+"client-cpu-µs/pod")
}

// quantileµs is the nearest-rank quantile q of d in microseconds.
func quantileµs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := stdslices.Clone(d)
	stdslices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return float64(s[max(0, min(i, len(s)-1))].Nanoseconds()) / 1e3
}

// pid1CPU is the CPU time PID 1 (systemd, inside the sandbox) has used, from
// /proc/1/schedstat (nanoseconds, unlike the 10 ms ticks of /proc/1/stat); 0 when unreadable.
func pid1CPU() time.Duration {
	data, err := os.ReadFile("/proc/1/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// callStat is the count and summed duration of one kind of call.
type callStat struct {
	count int
	total time.Duration
}

func merge(into, from map[string]callStat) map[string]callStat {
	if into == nil {
		into = map[string]callStat{}
	}
	for k, v := range from {
		c := into[k]
		c.count += v.count
		c.total += v.total
		into[k] = c
	}
	return into
}

// recorder sums the duration of the Systemd and Cgroupfs calls the Manager makes, split by
// whether they concern a pod slice ("pod") or a node/QoS-level slice ("qos"). Off, it records
// nothing.
type recorder struct {
	on    atomic.Bool
	mu    sync.Mutex
	calls map[string]map[string]callStat // scope → call → stat
}

func (r *recorder) start() {
	r.mu.Lock()
	r.calls = map[string]map[string]callStat{"pod": {}, "qos": {}}
	r.mu.Unlock()
	r.on.Store(true)
}

func (r *recorder) stop() { r.on.Store(false) }

// take returns and resets the stats of a scope.
func (r *recorder) take(scope string) map[string]callStat {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls[scope]
	r.calls[scope] = map[string]callStat{}
	return out
}

// record adds one call of kind call on unit or cgroup path target that began at t0.
func (r *recorder) record(call, target string, t0 time.Time) {
	if !r.on.Load() {
		return
	}
	d := time.Since(t0)
	scope := "qos"
	if strings.Contains(target, "-pod") {
		scope = "pod"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		return
	}
	c := r.calls[scope][call]
	c.count++
	c.total += d
	r.calls[scope][call] = c
}

// timedSystemd is hierarchy.Systemd with each call timed by the recorder.
type timedSystemd struct {
	hierarchy.Systemd
	rec *recorder
}

func (t *timedSystemd) StartSlice(ctx context.Context, name string, props []units.Property) error {
	defer t.rec.record("sd.StartSlice", name, time.Now())
	return t.Systemd.StartSlice(ctx, name, props)
}

func (t *timedSystemd) SetProperties(ctx context.Context, name string, props []units.Property) error {
	defer t.rec.record("sd.SetProperties", name, time.Now())
	return t.Systemd.SetProperties(ctx, name, props)
}

func (t *timedSystemd) Stop(ctx context.Context, name string) error {
	defer t.rec.record("sd.Stop", name, time.Now())
	return t.Systemd.Stop(ctx, name)
}

func (t *timedSystemd) List(ctx context.Context, patterns ...string) ([]units.UnitStatus, error) {
	defer t.rec.record("sd.List", strings.Join(patterns, ","), time.Now())
	return t.Systemd.List(ctx, patterns...)
}

func (t *timedSystemd) Properties(ctx context.Context, name string) (units.UnitInfo, error) {
	defer t.rec.record("sd.Properties", name, time.Now())
	return t.Systemd.Properties(ctx, name)
}

// timedCgroupfs is hierarchy.Cgroupfs with each call timed by the recorder.
type timedCgroupfs struct {
	hierarchy.Cgroupfs
	rec *recorder
}

func (t *timedCgroupfs) Dirs(cgroupPath string) []string {
	defer t.rec.record("cg.Dirs", cgroupPath, time.Now())
	return t.Cgroupfs.Dirs(cgroupPath)
}

func (t *timedCgroupfs) Pids(cgroupPath string) ([]int, error) {
	defer t.rec.record("cg.Pids", cgroupPath, time.Now())
	return t.Cgroupfs.Pids(cgroupPath)
}

func (t *timedCgroupfs) Remove(cgroupPath string) error {
	defer t.rec.record("cg.Remove", cgroupPath, time.Now())
	return t.Cgroupfs.Remove(cgroupPath)
}

func (t *timedCgroupfs) Write(cgroupPath, controller, file, value string) error {
	defer t.rec.record("cg.Write", cgroupPath, time.Now())
	return t.Cgroupfs.Write(cgroupPath, controller, file, value)
}

func (t *timedCgroupfs) Read(cgroupPath, controller, file string) (string, error) {
	defer t.rec.record("cg.Read", cgroupPath, time.Now())
	return t.Cgroupfs.Read(cgroupPath, controller, file)
}
