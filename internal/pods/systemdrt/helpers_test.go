package systemdrt

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/unitstest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// fakeSystemd is unitstest.Fake plus what the runtime reads that the fake does not simulate:
// the main process's start and exit (ExecMain*, Result), and Kill ending a unit like a process
// that dies of the signal.
type fakeSystemd struct {
	*unitstest.Fake
	now func() time.Time

	mu   sync.Mutex
	info map[string]units.UnitInfo
	// dieOn: signals the fake's processes die of when Kill delivers them (nil: all).
	ignore map[syscall.Signal]bool
}

func newFakeSystemd(mode units.Mode) *fakeSystemd {
	return &fakeSystemd{Fake: unitstest.New(mode), now: time.Now, info: map[string]units.UnitInfo{}}
}

// StartService starts the unit and records its main process start time.
func (f *fakeSystemd) StartService(ctx context.Context, name string, props []units.Property) error {
	if err := f.Fake.StartService(ctx, name, props); err != nil {
		return err
	}
	f.mu.Lock()
	f.info[name] = units.UnitInfo{ExecMainStartTimestamp: f.now(), MainPID: 42}
	f.mu.Unlock()
	return nil
}

// exit simulates the main process ending: code/status as in ExecMainCode/Status. A clean exit
// leaves the unit active/exited (RemainAfterExit), anything else failed.
func (f *fakeSystemd) exit(unit string, code, status int32, result string) {
	f.mu.Lock()
	i := f.info[unit]
	i.ExecMainCode, i.ExecMainStatus, i.Result, i.ExecMainExitTimestamp, i.MainPID = code, status, result, f.now(), 0
	f.info[unit] = i
	f.mu.Unlock()
	if result == "success" {
		f.SetState(unit, "active", "exited")
	} else {
		f.SetState(unit, "failed", "failed")
	}
}

// Kill ends the unit as if its main process died of signal.
func (f *fakeSystemd) Kill(ctx context.Context, name string, signal syscall.Signal, whom units.Who) error {
	if err := f.Fake.Kill(ctx, name, signal, whom); err != nil {
		return err
	}
	f.mu.Lock()
	ignored := f.ignore[signal]
	f.mu.Unlock()
	if u, ok := f.Unit(name); ok && u.Status.SubState == "running" && !ignored {
		result := "success" // SIGTERM is a clean end for systemd
		if signal == syscall.SIGKILL {
			result = "signal"
		}
		f.exit(name, cldKilled, int32(signal), result)
	}
	return nil
}

// Properties adds the simulated main process data to the fake's view.
func (f *fakeSystemd) Properties(ctx context.Context, name string) (units.UnitInfo, error) {
	info, err := f.Fake.Properties(ctx, name)
	if err != nil {
		return info, err
	}
	f.mu.Lock()
	x := f.info[name]
	f.mu.Unlock()
	info.ExecMainStartTimestamp, info.ExecMainExitTimestamp = x.ExecMainStartTimestamp, x.ExecMainExitTimestamp
	info.ExecMainCode, info.ExecMainStatus, info.Result, info.MainPID = x.ExecMainCode, x.ExecMainStatus, x.Result, x.MainPID
	return info, nil
}

// hostBinaries are the commands unit tests may use.
var hostBinaries = map[string]bool{"/bin/sleep": true, "/usr/bin/sleep": true, "/bin/sh": true, "/usr/bin/env": true}

// fakeMountPoint: every path exists but those under /missing.
func fakeMountPoint(p string) error {
	if p == "/missing" || strings.HasPrefix(p, "/missing/") {
		return fmt.Errorf("stat %s: %w", p, os.ErrNotExist)
	}
	return nil
}

func fakeExecutable(p string) error {
	if hostBinaries[p] {
		return nil
	}
	return &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

// fakeProc writes a procfs with PID 1's capabilities and oom_score_adj.
func fakeProc(t *testing.T, capEff string, adj string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	status := "Name:\tsystemd\nCapInh:\t0000000000000000\nCapPrm:\t" + capEff + "\nCapEff:\t" + capEff + "\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oom_score_adj"), []byte(adj+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// testRT is the pod worker over the systemd runtime, wired as the daemon wires them.
type testRT struct {
	*worker.Worker
	rt   *Runtime
	opts Options
	gc   gc.ContainerRuntime
}

// newTestRuntime returns the worker over a runtime over a fake with full capabilities.
func newTestRuntime(t *testing.T, mode units.Mode) (*testRT, *fakeSystemd) {
	t.Helper()
	sd := newFakeSystemd(mode)
	return newTestRT(t, Options{
		Systemd: sd, StateDir: t.TempDir(),
		ProcRoot: fakeProc(t, "000001ffffffffff", "0"), Executable: fakeExecutable, MountPoint: fakeMountPoint,
		SeccompProfileRoot: t.TempDir(), AppArmor: func() bool { return false }, KnownUser: knownID, KnownGroup: knownID,
	}, nil), sd
}

// newTestRT returns the worker over a runtime with opts; events, when set, receives the
// worker's events (else they are dropped).
func newTestRT(t *testing.T, opts Options, events *record.FakeRecorder) *testRT {
	t.Helper()
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if events == nil {
		events = &record.FakeRecorder{}
	}
	w, err := worker.New(worker.Options{Runtime: rt, Recorder: events, StateDir: opts.StateDir, MemoryCapacity: 8 << 30, Resources: slices.DefaultOptions(), HostNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	return &testRT{Worker: w, rt: rt, opts: opts, gc: w.ContainerGC()}
}

// restart models a restart of slicelet: a new runtime and worker over the same state.
func (x *testRT) restart(t *testing.T) *testRT { return newTestRT(t, x.opts, nil) }

func testPod(uid string, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: cs, RestartPolicy: policy},
	}
}

func cmd(name string, args ...string) v1.Container {
	return v1.Container{Name: name, Command: append([]string{"/bin/sleep"}, args...)}
}

func testSlice(pod *v1.Pod) slices.PodSlice {
	unit, _ := slices.PodSliceName(slices.QOSClass(pod), string(pod.UID))
	return slices.PodSlice{UID: string(pod.UID), Unit: unit}
}

func describe(st v1.PodStatus) string {
	var b strings.Builder
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			b.WriteString(cs.Name + "=")
			switch {
			case cs.State.Running != nil:
				b.WriteString("running")
			case cs.State.Terminated != nil:
				b.WriteString("terminated(" + cs.State.Terminated.Reason + ")")
			case cs.State.Waiting != nil:
				b.WriteString("waiting(" + cs.State.Waiting.Reason + ")")
			}
			b.WriteString(" ")
		}
	}
	return b.String()
}

func condition(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func allRunning(st v1.PodStatus) bool {
	if st.Phase != v1.PodRunning {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// knownID is a fake host user database that knows every id.
func knownID(int64) bool { return true }
