package hierarchy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	stdslices "slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

// v1Unlimited is what cgroup v1 reports for an unlimited memory limit on 4 KiB pages.
const v1Unlimited = "9223372036854771712"

type itEnv struct {
	sd   *units.Manager
	cg   *CgroupFS
	mode units.Mode
	root string
	cap  slices.Capacity
}

func newIT(t *testing.T) *itEnv {
	t.Helper()
	env := systemdtest.Require(t)
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sd, err := units.Connect(ctx, units.Options{Logger: log, CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	c, err := slices.ReadCapacity("/proc", "/sys", "")
	if err != nil {
		t.Fatal(err)
	}
	it := &itEnv{sd: sd, cg: NewCgroupFS(env.CgroupRoot), mode: sd.Mode(), root: env.CgroupRoot, cap: c}
	t.Cleanup(func() { it.cleanup(t) })
	return it
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// cleanup removes every kubepods slice so tests do not see each other's.
func (it *itEnv) cleanup(t *testing.T) {
	ctx := context.Background()
	list, _ := it.sd.List(ctx, "kubepods*.slice")
	// Children first: pod slices, then QoS slices, then kubepods.
	for _, depth := range []int{3, 2, 1} {
		for _, u := range list {
			if strings.Count(u.Name, "-")+1 == depth || (depth == 3 && strings.Contains(u.Name, "-pod")) {
				_ = it.sd.Stop(ctx, u.Name)
			}
		}
	}
}

// itNodeConfig reserves little enough to fit the 1 GiB cgroup v2 VM as well as the host.
func itNodeConfig() slices.NodeConfig {
	return slices.NodeConfig{
		SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		HardEviction:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")},
		Enforcement:    slices.Enforcement{Pods: true},
	}
}

func (it *itEnv) manager(t *testing.T, node slices.NodeConfig) *Manager {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
	return New(it.sd, it.cg, Config{Capacity: it.cap, Node: node, Pod: slices.DefaultOptions()}, log)
}

// file reads a controller file of a cgroup path (v1: under the controller's hierarchy).
func (it *itEnv) file(t *testing.T, cgPath, controller, name string) string {
	t.Helper()
	s, err := it.cg.Read(cgPath, controller, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func classicPods() (g, be, b *v1.Pod) {
	mk := func(name, uid string, res v1.ResourceRequirements) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Resources: res}}},
		}
	}
	rl := func(cpu, mem string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	}
	g = mk("nginx-g", "aaaa-0001", v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("100m", "100Mi")})
	be = mk("nginx-be", "aaaa-0002", v1.ResourceRequirements{})
	b = mk("nginx-b", "aaaa-0003", v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("200m", "200Mi")})
	return g, be, b
}

// TestIntegrationClassicThreePods: the kubelet's three classic pods get exactly the kubelet's
// slices and cgroupfs values, kubepods.slice holds node allocatable, and the Burstable slice
// follows Σ requests as pods come and go.
func TestIntegrationClassicThreePods(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	node := itNodeConfig()
	m := it.manager(t, node)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !m.Enforced() {
		t.Error("kubepods limits not enforced")
	}

	// Node allocatable on kubepods.slice: capacity − reserved, eviction thresholds not subtracted.
	limits := slices.KubepodsLimits(it.cap, node.SystemReserved, node.KubeReserved)
	wantMem := limits.Memory().Value()
	wantShares := slices.MilliCPUToShares(limits.Cpu().MilliValue())
	if it.mode.V2() {
		assertFile(t, it, "/kubepods.slice", "memory", "memory.max", strconv.FormatInt(wantMem, 10))
		assertFile(t, it, "/kubepods.slice", "cpu", "cpu.weight", strconv.FormatUint(slices.CPUSharesToWeight(wantShares), 10))
		assertFile(t, it, "/kubepods.slice", "pids", "pids.max", strconv.FormatInt(it.cap.Pids, 10))
	} else {
		assertFile(t, it, "/kubepods.slice", "memory", "memory.limit_in_bytes", strconv.FormatInt(wantMem&^4095, 10))
		assertFile(t, it, "/kubepods.slice", "cpu", "cpu.shares", strconv.FormatUint(wantShares, 10))
		assertFile(t, it, "/kubepods.slice", "pids", "pids.max", strconv.FormatInt(it.cap.Pids, 10))
	}

	g, be, b := classicPods()
	want := []struct {
		pod                   *v1.Pod
		slice, path           string
		shares, quota, memV1  string
		weight, cpuMax, memV2 string
	}{
		{g, "kubepods-podaaaa_0001.slice", "/kubepods.slice/kubepods-podaaaa_0001.slice", "102", "10000", "104857600", "4", "10000 100000", "104857600"},
		{be, "kubepods-besteffort-podaaaa_0002.slice", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podaaaa_0002.slice", "2", "-1", v1Unlimited, "1", "max 100000", "max"},
		{b, "kubepods-burstable-podaaaa_0003.slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_0003.slice", "102", "20000", "209715200", "4", "20000 100000", "209715200"},
	}
	for _, w := range want {
		ps, err := m.EnsurePod(ctx, w.pod)
		if err != nil {
			t.Fatal(err)
		}
		if ps.Unit != w.slice || ps.CgroupPath != w.path {
			t.Errorf("pod %s: slice %s at %s, want %s at %s", w.pod.Name, ps.Unit, ps.CgroupPath, w.slice, w.path)
		}
		info, err := it.sd.Properties(ctx, w.slice)
		if err != nil {
			t.Fatal(err)
		}
		if info.ControlGroup != w.path || info.ActiveState != "active" {
			t.Errorf("pod %s: systemd reports %s %s", w.pod.Name, info.ControlGroup, info.ActiveState)
		}
		if it.mode.V2() {
			assertFile(t, it, w.path, "cpu", "cpu.weight", w.weight)
			assertFile(t, it, w.path, "cpu", "cpu.max", w.cpuMax)
			assertFile(t, it, w.path, "memory", "memory.max", w.memV2)
		} else {
			assertFile(t, it, w.path, "cpu", "cpu.shares", w.shares)
			assertFile(t, it, w.path, "cpu", "cpu.cfs_quota_us", w.quota)
			assertFile(t, it, w.path, "cpu", "cpu.cfs_period_us", "100000")
			assertFile(t, it, w.path, "memory", "memory.limit_in_bytes", w.memV1)
		}
	}

	// Burstable QoS slice follows Σ cpu requests.
	burstableShares := func() string {
		if err := m.UpdateQoS(ctx); err != nil {
			t.Fatal(err)
		}
		if it.mode.V2() {
			return it.file(t, "/kubepods.slice/kubepods-burstable.slice", "cpu", "cpu.weight")
		}
		return it.file(t, "/kubepods.slice/kubepods-burstable.slice", "cpu", "cpu.shares")
	}
	expect := func(milli int64) string {
		s := slices.MilliCPUToShares(milli)
		if it.mode.V2() {
			return strconv.FormatUint(slices.CPUSharesToWeight(s), 10)
		}
		return strconv.FormatUint(s, 10)
	}
	if got := burstableShares(); got != expect(100) {
		t.Errorf("burstable with one pod = %s, want %s", got, expect(100))
	}
	b2 := b.DeepCopy()
	b2.Name, b2.UID = "second", "aaaa-0004"
	b2.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	if _, err := m.EnsurePod(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if got := burstableShares(); got != expect(2100) {
		t.Errorf("burstable with two pods = %s, want %s", got, expect(2100))
	}
	if it.mode.V2() {
		assertFile(t, it, "/kubepods.slice/kubepods-besteffort.slice", "cpu", "cpu.weight", "1")
	} else {
		assertFile(t, it, "/kubepods.slice/kubepods-besteffort.slice", "cpu", "cpu.shares", "2")
	}

	// Destroy leaves no cgroup directories in any hierarchy.
	for _, uid := range []string{"aaaa-0003", "aaaa-0004"} {
		if err := m.DestroyPod(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	if got := burstableShares(); got != expect(0) {
		t.Errorf("burstable with no pods = %s, want %s", got, expect(0))
	}
	for _, p := range []string{want[2].path, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_0004.slice"} {
		if dirs := it.cg.Dirs(p); len(dirs) > 0 {
			t.Errorf("cgroup left after destroy: %v", dirs)
		}
	}
}

func assertFile(t *testing.T, it *itEnv, cgPath, controller, name, want string) {
	t.Helper()
	if got := it.file(t, cgPath, controller, name); got != want {
		t.Errorf("%s %s = %s, want %s", cgPath, name, got, want)
	}
}

// TestIntegrationDestroyKillsEverything: a pod slice with a running service and a stray process
// is destroyed completely.
func TestIntegrationDestroyKillsEverything(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	m := it.manager(t, itNodeConfig())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, b := classicPods()
	ps, err := m.EnsurePod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	svc := "slicelet-test-sleeper.service"
	if err := it.sd.StartService(ctx, svc, []units.Property{
		{Name: "Slice", Value: ps.Unit},
		{Name: "ExecStart", Value: []units.Exec{{Path: "/bin/sleep", Args: []string{"/bin/sleep", "1000"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	// A stray: a process put into the pod's cgroup behind systemd's back. On cgroup v1 it sits
	// only in the memory hierarchy, where systemd's stop does not look, so only slicelet's
	// leftover sweep can kill it; on v2 it sits in a child cgroup of the slice.
	stray := exec.Command("/bin/sleep", "1000")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	defer stray.Process.Kill()
	strayDir := filepath.Join(it.root, "memory", ps.CgroupPath)
	if it.mode.V2() {
		strayDir = filepath.Join(it.root, ps.CgroupPath, "stray")
		if err := os.Mkdir(strayDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(strayDir, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan error, 1)
	go func() { strayDone <- stray.Wait() }()

	pids, err := it.cg.Pids(ps.CgroupPath)
	if err != nil || len(pids) < 2 {
		t.Fatalf("want the service and the stray in the pod slice: %v %v", pids, err)
	}
	if err := m.DestroyPod(ctx, string(b.UID)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); !strings.Contains(string(b), ") Z ") {
				t.Errorf("pid %d still alive after destroy", pid)
			}
		}
	}
	if dirs := it.cg.Dirs(ps.CgroupPath); len(dirs) > 0 {
		t.Errorf("cgroup left: %v", dirs)
	}
	select {
	case <-strayDone:
	case <-time.After(5 * time.Second):
		t.Error("the stray process survived the destroy")
	}
	if list, _ := it.sd.List(ctx, svc); len(list) > 0 && list[0].ActiveState == "active" {
		t.Errorf("service still active: %+v", list[0])
	}
}

// TestIntegrationOrphansAndRestart: slices left by an earlier run are adopted when their pod is
// still wanted (no duplicate) and destroyed as orphans when not.
func TestIntegrationOrphansAndRestart(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	m := it.manager(t, itNodeConfig())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g, be, b := classicPods()
	for _, p := range []*v1.Pod{g, be, b} {
		if _, err := m.EnsurePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	// "Restart": a new connection and a new Manager that only knows g and b.
	sd2, err := units.Connect(ctx, units.Options{CgroupRoot: it.root})
	if err != nil {
		t.Fatal(err)
	}
	defer sd2.Close()
	m2 := New(sd2, it.cg, Config{Capacity: it.cap, Node: itNodeConfig(), Pod: slices.DefaultOptions()}, nil)
	if err := m2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{g, b} {
		if _, err := m2.EnsurePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	done, err := m2.CleanupOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].UID != "aaaa-0002" {
		t.Errorf("orphans cleaned = %v, want the BestEffort pod only", done)
	}
	list, err := sd2.List(ctx, "kubepods*.slice")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range list {
		if u.ActiveState == "active" {
			names = append(names, u.Name)
		}
	}
	want := "kubepods-besteffort.slice kubepods-burstable-podaaaa_0003.slice kubepods-burstable.slice kubepods-podaaaa_0001.slice kubepods.slice"
	if got := strings.Join(stdslices.Sorted(stdslices.Values(names)), " "); got != want {
		t.Errorf("active slices = %s\nwant %s", got, want)
	}
	if dirs := it.cg.Dirs("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podaaaa_0002.slice"); len(dirs) > 0 {
		t.Errorf("orphan cgroup left: %v", dirs)
	}
}

// TestIntegrationSystemctlSeesTree: the tree is visible to operators the usual way.
func TestIntegrationSystemctlSeesTree(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	m := it.manager(t, itNodeConfig())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, b := classicPods()
	if _, err := m.EnsurePod(ctx, b); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, "systemctl", "show", "-p", "Description", "-p", "ControlGroup", "kubepods-burstable-podaaaa_0003.slice").CombinedOutput()
	if err != nil {
		t.Fatalf("systemctl show: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "ControlGroup=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_0003.slice") ||
		!strings.Contains(string(out), "Description="+slices.PodSliceDescription(b)) {
		t.Errorf("systemctl show:\n%s", out)
	}
}

// TestIntegrationMemoryQoSTiers: with memory_reservation_policy TieredReservation on cgroup v2,
// Guaranteed pods get memory.min, Burstable pods memory.low, kubepods.slice memory.min = G + B
// and the Burstable slice memory.low = B (pkg/kubelet/cm/qos_container_manager_linux.go,
// setMemoryQoS; helpers_linux.go, ResourceConfigForPod). On cgroup v1 there is no memory QoS:
// nothing is written.
func TestIntegrationMemoryQoSTiers(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	node := itNodeConfig()
	node.QOS = slices.QOSOptions{EnforceMemoryQoS: it.mode.V2(), MemoryReservationPolicy: slices.MemoryReservationTiered}
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
	opts := slices.DefaultOptions()
	opts.EnforceMemoryQoS, opts.MemoryReservationPolicy = it.mode.V2(), slices.MemoryReservationTiered
	m := New(it.sd, it.cg, Config{Capacity: it.cap, Node: node, Pod: opts}, log)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g, be, b := classicPods()
	for _, p := range []*v1.Pod{g, be, b} {
		if _, err := m.EnsurePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.UpdateQoS(ctx); err != nil {
		t.Fatal(err)
	}
	gPath, _ := slices.PodCgroupPath(v1.PodQOSGuaranteed, "aaaa-0001")
	bPath, _ := slices.PodCgroupPath(v1.PodQOSBurstable, "aaaa-0003")
	if !it.mode.V2() {
		for _, u := range []string{"kubepods.slice", "kubepods-burstable.slice"} {
			info, err := it.sd.Property(ctx, u, "org.freedesktop.systemd1.Slice", "MemoryMin")
			if err != nil || fmt.Sprint(info) != "0" {
				t.Errorf("%s MemoryMin = %v (%v), want 0: no memory QoS on cgroup v1", u, info, err)
			}
		}
		return
	}
	assertFile(t, it, gPath, "memory", "memory.min", "104857600")
	assertFile(t, it, bPath, "memory", "memory.low", "104857600")
	assertFile(t, it, "/kubepods.slice", "memory", "memory.min", "209715200")
	assertFile(t, it, "/kubepods.slice/kubepods-burstable.slice", "memory", "memory.low", "104857600")

	// The Burstable pod goes: its share of the tiers goes with it.
	if err := m.DestroyPod(ctx, "aaaa-0003"); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateQoS(ctx); err != nil {
		t.Fatal(err)
	}
	assertFile(t, it, "/kubepods.slice", "memory", "memory.min", "104857600")
	assertFile(t, it, "/kubepods.slice/kubepods-burstable.slice", "memory", "memory.low", "0")
}

// TestIntegrationReservedCgroups: system-reserved enforcement limits the existing system.slice
// (never creating it); a reserved cgroup that does not exist is refused with a clear error and
// nothing is created.
func TestIntegrationReservedCgroups(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil))

	node := itNodeConfig()
	node.Enforcement.SystemReservedCompressible = true
	missing := New(it.sd, it.cg, Config{Capacity: it.cap, Node: node, Pod: slices.DefaultOptions(), SystemReservedCgroup: "/nonexistent-reserved.slice"}, log)
	err := missing.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), `system_reserved_cgroup "/nonexistent-reserved.slice"`) {
		t.Fatalf("Start with a missing reserved cgroup = %v", err)
	}
	if list, _ := it.sd.List(ctx, "kubepods*.slice", "nonexistent-reserved.slice"); len(list) != 0 {
		t.Errorf("units created despite the error: %+v", list)
	}

	m := New(it.sd, it.cg, Config{Capacity: it.cap, Node: node, Pod: slices.DefaultOptions(), SystemReservedCgroup: "/system.slice"}, log)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Give system.slice its default weight back for the tests after this one.
		_ = it.sd.SetProperties(context.Background(), "system.slice", slices.SliceProperties(slices.ResourceConfig{CPUShares: ptr(uint64(1024))}, it.mode))
	})
	if it.mode.V2() {
		assertFile(t, it, "/system.slice", "cpu", "cpu.weight", "4")
	} else {
		assertFile(t, it, "/system.slice", "cpu", "cpu.shares", "102")
	}
	// Compressible only: no memory limit on system.slice.
	if it.mode.V2() {
		assertFile(t, it, "/system.slice", "memory", "memory.max", "max")
	} else {
		assertFile(t, it, "/system.slice", "memory", "memory.limit_in_bytes", v1Unlimited)
	}
}

func ptr[T any](v T) *T { return &v }

// TestIntegrationCgroupFSKill: Kill empties a cgroup whose processes systemd does not know
// (written to cgroup.procs behind its back), with cgroup.kill on cgroup v2 and with pidfds
// (the cgroup v1 way, also tried on v2), and reports nothing left.
func TestIntegrationCgroupFSKill(t *testing.T) {
	it := newIT(t)
	strategies := []struct {
		name string
		cg   *CgroupFS
	}{{"default", it.cg}}
	if it.mode.V2() {
		strategies = append(strategies, struct {
			name string
			cg   *CgroupFS
		}{"pidfd on v2", &CgroupFS{Root: it.cg.Root, Unified: true, noCgroupKill: true}})
	}
	for _, st := range strategies {
		t.Run(st.name, func(t *testing.T) {
			cgPath := "/slicelet-killtest.slice"
			// On v1 the processes sit in the memory hierarchy only.
			dir := filepath.Join(it.root, "memory", cgPath)
			if it.mode.V2() {
				dir = filepath.Join(it.root, cgPath)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.cg.Remove(cgPath) })
			var done []chan error
			for range 3 {
				cmd := exec.Command("/bin/sleep", "1000")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill() })
				if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
					t.Fatal(err)
				}
				ch := make(chan error, 1)
				go func() { ch <- cmd.Wait() }()
				done = append(done, ch)
			}
			res, err := st.cg.Kill(cgPath, 5*time.Second)
			if err != nil || res.Signalled != 3 || len(res.Left) != 0 {
				t.Fatalf("Kill = %+v, %v; want 3 signalled, none left", res, err)
			}
			for i, ch := range done {
				select {
				case err := <-ch:
					if !strings.Contains(fmt.Sprint(err), "killed") {
						t.Errorf("process %d: %v, want killed", i, err)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("process %d survived Kill", i)
				}
			}
			// An empty (or missing) cgroup: nothing to do.
			if res, err := st.cg.Kill(cgPath, time.Second); err != nil || res.Signalled != 0 || len(res.Left) != 0 {
				t.Errorf("Kill of an empty cgroup = %+v, %v", res, err)
			}
			if err := st.cg.Remove(cgPath); err != nil {
				t.Fatal(err)
			}
			if res, err := st.cg.Kill(cgPath, time.Second); err != nil || res.Signalled != 0 {
				t.Errorf("Kill of a removed cgroup = %+v, %v", res, err)
			}
		})
	}
}
