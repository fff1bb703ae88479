package worker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// fakeRT is an in-memory Runtime: containers run until the test ends them (exit), a stop ends
// them with 128+SIGTERM. It counts calls.
type fakeRT struct {
	mu         sync.Mutex
	next       int
	sandboxes  map[string]*Sandbox
	containers map[string]*ContainerStatus
	configs    map[string]*runtimeapi.ContainerConfig
	calls      map[string]int
	listed     []string // the pod UID of every ListContainers call
	now        func() time.Time
	execCode   int32                    // ExecSync's exit code
	order      []string                 // ExecSync and StopContainer calls in order: "exec <cmd>", "stop <id>"
	grace      map[string]time.Duration // the grace of each StopContainer by container ID
	logs       string                   // what Logs writes; none (ErrNoLogs) when empty
	handlers   []string                 // the runtime handler of every RunPodSandbox
}

func newFakeRT() *fakeRT {
	return &fakeRT{sandboxes: map[string]*Sandbox{}, containers: map[string]*ContainerStatus{},
		configs: map[string]*runtimeapi.ContainerConfig{}, calls: map[string]int{}, now: time.Now}
}

func (f *fakeRT) count(name string) {
	f.calls[name]++
}

func (f *fakeRT) callsTo(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeRT) Name() string                     { return "fake" }
func (f *fakeRT) Type() string                     { return "fake" }
func (f *fakeRT) Validate(*v1.Pod) field.ErrorList { return nil }

func (f *fakeRT) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("RunPodSandbox")
	f.handlers = append(f.handlers, handler)
	f.next++
	id := fmt.Sprintf("sb%d", f.next)
	f.sandboxes[id] = &Sandbox{ID: id, PodUID: cfg.GetMetadata().GetUid(), Attempt: cfg.GetMetadata().GetAttempt(), Ready: true, CreatedAt: f.now()}
	return id, nil
}

func (f *fakeRT) StopPodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StopPodSandbox")
	if sb := f.sandboxes[id]; sb != nil {
		sb.Ready = false
		for _, c := range f.containers {
			if c.SandboxID == id && c.State != StateExited {
				f.end(c, 137, "Error")
			}
		}
	}
	return nil
}

func (f *fakeRT) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("RemovePodSandbox")
	delete(f.sandboxes, id)
	return nil
}

func (f *fakeRT) ListPodSandbox(_ context.Context, uid string) ([]Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ListPodSandbox")
	var out []Sandbox
	for _, sb := range f.sandboxes {
		if uid == "" || sb.PodUID == uid {
			out = append(out, *sb)
		}
	}
	return out, nil
}

func (f *fakeRT) CreateContainer(_ context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("CreateContainer")
	f.next++
	id := fmt.Sprintf("c%d", f.next)
	f.containers[id] = &ContainerStatus{Container: Container{
		ID: id, SandboxID: sandboxID, PodUID: cfg.GetLabels()[LabelPodUID], Name: cfg.GetMetadata().GetName(),
		Attempt: cfg.GetMetadata().GetAttempt(), State: StateCreated, CreatedAt: f.now(),
	}}
	f.configs[id] = cfg
	return id, nil
}

func (f *fakeRT) StartContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StartContainer")
	c := f.containers[id]
	if c == nil {
		return fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	c.State, c.StartedAt = StateRunning, f.now()
	return nil
}

// end makes a container exit. Call with f.mu held.
func (f *fakeRT) end(c *ContainerStatus, code int32, reason string) {
	c.State, c.ExitCode, c.Reason, c.FinishedAt = StateExited, code, reason, f.now()
}

// exit makes the running run of the pod's container exit.
func (f *fakeRT) exit(uid, name string, code int32, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.PodUID == uid && c.Name == name && c.State == StateRunning {
			f.end(c, code, reason)
		}
	}
}

func (f *fakeRT) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("UpdateContainerResources")
	cfg := f.configs[id]
	if cfg == nil {
		return fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	cfg.Linux.Resources = res
	return nil
}

func (f *fakeRT) StopContainer(_ context.Context, id string, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StopContainer")
	f.order = append(f.order, "stop "+id)
	if f.grace == nil {
		f.grace = map[string]time.Duration{}
	}
	f.grace[id] = grace
	if c := f.containers[id]; c != nil && c.State != StateExited {
		f.end(c, 143, "Error")
	}
	return nil
}

func (f *fakeRT) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("RemoveContainer")
	if c := f.containers[id]; c != nil && c.State == StateRunning {
		return fmt.Errorf("container %s is running", id)
	}
	delete(f.containers, id)
	return nil
}

func (f *fakeRT) ListContainers(_ context.Context, uid string) ([]Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ListContainers")
	f.listed = append(f.listed, uid)
	var out []Container
	for _, c := range f.containers {
		if uid == "" || c.PodUID == uid {
			out = append(out, c.Container)
		}
	}
	return out, nil
}

func (f *fakeRT) ContainerStatus(_ context.Context, id string) (ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ContainerStatus")
	c := f.containers[id]
	if c == nil {
		return ContainerStatus{}, fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	return *c, nil
}

func (f *fakeRT) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (ExecResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ExecSync")
	f.order = append(f.order, fmt.Sprint("exec ", cmd))
	return ExecResult{Stdout: []byte(fmt.Sprint(id, cmd)), ExitCode: f.execCode}, nil
}

func (f *fakeRT) Logs(_ context.Context, _ *v1.Pod, _ string, _ pods.LogOptions, out io.Writer) error {
	f.mu.Lock()
	logs := f.logs
	f.mu.Unlock()
	if logs == "" {
		return pods.ErrNoLogs
	}
	_, err := io.WriteString(out, logs)
	return err
}

// setExecCode sets the exit code of the commands ExecSync runs from now on.
func (f *fakeRT) setExecCode(code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execCode = code
}

// newTestWorker returns a worker over f with a fresh state dir and a fake recorder.
func newTestWorker(t *testing.T, f *fakeRT, dir string) (*Worker, *record.FakeRecorder) {
	return newTestWorkerWith(t, f, dir, nil)
}

// newTestWorkerWith is newTestWorker with options changed by opt (when not nil).
func newTestWorkerWith(t *testing.T, f *fakeRT, dir string, opt func(*Options)) (*Worker, *record.FakeRecorder) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	events := record.NewFakeRecorder(1000)
	opts := Options{Runtime: f, Recorder: events, StateDir: dir, MemoryCapacity: 8 << 30, Resources: slices.DefaultOptions()}
	if opt != nil {
		opt(&opts)
	}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, events
}

func testPod(uid string, policy v1.RestartPolicy, names ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Command: []string{"/bin/sleep", "1"}})
	}
	return pod
}

func testSlice(pod *v1.Pod) slices.PodSlice {
	return slices.PodSlice{UID: string(pod.UID), Unit: "kubepods-pod" + string(pod.UID) + ".slice"}
}

// drain returns the events recorded so far.
func drain(events *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// client-go's recorder (the kubelet's) is what the daemon may give the worker.
var _ EventRecorder = record.EventRecorder(nil)
