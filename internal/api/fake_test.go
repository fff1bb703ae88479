package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// fakeBackend is an in-memory Backend.
type fakeBackend struct {
	mu   sync.Mutex
	pods map[string]v1.Pod // "namespace/name"
	// logs maps "namespace/name/container" to the container's output.
	logs map[string]string
	// follow, when set, is used for followed logs: it is called with the writer and the context.
	follow func(ctx context.Context, w io.Writer) error
	// err, when set, is returned by every call.
	err  error
	node v1.Node
	// lastLogOpts records the options of the last Logs call.
	lastLogOpts pods.LogOptions
	// gcCalls records the collections asked for, as "images dry" / "containers run".
	gcCalls []string
	// lastDryRun is the dryRun of the last ApplyPod.
	lastDryRun bool
}

// baseline is the API's default Pod Security level.
var baseline = func() admission.PodSecurity {
	p, err := admission.ParsePodSecurity("baseline", "latest")
	if err != nil {
		panic(err)
	}
	return p
}()

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		pods: map[string]v1.Pod{},
		logs: map[string]string{},
		node: v1.Node{Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3800m"), v1.ResourceMemory: resource.MustParse("14760Mi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory"}},
		}},
	}
}

func (f *fakeBackend) add(pod v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	f.pods[pod.Namespace+"/"+pod.Name] = pod
}

func (f *fakeBackend) ListPods(context.Context) ([]v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []v1.Pod
	for _, p := range f.pods {
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeBackend) GetPod(_ context.Context, ns, name string) (v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return v1.Pod{}, f.err
	}
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return v1.Pod{}, fmt.Errorf("pod %q: %w", ns+"/"+name, ErrNotFound)
	}
	return p, nil
}

// ApplyPod refuses what Pod Security baseline refuses, as the daemon's API level does by default.
func (f *fakeBackend) ApplyPod(ctx context.Context, body []byte, dryRun bool) (ApplyResult, error) {
	pod, action, err := f.applyPod(ctx, body, dryRun)
	return ApplyResult{Action: action, Pod: pod}, err
}

// applyPod is ApplyPod's work; the action compares with the pod stored before, under the lock.
func (f *fakeBackend) applyPod(ctx context.Context, body []byte, dryRun bool) (v1.Pod, string, error) {
	if f.err != nil {
		return v1.Pod{}, "", f.err
	}
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return v1.Pod{}, "", &InvalidError{Problems: []string{err.Error()}}
	}
	pod := parsed[0]
	if d := admission.CheckPodSecurity(pod, baseline); !d.Admit {
		return v1.Pod{}, "", PodForbidden(pod.Name, d.Message)
	}
	uid, err := slices.PodUID(pod, "api")
	if err != nil {
		return v1.Pod{}, "", err
	}
	pod.UID = types.UID(uid)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastDryRun = dryRun
	key := pod.Namespace + "/" + pod.Name
	if old, ok := f.pods[key]; ok && old.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return v1.Pod{}, "", fmt.Errorf("pod %q comes from manifest file %s: %w", key, old.Annotations[pods.AnnotationOrigin], ErrConflict)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[pods.AnnotationSource] = pods.SourceAPI
	pod.Annotations[pods.AnnotationOrigin] = "api"
	if peer, ok := PeerFrom(ctx); ok {
		pod.Annotations[AnnotationAppliedBy] = peer.String()
	}
	pod.Status.Phase = v1.PodPending
	action := ActionCreated
	if old, ok := f.pods[key]; ok {
		action = ActionConfigured
		if old.UID == pod.UID {
			action = ActionUnchanged
		}
	}
	if !dryRun {
		f.pods[key] = *pod
	}
	return *pod, action, nil
}

func (f *fakeBackend) DeletePod(_ context.Context, ns, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	key := ns + "/" + name
	p, ok := f.pods[key]
	if !ok {
		return fmt.Errorf("pod %q: %w", key, ErrNotFound)
	}
	if p.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return fmt.Errorf("pod %q: %w: remove the manifest file %s", key, ErrConflict, p.Annotations[pods.AnnotationOrigin])
	}
	delete(f.pods, key)
	return nil
}

func (f *fakeBackend) Logs(ctx context.Context, ns, name, container string, opts pods.LogOptions, w io.Writer) error {
	f.mu.Lock()
	f.lastLogOpts = opts
	follow, berr := f.follow, f.err
	text, ok := f.logs[ns+"/"+name+"/"+container]
	f.mu.Unlock()
	if berr != nil {
		return berr
	}
	if opts.Follow && follow != nil {
		return follow(ctx, w)
	}
	if !ok {
		return fmt.Errorf("container %q of pod %s/%s: %w", container, ns, name, ErrNotFound)
	}
	if text == "" {
		return pods.ErrNoLogs
	}
	if opts.TailLines > 0 {
		lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
		if len(lines) > opts.TailLines {
			lines = lines[len(lines)-opts.TailLines:]
		}
		text = strings.Join(lines, "") + "\n"
	}
	_, err := io.WriteString(w, text)
	return err
}

func (f *fakeBackend) Node(context.Context) (v1.Node, error) {
	if f.err != nil {
		return v1.Node{}, f.err
	}
	n := f.node
	n.Name = "testnode"
	return n, nil
}

func (f *fakeBackend) ExplainPod(_ context.Context, body []byte) (slices.PodExplanation, error) {
	if f.err != nil {
		return slices.PodExplanation{}, f.err
	}
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return slices.PodExplanation{}, &InvalidError{Problems: []string{err.Error()}}
	}
	pod := parsed[0]
	pod.UID = "11111111-aaaa-bbbb-cccc-000000000009"
	return slices.ExplainPod(pod, slices.Options{}, units.ModeHybrid, slices.Capacity{Memory: 16 << 30})
}

func (f *fakeBackend) ExplainNode(context.Context) (slices.NodeExplanation, error) {
	if f.err != nil {
		return slices.NodeExplanation{}, f.err
	}
	return slices.NodeExplanation{Allocatable: slices.Amounts{CPU: 3800, Memory: 14760 << 20}}, nil
}

func (f *fakeBackend) PodMetrics(context.Context) ([]metricsv1beta1.PodMetrics, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []metricsv1beta1.PodMetrics{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}}}, nil
}

func (f *fakeBackend) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	return nil, f.err // not sampled twice yet
}

func (f *fakeBackend) ExplainEviction(context.Context) (eviction.Explanation, error) {
	if f.err != nil {
		return eviction.Explanation{}, f.err
	}
	return eviction.Explanation{At: "2026-11-21T08:00:00Z", ThresholdsMet: []eviction.ThresholdExplanation{}, Reclaim: v1.ResourceMemory,
		Signal: eviction.SignalMemoryAvailable, Ranking: []eviction.Candidate{{Name: "default/hog", Priority: 0, Reason: "exceeds its memory request"}},
		Evict: &eviction.EvictionExplanation{Pod: "default/hog", Signal: eviction.SignalMemoryAvailable, GracePeriod: "1s", Message: "The node was low on resource: memory."}}, nil
}

func (f *fakeBackend) gcCall(kind string, dryRun bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mode := "run"
	if dryRun {
		mode = "dry"
	}
	f.gcCalls = append(f.gcCalls, kind+" "+mode)
}

func (f *fakeBackend) CollectImages(_ context.Context, dryRun bool) (gc.ImageResult, error) {
	if f.err != nil {
		return gc.ImageResult{}, f.err
	}
	f.gcCall("images", dryRun)
	return gc.ImageResult{Kind: gc.KindImages, DryRun: dryRun, UsagePercent: 90, AmountToFree: 3 << 20,
		Remove: []gc.ImageRemoval{{ID: "sha256:old", SizeBytes: 4 << 20, Reason: gc.ReasonSpace}}, Removed: []string{"sha256:old"},
		Measured: true, FreedBytes: 4 << 20}, nil
}

func (f *fakeBackend) CollectContainers(_ context.Context, dryRun bool) (gc.ContainerResult, error) {
	if f.err != nil {
		return gc.ContainerResult{}, f.err
	}
	f.gcCall("containers", dryRun)
	return gc.ContainerResult{Kind: gc.KindContainers, DryRun: dryRun, Removed: []string{"c1", "c2"}}, nil
}

var errBoom = errors.New("backend exploded")

// testSocketPath returns a socket path in a fresh directory, short enough for sun_path.
func testSocketPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.sock")
	if len(p) > 100 {
		dir, err := os.MkdirTemp("", "api")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		p = filepath.Join(dir, "s.sock")
	}
	return p
}

// testGroup is the configured group in tests; the fake lookup maps it to testGID.
const (
	testGroup = "slicelet-test"
	testGID   = 4242
)

// startServer serves b on a fresh socket whose group is gid (the test's own gid when 0).
func startServer(t *testing.T, b Backend, gid uint32) (*Server, *Client) {
	t.Helper()
	return startServerWith(t, b, gid, Options{})
}

// startServerLogging is startServer with the server's logger.
func startServerLogging(t *testing.T, b Backend, gid uint32, log *slog.Logger) (*Server, *Client) {
	t.Helper()
	return startServerWith(t, b, gid, Options{Logger: log})
}

// startServerWith is startServer with further options (socket, group and lookup are set here).
func startServerWith(t *testing.T, b Backend, gid uint32, opts Options) (*Server, *Client) {
	t.Helper()
	return startServerSetup(t, b, gid, opts, nil)
}

// startServerSetup is startServerWith calling setup (when not nil) before Serve.
func startServerSetup(t testing.TB, b Backend, gid uint32, opts Options, setup func(*Server)) (*Server, *Client) {
	t.Helper()
	if gid == 0 {
		gid = uint32(os.Getgid())
	}
	opts.Socket, opts.Group = testSocketPath(t), testGroup
	opts.LookupGroup = func(name string) (uint32, error) {
		if name == testGroup {
			return gid, nil
		}
		return 0, fmt.Errorf("group %q not found", name)
	}
	s, err := NewServer(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(s.Socket()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind after shutdown: %v", err)
		}
	})
	return s, NewClient(s.Socket())
}
