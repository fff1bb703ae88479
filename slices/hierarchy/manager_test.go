package hierarchy

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/testharness/unitstest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// fakeCgroupfs is an in-memory Cgroupfs: files written are remembered, reads of unwritten files
// fail, and the memory limit of kubepods can be made to read back differently (a kernel that
// refused a limit below usage).
type fakeCgroupfs struct {
	mu       sync.Mutex
	files    map[string]string // cgroupPath + "/" + file → value
	hugetlb  bool
	override map[string]string // readback overrides
	pids     map[string][]int
	dirs     map[string]bool
}

func newFakeCgroupfs() *fakeCgroupfs {
	return &fakeCgroupfs{files: map[string]string{}, override: map[string]string{}, pids: map[string][]int{}, dirs: map[string]bool{}}
}

func (f *fakeCgroupfs) Dirs(p string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[p] {
		return []string{"/sys/fs/cgroup/memory" + p}
	}
	return nil
}
func (f *fakeCgroupfs) Pids(p string) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pids[p], nil
}
func (f *fakeCgroupfs) Kill(p string, _ time.Duration) (KillResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.pids[p])
	delete(f.pids, p)
	return KillResult{Signalled: n}, nil
}
func (f *fakeCgroupfs) Remove(p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.dirs, p)
	return nil
}
func (f *fakeCgroupfs) HasController(name string) bool { return name == "hugetlb" && f.hugetlb }
func (f *fakeCgroupfs) Write(p, controller, file, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[p+"/"+file] = value
	return nil
}
func (f *fakeCgroupfs) Read(p, controller, file string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.override[p+"/"+file]; ok {
		return v, nil
	}
	v, ok := f.files[p+"/"+file]
	if !ok {
		return "", fmt.Errorf("cgroup %s %s: no such file", p, file)
	}
	return v, nil
}

// syncingFake mirrors memory limits set through systemd into the fake cgroupfs, as systemd
// writes them to cgroupfs.
type syncingFake struct {
	*unitstest.Fake
	cg *fakeCgroupfs
}

func (s *syncingFake) mirror(name string, props []units.Property) {
	for _, p := range props {
		switch p.Name {
		case "MemoryLimit":
			s.cg.Write(slices.SliceCgroupPath(name), "memory", "memory.limit_in_bytes", fmt.Sprint(p.Value))
		case "MemoryMax":
			s.cg.Write(slices.SliceCgroupPath(name), "memory", "memory.max", fmt.Sprint(p.Value))
		}
	}
}

func (s *syncingFake) StartSlice(ctx context.Context, name string, props []units.Property) error {
	if err := s.Fake.StartSlice(ctx, name, props); err != nil {
		return err
	}
	s.mirror(name, props)
	return nil
}

func (s *syncingFake) SetProperties(ctx context.Context, name string, props []units.Property) error {
	if err := s.Fake.SetProperties(ctx, name, props); err != nil {
		return err
	}
	s.mirror(name, props)
	return nil
}

func testCapacity() slices.Capacity {
	return slices.Capacity{CPU: 4000, Memory: 16 << 30, Pids: 4194304}
}

func testNodeConfig() slices.NodeConfig {
	return slices.NodeConfig{
		SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")},
		KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		HardEviction:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")},
		Enforcement:    slices.Enforcement{Pods: true},
	}
}

func newTestManager(t *testing.T, mode units.Mode, node slices.NodeConfig) (*Manager, *syncingFake, *fakeCgroupfs) {
	t.Helper()
	cg := newFakeCgroupfs()
	sd := &syncingFake{Fake: unitstest.New(mode), cg: cg}
	m := New(sd, cg, Config{Capacity: testCapacity(), Node: node, Pod: slices.DefaultOptions()}, nil)
	return m, sd, cg
}

func propValue(t *testing.T, sd *syncingFake, unit, prop string) any {
	t.Helper()
	u, ok := sd.Unit(unit)
	if !ok {
		t.Fatalf("unit %s does not exist; units: %v", unit, sd.Names())
	}
	return u.Props[prop]
}

func burstablePod(uid, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "b-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
}

func TestManagerStartBuildsNodeLevel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  units.Mode
		want  map[string]map[string]any
		noKey map[string]string
	}{
		{
			name: "hybrid",
			mode: units.ModeHybrid,
			want: map[string]map[string]any{
				"kubepods.slice":            {"CPUShares": uint64(3891), "MemoryLimit": uint64(15581839360), "Description": "kubepods (Guaranteed QoS)"},
				"kubepods-burstable.slice":  {"CPUShares": uint64(2), "Wants": []string{"kubepods.slice"}},
				"kubepods-besteffort.slice": {"CPUShares": uint64(2)},
			},
		},
		{
			name: "unified",
			mode: units.ModeUnified,
			want: map[string]map[string]any{
				"kubepods.slice":            {"CPUWeight": uint64(149), "MemoryMax": uint64(15581839360), "MemoryMin": uint64(0), "MemoryLow": uint64(0)},
				"kubepods-burstable.slice":  {"CPUWeight": uint64(1)},
				"kubepods-besteffort.slice": {"CPUWeight": uint64(1)},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sd, _ := newTestManager(t, tc.mode, testNodeConfig())
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			for unit, props := range tc.want {
				for k, v := range props {
					if got := propValue(t, sd, unit, k); fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s %s = %v, want %v", unit, k, got, v)
					}
				}
			}
			if !m.Enforced() {
				t.Error("kubepods limits not reported enforced")
			}
		})
	}
}

func TestManagerStartRefusesReservationAboveCapacity(t *testing.T) {
	node := testNodeConfig()
	node.SystemReserved = v1.ResourceList{v1.ResourceMemory: resource.MustParse("20Gi")}
	m, sd, _ := newTestManager(t, units.ModeHybrid, node)
	err := m.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), `Resource "memory" has a reservation of`) || !strings.Contains(err.Error(), "Expected capacity >= reservation.") {
		t.Fatalf("Start = %v, want the kubelet's reservation message", err)
	}
	if n := len(sd.Names()); n != 0 {
		t.Errorf("units created despite the error: %v", sd.Names())
	}
}

func TestManagerReservedCgroupMustExist(t *testing.T) {
	node := testNodeConfig()
	node.Enforcement.SystemReserved = true
	m, sd, _ := newTestManager(t, units.ModeHybrid, node)
	m.cfg.SystemReservedCgroup = "/system.slice"
	err := m.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), `system_reserved_cgroup "/system.slice"`) {
		t.Fatalf("Start = %v, want an error naming the missing cgroup", err)
	}
	if len(sd.Names()) != 0 {
		t.Errorf("units created despite the error: %v", sd.Names())
	}

	// Once it exists, it gets system_reserved as limits.
	m, sd, _ = newTestManager(t, units.ModeHybrid, node)
	m.cfg.SystemReservedCgroup = "/system.slice"
	if err := sd.StartSlice(t.Context(), "system.slice", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := propValue(t, sd, "system.slice", "MemoryLimit"); got != uint64(500<<20) {
		t.Errorf("system.slice MemoryLimit = %v, want %d", got, 500<<20)
	}
	if got := propValue(t, sd, "system.slice", "CPUShares"); got != uint64(102) {
		t.Errorf("system.slice CPUShares = %v, want 102", got)
	}
}

func TestManagerEnsurePodCreatesThenUpdatesInPlace(t *testing.T) {
	m, sd, _ := newTestManager(t, units.ModeHybrid, testNodeConfig())
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pod := burstablePod("0f1c-22", "100m")
	ps, err := m.EnsurePod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Unit != "kubepods-burstable-pod0f1c_22.slice" || ps.CgroupPath != "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c_22.slice" {
		t.Errorf("slice = %s at %s", ps.Unit, ps.CgroupPath)
	}
	if got := propValue(t, sd, ps.Unit, "Description"); got != "pod default/b-0f1c-22 (Burstable)" {
		t.Errorf("Description = %q", got)
	}
	starts := len(sd.CallsTo("StartSlice"))

	// Same pod again: nothing to do.
	if _, err := m.EnsurePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// More CPU: updated in place, not recreated.
	bigger := burstablePod("0f1c-22", "500m")
	if _, err := m.EnsurePod(ctx, bigger); err != nil {
		t.Fatal(err)
	}
	if got := len(sd.CallsTo("StartSlice")); got != starts {
		t.Errorf("StartSlice called %d more times", got-starts)
	}
	if got := propValue(t, sd, ps.Unit, "CPUShares"); got != uint64(512) {
		t.Errorf("CPUShares after resize = %v, want 512", got)
	}
	var sets int
	for _, c := range sd.CallsTo("SetProperties") {
		if c.Unit == ps.Unit {
			sets++
		}
	}
	if sets != 1 {
		t.Errorf("SetProperties on the pod slice = %d, want 1 (the unchanged EnsurePod writes nothing)", sets)
	}

	// A QoS class change is refused.
	guaranteed := bigger.DeepCopy()
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if _, err := m.EnsurePod(ctx, guaranteed); err == nil || !strings.Contains(err.Error(), "QoS class is immutable") {
		t.Errorf("EnsurePod with another QoS class = %v", err)
	}
}

// TestManagerCoalescesQoSUpdates: 100 pods arriving at once cost a handful of writes on the
// Burstable slice, not 100, and the final value is Σ requests.
func TestManagerCoalescesQoSUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, sd, _ := newTestManager(t, units.ModeHybrid, testNodeConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		before := countSets(sd, "kubepods-burstable.slice")
		go m.Run(ctx)
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if _, err := m.EnsurePod(ctx, burstablePod(fmt.Sprintf("pod-%03d", i), "10m")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Second) // past the settle delay, in the bubble's fake time
		synctest.Wait()
		writes := countSets(sd, "kubepods-burstable.slice") - before
		if writes < 1 || writes > 10 {
			t.Errorf("burstable slice written %d times for 100 pods, want 1..10", writes)
		}
		if got := propValue(t, sd, "kubepods-burstable.slice", "CPUShares"); got != slices.MilliCPUToShares(1000) {
			t.Errorf("burstable CPUShares = %v, want %d", got, slices.MilliCPUToShares(1000))
		}

		// Pods going away lower it again.
		for i := range 100 {
			if err := m.DestroyPod(ctx, fmt.Sprintf("pod-%03d", i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := propValue(t, sd, "kubepods-burstable.slice", "CPUShares"); got != uint64(slices.MinShares) {
			t.Errorf("burstable CPUShares after deletes = %v, want %d", got, slices.MinShares)
		}
	})
}

func countSets(sd *syncingFake, unit string) int {
	n := 0
	for _, c := range sd.CallsTo("SetProperties") {
		if c.Unit == unit {
			n++
		}
	}
	return n
}

// TestManagerPeriodicReconcileRepairsDrift: the minute reconcile rewrites the QoS slices even
// when nothing changed on our side.
func TestManagerPeriodicReconcileRepairsDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, sd, _ := newTestManager(t, units.ModeHybrid, testNodeConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		go m.Run(ctx)
		if err := sd.Fake.SetProperties(ctx, "kubepods-besteffort.slice", []units.Property{{Name: "CPUShares", Value: uint64(999)}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultReconcileInterval - time.Second)
		synctest.Wait()
		if got := propValue(t, sd, "kubepods-besteffort.slice", "CPUShares"); got != uint64(999) {
			t.Fatalf("reconciled early: %v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := propValue(t, sd, "kubepods-besteffort.slice", "CPUShares"); got != uint64(slices.MinShares) {
			t.Errorf("besteffort CPUShares after a reconcile = %v, want %d", got, slices.MinShares)
		}
	})
}

// TestManagerEnforcementRetries: a kubepods limit the kernel refused (usage above it) is
// retried every minute until it reads back right.
func TestManagerEnforcementRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, cg := newTestManager(t, units.ModeHybrid, testNodeConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cg.override["/kubepods.slice/memory.limit_in_bytes"] = "9223372036854771712"
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Enforced() {
			t.Fatal("Enforced with a limit that did not stick")
		}
		go m.Run(ctx)
		time.Sleep(DefaultEnforceRetryInterval + time.Second)
		synctest.Wait()
		if m.Enforced() {
			t.Fatal("Enforced while the limit still does not stick")
		}
		cg.mu.Lock()
		delete(cg.override, "/kubepods.slice/memory.limit_in_bytes")
		cg.mu.Unlock()
		time.Sleep(DefaultEnforceRetryInterval)
		synctest.Wait()
		if !m.Enforced() {
			t.Error("not Enforced after the limit sticks")
		}
	})
}

func TestManagerDestroyPod(t *testing.T) {
	m, sd, cg := newTestManager(t, units.ModeUnified, testNodeConfig())
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := m.EnsurePod(ctx, burstablePod("abc-1", "100m"))
	if err != nil {
		t.Fatal(err)
	}
	cg.dirs[ps.CgroupPath] = true
	if err := m.DestroyPod(ctx, "abc-1"); err != nil {
		t.Fatal(err)
	}
	calls := sd.Calls()
	var seq []string
	for _, c := range calls {
		if c.Unit == ps.Unit {
			seq = append(seq, c.Method)
		}
	}
	if want := "StartSlice,Stop"; strings.Join(seq, ",") != want {
		t.Errorf("calls on the pod slice = %v, want %s", seq, want)
	}
	if got := cg.files[ps.CgroupPath+"/cpu.weight"]; got != "1" {
		t.Errorf("teardown cpu.weight = %q, want 1 (CPU reduced before the stop)", got)
	}
	if _, ok := sd.Unit(ps.Unit); ok {
		t.Error("pod slice still exists")
	}
	if len(cg.Dirs(ps.CgroupPath)) != 0 {
		t.Error("cgroup directory left behind")
	}
	if len(m.Pods()) != 0 {
		t.Errorf("pods still known: %v", m.Pods())
	}
	// Again: already gone is success.
	if err := m.DestroyPod(ctx, "abc-1"); err != nil {
		t.Errorf("second DestroyPod = %v", err)
	}
}

func TestManagerOrphans(t *testing.T) {
	m, sd, _ := newTestManager(t, units.ModeHybrid, testNodeConfig())
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsurePod(ctx, burstablePod("kept-1", "100m")); err != nil {
		t.Fatal(err)
	}
	// Left by an earlier run: a pod slice nobody claims, and a unit that only looks similar.
	for _, name := range []string{"kubepods-besteffort-podold_1.slice", "kubepods-pod9_9.slice"} {
		if err := sd.StartSlice(ctx, name, []units.Property{{Name: "Description", Value: "old"}}); err != nil {
			t.Fatal(err)
		}
	}
	orphans, err := m.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(orphans)
	want := fmt.Sprint([]slices.Orphan{{Unit: "kubepods-besteffort-podold_1.slice", UID: "old-1", QOS: v1.PodQOSBestEffort}, {Unit: "kubepods-pod9_9.slice", UID: "9-9", QOS: v1.PodQOSGuaranteed}})
	if got != want {
		t.Errorf("Orphans = %s, want %s", got, want)
	}
	if _, err := m.CleanupOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubepods-besteffort-podold_1.slice", "kubepods-pod9_9.slice"} {
		if _, ok := sd.Unit(name); ok {
			t.Errorf("orphan %s still exists", name)
		}
	}
	if _, ok := sd.Unit("kubepods-burstable-podkept_1.slice"); !ok {
		t.Error("a known pod's slice was destroyed")
	}
}

func TestManagerAdoptsExistingSliceOnRestart(t *testing.T) {
	m, sd, cg := newTestManager(t, units.ModeHybrid, testNodeConfig())
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pod := burstablePod("re-1", "100m")
	if _, err := m.EnsurePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// A new Manager over the same systemd (slicelet restarted).
	m2 := New(sd, cg, Config{Capacity: testCapacity(), Node: testNodeConfig(), Pod: slices.DefaultOptions()}, nil)
	if err := m2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.EnsurePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var n int
	for _, name := range sd.Names() {
		if strings.Contains(name, "podre_1") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d slices for the pod after restart, want 1", n)
	}
	if orphans, _ := m2.Orphans(ctx); len(orphans) != 0 {
		t.Errorf("orphans after adoption: %v", orphans)
	}
}

// TestManagerObservesOperations: each slice operation reaches ManagerConfig.Observe with its
// kind and duration, as the kubelet's cgroup manager times create, update and destroy.
func TestManagerObservesOperations(t *testing.T) {
	cg := newFakeCgroupfs()
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	sd := &slowSystemd{syncingFake: &syncingFake{Fake: unitstest.New(units.ModeUnified), cg: cg}}
	type op struct {
		name string
		d    time.Duration
	}
	var got []op
	m := New(sd, cg, Config{Capacity: testCapacity(), Node: testNodeConfig(), Pod: slices.DefaultOptions(), Clock: clk,
		Observe: func(name string, d time.Duration) { got = append(got, op{name, d}) }}, nil)
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	got = nil
	// Each call to systemd takes 3 s of the fake clock.
	sd.step = func() { clk.Step(3 * time.Second) }
	if _, err := m.EnsurePod(ctx, burstablePod("abc-1", "100m")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsurePod(ctx, burstablePod("abc-1", "200m")); err != nil {
		t.Fatal(err)
	}
	if err := m.DestroyPod(ctx, "abc-1"); err != nil {
		t.Fatal(err)
	}
	want := []op{{OperationCreate, 3 * time.Second}, {OperationUpdate, 3 * time.Second}, {OperationDestroy, 3 * time.Second}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operations %v, want %v", got, want)
	}
}

// slowSystemd calls step before each start, property change and stop.
type slowSystemd struct {
	*syncingFake
	step func()
}

func (s *slowSystemd) tick() {
	if s.step != nil {
		s.step()
	}
}

func (s *slowSystemd) StartSlice(ctx context.Context, name string, props []units.Property) error {
	s.tick()
	return s.syncingFake.StartSlice(ctx, name, props)
}

func (s *slowSystemd) SetProperties(ctx context.Context, name string, props []units.Property) error {
	s.tick()
	return s.syncingFake.SetProperties(ctx, name, props)
}

func (s *slowSystemd) Stop(ctx context.Context, name string) error {
	s.tick()
	return s.syncingFake.Stop(ctx, name)
}
