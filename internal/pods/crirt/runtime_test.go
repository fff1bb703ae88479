package crirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	stdslices "slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/podstats"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

const fakeImage = "example.test/app:1"

// env is a fake CRI server, a runtime connected to it and the pod worker over the runtime.
type env struct {
	clock *fakeClock
	cri   *fakeCRI
	srv   *fakeServer
	rt    *worker.Worker
	back  *Runtime
	opts  Options
	wopts worker.Options
}

func newEnv(t *testing.T) *env { return newBenchEnv(t) }

func newBenchEnv(t testing.TB) *env {
	t.Helper()
	clock := newFakeClock(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
	cri := newFakeCRI(clock)
	cri.addImage("sha256:app", 5<<20, fakeImage)
	srv := startFake(t, cri)
	dir := shortDir(t)
	e := &env{clock: clock, cri: cri, srv: srv, opts: Options{
		Endpoint: srv.endpoint(), SandboxImage: "example.test/pause:1",
		LogRoot: filepath.Join(dir, "logs"), RetryInitial: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond,
	}, wopts: worker.Options{
		Recorder: &record.FakeRecorder{}, StateDir: filepath.Join(dir, "state"), Clock: clock,
		MemoryCapacity: 8 << 30, Resources: slices.DefaultOptions(), HostNetwork: true,
	}}
	e.rt = e.newRuntime(t)
	return e
}

// newRuntime connects a new runtime to the server and returns the pod worker over it (a new
// one models a restart of slicelet); e.back is the new runtime.
func (e *env) newRuntime(t testing.TB) *worker.Worker {
	t.Helper()
	rt, err := New(t.Context(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := rt.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	opts := e.wopts
	opts.Runtime, opts.Images = rt, rt
	w, err := worker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.back = rt
	return w
}

func fakePod(uid string, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Containers: cs, RestartPolicy: policy},
	}
}

func app(name string) v1.Container {
	return v1.Container{Name: name, Image: fakeImage, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/app"}}
}

var testSlice = slices.PodSlice{UID: "u1", Unit: "kubepods-burstable-podu1.slice"}

func (e *env) sync(t *testing.T, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	st, err := e.rt.SyncPod(t.Context(), pod, testSlice)
	if err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	return st
}

func (e *env) calls(name string) int {
	e.cri.mu.Lock()
	defer e.cri.mu.Unlock()
	return e.cri.calls[name]
}

func TestParseEndpoint(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"unix url", "unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", ""},
		{"bare path", "/run/crio/crio.sock", "/run/crio/crio.sock", ""},
		{"tcp", "tcp://127.0.0.1:1234", "", `cri endpoint "tcp://127.0.0.1:1234": only unix:// endpoints are supported`},
		{"relative", "unix://run/x.sock", "", `cri endpoint "unix://run/x.sock": want unix:///absolute/path.sock`},
		{"empty", "", "", `cri endpoint "": want unix:///absolute/path.sock`},
		{"too long", "unix:///" + strings.Repeat("a", 120), "", "unix sockets allow 107"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseEndpoint(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseEndpoint(%q) = %q, %v; want error %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseEndpoint(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
}

// TestConnBackoff: while the endpoint fails, probes come after 0.5, 1, 2, 4 s … capped at the
// maximum; a success resets the back-off; a call that finds the runtime gone probes at once.
func TestConnBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		failing := true
		start := time.Now()
		probe := func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Since(start))
			if failing {
				return errors.New("dial unix /run/x.sock: connect: no such file or directory")
			}
			return nil
		}
		c := newConn("unix:///run/x.sock", slog.New(slog.DiscardHandler), clock.RealClock{}, 500*time.Millisecond, 4*time.Second, probe)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.run(ctx)
		time.Sleep(12 * time.Second)
		synctest.Wait()
		mu.Lock()
		want := []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 3500 * time.Millisecond, 7500 * time.Millisecond, 11500 * time.Millisecond}
		if len(at) != len(want) {
			t.Fatalf("probes at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Fatalf("probes at %v, want %v", at, want)
			}
		}
		failing = false
		mu.Unlock()
		err := c.ready()
		if !errors.Is(err, pods.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), "unix:///run/x.sock") || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("ready() while down = %v; want ErrRuntimeUnavailable naming the endpoint and the cause", err)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if err := c.ready(); err != nil {
			t.Fatalf("ready() after a successful probe: %v", err)
		}
		// A call finds the runtime gone: marked down, probed again at once.
		mu.Lock()
		n := len(at)
		failing = true
		mu.Unlock()
		if err := c.check(status.Error(codes.Unavailable, "connection refused")); !errors.Is(err, pods.ErrRuntimeUnavailable) {
			t.Errorf("check(Unavailable) = %v", err)
		}
		synctest.Wait()
		mu.Lock()
		if len(at) != n+1 || c.ready() == nil {
			t.Errorf("after a call saw Unavailable: %d probes (want %d), ready %v", len(at), n+1, c.ready())
		}
		mu.Unlock()
		// The back-off restarts from the initial wait.
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		if len(at) != n+2 {
			t.Errorf("probes after the initial wait: %d, want %d", len(at), n+2)
		}
		mu.Unlock()
	})
}

// TestNewUnreachableEndpoint: a socket nobody listens on is not an error at New (the daemon
// stays up), but every call fails with ErrRuntimeUnavailable naming the endpoint.
func TestNewUnreachableEndpoint(t *testing.T) {
	endpoint := "unix://" + filepath.Join(shortDir(t), "nothing.sock")
	rt, err := New(t.Context(), Options{Endpoint: endpoint, RetryInitial: time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer rt.Close()
	w, err := worker.New(worker.Options{Runtime: rt, Images: rt, Recorder: &record.FakeRecorder{}, StateDir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Err": rt.Err(),
		"SyncPod": func() error {
			_, err := w.SyncPod(t.Context(), fakePod("u1", "", app("a")), testSlice)
			return err
		}(),
		"PodUIDs": func() error { _, err := w.PodUIDs(t.Context()); return err }(),
		"KillPod": func() error {
			_, err := w.KillPod(t.Context(), fakePod("u1", "", app("a")), 0)
			return err
		}(),
		"ListImages": func() error { _, err := rt.ListImages(t.Context()); return err }(),
	} {
		if !errors.Is(err, pods.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), endpoint) {
			t.Errorf("%s: %v; want ErrRuntimeUnavailable naming %s", name, err, endpoint)
		}
	}
}

// TestNewNotCRI: an endpoint that speaks gRPC but not CRI is reported as such.
func TestNewNotCRI(t *testing.T) {
	sock := filepath.Join(shortDir(t), "other.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	rt, err := New(t.Context(), Options{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := rt.Err(); !errors.Is(err, pods.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), "not a CRI v1 runtime") {
		t.Errorf("Err() = %v; want it to say the endpoint is not a CRI runtime", err)
	}
}

func TestNewBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		err  string
	}{
		{"tcp endpoint", Options{Endpoint: "tcp://1.2.3.4:5"}, `cri endpoint "tcp://1.2.3.4:5"`},
		{"relative log root", Options{Endpoint: "unix:///run/x.sock", LogRoot: "logs"}, `log root "logs"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(t.Context(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("New = %v, want error with %q", err, c.err)
			}
		})
	}
}

// TestSyncPodRequests: the sandbox is in the pod slice with host network and the kubelet's
// labels; the container gets its resources, PID namespace CONTAINER, restart count and log
// path.
func TestSyncPodRequests(t *testing.T) {
	e := newEnv(t)
	c := app("main")
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
	}
	c.Env = []v1.EnvVar{{Name: "A", Value: "1"}}
	pod := fakePod("u1", "", c)
	st := e.sync(t, pod)
	if st.Phase != v1.PodRunning || st.ContainerStatuses[0].State.Running == nil || st.ContainerStatuses[0].ImageID != "sha256:app" {
		t.Fatalf("status: %+v", st)
	}
	e.cri.mu.Lock()
	defer e.cri.mu.Unlock()
	if len(e.cri.sandboxes) != 1 || len(e.cri.containers) != 1 {
		t.Fatalf("sandboxes %d containers %d, want 1 and 1", len(e.cri.sandboxes), len(e.cri.containers))
	}
	for _, sb := range e.cri.sandboxes {
		cfg := sb.cfg
		ns := cfg.Linux.SecurityContext.NamespaceOptions
		if cfg.Linux.CgroupParent != testSlice.Unit || ns.Network != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_CONTAINER || cfg.Hostname != "" {
			t.Errorf("sandbox linux config: %+v", cfg.Linux)
		}
		if cfg.LogDirectory != filepath.Join(e.opts.LogRoot, "default_web_u1") {
			t.Errorf("log directory %s", cfg.LogDirectory)
		}
		if cfg.Labels[worker.LabelPodUID] != "u1" || cfg.Labels[worker.LabelPodName] != "web" || cfg.Labels[worker.LabelPodNamespace] != "default" || cfg.Labels["app"] != "web" || cfg.Labels[worker.LabelManaged] != "true" {
			t.Errorf("sandbox labels %v", cfg.Labels)
		}
	}
	for _, fc := range e.cri.containers {
		cfg := fc.cfg
		r := cfg.Linux.Resources
		if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 128<<20 || r.OomScoreAdj <= 0 || r.OomScoreAdj >= 1000 {
			t.Errorf("container resources %+v", r)
		}
		if cfg.Linux.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_CONTAINER {
			t.Errorf("container pid namespace %v", cfg.Linux.SecurityContext.NamespaceOptions.Pid)
		}
		if cfg.Labels[worker.LabelContainerName] != "main" || cfg.Labels[worker.LabelPodUID] != "u1" || cfg.Annotations[worker.AnnotationRestartCount] != "0" || cfg.Metadata.Attempt != 0 {
			t.Errorf("container labels %v annotations %v attempt %d", cfg.Labels, cfg.Annotations, cfg.Metadata.Attempt)
		}
		if cfg.LogPath != "main/0.log" || cfg.Image.Image != "sha256:app" || cfg.Image.UserSpecifiedImage != fakeImage || string(cfg.Envs[0].Value) != "1" {
			t.Errorf("container config: log %s image %+v envs %v", cfg.LogPath, cfg.Image, cfg.Envs)
		}
	}
}

// TestRestartsWithKubeletBackoff: the first restart is immediate, the next waits 10 s
// (CrashLoopBackOff), then 20 s; restart counts and last terminations follow; syncs in between
// start nothing.
func TestRestartsWithKubeletBackoff(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	e.sync(t, pod)
	e.cri.exit(t, "main", 1)
	st := e.sync(t, pod)
	cs := st.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Fatalf("after the first exit: %+v", cs)
	}
	e.clock.Advance(time.Second)
	e.cri.exit(t, "main", 1)
	st = e.sync(t, pod)
	cs = st.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || !strings.Contains(cs.State.Waiting.Message, "back-off 10s") || cs.RestartCount != 1 {
		t.Fatalf("after the second exit: %+v", cs)
	}
	if next := e.rt.NextSync("u1"); !next.Equal(e.clock.Now().Add(10 * time.Second)) {
		t.Errorf("NextSync = %v, want now+10s", next)
	}
	creates := e.calls("CreateContainer")
	e.clock.Advance(9 * time.Second)
	e.sync(t, pod)
	if e.calls("CreateContainer") != creates {
		t.Fatal("restarted during the back-off")
	}
	e.clock.Advance(time.Second)
	st = e.sync(t, pod)
	if cs := st.ContainerStatuses[0]; cs.RestartCount != 2 || cs.State.Running == nil {
		t.Fatalf("after the back-off: %+v", cs)
	}
	e.clock.Advance(time.Second)
	e.cri.exit(t, "main", 2)
	st = e.sync(t, pod)
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || !strings.Contains(w.Message, "back-off 20s") {
		t.Fatalf("third exit: %+v", st.ContainerStatuses[0])
	}
	// The back-off survives a new runtime instance (it is kept in the state dir).
	rt2 := e.newRuntime(t)
	st, err := rt2.SyncPod(t.Context(), pod, testSlice)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != lifecycle.ReasonCrashLoopBackOff {
		t.Fatalf("new runtime ignores the back-off: %+v", st.ContainerStatuses[0])
	}
}

// TestAdoption: a new runtime instance finds the running container (no second create), and
// starts a container that was created but never started instead of creating another.
func TestAdoption(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", "", app("main"), app("side"))
	st := e.sync(t, pod)
	id := st.ContainerStatuses[0].ContainerID
	// slicelet "crashed" between CreateContainer and StartContainer of side's next instance.
	e.cri.exit(t, "side", 0)
	e.cri.mu.Lock()
	var sbID string
	for id := range e.cri.sandboxes {
		sbID = id
	}
	e.cri.mu.Unlock()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "side", Attempt: 1},
		Image:    &runtimeapi.ImageSpec{Image: "sha256:app"},
		Labels: map[string]string{worker.LabelPodUID: "u1", worker.LabelPodName: "web", worker.LabelPodNamespace: "default",
			worker.LabelContainerName: "side", worker.LabelManaged: "true"},
	}
	if _, err := e.cri.CreateContainer(t.Context(), &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	creates, starts := e.calls("CreateContainer"), e.calls("StartContainer")

	rt2 := e.newRuntime(t)
	uids, err := rt2.PodUIDs(t.Context())
	if err != nil || len(uids) != 1 || uids[0] != "u1" {
		t.Fatalf("PodUIDs = %v, %v", uids, err)
	}
	st, err = rt2.SyncPod(t.Context(), pod, testSlice)
	if err != nil {
		t.Fatal(err)
	}
	if e.calls("CreateContainer") != creates || e.calls("StartContainer") != starts+1 || e.calls("RunPodSandbox") != 1 {
		t.Errorf("adoption: creates %d→%d starts %d→%d sandboxes %d", creates, e.calls("CreateContainer"), starts, e.calls("StartContainer"), e.calls("RunPodSandbox"))
	}
	if st.ContainerStatuses[0].ContainerID != id || st.ContainerStatuses[1].RestartCount != 1 || st.ContainerStatuses[1].State.Running == nil {
		t.Errorf("after adoption: %+v", st.ContainerStatuses)
	}
}

// TestRuntimeDownThenBack: with the runtime down every call fails with ErrRuntimeUnavailable and
// nothing is removed; when it is back the runtime reconnects and the pod is resynced with the
// same container.
func TestRuntimeDownThenBack(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", "", app("main"))
	id := e.sync(t, pod).ContainerStatuses[0].ContainerID
	e.srv.stop()
	_, err := e.rt.SyncPod(t.Context(), pod, testSlice)
	if !errors.Is(err, pods.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), e.srv.endpoint()) {
		t.Fatalf("SyncPod while down: %v", err)
	}
	if _, err := e.rt.KillPod(t.Context(), pod, 0); !errors.Is(err, pods.ErrRuntimeUnavailable) {
		t.Errorf("KillPod while down: %v", err)
	}
	if err := e.rt.Forget(t.Context(), "u1"); !errors.Is(err, pods.ErrRuntimeUnavailable) {
		t.Errorf("Forget while down: %v", err)
	}
	if _, err := e.rt.PodUIDs(t.Context()); !errors.Is(err, pods.ErrRuntimeUnavailable) {
		t.Errorf("PodUIDs while down: %v", err)
	}
	if _, err := e.rt.Relist(t.Context(), nil); !errors.Is(err, pods.ErrRuntimeUnavailable) {
		t.Errorf("Relist while down: %v", err)
	}
	e.srv.serve(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.back.WaitReady(ctx); err != nil {
		t.Fatalf("no reconnect: %v", err)
	}
	st := e.sync(t, pod)
	if st.ContainerStatuses[0].ContainerID != id || st.Phase != v1.PodRunning {
		t.Errorf("after reconnect: %+v", st)
	}
	if r := e.cri.removed(); r != "" {
		t.Errorf("removed on a transient failure: %s", r)
	}
}

// TestImagePullPolicies: the kubelet's semantics of Always, IfNotPresent, Never and the
// default policy, and the waiting reasons of failures.
func TestImagePullPolicies(t *testing.T) {
	cases := []struct {
		name    string
		image   string
		policy  v1.PullPolicy
		pullErr error
		pulls   int
		waiting string
		running bool
		event   string // the image event the kubelet records, by its prefix
	}{
		{"IfNotPresent and present", fakeImage, v1.PullIfNotPresent, nil, 0, "", true, `Normal Pulled Container image "example.test/app:1" already present on machine and can be accessed by the pod`},
		{"IfNotPresent and missing", "example.test/new:2", v1.PullIfNotPresent, nil, 1, "", true, `Normal Pulled Successfully pulled image "example.test/new:2" in 0s (0s including waiting). Image size: 1 bytes.`},
		{"Always and present", fakeImage, v1.PullAlways, nil, 1, "", true, `Normal Pulled Successfully pulled image "example.test/app:1"`},
		{"Never and present", fakeImage, v1.PullNever, nil, 0, "", true, `Normal Pulled Container image "example.test/app:1" already present on machine and can be accessed by the pod`},
		{"Never and missing", "example.test/new:2", v1.PullNever, nil, 0, lifecycle.ReasonErrImageNeverPull, false, `Warning ErrImageNeverPull Container image "example.test/new:2" is not present with pull policy of Never`},
		{"default for latest is Always", "example.test/app:latest", "", nil, 1, "", true, `Normal Pulling Pulling image "example.test/app:latest"`},
		{"default for a tag is IfNotPresent", fakeImage, "", nil, 0, "", true, `Normal Pulled Container image "example.test/app:1" already present`},
		{"pull fails", "example.test/new:2", v1.PullIfNotPresent, status.Error(codes.NotFound, "manifest unknown"), 1, lifecycle.ReasonImagePullBackOff, false, `Warning Failed Failed to pull image "example.test/new:2": `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			events := record.NewFakeRecorder(100)
			e.wopts.Recorder = events
			e.rt = e.newRuntime(t)
			e.cri.pullErr = c.pullErr
			ctr := app("main")
			ctr.Image, ctr.ImagePullPolicy = c.image, c.policy
			st := e.sync(t, fakePod("u1", "", ctr))
			cs := st.ContainerStatuses[0]
			if got := len(e.cri.pulls); got != c.pulls {
				t.Errorf("pulls = %d, want %d", got, c.pulls)
			}
			if c.running != (cs.State.Running != nil) {
				t.Errorf("running = %v, want %v: %+v", cs.State.Running != nil, c.running, cs.State)
			}
			if c.waiting != "" && (cs.State.Waiting == nil || cs.State.Waiting.Reason != c.waiting || !strings.Contains(cs.State.Waiting.Message, c.image)) {
				t.Errorf("waiting = %+v, want %s naming the image", cs.State.Waiting, c.waiting)
			}
			var got []string
			for len(events.Events) > 0 {
				got = append(got, <-events.Events)
			}
			if !stdslices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, c.event) }) {
				t.Errorf("events %q, want one starting %q", got, c.event)
			}
			if c.running && !stdslices.Contains(got, "Normal Started Container started") {
				t.Errorf("events %q, want Started", got)
			}
		})
	}
}

// TestPullFailureBackoff: after a failed pull the next attempt waits the back-off.
func TestPullFailureBackoff(t *testing.T) {
	e := newEnv(t)
	e.cri.pullErr = errors.New("registry unreachable")
	ctr := app("main")
	ctr.Image = "example.test/new:2"
	pod := fakePod("u1", "", ctr)
	e.sync(t, pod)
	e.sync(t, pod)
	if len(e.cri.pulls) != 1 {
		t.Fatalf("pulls during the back-off: %d", len(e.cri.pulls))
	}
	e.cri.mu.Lock()
	e.cri.pullErr = nil
	e.cri.mu.Unlock()
	e.clock.Advance(10 * time.Second)
	if st := e.sync(t, pod); st.ContainerStatuses[0].State.Running == nil || len(e.cri.pulls) != 2 {
		t.Fatalf("after the back-off: pulls %d, %+v", len(e.cri.pulls), st.ContainerStatuses[0].State)
	}
}

// TestPullFailureAsTheKubelet: a pull that fails with the runtime's Unknown error is shown as
// the kubelet shows it beside slicelet: the runtime's message without the gRPC prefix in the
// Failed event, "Error: ErrImagePull", then while the pull backs off the waiting message
// "Back-off pulling image ...: ErrImagePull: <message>", a Normal BackOff event and "Error:
// ImagePullBackOff" once per back-off.
func TestPullFailureAsTheKubelet(t *testing.T) {
	e := newEnv(t)
	events := record.NewFakeRecorder(100)
	e.wopts.Recorder = events
	e.rt = e.newRuntime(t)
	e.cri.pullErr = status.Error(codes.Unknown, `failed to pull and unpack image "example.test/new:2": not found`)
	ctr := app("main")
	ctr.Image = "example.test/new:2"
	pod := fakePod("u1", "", ctr)
	e.sync(t, pod)
	st := e.sync(t, pod)
	w := st.ContainerStatuses[0].State.Waiting
	if want := `Back-off pulling image "example.test/new:2": ErrImagePull: failed to pull and unpack image "example.test/new:2": not found`; w == nil || w.Reason != lifecycle.ReasonImagePullBackOff || w.Message != want {
		t.Errorf("waiting = %+v, want ImagePullBackOff, %q", w, want)
	}
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	for _, want := range []string{
		`Warning Failed Failed to pull image "example.test/new:2": failed to pull and unpack image "example.test/new:2": not found`,
		"Warning Failed Error: ErrImagePull",
		`Normal BackOff Back-off pulling image "example.test/new:2"`,
		"Warning Failed Error: ImagePullBackOff",
	} {
		if n := stdslices.Index(got, want); n < 0 {
			t.Errorf("events %q, want %q", got, want)
		}
	}
	if n := len(stdslices.DeleteFunc(stdslices.Clone(got), func(e string) bool { return e != "Warning Failed Error: ImagePullBackOff" })); n != 1 {
		t.Errorf("%d ImagePullBackOff events in one back-off, want 1: %q", n, got)
	}
}

func TestCreateContainerError(t *testing.T) {
	e := newEnv(t)
	e.cri.createErr = status.Error(codes.InvalidArgument, "bad mount")
	st := e.sync(t, fakePod("u1", "", app("main")))
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != lifecycle.ReasonCreateContainerError || !strings.Contains(w.Message, "bad mount") {
		t.Fatalf("status: %+v", st.ContainerStatuses[0].State)
	}
}

// TestRunAsNonRootAgainstImageUser: with runAsNonRoot and no runAsUser, the image's user is
// checked before the container is created (CreateContainerConfigError, nothing created); a
// non-root runAsUser passes whatever the image says.
func TestRunAsNonRootAgainstImageUser(t *testing.T) {
	yes := true
	cases := []struct {
		name    string
		uid     *runtimeapi.Int64Value
		user    string
		runAs   *int64
		wantMsg string
	}{
		{name: "image without user: root", wantMsg: "container has runAsNonRoot and image will run as root"},
		{name: "image uid 0", uid: &runtimeapi.Int64Value{Value: 0}, wantMsg: "image will run as root"},
		{name: "image user by name", user: "nginx", wantMsg: "image has non-numeric user (nginx), cannot verify user is non-root"},
		{name: "image uid 101", uid: &runtimeapi.Int64Value{Value: 101}},
		{name: "runAsUser 1000 over a root image", runAs: func() *int64 { v := int64(1000); return &v }()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.cri.mu.Lock()
			e.cri.images["sha256:app"].Uid, e.cri.images["sha256:app"].Username = c.uid, c.user
			e.cri.mu.Unlock()
			ctr := app("main")
			ctr.SecurityContext = &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: c.runAs}
			st := e.sync(t, fakePod("u1", "", ctr))
			w := st.ContainerStatuses[0].State.Waiting
			if c.wantMsg == "" {
				if e.calls("CreateContainer") != 1 {
					t.Fatalf("container not created: %+v", st.ContainerStatuses[0].State)
				}
				return
			}
			if w == nil || w.Reason != lifecycle.ReasonCreateContainerConfigError || !strings.Contains(w.Message, c.wantMsg) {
				t.Fatalf("status: %+v", st.ContainerStatuses[0].State)
			}
			if n := e.calls("CreateContainer"); n != 0 {
				t.Errorf("CreateContainer called %d times", n)
			}
		})
	}
}

// TestStrictSupplementalGroups: supplementalGroupsPolicy Strict is refused unless the runtime
// reports the feature (containerd 1.6 does not).
func TestStrictSupplementalGroups(t *testing.T) {
	e := newEnv(t)
	strict := v1.SupplementalGroupsPolicyStrict
	pod := fakePod("u1", "", app("main"))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
	want := "spec.securityContext.supplementalGroupsPolicy: Forbidden: the cri runtime does not report support for SupplementalGroupsPolicy Strict"
	if errs := e.back.Validate(pod); len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("Validate without the feature = %v, want %q", errs, want)
	}
	e.cri.mu.Lock()
	e.cri.features = &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}
	e.cri.mu.Unlock()
	if errs := e.back.Validate(pod); len(errs) != 0 {
		t.Errorf("Validate with the feature = %v", errs)
	}
}

// TestInitContainersFake: init containers run one at a time, in order, before the app.
func TestInitContainersFake(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	pod.Spec.InitContainers = []v1.Container{app("one"), app("two")}
	st := e.sync(t, pod)
	if st.Phase != v1.PodPending || st.InitContainerStatuses[0].State.Running == nil || st.InitContainerStatuses[1].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != lifecycle.ReasonPodInitializing {
		t.Fatalf("first sync: %+v", st)
	}
	e.cri.exit(t, "one", 0)
	st = e.sync(t, pod)
	if st.InitContainerStatuses[1].State.Running == nil || st.ContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("after one: %+v", st)
	}
	e.cri.exit(t, "two", 0)
	st = e.sync(t, pod)
	if st.Phase != v1.PodRunning || st.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("after two: %+v", st)
	}
}

func TestKillPodAndForget(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	e.sync(t, pod)
	dir := filepath.Join(e.opts.LogRoot, "default_web_u1")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("pod log dir: %v", err)
	}
	st, err := e.rt.KillPod(t.Context(), pod, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cs := st.ContainerStatuses[0]; cs.State.Terminated == nil || st.Phase != v1.PodSucceeded {
		t.Fatalf("after KillPod: phase %s %+v", st.Phase, cs.State)
	}
	if e.calls("StopContainer") != 1 || e.calls("StopPodSandbox") != 1 {
		t.Errorf("stops: container %d sandbox %d", e.calls("StopContainer"), e.calls("StopPodSandbox"))
	}
	// Killed pods are not restarted by a later sync of the controller's last status read.
	if err := e.rt.Forget(t.Context(), "u1"); err != nil {
		t.Fatal(err)
	}
	if r := e.cri.removed(); !strings.Contains(r, "container c") || !strings.Contains(r, "sandbox sb") {
		t.Errorf("Forget removed %q", r)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod log dir after Forget: %v", err)
	}
	if uids, err := e.rt.PodUIDs(t.Context()); err != nil || len(uids) != 0 {
		t.Errorf("PodUIDs after Forget = %v, %v", uids, err)
	}
}

func TestRelist(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	e.sync(t, pod)
	if got, err := e.rt.Relist(t.Context(), nil); err != nil || len(got.Due) != 0 {
		t.Fatalf("Relist with nothing changed = %v, %v", got, err)
	}
	e.cri.exit(t, "main", 1)
	if got, err := e.rt.Relist(t.Context(), nil); err != nil || len(got.Due) != 1 || got.Due[0] != "u1" {
		t.Fatalf("Relist after an exit = %v, %v", got, err)
	}
}

func TestValidate(t *testing.T) {
	rt := &Runtime{opts: Options{AppArmor: func() bool { return false }}}
	neg := int64(-1)
	sig := v1.Signal("SIGNOPE")
	cases := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   string
	}{
		{"ok", func(*v1.Pod) {}, ""},
		{"no image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "spec.containers[0].image: Required value"},
		{"bad pull policy", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, `spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`},
		{"configMap volume (the worker writes it)", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}}
		}, ""},
		{"nfs volume", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "n", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}}}
		}, "spec.volumes[0]: Unsupported value"},
		{"unknown mount", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "x", MountPath: "/x"}} }, `spec.containers[0].volumeMounts[0].name: Not found: "x"`},
		{"env from a source (the worker resolves it)", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, ""},
		{"negative grace", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &neg }, "spec.terminationGracePeriodSeconds: Invalid value: -1"},
		{"bad stop signal", func(p *v1.Pod) { p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &sig} }, `spec.containers[0].lifecycle.stopSignal: Invalid value: "SIGNOPE"`},
		{"init container without image", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "i"}} }, "spec.initContainers[0].image: Required value"},
		{"AppArmor without AppArmor", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/main": "runtime/default"}
		}, "metadata.annotations[container.apparmor.security.beta.kubernetes.io/main]: Forbidden: cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"AppArmor Unconfined needs none", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fakePod("u1", "", app("main"))
			c.mutate(p)
			errs := rt.Validate(p)
			if c.want == "" {
				if len(errs) != 0 {
					t.Fatalf("Validate = %v", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), c.want) {
				t.Fatalf("Validate = %v, want %q", errs, c.want)
			}
		})
	}
}

func TestCRILogDecode(t *testing.T) {
	cases := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"full lines", []string{"2026-11-21T08:00:00.000000001Z stdout F hello\n2026-11-21T08:00:00.1Z stderr F world\n"}, "hello\nworld\n"},
		{"partial records joined", []string{"2026-11-21T08:00:00Z stdout P hel\n2026-11-21T08:00:00Z stdout P lo \n2026-11-21T08:00:00Z stdout F there\n"}, "hello there\n"},
		{"record split across reads", []string{"2026-11-21T08:00:00Z std", "out F split\n"}, "split\n"},
		{"empty message", []string{"2026-11-21T08:00:00Z stdout F \n2026-11-21T08:00:00Z stdout F\n"}, "\n\n"},
		{"malformed skipped", []string{"garbage\nnot-a-time stdout F x\n2026-11-21T08:00:00Z stdin F x\n2026-11-21T08:00:00Z stdout X x\n2026-11-21T08:00:00Z stdout F ok\n"}, "ok\n"},
		{"no trailing newline yet", []string{"2026-11-21T08:00:00Z stdout F done\n2026-11-21T08:00:00Z stdout F pend"}, "done\n"},
		// echo -n DONE: the runtime ends the stream with a partial record, shown as it is.
		{"a last partial record flushed", []string{"2026-11-21T08:00:00Z stdout P DO\n2026-11-21T08:00:00Z stdout P NE\n"}, "DONE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &criLog{emit: func(_ time.Time, l []byte) error { out.Write(l); return nil }}
			for _, ch := range c.chunks {
				if _, err := d.Write([]byte(ch)); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Errorf("decoded %q, want %q", out.String(), c.want)
			}
		})
	}
}

// TestLogsFiles: current and previous instance from the files, TailLines, SinceTime,
// Timestamps, ErrNoLogs.
func TestLogsFiles(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", "", app("main"))
	dir := filepath.Join(e.opts.LogRoot, "default_web_u1", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(n int, lines ...string) {
		var b strings.Builder
		for i, l := range lines { // line i of a file was written at second i
			fmt.Fprintf(&b, "2026-11-21T08:00:0%dZ stdout F %s\n", i, l)
		}
		if err := os.WriteFile(filepath.Join(dir, []string{"0.log", "1.log", "2.log"}[n]), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, "a0")
	write(1, "b1", "b2", "b3")
	write(2, "c1", "c2")
	cases := []struct {
		name string
		opts pods.LogOptions
		want string
	}{
		{"current", pods.LogOptions{}, "c1\nc2\n"},
		{"previous", pods.LogOptions{Previous: true}, "b1\nb2\nb3\n"},
		{"previous tail 2", pods.LogOptions{Previous: true, TailLines: 2}, "b2\nb3\n"},
		{"tail more than there is", pods.LogOptions{TailLines: 10}, "c1\nc2\n"},
		{"since", pods.LogOptions{Previous: true, SinceTime: time.Date(2026, 11, 21, 8, 0, 1, 0, time.UTC)}, "b2\nb3\n"},
		{"since then tail", pods.LogOptions{Previous: true, TailLines: 1, SinceTime: time.Date(2026, 11, 21, 8, 0, 1, 0, time.UTC)}, "b3\n"},
		{"since after everything", pods.LogOptions{SinceTime: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}, ""},
		{"timestamps", pods.LogOptions{Timestamps: true}, "2026-11-21T08:00:00Z c1\n2026-11-21T08:00:01Z c2\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := e.rt.Logs(t.Context(), pod, "main", c.opts, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Errorf("Logs = %q, want %q", out.String(), c.want)
			}
		})
	}
	other := fakePod("u2", "", app("main"))
	if err := e.rt.Logs(t.Context(), other, "main", pods.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("Logs of a container that never ran: %v", err)
	}
	if err := e.rt.Logs(t.Context(), pod, "nosuch", pods.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("Logs of an unknown container: %v", err)
	}
}

// TestImageFsInfo: numbers come back as the runtime and statfs give them, capacity 0 and
// garbage included; no filesystem or mountpoint is an error naming the endpoint.
func TestImageFsInfo(t *testing.T) {
	ts := time.Date(2026, 11, 21, 8, 0, 1, 500, time.UTC)
	fs := func(used uint64, mp string) *runtimeapi.ImageFsInfoResponse {
		return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp: ts.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mp}, UsedBytes: &runtimeapi.UInt64Value{Value: used},
		}}}
	}
	cases := []struct {
		name         string
		resp         *runtimeapi.ImageFsInfoResponse
		capacity, av int64
		want         gc.ImageFsInfo
		err          string
	}{
		{"normal", fs(300, "/var/lib/containerd/snap"), 1000, 600, gc.ImageFsInfo{ImageFs: gc.ImageFs{CapacityBytes: 1000, AvailableBytes: 600}, UsedBytes: 300, Timestamp: ts}, ""},
		{"capacity 0 as is", fs(300, "/snap"), 0, 0, gc.ImageFsInfo{UsedBytes: 300, Timestamp: ts}, ""},
		{"garbage used bytes", fs(math.MaxUint64, "/snap"), 1000, 600, gc.ImageFsInfo{ImageFs: gc.ImageFs{CapacityBytes: 1000, AvailableBytes: 600}, UsedBytes: math.MaxInt64, Timestamp: ts}, ""},
		{"no filesystem", &runtimeapi.ImageFsInfoResponse{}, 0, 0, gc.ImageFsInfo{}, "reported no image filesystem"},
		{"no mountpoint", fs(1, ""), 0, 0, gc.ImageFsInfo{}, "reported no mountpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.cri.fsInfo = c.resp
			e.back.statfs = func(string) (int64, int64, error) { return c.capacity, c.av, nil }
			got, err := e.back.ImageFsInfo(t.Context())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), e.opts.Endpoint) {
					t.Fatalf("ImageFsInfo = %+v, %v; want error %q naming the endpoint", got, err, c.err)
				}
				return
			}
			if err != nil || !got.Timestamp.Equal(c.want.Timestamp) || got.ImageFs != c.want.ImageFs || got.UsedBytes != c.want.UsedBytes {
				t.Fatalf("ImageFsInfo = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestImageFsMountpoint: the mountpoint is asked once and cached, and still known when a later
// statfs fails; no answer at all is the runtime's error.
func TestImageFsMountpoint(t *testing.T) {
	e := newEnv(t)
	e.cri.fsInfo = &runtimeapi.ImageFsInfoResponse{}
	if mp, err := e.back.ImageFsMountpoint(t.Context()); err == nil {
		t.Fatalf("ImageFsMountpoint without a filesystem = %q, want an error", mp)
	}
	e.cri.fsInfo = &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/snap"}, UsedBytes: &runtimeapi.UInt64Value{Value: 1}}}}
	e.back.statfs = func(string) (int64, int64, error) { return 0, 0, errors.New("statfs: no such file") }
	mp, err := e.back.ImageFsMountpoint(t.Context())
	if err != nil || mp != "/var/lib/containerd/snap" {
		t.Fatalf("ImageFsMountpoint = %q, %v", mp, err)
	}
	e.cri.fsInfo = &runtimeapi.ImageFsInfoResponse{}
	if mp, err := e.back.ImageFsMountpoint(t.Context()); err != nil || mp != "/var/lib/containerd/snap" {
		t.Errorf("cached ImageFsMountpoint = %q, %v", mp, err)
	}
}

// TestGCPrimitivesFake: containers and sandboxes listed with pod UID, name, image and gc
// state; removal of a container removes its log file; removing what is gone is no error.
func TestGCPrimitivesFake(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyNever, app("main"))
	e.sync(t, pod)
	e.cri.exit(t, "main", 0)
	cgc, sgc := e.rt.ContainerGC(), e.rt.SandboxGC()
	ctrs, err := cgc.ListContainers(t.Context())
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("ListContainers = %+v, %v", ctrs, err)
	}
	c := ctrs[0]
	if c.PodUID != "u1" || c.Name != "main" || c.State != gc.StateExited || c.ImageID != "sha256:app" || c.SandboxID == "" || !c.CreatedAt.Equal(e.clock.Now()) {
		t.Errorf("container %+v", c)
	}
	logFile := filepath.Join(e.opts.LogRoot, "default_web_u1", "main", "0.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cgc.RemoveContainer(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log file after RemoveContainer: %v", err)
	}
	for name, err := range map[string]error{
		"RemoveContainer": cgc.RemoveContainer(t.Context(), c.ID),
		"StopContainer":   cgc.StopContainer(t.Context(), c.ID),
		"StopSandbox":     sgc.StopSandbox(t.Context(), "nosuch"),
	} {
		if err != nil {
			t.Errorf("%s of something gone: %v", name, err)
		}
	}
	sbs, err := sgc.ListSandboxes(t.Context())
	if err != nil || len(sbs) != 1 || sbs[0].PodUID != "u1" || !sbs[0].Ready {
		t.Fatalf("ListSandboxes = %+v, %v", sbs, err)
	}
	imgs, err := e.back.ListImages(t.Context())
	if err != nil || len(imgs) != 1 || imgs[0].ID != "sha256:app" || imgs[0].SizeBytes != 5<<20 || imgs[0].Names[0] != fakeImage {
		t.Fatalf("ListImages = %+v, %v", imgs, err)
	}
	if err := e.back.RemoveImage(t.Context(), "sha256:app"); err != nil {
		t.Fatal(err)
	}
	if img, err := e.back.SandboxImage(t.Context()); err != nil || img != "example.test/pause:1" {
		t.Errorf("SandboxImage = %q, %v", img, err)
	}
	e.opts.SandboxImage = ""
	e.newRuntime(t)
	if img, err := e.back.SandboxImage(t.Context()); err != nil || img != "example.test/pause:from-runtime" {
		t.Errorf("SandboxImage from the runtime's status = %q, %v", img, err)
	}
}

// TestSidecars: a restartable init container starts before the app containers and keeps
// running; when the app containers have ended for good it is stopped.
func TestSidecars(t *testing.T) {
	e := newEnv(t)
	always := v1.ContainerRestartPolicyAlways
	side := app("side")
	side.RestartPolicy = &always
	pod := fakePod("u1", v1.RestartPolicyNever, app("main"))
	pod.Spec.InitContainers = []v1.Container{side}
	st := e.sync(t, pod)
	if st.InitContainerStatuses[0].State.Running == nil || st.ContainerStatuses[0].State.Running == nil || st.Phase != v1.PodRunning {
		t.Fatalf("sidecar and app: %+v", st)
	}
	e.cri.exit(t, "main", 0)
	st = e.sync(t, pod)
	if st.InitContainerStatuses[0].State.Terminated == nil || st.Phase != v1.PodSucceeded {
		t.Fatalf("after the app ended: phase %s, sidecar %+v", st.Phase, st.InitContainerStatuses[0].State)
	}
}

// TestKillOrphan: the controller kills pods it only knows by UID (orphans found after a
// restart); every live container of that UID is stopped.
func TestKillOrphan(t *testing.T) {
	e := newEnv(t)
	e.sync(t, fakePod("u1", "", app("main"), app("side")))
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if _, err := e.rt.KillPod(t.Context(), orphan, 0); err != nil {
		t.Fatal(err)
	}
	if n := e.calls("StopContainer"); n != 2 {
		t.Errorf("StopContainer calls = %d, want 2", n)
	}
	if err := e.rt.Forget(t.Context(), "u1"); err != nil {
		t.Fatal(err)
	}
	e.cri.mu.Lock()
	defer e.cri.mu.Unlock()
	if len(e.cri.containers) != 0 || len(e.cri.sandboxes) != 0 {
		t.Errorf("left after Forget: %d containers, %d sandboxes", len(e.cri.containers), len(e.cri.sandboxes))
	}
}

// TestLogsFollowFake: Follow streams what is appended to the file and returns, drained, once
// the runtime reports the instance exited.
func TestLogsFollowFake(t *testing.T) {
	e := newEnv(t)
	e.opts.FollowPoll = 5 * time.Millisecond
	rt := e.newRuntime(t)
	pod := fakePod("u1", v1.RestartPolicyNever, app("main"))
	if _, err := rt.SyncPod(t.Context(), pod, testSlice); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.opts.LogRoot, "default_web_u1", "main", "0.log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("2026-11-21T08:00:00Z stdout F before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- rt.Logs(ctx, pod, "main", pods.LogOptions{Follow: true}, &out) }()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("2026-11-21T08:00:01Z stderr P after-\n2026-11-21T08:00:01Z stderr F exit\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	e.cri.exit(t, "main", 0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Follow did not return after the container exited")
	}
	if out.String() != "before\nafter-exit\n" {
		t.Errorf("followed %q", out.String())
	}
}

// TestSandboxDied: when the pod's sandbox is no longer ready (stopped behind slicelet's back,
// e.g. a reboot), the containers restart per policy in a new sandbox with the next attempt.
func TestSandboxDied(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	e.sync(t, pod)
	e.cri.mu.Lock()
	var sbID string
	for id := range e.cri.sandboxes {
		sbID = id
	}
	e.cri.mu.Unlock()
	if _, err := e.cri.StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID}); err != nil {
		t.Fatal(err)
	}
	st := e.sync(t, pod)
	if cs := st.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil || e.calls("RunPodSandbox") != 2 {
		t.Fatalf("after the sandbox died: %+v, sandboxes run %d", cs, e.calls("RunPodSandbox"))
	}
	e.cri.mu.Lock()
	defer e.cri.mu.Unlock()
	for id, sb := range e.cri.sandboxes {
		if id != sbID && sb.sb.Metadata.Attempt != 1 {
			t.Errorf("new sandbox attempt %d, want 1", sb.sb.Metadata.Attempt)
		}
	}
}

// killSandbox stops the pod's only ready sandbox behind the runtime's back (its live
// containers exit 137) and returns its ID.
func (e *env) killSandbox(t *testing.T) string {
	t.Helper()
	e.cri.mu.Lock()
	var ids []string
	for id, sb := range e.cri.sandboxes {
		if sb.sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ids = append(ids, id)
		}
	}
	e.cri.mu.Unlock()
	if len(ids) != 1 {
		t.Fatalf("ready sandboxes %v, want one", ids)
	}
	if _, err := e.cri.StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids[0]}); err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// createdOutside lists, in creation order, the containers created outside sandbox old, as
// name/CRI attempt/restart count annotation.
func (e *env) createdOutside(old string) []string {
	e.cri.mu.Lock()
	defer e.cri.mu.Unlock()
	var ids []string
	for id, c := range e.cri.containers {
		if c.c.PodSandboxId != old {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // the fake's IDs grow with each creation
	var out []string
	for _, id := range ids {
		c := e.cri.containers[id]
		out = append(out, fmt.Sprintf("%s/%d/%s", c.cfg.Metadata.Name, c.cfg.Metadata.Attempt, c.cfg.Annotations[worker.AnnotationRestartCount]))
	}
	return out
}

// TestSandboxDiedInitContainers: when the sandbox of an initialized pod dies, the next sync
// gives the pod a new sandbox in which it starts over as the kubelet does: the init containers
// run again, one at a time, in order, to completion, before the app container restarts; every
// restart count continues (CRI attempt and restart count annotation), and the status shows it.
func TestSandboxDiedInitContainers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		inits []string
	}{
		{name: "one init container", inits: []string{"one"}},
		{name: "two init containers", inits: []string{"one", "two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
			for _, n := range tc.inits {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, app(n))
			}
			e.sync(t, pod)
			for _, n := range tc.inits {
				e.cri.exit(t, n, 0)
				e.sync(t, pod)
			}
			st := e.sync(t, pod)
			if st.Phase != v1.PodRunning || st.ContainerStatuses[0].State.Running == nil {
				t.Fatalf("before the sandbox died: %+v", st)
			}
			e.clock.Advance(time.Minute)
			old := e.killSandbox(t)
			var want []string
			for i, n := range tc.inits {
				st = e.sync(t, pod)
				if got := e.calls("RunPodSandbox"); got != 2 {
					t.Fatalf("sandboxes run %d, want 2", got)
				}
				want = append(want, n+"/1/1")
				if got := e.createdOutside(old); !stdslices.Equal(got, want) {
					t.Fatalf("init %s: created in the new sandbox %v, want %v", n, got, want)
				}
				if st.Phase != v1.PodPending || podCondition(st, v1.PodInitialized) != v1.ConditionFalse {
					t.Fatalf("init %s: phase %s, initialized %s", n, st.Phase, podCondition(st, v1.PodInitialized))
				}
				ics := st.InitContainerStatuses[i]
				if ics.State.Running == nil || ics.RestartCount != 1 || ics.LastTerminationState.Terminated == nil || ics.LastTerminationState.Terminated.ExitCode != 0 {
					t.Fatalf("init %s running again: %+v", n, ics)
				}
				for _, later := range st.InitContainerStatuses[i+1:] {
					// Not run again yet: its last run shows, as the kubelet keeps it.
					if later.State.Terminated == nil || later.State.Terminated.ExitCode != 0 || later.RestartCount != 0 {
						t.Fatalf("init %s waiting to run again: %+v", later.Name, later)
					}
				}
				if cs := st.ContainerStatuses[0]; cs.State.Running != nil || cs.RestartCount != 0 {
					t.Fatalf("app started before init %s completed: %+v", n, cs)
				}
				e.cri.exit(t, n, 0)
			}
			st = e.sync(t, pod)
			want = append(want, "main/1/1")
			if got := e.createdOutside(old); !stdslices.Equal(got, want) {
				t.Fatalf("created in the new sandbox %v, want %v", got, want)
			}
			cs := st.ContainerStatuses[0]
			if st.Phase != v1.PodRunning || podCondition(st, v1.PodInitialized) != v1.ConditionTrue || cs.State.Running == nil || cs.RestartCount != 1 ||
				cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
				t.Fatalf("after initialization: phase %s, app %+v", st.Phase, cs)
			}
			for _, ics := range st.InitContainerStatuses {
				if ics.State.Terminated == nil || ics.State.Terminated.ExitCode != 0 || ics.RestartCount != 1 {
					t.Errorf("init %s: %+v", ics.Name, ics)
				}
			}
			// Initialized in the new sandbox: a crash of the app restarts it alone, after the
			// back-off its restart in the new sandbox began.
			e.cri.exit(t, "main", 1)
			st = e.sync(t, pod)
			if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != lifecycle.ReasonCrashLoopBackOff || !strings.Contains(w.Message, "back-off 10s") {
				t.Fatalf("app crash in the new sandbox: %+v", st.ContainerStatuses[0])
			}
			e.clock.Advance(10 * time.Second)
			st = e.sync(t, pod)
			want = append(want, "main/2/2")
			if got := e.createdOutside(old); !stdslices.Equal(got, want) || st.ContainerStatuses[0].RestartCount != 2 || e.calls("RunPodSandbox") != 2 {
				t.Fatalf("app restart in the new sandbox: created %v, status %+v", got, st.ContainerStatuses[0])
			}
		})
	}
}

// TestSandboxDiedNoNewSandbox: as in the kubelet, a pod whose sandbox died gets no new one
// under restartPolicy Never once a container was created, nor under OnFailure when every app
// container succeeded; nothing runs again.
func TestSandboxDiedNoNewSandbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1.RestartPolicy
		exit   bool // the app exits 0 before the sandbox dies
		phase  v1.PodPhase
	}{
		{name: "never, app killed with the sandbox", policy: v1.RestartPolicyNever, phase: v1.PodFailed},
		{name: "on failure, app succeeded", policy: v1.RestartPolicyOnFailure, exit: true, phase: v1.PodSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := fakePod("u1", tc.policy, app("main"))
			pod.Spec.InitContainers = []v1.Container{app("one")}
			e.sync(t, pod)
			e.cri.exit(t, "one", 0)
			e.sync(t, pod)
			if tc.exit {
				e.cri.exit(t, "main", 0)
			}
			e.killSandbox(t)
			creates := e.calls("CreateContainer")
			st := e.sync(t, pod)
			if e.calls("RunPodSandbox") != 1 || e.calls("CreateContainer") != creates {
				t.Fatalf("sandboxes run %d, creates %d→%d", e.calls("RunPodSandbox"), creates, e.calls("CreateContainer"))
			}
			if st.Phase != tc.phase || podCondition(st, v1.PodInitialized) != v1.ConditionTrue || st.ContainerStatuses[0].State.Terminated == nil {
				t.Fatalf("phase %s, want %s; status %+v", st.Phase, tc.phase, st)
			}
		})
	}
}

func podCondition(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestStorageDirsAndLayers: the pod's local storage is its emptyDirs and its log directories;
// a runtime without container stats (the fake, like a CRI runtime that lacks them) reports no
// writable layers rather than an error.
func TestStorageDirsAndLayers(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	vols := e.rt.EmptyDirs(pod)
	ctrs, other := e.back.LogDirs(pod)
	logs := filepath.Join(e.opts.LogRoot, "default_web_u1")
	if vols["scratch"] != filepath.Join(e.wopts.StateDir, "pods", "u1", "volumes", "scratch") || len(ctrs["main"]) != 1 || ctrs["main"][0] != filepath.Join(logs, "main") || len(other) != 1 || other[0] != logs {
		t.Errorf("StorageDirs = %v, %v, %v", vols, ctrs, other)
	}
	bad := pod.DeepCopy()
	bad.UID = "../x"
	if v := e.rt.EmptyDirs(bad); v != nil {
		t.Errorf("EmptyDirs of a bad UID = %v", v)
	}
	if c, o := e.back.LogDirs(bad); c != nil || o != nil {
		t.Errorf("LogDirs of an invalid UID = %v, %v", c, o)
	}
	layers, err := e.back.WritableLayers(t.Context(), pod)
	if err != nil || len(layers) != 0 {
		t.Errorf("WritableLayers without container stats = %v, %v; want none", layers, err)
	}
}

// TestContainerCgroups: the child cgroups of a pod slice are named by the container IDs they
// carry (systemd driver: <prefix>-<id>.scope; cgroupfs driver: the bare ID), each with its
// attempt; the sandbox's and foreign cgroups are left out.
func TestContainerCgroups(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"), app("side"))
	e.sync(t, pod)
	e.cri.exit(t, "main", 1)
	e.sync(t, pod) // main restarts at once: attempt 1
	resp, err := e.cri.ListContainers(t.Context(), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]string{} // name → ids by attempt
	for _, c := range resp.Containers {
		n := c.Metadata.Name
		for len(ids[n]) <= int(c.Metadata.Attempt) {
			ids[n] = append(ids[n], "")
		}
		ids[n][c.Metadata.Attempt] = c.Id
	}
	if len(ids["main"]) != 2 || len(ids["side"]) != 1 {
		t.Fatalf("containers: %v", ids)
	}
	sbs, _ := e.cri.ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{})
	dirs := []string{
		"cri-containerd-" + ids["main"][1] + ".scope", "cri-containerd-" + ids["main"][0] + ".scope",
		ids["side"][0], // cgroupfs driver
		"cri-containerd-" + sbs.Items[0].Id + ".scope",            // the sandbox
		"cri-containerd-0000.scope", "system.slice", "crio.scope", // not the pod's
	}
	got, err := e.back.ContainerCgroups(t.Context(), pod, dirs)
	want := map[string]podstats.ContainerCgroup{dirs[0]: {Name: "main", Instance: 1}, dirs[1]: {Name: "main"}, dirs[2]: {Name: "side"}}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("ContainerCgroups = %v, %v; want %v", got, err, want)
	}
}

// TestStopContainerRacingExit: containerd answers a stop whose SIGKILL raced the container's
// own exit with "failed to kill container ...: ttrpc: closed" (the cause of the flaky
// TestIntegrationScopeInPodSlice on a loaded VM); the container ended, so the stop succeeded.
// A container that is still running after a failed stop gets one more stop; if that fails too
// and it still runs, the error stands.
func TestStopContainerRacingExit(t *testing.T) {
	raced := status.Error(codes.Unknown, `failed to kill container "abc": ttrpc: closed`)
	for _, tc := range []struct {
		name       string
		errs       []error
		exitOnStop bool
		wantErr    bool
		wantStops  int
	}{
		{name: "kill raced the exit", errs: []error{raced}, exitOnStop: true, wantStops: 1},
		{name: "transient failure, second stop works", errs: []error{raced}, wantStops: 2},
		{name: "still running", errs: []error{raced, raced}, wantErr: true, wantStops: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := fakePod("u1", "", app("main"))
			e.sync(t, pod)
			e.cri.mu.Lock()
			e.cri.stopErrs, e.cri.exitOnStop = tc.errs, tc.exitOnStop
			var id string
			for cid := range e.cri.containers {
				id = cid
			}
			before := e.cri.calls["StopContainer"]
			e.cri.mu.Unlock()
			err := e.back.StopContainer(t.Context(), id, time.Second)
			if (err != nil) != tc.wantErr {
				t.Fatalf("StopContainer = %v, want error %v", err, tc.wantErr)
			}
			e.cri.mu.Lock()
			defer e.cri.mu.Unlock()
			if got := e.cri.calls["StopContainer"] - before; got != tc.wantStops {
				t.Errorf("%d stop calls, want %d", got, tc.wantStops)
			}
		})
	}
}

// TestVersion: the runtime's name and version as a Node's nodeInfo says them (the CRI Version
// call's RuntimeName://RuntimeVersion); a runtime that does not answer is an error.
func TestVersion(t *testing.T) {
	e := newEnv(t)
	got, err := e.back.Version(t.Context())
	if err != nil || got != "fake://1" {
		t.Fatalf("Version = %q, %v; want fake://1", got, err)
	}
	e.srv.stop()
	if got, err := e.back.Version(t.Context()); err == nil {
		t.Errorf("Version after the runtime stopped = %q, want an error", got)
	}
}

func TestRuntimeVersion(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"semantic", "1.7.24", "1.7.24"},
		{"semantic with a pre-release", "2.0.0-rc.1", "2.0.0-rc.1"},
		{"Debian's suffix", "1.6.20~ds1", "1.6.20"},
		{"a leading v", "v1.7.0", "1.7.0"},
		{"not a version", "unknown", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runtimeVersion(tc.in); got != tc.want {
				t.Errorf("runtimeVersion(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestAdoptKubeletPod: a sandbox and a container the kubelet created for the pod (its labels
// and annotations, no slicelet mark, the container in its third run) are adopted as they are
// by a runtime that never ran the pod: nothing is created or started, the container keeps its
// ID and its restart count; a pod of the kubelet's that slicelet does not run is not listed.
func TestAdoptKubeletPod(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", "", app("main"))
	adoptKubeletPod(t, e, pod, pod)
}

// TestAdoptKubeletPodChanged: a container the kubelet created from another image (its hash is
// not the spec's) is restarted as the kubelet restarts it, the restart count going on.
func TestAdoptKubeletPodChanged(t *testing.T) {
	e := newEnv(t)
	pod := fakePod("u1", "", app("main"))
	was := pod.DeepCopy()
	was.Spec.Containers[0].Image = "example.com/older:1"
	adoptKubeletPod(t, e, pod, was)
}

// adoptKubeletPod runs TestAdoptKubeletPod's check on pod, whose containers the kubelet
// created from the spec of was: adopted as they are when was is pod, else the changed
// container is stopped and started again.
func adoptKubeletPod(t *testing.T, e *env, pod, was *v1.Pod) {
	changed := was.Spec.Containers[0].Image != pod.Spec.Containers[0].Image
	kubeletLabels := func(uid string) map[string]string {
		return map[string]string{worker.LabelPodUID: uid, worker.LabelPodName: "web", worker.LabelPodNamespace: "default"}
	}
	ctx := t.Context()
	var ids []string
	for _, uid := range []string{"u1", "u9"} {
		sb, err := e.cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: uid}, Labels: kubeletLabels(uid)}})
		if err != nil {
			t.Fatal(err)
		}
		labels := kubeletLabels(uid)
		labels[worker.LabelContainerName] = "main"
		c, err := e.cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main", Attempt: 2},
			Image:    &runtimeapi.ImageSpec{Image: "sha256:app"}, Labels: labels,
			Annotations: worker.ContainerAnnotations(was, &was.Spec.Containers[0], 2)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ContainerId)
	}
	calls := map[string]int{}
	for _, n := range []string{"RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox"} {
		calls[n] = e.calls(n)
	}
	rt := e.newRuntime(t)
	if uids, err := rt.PodUIDs(ctx); err != nil || len(uids) != 0 {
		t.Errorf("PodUIDs = %v, %v: want none (the kubelet's pods are not slicelet's until it runs them)", uids, err)
	}
	if ctrs, err := rt.ContainerGC().ListContainers(ctx); err != nil || len(ctrs) != 0 {
		t.Errorf("container GC lists %v, %v: want none of the kubelet's", ctrs, err)
	}
	if sbs, err := rt.SandboxGC().ListSandboxes(ctx); err != nil || len(sbs) != 0 {
		t.Errorf("sandbox GC lists %v, %v: want none of the kubelet's", sbs, err)
	}
	// The adoption's relist: the pod's status from the one listing of every pod, which holds
	// the kubelet's sandbox and container as the pod's own listing does; the sync that follows
	// takes that listing.
	res, err := rt.Relist(ctx, []*v1.Pod{pod})
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := res.Statuses[string(pod.UID)]; !ok || st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 1 ||
		!strings.HasSuffix(st.ContainerStatuses[0].ContainerID, "://"+ids[0]) || st.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("the relist's status of the kubelet's pod: %+v (found %t); want Running, %s in its third run", st, ok, ids[0])
	}
	st, err := rt.SyncPod(ctx, pod, testSlice)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		if e.calls("StopContainer") == calls["StopContainer"] || e.calls("RunPodSandbox") != calls["RunPodSandbox"] {
			t.Errorf("changed container: %d stops, %d sandboxes created", e.calls("StopContainer")-calls["StopContainer"], e.calls("RunPodSandbox")-calls["RunPodSandbox"])
		}
		if st, err = rt.SyncPod(ctx, pod, testSlice); err != nil {
			t.Fatal(err)
		}
		if cs := st.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != 3 || strings.HasSuffix(cs.ContainerID, "://"+ids[0]) {
			t.Errorf("changed container after its restart: %+v (want a new run, restart count 3)", cs)
		}
		return
	}
	for n, before := range calls {
		if got := e.calls(n); got != before {
			t.Errorf("%s called %d times adopting the kubelet's pod", n, got-before)
		}
	}
	cs := st.ContainerStatuses[0]
	if st.Phase != v1.PodRunning || cs.State.Running == nil || cs.RestartCount != 2 || !strings.HasSuffix(cs.ContainerID, "://"+ids[0]) {
		t.Errorf("adopted status: phase %s, %+v (want %s running, restart count 2)", st.Phase, cs, ids[0])
	}
}

// TestNetworkCondition: the runtime status's NetworkReady condition, as the kubelet reads it
// (pkg/kubelet/kubelet.go updateRuntimeUp): true is ready; false, or missing, is the Ready
// condition's message of a kubelet node whose CNI agent has not written its configuration yet.
func TestNetworkCondition(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *runtimeapi.RuntimeStatus
		want string
	}{
		{"ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}, ""},
		{"no CNI configuration yet (containerd's words)", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: "Network plugin returns error: cni plugin not initialized"}}},
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"},
		{"condition missing", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{{Type: runtimeapi.RuntimeReady, Status: true}}},
			"container runtime network not ready: <nil>"},
		{"no status", nil, "container runtime network not ready: <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := networkCondition(tc.st)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("networkCondition = %q, want %q", got, tc.want)
			}
		})
	}
}
