package units

// Integration tests against a real systemd: systemdtest.Main re-runs this test binary inside a
// throwaway systemd (the sandbox on this machine kind, a cgroup v2 VM with SLICELET_VM=1), and
// systemdtest.Require skips (or, with CI=true, fails) them outside. Expectations on cgroupfs
// files are chosen by Mode(), so the same tests check the v1 hybrid and the v2 layouts.
// Polling with a deadline is used only to observe asynchronous systemd state, never as an
// assertion about speed.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

// itEnv is one connected Manager inside the test systemd.
type itEnv struct {
	m    *Manager
	root string // cgroup root
	ctx  context.Context
}

func newIntegration(t *testing.T, opts Options) *itEnv {
	t.Helper()
	env := systemdtest.Require(t)
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = env.CgroupRoot
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	m, err := Connect(ctx, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if m.Mode() == ModeUnknown {
		t.Fatalf("cgroup mode unknown at %s", opts.CgroupRoot)
	}
	t.Logf("where=%s cgroup_root=%s mode=%s", env.Where, opts.CgroupRoot, m.Mode())
	return &itEnv{m: m, root: opts.CgroupRoot, ctx: ctx}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stopAtEnd stops name when the test ends (ignoring errors: the test may have stopped it).
func (e *itEnv) stopAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.m.Stop(ctx, name); err != nil {
			t.Logf("cleanup: stop %s: %v", name, err)
		}
		_ = e.m.ResetFailed(ctx, name)
	})
}

// controllerDir returns the v1 hierarchy directory holding controller (e.g. "cpu" lives in
// "cpu,cpuacct"); on v2 it returns the root.
func (e *itEnv) controllerDir(t *testing.T, controller string) string {
	t.Helper()
	if e.m.Mode() == ModeUnified {
		return e.root
	}
	entries, err := os.ReadDir(e.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if slices.Contains(strings.Split(ent.Name(), ","), controller) {
			return filepath.Join(e.root, ent.Name())
		}
	}
	t.Fatalf("no cgroup v1 hierarchy for controller %s under %s", controller, e.root)
	return ""
}

// cgroupFile reads a cgroupfs file of the unit at cgroup path cg (as in ControlGroup).
func (e *itEnv) cgroupFile(t *testing.T, controller, cg, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.controllerDir(t, controller), cg, file))
	if err != nil {
		t.Fatalf("read cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// eventually polls cond every 20 ms until it returns "" or the deadline passes; the last
// message is the failure.
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// limits is a set of resource values and the cgroupfs files that must show them.
type limits struct {
	props []Property
	files []cgFile
}

type cgFile struct{ controller, file, want string }

// memoryMaxName is the hard memory limit's property in mode: MemoryMax on cgroup v2,
// MemoryLimit on v1 (slices.SliceProperties makes the same choice for the product).
func memoryMaxName(mode Mode) string {
	if mode.V2() {
		return "MemoryMax"
	}
	return "MemoryLimit"
}

// resourceLimits builds props for memory, cpu and tasks in the property names systemd applies
// in mode (cgroup v2: MemoryMax, CPUWeight, MemoryMin, MemoryLow; v1: MemoryLimit, CPUShares),
// and the files systemd must write for them.
func resourceLimits(mode Mode, memory uint64, shares uint64, tasks uint64) limits {
	l := limits{}
	l.props = append(l.props, Property{"TasksMax", tasks})
	l.files = append(l.files, cgFile{"pids", "pids.max", strconv.FormatUint(tasks, 10)})
	if mode == ModeUnified {
		weight := 1 + ((shares-2)*9999)/262142 // the kubelet's conversion; any value will do
		l.props = append(l.props,
			Property{"MemoryMax", memory}, Property{"CPUWeight", weight},
			Property{"MemoryMin", memory / 4}, Property{"MemoryLow", memory / 2})
		l.files = append(l.files,
			cgFile{"memory", "memory.max", strconv.FormatUint(memory, 10)},
			cgFile{"cpu", "cpu.weight", strconv.FormatUint(weight, 10)},
			cgFile{"memory", "memory.min", strconv.FormatUint(memory/4, 10)},
			cgFile{"memory", "memory.low", strconv.FormatUint(memory/2, 10)})
		return l
	}
	l.props = append(l.props, Property{"MemoryLimit", memory}, Property{"CPUShares", shares})
	l.files = append(l.files,
		cgFile{"memory", "memory.limit_in_bytes", strconv.FormatUint(memory, 10)},
		cgFile{"cpu", "cpu.shares", strconv.FormatUint(shares, 10)})
	return l
}

func (e *itEnv) checkFiles(t *testing.T, cg string, files []cgFile) {
	t.Helper()
	for _, f := range files {
		if got := e.cgroupFile(t, f.controller, cg, f.file); got != f.want {
			t.Errorf("%s of %s = %q, want %q", f.file, cg, got, f.want)
		}
	}
}

func TestIntegrationSliceLimitsSetPropertiesStop(t *testing.T) {
	e := newIntegration(t, Options{})
	parent, _ := SliceName("itlim")
	child, _ := SliceName("itlim", "pod1")
	e.stopAtEnd(t, parent)

	if err := e.m.StartSlice(e.ctx, parent, []Property{{"Description", "it parent"}}); err != nil {
		t.Fatal(err)
	}
	l := resourceLimits(e.m.Mode(), 64<<20, 512, 100)
	if err := e.m.StartSlice(e.ctx, child, append(l.props, Property{"Description", "it child"})); err != nil {
		t.Fatal(err)
	}
	info, err := e.m.Properties(e.ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	wantCG := "/itlim.slice/itlim-pod1.slice"
	if p, _ := ExpandSlice(child); p != wantCG || info.ControlGroup != wantCG {
		t.Fatalf("ControlGroup = %q (ExpandSlice %q), want %q", info.ControlGroup, p, wantCG)
	}
	if info.ActiveState != "active" || info.Description != "it child" || info.LoadState != "loaded" {
		t.Errorf("info = %+v", info)
	}
	e.checkFiles(t, wantCG, l.files)

	// SetProperties on the live slice changes the files.
	l2 := resourceLimits(e.m.Mode(), 128<<20, 1024, 200)
	if err := e.m.SetProperties(e.ctx, child, l2.props); err != nil {
		t.Fatal(err)
	}
	e.checkFiles(t, wantCG, l2.files)

	list, err := e.m.List(e.ctx, "itlim*")
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by name: '-' sorts before '.'.
	if len(list) != 2 || list[0].Name != child || list[1].Name != parent || list[0].Description != "it child" {
		t.Errorf("List = %+v", list)
	}

	// Stopping the parent stops the child and removes both cgroups in every hierarchy.
	if err := e.m.Stop(e.ctx, parent); err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(e.controllerDir(t, "memory"), "itlim.slice"), filepath.Join(e.controllerDir(t, "pids"), "itlim.slice")}
	eventually(t, 10*time.Second, func() string {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return d + " still exists"
			}
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string {
		list, err := e.m.List(e.ctx, "itlim*")
		if err != nil || len(list) != 0 {
			return fmt.Sprintf("List after stop = %+v, %v", list, err)
		}
		return ""
	})
	if _, err := e.m.Properties(e.ctx, child); !errors.Is(err, ErrNoSuchUnit) {
		t.Errorf("Properties after stop: %v, want ErrNoSuchUnit", err)
	}
	// Idempotent.
	if err := e.m.Stop(e.ctx, parent); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestIntegrationMissingUnits(t *testing.T) {
	e := newIntegration(t, Options{})
	const name = "it-never-existed.service"
	if err := e.m.Stop(e.ctx, name); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := e.m.ResetFailed(e.ctx, name); err != nil {
		t.Errorf("ResetFailed: %v", err)
	}
	if err := e.m.SetProperties(e.ctx, name, []Property{{"CPUShares", uint64(10)}}); !errors.Is(err, ErrNoSuchUnit) {
		t.Errorf("SetProperties: %v, want ErrNoSuchUnit", err)
	}
	if _, err := e.m.Properties(e.ctx, name); !errors.Is(err, ErrNoSuchUnit) {
		t.Errorf("Properties: %v, want ErrNoSuchUnit", err)
	}
	if _, err := e.m.Property(e.ctx, name, "Unit", "ActiveState"); !errors.Is(err, ErrNoSuchUnit) {
		t.Errorf("Property: %v, want ErrNoSuchUnit", err)
	}
	err := e.m.Kill(e.ctx, name, syscall.SIGTERM, KillAll)
	if !errors.Is(err, ErrNoSuchUnit) && !errors.Is(err, ErrNoProcess) {
		t.Errorf("Kill: %v, want ErrNoSuchUnit or ErrNoProcess", err)
	}
	t.Logf("Kill of a missing unit: %v", err)
	if list, err := e.m.List(e.ctx, name); err != nil || len(list) != 0 {
		t.Errorf("List = %+v, %v; want nothing (ListUnitsByPatterns must not load it)", list, err)
	}
	if err := e.m.StartSlice(e.ctx, "bad/name.slice", nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("StartSlice(bad name) = %v, want ErrInvalidName", err)
	}
	if err := e.m.StartService(e.ctx, "x.slice", nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("StartService(slice name) = %v, want ErrInvalidName", err)
	}
}

func TestIntegrationService(t *testing.T) {
	e := newIntegration(t, Options{})
	slice, _ := SliceName("itsvc")
	svc, _ := ServiceName("itsvc", "sleep")
	e.stopAtEnd(t, slice)
	if err := e.m.StartSlice(e.ctx, slice, nil); err != nil {
		t.Fatal(err)
	}
	err := e.m.StartService(e.ctx, svc, []Property{
		{"Description", "it sleeper"},
		{"Slice", slice},
		{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "300"}}},
		{"Environment", []string{"A=1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.m.Properties(e.ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	if info.ActiveState != "active" || info.SubState != "running" || info.MainPID == 0 ||
		info.ControlGroup != "/itsvc.slice/"+svc || len(info.InvocationID) != 32 ||
		info.ExecMainStartTimestamp.IsZero() || !info.ExecMainExitTimestamp.IsZero() || !info.HasTasksCurrent {
		t.Fatalf("info = %+v", info)
	}
	// The name=systemd hierarchy (v1) or the v2 tree always has every process of the unit.
	procs := e.cgroupFile(t, "systemd", info.ControlGroup, "cgroup.procs")
	if !slices.Contains(strings.Fields(procs), strconv.Itoa(int(info.MainPID))) {
		t.Errorf("cgroup.procs = %q, want main pid %d", procs, info.MainPID)
	}
	v, err := e.m.Property(e.ctx, svc, "Service", "ExecStart")
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(v); !strings.Contains(s, "/bin/sleep") {
		t.Errorf("Property ExecStart = %s", s)
	}
	if v, err := e.m.Property(e.ctx, svc, "org.freedesktop.systemd1.Unit", "Id"); err != nil || v != svc {
		t.Errorf("Property Id = %v, %v", v, err)
	}

	// SIGKILL the main process: the service fails with signal 9.
	if err := e.m.Kill(e.ctx, svc, syscall.SIGKILL, KillMain); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		info, err = e.m.Properties(e.ctx, svc)
		if err != nil || info.ActiveState != "failed" {
			return fmt.Sprintf("after SIGKILL: %+v, %v", info, err)
		}
		return ""
	})
	if info.Result != "signal" || info.ExecMainCode != 2 || info.ExecMainStatus != int32(syscall.SIGKILL) || info.ExecMainExitTimestamp.IsZero() {
		t.Errorf("failed service info = %+v", info)
	}
	// Starting it again: the failed unit is reset and replaced.
	if err := e.m.StartService(e.ctx, svc, []Property{
		{"Description", "it sleeper"}, {"Slice", slice},
		{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "300"}}},
	}); err != nil {
		t.Fatalf("restart of failed unit: %v", err)
	}
	info2, err := e.m.Properties(e.ctx, svc)
	if err != nil || info2.ActiveState != "active" || info2.InvocationID == info.InvocationID {
		t.Fatalf("after replace: %+v, %v", info2, err)
	}
	if err := e.m.Stop(e.ctx, svc); err != nil {
		t.Fatal(err)
	}

	// Restart=always: systemd restarts the killed main process and counts it.
	restarting, _ := ServiceName("itsvc", "restarting")
	if err := e.m.StartService(e.ctx, restarting, []Property{
		{"Slice", slice}, {"Restart", "always"}, {"RestartUSec", 50 * time.Millisecond},
		{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "300"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Kill(e.ctx, restarting, syscall.SIGKILL, KillMain); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		info, err := e.m.Properties(e.ctx, restarting)
		if err != nil || info.NRestarts != 1 || info.ActiveState != "active" {
			return fmt.Sprintf("after kill with Restart=always: %+v, %v", info, err)
		}
		return ""
	})
}

func TestIntegrationJobResults(t *testing.T) {
	// The jobs that must finish get the default timeout (a loaded machine may take seconds for
	// a millisecond job); only the one meant to time out runs under a short one.
	e := newIntegration(t, Options{})
	short := newIntegration(t, Options{JobTimeout: 500 * time.Millisecond})
	failing, _ := ServiceName("itjob", "false")
	e.stopAtEnd(t, failing)
	// A oneshot's start job waits for the process, so its failure is the job's result.
	err := e.m.StartService(e.ctx, failing, []Property{{"Type", "oneshot"}, {"ExecStart", Exec{Path: "/bin/false"}}})
	var je *JobError
	if !errors.As(err, &je) || je.Result != "failed" || je.Unit != failing || je.Op != "start" || !errors.Is(err, ErrJobFailed) {
		t.Fatalf("StartService(/bin/false) = %v, want a failed start job", err)
	}
	// The same with ignore-failure: the job succeeds.
	ok, _ := ServiceName("itjob", "ignored")
	e.stopAtEnd(t, ok)
	if err := e.m.StartService(e.ctx, ok, []Property{{"Type", "oneshot"}, {"ExecStart", Exec{Path: "/bin/false", IgnoreFailure: true}}}); err != nil {
		t.Fatalf("StartService(-/bin/false) = %v", err)
	}
	// A job longer than JobTimeout is ErrTimeout, not ErrJobFailed.
	slow, _ := ServiceName("itjob", "slow")
	e.stopAtEnd(t, slow)
	err = short.m.StartService(short.ctx, slow, []Property{{"Type", "oneshot"}, {"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "30"}}}})
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrJobFailed) || !strings.Contains(err.Error(), slow) {
		t.Fatalf("StartService(sleep 30) = %v, want ErrTimeout naming the unit", err)
	}
	// While its start job runs, the unit is "activating": not ours to adopt or replace.
	err = e.m.StartService(e.ctx, slow, []Property{{"Type", "oneshot"}, {"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "30"}}}})
	if !errors.Is(err, ErrUnitExists) || !strings.Contains(err.Error(), "activating") {
		t.Fatalf("StartService while activating = %v, want ErrUnitExists", err)
	}
	// Creation-only properties cannot be changed on a live unit; the error names the unit.
	err = e.m.SetProperties(e.ctx, slow, []Property{{"ExecStart", Exec{Path: "/bin/true"}}})
	if err == nil || !strings.Contains(err.Error(), slow) || !strings.Contains(err.Error(), "ExecStart") {
		t.Fatalf("SetProperties(ExecStart) on a live unit = %v, want an error naming unit and property", err)
	}
	// The stop job cancels the pending start job.
	if err := e.m.Stop(e.ctx, slow); err != nil {
		t.Fatalf("Stop(slow): %v", err)
	}
}

func TestIntegrationUnitExists(t *testing.T) {
	e := newIntegration(t, Options{})
	name, _ := SliceName("itexists")
	e.stopAtEnd(t, name)
	props := []Property{{"Description", "slicelet it"}, {"TasksMax", uint64(50)}}
	if err := e.m.StartSlice(e.ctx, name, props); err != nil {
		t.Fatal(err)
	}
	// Same Description: adopted, and the live properties are applied.
	props[1].Value = uint64(60)
	if err := e.m.StartSlice(e.ctx, name, props); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if got := e.cgroupFile(t, "pids", "/itexists.slice", "pids.max"); got != "60" {
		t.Errorf("pids.max after adopt = %s, want 60", got)
	}
	// Another Description: not ours.
	err := e.m.StartSlice(e.ctx, name, []Property{{"Description", "someone else"}})
	if !errors.Is(err, ErrUnitExists) || !strings.Contains(err.Error(), name) {
		t.Fatalf("StartSlice with other description = %v, want ErrUnitExists naming the unit", err)
	}

	// Without a Description the identity is the name (systemd reports the name), and escaped
	// names (with \xNN) are found by the exists check.
	esc, _ := ServiceName("itexists", "a-b")
	e.stopAtEnd(t, esc)
	sleeper := []Property{{"Slice", name}, {"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "300"}}}}
	for i := range 2 {
		if err := e.m.StartService(e.ctx, esc, sleeper); err != nil {
			t.Fatalf("StartService(%s) #%d: %v", esc, i+1, err)
		}
	}
	if info, err := e.m.Properties(e.ctx, esc); err != nil || info.Description != esc || info.ActiveState != "active" {
		t.Fatalf("escaped service: %+v, %v", info, err)
	}

	// Scopes: adopting an identical running scope must account for its pids.
	scope, _ := ScopeName("itexists", "scope")
	e.stopAtEnd(t, scope)
	cmd := exec.Command("/bin/sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sp := []Property{{"Description", "it scope"}, {"Slice", name}}
	if err := e.m.StartScope(e.ctx, scope, []int{cmd.Process.Pid}, sp); err != nil {
		t.Fatal(err)
	}
	// Adopting the identical running scope with the pid it already has succeeds (the retry
	// after a dropped connection); a new pid cannot be moved into a non-delegated scope.
	if err := e.m.StartScope(e.ctx, scope, []int{cmd.Process.Pid}, sp); err != nil {
		t.Fatalf("adopt scope with its own pid: %v", err)
	}
	cmd2 := exec.Command("/bin/sleep", "300")
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd2.Process.Kill(); _ = cmd2.Wait() })
	if err := e.m.StartScope(e.ctx, scope, []int{cmd2.Process.Pid}, sp); !errors.Is(err, ErrUnitExists) || !strings.Contains(err.Error(), "not delegated") {
		t.Fatalf("adopt non-delegated scope with a new pid = %v, want ErrUnitExists", err)
	}
	// A delegated scope gets new pids attached.
	deleg, _ := ScopeName("itexists", "delegated")
	e.stopAtEnd(t, deleg)
	dp := []Property{{"Description", "it delegated"}, {"Slice", name}, {"Delegate", true}}
	if err := e.m.StartScope(e.ctx, deleg, []int{cmd.Process.Pid}, dp); err != nil {
		t.Fatal(err)
	}
	if err := e.m.StartScope(e.ctx, deleg, []int{cmd2.Process.Pid}, dp); err != nil {
		t.Fatalf("adopt delegated scope: %v", err)
	}
	if cg := procCgroup(t, cmd2.Process.Pid, "pids"); !strings.HasSuffix(cg, "/"+deleg) {
		t.Errorf("adopted pid in %q, want %s", cg, deleg)
	}
	if err := e.m.Stop(e.ctx, scope); err != nil {
		t.Fatal(err)
	}

	// A failed scope of the same name is reset and replaced. RuntimeMaxUSec makes it fail
	// (result "timeout"); a scope whose processes merely die ends "inactive", not failed.
	failing, _ := ScopeName("itexists", "timeout")
	e.stopAtEnd(t, failing)
	cmd3 := exec.Command("/bin/sleep", "300")
	if err := cmd3.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd3.Process.Kill(); _ = cmd3.Wait() })
	fp := []Property{{"Description", "it failing scope"}, {"Slice", name}}
	if err := e.m.StartScope(e.ctx, failing, []int{cmd3.Process.Pid}, append(fp, Property{"RuntimeMaxUSec", 200 * time.Millisecond})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		info, err := e.m.Properties(e.ctx, failing)
		if err != nil || info.ActiveState != "failed" || info.Result != "timeout" {
			return fmt.Sprintf("scope after RuntimeMaxSec: %+v, %v", info, err)
		}
		return ""
	})
	cmd4 := exec.Command("/bin/sleep", "300")
	if err := cmd4.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd4.Process.Kill(); _ = cmd4.Wait() })
	if err := e.m.StartScope(e.ctx, failing, []int{cmd4.Process.Pid}, fp); err != nil {
		t.Fatalf("replace failed scope: %v", err)
	}
	info, err := e.m.Properties(e.ctx, failing)
	if err != nil || info.ActiveState != "active" {
		t.Fatalf("replaced scope: %+v, %v", info, err)
	}
}

// procCgroup returns the cgroup path of pid in the v1 hierarchy holding controller, or the v2
// path.
func procCgroup(t *testing.T, pid int, controller string) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var v2 string
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			v2 = parts[2]
		}
		if slices.Contains(strings.Split(parts[1], ","), controller) {
			return parts[2]
		}
	}
	return v2
}

func TestIntegrationScopeAdoptsPID(t *testing.T) {
	e := newIntegration(t, Options{})
	scope, _ := ScopeName("itscope", "sleep")
	e.stopAtEnd(t, scope)
	cmd := exec.Command("/bin/sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	memoryMax := memoryMaxName(e.m.Mode())
	if err := e.m.StartScope(e.ctx, scope, []int{cmd.Process.Pid}, []Property{
		{"Description", "it scope"}, {memoryMax, uint64(32 << 20)},
	}); err != nil {
		t.Fatal(err)
	}
	info, err := e.m.Properties(e.ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	// MemoryCurrent is known (a memory limit turns accounting on) but may be 0: on v1, memory
	// charged before the move stays with the old cgroup.
	if info.ActiveState != "active" || info.ControlGroup == "" || !info.HasMemoryCurrent {
		t.Fatalf("info = %+v", info)
	}
	if cg := procCgroup(t, cmd.Process.Pid, "memory"); cg != info.ControlGroup {
		t.Errorf("pid %d in cgroup %q, want %q", cmd.Process.Pid, cg, info.ControlGroup)
	}
	want := strconv.Itoa(32 << 20)
	file := "memory.max"
	if e.m.Mode() != ModeUnified {
		file = "memory.limit_in_bytes"
	}
	if got := e.cgroupFile(t, "memory", info.ControlGroup, file); got != want {
		t.Errorf("%s = %s, want %s", file, got, want)
	}
	// Stopping the scope kills the adopted process.
	if err := e.m.Stop(e.ctx, scope); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("adopted process still running 10s after Stop")
	}
	if err := e.m.StartScope(e.ctx, scope, nil, nil); !errors.Is(err, ErrInvalidProperty) {
		t.Errorf("StartScope without pids = %v, want ErrInvalidProperty", err)
	}
}

func TestIntegrationTimerFiresTwice(t *testing.T) {
	e := newIntegration(t, Options{})
	timer, _ := TimerName("ittimer")
	svc := strings.TrimSuffix(timer, ".timer") + ".service"
	e.stopAtEnd(t, timer)
	e.stopAtEnd(t, svc)
	out := filepath.Join(t.TempDir(), "fired")

	err := e.m.StartTimer(e.ctx, timer, []Property{
		{"Description", "it timer"},
		{"TimersMonotonic", []TimerMonotonic{{"OnActiveSec", 50 * time.Millisecond}, {"OnUnitActiveSec", 300 * time.Millisecond}}},
		// The default accuracy is one minute; without this the timer would fire much later.
		{"AccuracyUSec", time.Millisecond},
	}, svc, []Property{
		{"Description", "it timer service"},
		{"Type", "oneshot"},
		{"ExecStart", Exec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo fired >> " + out}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		b, _ := os.ReadFile(out)
		if n := strings.Count(string(b), "fired"); n < 2 {
			return fmt.Sprintf("service ran %d times, want 2", n)
		}
		return ""
	})
	info, err := e.m.Properties(e.ctx, timer)
	if err != nil || info.ActiveState != "active" || info.LastTrigger.IsZero() {
		t.Errorf("timer info = %+v, %v", info, err)
	}
	if err := e.m.StartTimer(e.ctx, timer, nil, "other.service", nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("StartTimer with another service = %v, want ErrInvalidName", err)
	}
	if err := e.m.Stop(e.ctx, timer); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationReconnectAfterReexec(t *testing.T) {
	e := newIntegration(t, Options{})
	a, _ := SliceName("itreexec", "a")
	b, _ := SliceName("itreexec", "b")
	e.stopAtEnd(t, "itreexec.slice")
	if err := e.m.StartSlice(e.ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	old := e.m.c
	out, err := exec.Command("systemctl", "daemon-reexec").CombinedOutput()
	if err != nil {
		t.Fatalf("systemctl daemon-reexec: %v: %s", err, out)
	}
	// The first call after the re-exec must succeed (reconnecting underneath).
	if err := e.m.StartSlice(e.ctx, b, nil); err != nil {
		t.Fatalf("StartSlice after daemon-reexec: %v", err)
	}
	list, err := e.m.List(e.ctx, "itreexec*")
	if err != nil || len(list) != 3 {
		t.Fatalf("List after daemon-reexec = %+v, %v", list, err)
	}
	e.m.mu.Lock()
	replaced := e.m.c != old
	e.m.mu.Unlock()
	if !replaced {
		t.Error("connection was not replaced after daemon-reexec")
	}

	// A re-exec while a start job is pending: the JobRemoved signal is lost with the
	// connection, and the result is recovered after reconnecting.
	slow, _ := ServiceName("itreexec", "slow")
	e.stopAtEnd(t, slow)
	done := make(chan error, 1)
	go func() {
		done <- e.m.StartService(e.ctx, slow, []Property{
			{"Slice", "itreexec.slice"}, {"Type", "oneshot"},
			{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "2"}}},
		})
	}()
	eventually(t, 10*time.Second, func() string {
		list, err := e.m.List(e.ctx, slow)
		if err != nil || len(list) != 1 || list[0].ActiveState != "activating" {
			return fmt.Sprintf("slow service not activating yet: %+v, %v", list, err)
		}
		return ""
	})
	if out, err := exec.Command("systemctl", "daemon-reexec").CombinedOutput(); err != nil {
		t.Fatalf("systemctl daemon-reexec: %v: %s", err, out)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("StartService across daemon-reexec: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("StartService across daemon-reexec did not return")
	}
	if err := e.m.Stop(e.ctx, "itreexec.slice"); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationCallRetries closes the connection under a call, the way a daemon-reexec does
// between our liveness check and the call, and checks that the call reconnects and is retried,
// at most maxAttempts times in all.
func TestIntegrationCallRetries(t *testing.T) {
	e := newIntegration(t, Options{})
	for _, drops := range []int{1, maxAttempts - 1, maxAttempts} {
		attempts := 0
		var n int
		_, err := e.m.call(e.ctx, "-.slice", "test", func(c *conn) error {
			attempts++
			if attempts <= drops {
				c.close()
			}
			list, err := c.sd.ListUnitsByPatternsContext(e.ctx, nil, []string{"-.slice"})
			n = len(list)
			return err
		})
		if drops < maxAttempts && (err != nil || attempts != drops+1 || n != 1) {
			t.Fatalf("%d drops: call = %v after %d attempts (%d units); want success", drops, err, attempts, n)
		}
		if drops == maxAttempts && (err == nil || attempts != maxAttempts) {
			t.Fatalf("%d drops: call = %v after %d attempts; want failure after %d", drops, err, attempts, maxAttempts)
		}
	}
	// A systemd error is not retried.
	attempts := 0
	_, err := e.m.call(e.ctx, "x.service", "test", func(c *conn) error {
		attempts++
		return c.sd.SetUnitPropertiesContext(e.ctx, "it-missing.service", true)
	})
	if !errors.Is(err, ErrNoSuchUnit) || attempts != 1 {
		t.Fatalf("call = %v after %d attempts; want ErrNoSuchUnit after 1", err, attempts)
	}
}

// BenchmarkIntegrationSliceCreateDestroy measures creating a slice with a memory limit
// (StartTransientUnit + waiting for the job) and stopping it (StopUnit + job), and reports
// p50/p99 of each. Run with: go test ./units -run '^$' -bench SliceCreateDestroy -benchtime 200x
func BenchmarkIntegrationSliceCreateDestroy(b *testing.B) {
	systemdtest.Require(b)
	ctx := context.Background()
	m, err := Connect(ctx, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	parent, _ := SliceName("itbench2")
	if err := m.StartSlice(ctx, parent, nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Stop(ctx, parent) }()
	mem := memoryMaxName(m.Mode())
	var start, stop []time.Duration
	i := 0
	for b.Loop() {
		name, _ := SliceName("itbench2", "pod"+strconv.Itoa(i))
		i++
		t0 := time.Now()
		if err := m.StartSlice(ctx, name, []Property{{"Description", "bench"}, {mem, uint64(64 << 20)}}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := m.Stop(ctx, name); err != nil {
			b.Fatal(err)
		}
		start = append(start, t1.Sub(t0))
		stop = append(stop, time.Since(t1))
	}
	q := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(float64(len(s)-1)*p)].Microseconds())
	}
	b.ReportMetric(q(start, 0.5), "start-p50-µs")
	b.ReportMetric(q(start, 0.99), "start-p99-µs")
	b.ReportMetric(q(stop, 0.5), "stop-p50-µs")
	b.ReportMetric(q(stop, 0.99), "stop-p99-µs")
}

// TestIntegrationConcurrentReexec creates and stops slices from several goroutines while systemd
// re-executes twice: every call must succeed, whether it was in flight, waiting for its job, or
// issued on a dead connection.
func TestIntegrationConcurrentReexec(t *testing.T) {
	e := newIntegration(t, Options{})
	const workers, perWorker = 8, 25
	e.stopAtEnd(t, "itconc.slice")
	if err := e.m.StartSlice(e.ctx, "itconc.slice", nil); err != nil {
		t.Fatal(err)
	}
	mem := memoryMaxName(e.m.Mode())
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range perWorker {
				name, _ := SliceName("itconc", fmt.Sprintf("w%dn%d", w, i))
				if err := e.m.StartSlice(e.ctx, name, []Property{{"Description", "conc"}, {mem, uint64(64 << 20)}}); err != nil {
					errs <- err
					return
				}
				if err := e.m.Stop(e.ctx, name); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if out, err := exec.Command("systemctl", "daemon-reexec").CombinedOutput(); err != nil {
			t.Fatalf("systemctl daemon-reexec: %v: %s", err, out)
		}
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	list, err := e.m.List(e.ctx, "itconc-*")
	if err != nil || len(list) != 0 {
		t.Errorf("left over: %+v, %v", list, err)
	}
}

func TestIntegrationClose(t *testing.T) {
	e := newIntegration(t, Options{})
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.List(e.ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}
	if err := e.m.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestIntegrationSystemBus runs jobs over the system bus fallback (the path used when the
// private socket is not accessible), across a daemon-reexec: on the bus the connection survives
// the re-exec while systemd drops off the bus for a moment.
func TestIntegrationSystemBus(t *testing.T) {
	e := newIntegration(t, Options{dialers: []namedDial{{name: "bus", dial: dialSystemBus}}})
	if e.m.c.via != "bus" {
		t.Fatalf("connected via %s", e.m.c.via)
	}
	slice, _ := SliceName("itbus")
	e.stopAtEnd(t, slice)
	if err := e.m.StartSlice(e.ctx, slice, []Property{{"Description", "it bus"}}); err != nil {
		t.Fatal(err)
	}
	slow, _ := ServiceName("itbus", "slow")
	e.stopAtEnd(t, slow)
	done := make(chan error, 1)
	go func() {
		done <- e.m.StartService(e.ctx, slow, []Property{
			{"Slice", slice}, {"Type", "oneshot"},
			{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "1"}}},
		})
	}()
	eventually(t, 10*time.Second, func() string {
		list, err := e.m.List(e.ctx, slow)
		if err != nil || len(list) != 1 || list[0].ActiveState != "activating" {
			return fmt.Sprintf("slow service not activating yet: %+v, %v", list, err)
		}
		return ""
	})
	if out, err := exec.Command("systemctl", "daemon-reexec").CombinedOutput(); err != nil {
		t.Fatalf("systemctl daemon-reexec: %v: %s", err, out)
	}
	// A call right after the re-exec.
	list, err := e.m.List(e.ctx, "itbus*")
	if err != nil || len(list) < 1 {
		t.Fatalf("List after daemon-reexec = %+v, %v", list, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("StartService across daemon-reexec: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("StartService across daemon-reexec did not return")
	}
	if err := e.m.Stop(e.ctx, slice); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationUnitByPID: PID 1 is in init.scope; a PID systemd never saw is an error.
func TestIntegrationUnitByPID(t *testing.T) {
	e := newIntegration(t, Options{})
	got, err := e.m.UnitByPID(e.ctx, 1)
	if err != nil || got != "init.scope" {
		t.Errorf("UnitByPID(1) = %q, %v, want init.scope", got, err)
	}
	if _, err := e.m.UnitByPID(e.ctx, 1<<22+7); err == nil {
		t.Error("UnitByPID of a PID that does not exist succeeded")
	}
	if _, err := e.m.UnitByPID(e.ctx, 0); err == nil {
		t.Error("UnitByPID(0) succeeded")
	}
}
