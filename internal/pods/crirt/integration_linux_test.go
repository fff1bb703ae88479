package crirt

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	stdslices "slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

// testImage is the busybox image every integration test imports.
const testImage = "slicelet.test/busybox:1"

// fastBackoff keeps restart tests short; the kubelet's values are tested with the fake.
var fastBackoff = lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 400 * time.Millisecond}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// itEnv is a private containerd in the sandbox, systemd, a slice manager and the runtime's
// directories.
type itEnv struct {
	env   systemdtest.Env
	ctrd  *critest.Containerd
	sd    *units.Manager
	sl    *hierarchy.Manager
	state string
	logs  string
	log   *slog.Logger
	mem   int64
	mu    sync.Mutex
	rts   []*Runtime
	// objects are the ConfigMaps and Secrets the workers see.
	objects *pods.Objects
	// podNetwork: pods without spec.hostNetwork get the sandbox's network (runtime.network =
	// "cni"); else every pod is on the host's network.
	podNetwork bool
	// dns is the workers' node DNS (worker.Options.DNS); nil leaves it to containerd.
	dns *lifecycle.NodeDNS
}

// sandboxOnly runs t in the hybrid sandbox only: CRI behaviour that does not depend on the cgroup
// layout. TestIntegrationScopeInPodSlice covers CRI on cgroup v2 in the VM, where containerd under
// software emulation makes each of these tests take half a minute.
func sandboxOnly(t *testing.T) {
	t.Helper()
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "CRI lifecycle and GC do not depend on the cgroup layout; TestIntegrationScopeInPodSlice covers CRI on cgroup v2")
}

func newIT(tb testing.TB, opts critest.Options) *itEnv {
	tb.Helper()
	env := systemdtest.Require(tb)
	opts.Logf = tb.Logf
	ctrd := critest.Start(tb, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ctrd.ImportImage(ctx, critest.Image{Name: testImage, Cmd: []string{"/bin/sh"}}); err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLogWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if _, bench := tb.(*testing.B); bench {
		log = slog.New(slog.DiscardHandler)
	}
	sd, err := units.Connect(ctx, units.Options{Logger: log, CgroupRoot: env.CgroupRoot})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sd.Close() })
	capacity, err := slices.ReadCapacity("/proc", "/sys", "")
	if err != nil {
		tb.Fatal(err)
	}
	sl := hierarchy.New(sd, hierarchy.NewCgroupFS(env.CgroupRoot), hierarchy.Config{
		Capacity: capacity,
		Node:     slices.NodeConfig{Enforcement: slices.Enforcement{Pods: true}},
		Pod:      slices.DefaultOptions(),
	}, log)
	if err := sl.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "crirt-it")
	if err != nil {
		tb.Fatal(err)
	}
	it := &itEnv{env: env, ctrd: ctrd, sd: sd, sl: sl, state: filepath.Join(dir, "state"), logs: filepath.Join(dir, "logs"), log: log, mem: capacity.Memory, objects: pods.NewObjects()}
	tb.Cleanup(func() {
		it.mu.Lock()
		for _, rt := range it.rts {
			_ = rt.Close()
		}
		it.mu.Unlock()
		for _, p := range sl.Pods() {
			_ = sl.DestroyPod(context.Background(), p.UID)
		}
		_ = os.RemoveAll(dir)
	})
	return it
}

// full is the pod worker over the CRI runtime with the runtime's image side and GC's views, as
// the daemon wires them.
type full struct {
	*worker.Worker
	gc.ContainerRuntime
	gc.SandboxRuntime
	back *Runtime
}

func (f *full) ListImages(ctx context.Context) ([]gc.ListedImage, error) {
	return f.back.ListImages(ctx)
}
func (f *full) ImageFsInfo(ctx context.Context) (gc.ImageFsInfo, error) {
	return f.back.ImageFsInfo(ctx)
}
func (f *full) RemoveImage(ctx context.Context, id string) error { return f.back.RemoveImage(ctx, id) }
func (f *full) WaitReady(ctx context.Context) error              { return f.back.WaitReady(ctx) }

// runtime returns the pod worker over a new runtime instance over the environment's state (a
// new one models a restart of slicelet), with the runtime's image side and GC's views.
func (it *itEnv) runtime(tb testing.TB) *full {
	w, rt := it.runtimes(tb)
	return &full{Worker: w, ContainerRuntime: w.ContainerGC(), SandboxRuntime: w.SandboxGC(), back: rt}
}

// runtimes is runtime, with the runtime under the worker.
func (it *itEnv) runtimes(tb testing.TB) (*worker.Worker, *Runtime) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := New(context.Background(), Options{
		Endpoint: it.ctrd.Endpoint, SandboxImage: it.ctrd.SandboxImage, LogRoot: it.logs, Logger: it.log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	it.mu.Lock()
	it.rts = append(it.rts, rt)
	it.mu.Unlock()
	w, err := worker.New(worker.Options{Runtime: rt, Images: rt, Recorder: &record.FakeRecorder{}, StateDir: it.state, Logger: it.log,
		MemoryCapacity: it.mem, Resources: slices.DefaultOptions(), Backoff: fastBackoff, HostNetwork: !it.podNetwork, Objects: it.objects, DNS: it.dns})
	if err != nil {
		tb.Fatal(err)
	}
	return w, rt
}

func (it *itEnv) slice(tb testing.TB, pod *v1.Pod) slices.PodSlice {
	tb.Helper()
	ps, err := it.sl.EnsurePod(context.Background(), pod)
	if err != nil {
		tb.Fatal(err)
	}
	return ps
}

func container(name, script string) v1.Container {
	return v1.Container{Name: name, Image: testImage, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh", "-c", script}}
}

// TestIntegrationConformance runs the shared pod-lifecycle suite against containerd.
func TestIntegrationConformance(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	runtimetest.Run(t, runtimetest.Harness{
		NewRuntime: func(t *testing.T) *worker.Worker { return it.runtime(t).Worker },
		Slice:      func(t *testing.T, pod *v1.Pod) slices.PodSlice { return it.slice(t, pod) },
		DestroySlice: func(t *testing.T, uid string) {
			if err := it.sl.DestroyPod(context.Background(), uid); err != nil {
				t.Errorf("destroy slice: %v", err)
			}
		},
		Container: container,
		Objects:   it.objects,
	})
}

func itPod(name, uid string, cs ...v1.Container) *v1.Pod {
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: cs, TerminationGracePeriodSeconds: &grace},
	}
}

func syncUntil(t *testing.T, rt *full, pod *v1.Pod, slice slices.PodSlice, what string, cond func(v1.PodStatus, error) bool) v1.PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := rt.SyncPod(t.Context(), pod, slice)
		if cond(st, err) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %s: not reached in 30s: %v, phase %s, %s", pod.Name, what, err, st.Phase, runtimetest.Describe(st))
		}
		<-tick.C
	}
}

func running(st v1.PodStatus, err error) bool {
	return err == nil && st.Phase == v1.PodRunning && len(st.ContainerStatuses) > 0 && st.ContainerStatuses[0].State.Running != nil
}

// TestIntegrationScopeInPodSlice: the container's cgroup is cri-containerd-<id>.scope under the
// pod slice, with the kubelet's container limits; its output is in the CRI log file and Logs
// reads it as plain lines.
func TestIntegrationScopeInPodSlice(t *testing.T) {
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)
	c := container("main", "echo hello-from-cri; echo to-stderr >&2; trap 'exit 0' TERM; while true; do sleep 0.1; done")
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	pod := itPod("scoped", "it-scope-1", c)
	slice := it.slice(t, pod)
	st := syncUntil(t, rt, pod, slice, "running", running)
	id := strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "containerd://")
	scope := "cri-containerd-" + id + ".scope"
	cg := hierarchy.NewCgroupFS("/sys/fs/cgroup")
	want := []struct{ controller, file, want string }{
		{"memory", "memory.limit_in_bytes", "67108864"},
		{"cpu", "cpu.cfs_quota_us", "20000"},
		{"cpu", "cpu.shares", "102"},
	}
	if it.env.Where == "vm" { // pure cgroup v2: the same limits in the unified files
		want = []struct{ controller, file, want string }{
			{"memory", "memory.max", "67108864"},
			{"cpu", "cpu.max", "20000 100000"},
			{"cpu", "cpu.weight", "4"},
		}
	}
	for _, c := range want {
		path := slice.CgroupPath + "/" + scope
		got, err := cg.Read(path, c.controller, c.file)
		if err != nil {
			t.Errorf("container cgroup %s: %v", path, err)
			continue
		}
		if strings.TrimSpace(got) != c.want {
			t.Errorf("%s %s = %s, want %s", path, c.file, got, c.want)
		}
	}
	// The runtime reports the container's writable layer (its usage counts in the pod's
	// ephemeral storage).
	if layers, err := rt.back.WritableLayers(t.Context(), pod); err != nil {
		t.Errorf("WritableLayers: %v", err)
	} else if _, ok := layers["main"]; !ok {
		t.Errorf("WritableLayers = %v, want the main container's layer", layers)
	}
	list, err := it.sd.List(t.Context(), scope)
	if err != nil || len(list) != 1 || list[0].ActiveState != "active" {
		t.Errorf("systemd unit %s: %+v, %v; want it active", scope, list, err)
	}
	path := filepath.Join(it.logs, "default_scoped_it-scope-1", "main", "0.log")
	var buf bytes.Buffer
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(buf.String(), "to-stderr") && time.Now().Before(deadline) {
		<-tick.C
		buf.Reset()
		if err := rt.Logs(t.Context(), pod, "main", pods.LogOptions{}, &buf); err != nil {
			t.Fatal(err)
		}
	}
	// stdout and stderr are separate pipes: containerd timestamps each line as it reads it, so
	// the two lines may come in either order.
	if got := buf.String(); got != "hello-from-cri\nto-stderr\n" && got != "to-stderr\nhello-from-cri\n" {
		t.Errorf("Logs = %q, want both lines", got)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(raw), " stdout F hello-from-cri") {
		t.Errorf("CRI log file %s: %q, %v", path, raw, err)
	}
	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(path))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod log directory after Forget: %v", err)
	}
}

// TestIntegrationRuntimeRestart: while containerd is down SyncPod fails with
// pods.ErrRuntimeUnavailable naming the endpoint and nothing is removed; the container keeps
// running in its shim; when containerd is back the runtime reconnects and the pod is resynced
// with the same container (no duplicate start).
func TestIntegrationRuntimeRestart(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)
	pod := itPod("restart", "it-restart-1", container("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	slice := it.slice(t, pod)
	st := syncUntil(t, rt, pod, slice, "running", running)
	id := st.ContainerStatuses[0].ContainerID

	if err := it.ctrd.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err := rt.SyncPod(t.Context(), pod, slice)
	if !errors.Is(err, pods.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), it.ctrd.Endpoint) {
		t.Fatalf("SyncPod with containerd down: %v; want ErrRuntimeUnavailable naming %s", err, it.ctrd.Endpoint)
	}
	if _, err := rt.PodUIDs(t.Context()); !errors.Is(err, pods.ErrRuntimeUnavailable) {
		t.Errorf("PodUIDs with containerd down: %v", err)
	}
	if err := it.ctrd.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := rt.WaitReady(ctx); err != nil {
		t.Fatalf("runtime did not reconnect: %v", err)
	}
	st = syncUntil(t, rt, pod, slice, "running again", running)
	if got := st.ContainerStatuses[0]; got.ContainerID != id || got.RestartCount != 0 {
		t.Errorf("after the containerd restart: %s (%s); want the same container %s, no restart", runtimetest.Describe(st), got.ContainerID, id)
	}
	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationSandboxDiedInitContainers: containerd stops the pod's sandbox behind slicelet's
// back; the next syncs run the pod in a new sandbox (attempt 1), the init container again, to
// completion, before the app container, both with restart count 1.
func TestIntegrationSandboxDiedInitContainers(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)
	pod := itPod("reinit", "it-reinit-1", container("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	pod.Spec.InitContainers = []v1.Container{container("init", "exit 0")}
	slice := it.slice(t, pod)
	syncUntil(t, rt, pod, slice, "running", running)
	sbs, err := rt.back.ListPodSandbox(t.Context(), string(pod.UID))
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v: %v", sbs, err)
	}
	if err := rt.StopSandbox(t.Context(), sbs[0].ID); err != nil {
		t.Fatal(err)
	}
	st := syncUntil(t, rt, pod, slice, "running in a new sandbox", func(st v1.PodStatus, err error) bool {
		return running(st, err) && st.ContainerStatuses[0].RestartCount == 1
	})
	ics, cs := st.InitContainerStatuses[0], st.ContainerStatuses[0]
	if ics.RestartCount != 1 || ics.State.Terminated == nil || ics.State.Terminated.ExitCode != 0 || ics.LastTerminationState.Terminated == nil {
		t.Fatalf("init container after the sandbox died: %s", runtimetest.Describe(st))
	}
	if ics.State.Terminated.FinishedAt.After(cs.State.Running.StartedAt.Time) {
		t.Errorf("app started at %v, before the init container finished at %v", cs.State.Running.StartedAt, ics.State.Terminated.FinishedAt)
	}
	sbs, err = rt.back.ListPodSandbox(t.Context(), string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, sb := range sbs {
		if sb.Ready {
			ready++
			if sb.Attempt != 1 {
				t.Errorf("new sandbox attempt %d, want 1", sb.Attempt)
			}
		}
	}
	if ready != 1 {
		t.Errorf("ready sandboxes %d of %d, want 1", ready, len(sbs))
	}
	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationGCPrimitives: the image and container GC primitives against containerd.
func TestIntegrationGCPrimitives(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{ImageFsSize: 256 << 20})
	rt := it.runtime(t)
	ctx := t.Context()
	if err := it.ctrd.ImportImage(ctx, critest.Image{Name: "slicelet.test/extra:1", RandomMiB: 4}); err != nil {
		t.Fatal(err)
	}
	imgs, err := rt.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, img := range imgs {
		for _, n := range img.Names {
			byName[n] = img.ID
		}
		if img.SizeBytes <= 0 || !strings.HasPrefix(img.ID, "sha256:") {
			t.Errorf("image %+v", img)
		}
	}
	// Without the option, the sandbox image comes from containerd's own configuration.
	unset := it.runtime(t).back
	unset.opts.SandboxImage = ""
	if img, err := unset.SandboxImage(ctx); err != nil || img != critest.DefaultSandboxImage {
		t.Errorf("SandboxImage from containerd's status = %q, %v; want %s", img, err, critest.DefaultSandboxImage)
	}
	for _, n := range []string{testImage, critest.DefaultSandboxImage, "slicelet.test/extra:1"} {
		if byName[n] == "" {
			t.Errorf("ListImages has no %s: %+v", n, imgs)
		}
	}
	// containerd measures its image fs every stats_collect_period (1 s here): the first
	// numbers after its start may be zeros.
	fs, err := rt.ImageFsInfo(ctx)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); err == nil && fs.UsedBytes == 0 && time.Now().Before(deadline); {
		<-tick.C
		fs, err = rt.ImageFsInfo(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fs.CapacityBytes != 256<<20 || fs.AvailableBytes <= 0 || fs.AvailableBytes > fs.CapacityBytes || fs.UsedBytes <= 0 || fs.Timestamp.IsZero() {
		t.Errorf("ImageFsInfo = %+v; want the 256 MiB tmpfs", fs)
	}

	pod := itPod("gc", "it-gc-1", container("main", "echo once; exit 0"))
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	slice := it.slice(t, pod)
	st := syncUntil(t, rt, pod, slice, "succeeded", func(st v1.PodStatus, err error) bool { return err == nil && st.Phase == v1.PodSucceeded })
	id := strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "containerd://")
	ctrs, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := stdslices.IndexFunc(ctrs, func(c gc.Container) bool { return c.ID == id })
	if i < 0 || ctrs[i].PodUID != "it-gc-1" || ctrs[i].Name != "main" || ctrs[i].State != "exited" || ctrs[i].ImageID != byName[testImage] || ctrs[i].SandboxID == "" || ctrs[i].CreatedAt.IsZero() {
		t.Fatalf("ListContainers = %+v; want exited main of it-gc-1 using %s", ctrs, byName[testImage])
	}
	// The pod finished: its sandbox is stopped (not ready), and stays for its containers.
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil || len(sbs) != 1 || sbs[0].PodUID != "it-gc-1" || sbs[0].Ready || sbs[0].ID != ctrs[i].SandboxID {
		t.Fatalf("ListSandboxes = %+v, %v", sbs, err)
	}
	logFile := filepath.Join(it.logs, "default_gc_it-gc-1", "main", "0.log")
	if _, err := os.Stat(logFile); err != nil {
		t.Fatal(err)
	}
	if err := rt.StopContainer(ctx, id); err != nil {
		t.Errorf("StopContainer of an exited container: %v", err)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log file after RemoveContainer: %v", err)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Errorf("RemoveContainer of a removed container: %v", err)
	}
	if err := rt.StopSandbox(ctx, sbs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveSandbox(ctx, sbs[0].ID); err != nil {
		t.Fatal(err)
	}
	if sbs, err := rt.ListSandboxes(ctx); err != nil || len(sbs) != 0 {
		t.Errorf("ListSandboxes after removal = %+v, %v", sbs, err)
	}
	if err := rt.RemoveImage(ctx, byName["slicelet.test/extra:1"]); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveImage(ctx, byName["slicelet.test/extra:1"]); err != nil {
		t.Errorf("RemoveImage of a removed image: %v", err)
	}
	imgs, _ = rt.ListImages(ctx)
	for _, img := range imgs {
		if img.ID == byName["slicelet.test/extra:1"] {
			t.Errorf("image still listed after RemoveImage: %+v", img)
		}
	}
	if err := rt.Forget(ctx, "it-gc-1"); err != nil {
		t.Fatal(err)
	}
}
