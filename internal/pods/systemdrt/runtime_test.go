package systemdrt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/units"
)

// starts returns the units StartService was called for, in order.
func starts(sd *fakeSystemd) []string {
	var out []string
	for _, c := range sd.CallsTo("StartService") {
		out = append(out, c.Unit)
	}
	return out
}

func mustSync(t *testing.T, rt *testRT, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	st, err := rt.SyncPod(t.Context(), pod, testSlice(pod))
	if err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	return st
}

// TestSyncPodRestartBackoff: a crashing container restarts at once, then after 10 s, 20 s, …
// (the kubelet's back-off, in synctest time), each time as a new unit, and only the last dead
// instance stays loaded.
func TestSyncPodRestartBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("bo-1", v1.RestartPolicyOnFailure, cmd("a", "1"))
		unit := func(n int) string { u, _ := UnitName("bo-1", "a", n); return u }

		st := mustSync(t, rt, pod)
		if !allRunning(st) || !reflect.DeepEqual(starts(sd), []string{unit(1)}) {
			t.Fatalf("first sync: %s, starts %v", describe(st), starts(sd))
		}

		// First crash: restarted at once.
		sd.exit(unit(1), cldExited, 3, "exit-code")
		st = mustSync(t, rt, pod)
		cs := st.ContainerStatuses[0]
		if cs.State.Running == nil || cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 {
			t.Fatalf("after first crash: %+v", cs)
		}

		// Then 10 s, 20 s, 40 s after each exit.
		for i, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
			n := i + 2
			time.Sleep(time.Second) // the instance runs a second
			sd.exit(unit(n), cldExited, 3, "exit-code")
			exited := time.Now()
			st = mustSync(t, rt, pod)
			cs = st.ContainerStatuses[0]
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || st.Phase != v1.PodRunning {
				t.Fatalf("crash %d: %+v phase %s", n, cs.State, st.Phase)
			}
			if next := rt.NextSync("bo-1"); !next.Equal(exited.Add(delay)) {
				t.Errorf("crash %d: NextSync %v, want exit + %s", n, next.Sub(exited), delay)
			}
			time.Sleep(delay - time.Millisecond)
			mustSync(t, rt, pod)
			if got := len(starts(sd)); got != n {
				t.Fatalf("crash %d: restarted before the back-off ended (%d starts)", n, got)
			}
			time.Sleep(time.Millisecond)
			st = mustSync(t, rt, pod)
			if got := starts(sd); len(got) != n+1 || got[n] != unit(n+1) {
				t.Fatalf("crash %d: starts %v, want %s", n, got, unit(n+1))
			}
			if st.ContainerStatuses[0].RestartCount != int32(n) {
				t.Errorf("restart count %d, want %d", st.ContainerStatuses[0].RestartCount, n)
			}
		}
		// Dead instances older than the previous one are reset-failed.
		for n := 1; n <= 3; n++ {
			if _, ok := sd.Unit(unit(n)); ok {
				t.Errorf("old failed unit %s still loaded", unit(n))
			}
		}
		if u, ok := sd.Unit(unit(4)); !ok || u.Status.ActiveState != "failed" {
			t.Errorf("previous instance %s not kept inspectable", unit(4))
		}
	})
}

// TestSyncPodBackoffReset: an instance that ran for more than ten minutes restarts at once.
func TestSyncPodBackoffReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("bo-2", v1.RestartPolicyAlways, cmd("a", "1"))
		unit := func(n int) string { u, _ := UnitName("bo-2", "a", n); return u }
		mustSync(t, rt, pod)
		sd.exit(unit(1), cldExited, 1, "exit-code")
		mustSync(t, rt, pod) // immediate restart, back-off entry 10 s
		time.Sleep(11 * time.Minute)
		sd.exit(unit(2), cldExited, 1, "exit-code")
		st := mustSync(t, rt, pod)
		if st.ContainerStatuses[0].State.Running == nil || len(starts(sd)) != 3 {
			t.Errorf("after a long run: %s, %d starts", describe(st), len(starts(sd)))
		}
	})
}

// TestSyncPodNoDuplicates: units found without a record (crash after StartService) are adopted;
// a recorded instance that never reached systemd is started under its own name; a vanished
// unit is reported and replaced.
func TestSyncPodNoDuplicates(t *testing.T) {
	t.Run("unit without record is adopted", func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("ad-1", "", cmd("a", "1"), cmd("b", "1"))
		a1, _ := UnitName("ad-1", "a", 1)
		if err := sd.StartService(t.Context(), a1, []units.Property{{Name: "Description", Value: description(pod.Namespace, pod.Name, "a", 1)}}); err != nil {
			t.Fatal(err)
		}
		st := mustSync(t, rt, pod)
		b1, _ := UnitName("ad-1", "b", 1)
		if got := starts(sd); !reflect.DeepEqual(got, []string{a1, b1}) {
			t.Errorf("starts %v, want only b started (a adopted)", got)
		}
		if !allRunning(st) || st.ContainerStatuses[0].ContainerID != "systemd://"+a1 {
			t.Errorf("status %s", describe(st))
		}
		// A second sync and a new runtime over the same state start nothing.
		mustSync(t, rt, pod)
		st = mustSync(t, rt.restart(t), pod)
		if got := starts(sd); len(got) != 2 || !allRunning(st) {
			t.Errorf("after restart: starts %v, %s", got, describe(st))
		}
	})
	t.Run("created but never started", func(t *testing.T) {
		// slicelet stopped between creating run 2 (recorded with its configuration) and
		// starting its unit: the next slicelet starts it under its own name, no other run.
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("ad-2", "", cmd("a", "1"))
		a1, _ := UnitName("ad-2", "a", 1)
		a2, _ := UnitName("ad-2", "a", 2)
		ctx := t.Context()
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "ad-2", Name: "web", Namespace: "default"},
			Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: testSlice(pod).Unit}}
		sb, err := rt.rt.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			t.Fatal(err)
		}
		cfg := func(attempt uint32) *runtimeapi.ContainerConfig {
			return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a", Attempt: attempt}, Command: []string{"/bin/sleep", "1"},
				Labels: map[string]string{worker.LabelPodUID: "ad-2", worker.LabelPodName: "web", worker.LabelPodNamespace: "default"}}
		}
		for attempt, unit := range []string{a1, a2} {
			if id, err := rt.rt.CreateContainer(ctx, sb, cfg(uint32(attempt)), sbCfg); err != nil || id != unit {
				t.Fatalf("create %d: %s, %v", attempt, id, err)
			}
			if attempt == 0 {
				if err := rt.rt.StartContainer(ctx, a1); err != nil {
					t.Fatal(err)
				}
				sd.exit(a1, cldExited, 1, "exit-code")
			}
		}
		rt = rt.restart(t)
		st := mustSync(t, rt, pod)
		if got := starts(sd); !reflect.DeepEqual(got, []string{a1, a2}) {
			t.Errorf("starts %v, want %s started by the new slicelet", got, a2)
		}
		if cs := st.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil {
			t.Errorf("status %+v", cs)
		}
	})
	t.Run("vanished unit", func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("ad-3", "", cmd("a", "1"))
		mustSync(t, rt, pod)
		a1, _ := UnitName("ad-3", "a", 1)
		if err := sd.Fake.Stop(t.Context(), a1); err != nil { // gone behind slicelet's back
			t.Fatal(err)
		}
		st := mustSync(t, rt, pod)
		cs := st.ContainerStatuses[0]
		if lt := cs.LastTerminationState.Terminated; lt == nil || lt.Reason != lifecycle.ReasonUnknown || lt.ExitCode != 137 || cs.State.Running == nil {
			t.Errorf("status %+v", cs)
		}
	})
	t.Run("start rejected", func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod := testPod("ad-4", v1.RestartPolicyNever, cmd("a", "1"))
		a1, _ := UnitName("ad-4", "a", 1)
		sd.InjectError("StartService", a1, errors.New("unit: start: invalid argument"))
		st := mustSync(t, rt, pod)
		term := st.ContainerStatuses[0].State.Terminated
		if term == nil || term.Reason != lifecycle.ReasonStartError || term.ExitCode != 128 || st.Phase != v1.PodFailed {
			t.Errorf("status %s %+v", st.Phase, st.ContainerStatuses[0].State)
		}
	})
}

// TestSyncPodExitedUnitStopped: a successful exit is recorded from the active/exited unit,
// which is then killed (leftovers) and stopped; the record survives a restart of slicelet.
func TestSyncPodExitedUnitStopped(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	pod := testPod("ok-1", v1.RestartPolicyNever, cmd("a", "1"))
	a1, _ := UnitName("ok-1", "a", 1)
	mustSync(t, rt, pod)
	sd.exit(a1, cldExited, 0, "success")
	st := mustSync(t, rt, pod)
	if st.Phase != v1.PodSucceeded || st.ContainerStatuses[0].State.Terminated.Reason != lifecycle.ReasonCompleted {
		t.Fatalf("status %s %s", st.Phase, describe(st))
	}
	if _, ok := sd.Unit(a1); ok {
		t.Error("exited unit not stopped")
	}
	kills := sd.CallsTo("Kill")
	if len(kills) != 1 || kills[0].Signal != syscall.SIGKILL || kills[0].Who != units.KillAll {
		t.Errorf("kills %+v, want SIGKILL to leftovers", kills)
	}
	st = mustSync(t, rt.restart(t), pod)
	if st.Phase != v1.PodSucceeded || len(starts(sd)) != 1 {
		t.Errorf("after restart: %s, starts %v", st.Phase, starts(sd))
	}
}

// TestKillPod: stop signal, SIGKILL after grace, sidecars after the others, final status.
func TestKillPod(t *testing.T) {
	cases := []struct {
		name     string
		ignore   map[syscall.Signal]bool
		wantCode int32
		wantTook time.Duration
	}{
		{"stops on SIGTERM", nil, 143, 0},
		// The sidecar gets what is left of the grace period, at least 2 s
		// (kuberuntime's minimumGracePeriodInSeconds).
		{"ignores SIGTERM: killed after grace", map[syscall.Signal]bool{syscall.SIGTERM: true}, 137, 7 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt, sd := newTestRuntime(t, units.ModeHybrid)
				sd.ignore = c.ignore
				side := cmd("side", "1")
				side.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
				pod := testPod("kill-1", "", cmd("a", "1"))
				pod.Spec.InitContainers = []v1.Container{side}
				if st := mustSync(t, rt, pod); !allRunning(st) {
					t.Fatalf("not running: %s", describe(st))
				}
				start := time.Now()
				st, err := rt.KillPod(t.Context(), pod, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				// Sidecars go last, with what is left of the grace period (at least 2 s).
				if took < c.wantTook || took > c.wantTook+time.Second {
					t.Errorf("KillPod took %s, want ≈%s", took, c.wantTook)
				}
				for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
					term := cs.State.Terminated
					if term == nil || term.ExitCode != c.wantCode || term.Reason != lifecycle.ReasonError {
						t.Errorf("%s: %+v", cs.Name, cs.State)
					}
				}
				var order []string
				for _, k := range sd.CallsTo("Kill") {
					if k.Signal == syscall.SIGTERM {
						order = append(order, k.Unit)
					}
				}
				a1, _ := UnitName("kill-1", "a", 1)
				s1, _ := UnitName("kill-1", "side", 1)
				if !reflect.DeepEqual(order, []string{a1, s1}) {
					t.Errorf("SIGTERM order %v, want app then sidecar", order)
				}
				if names := sd.Names(); len(names) != 0 {
					t.Errorf("units left: %v", names)
				}
				// No restart after a kill, even with restartPolicy Always, until SyncPod.
				if len(starts(sd)) != 2 {
					t.Errorf("starts %v", starts(sd))
				}
			})
		})
	}
}

func TestFinish(t *testing.T) {
	exit := func(code, status int32, result string) units.UnitInfo {
		return units.UnitInfo{ExecMainCode: code, ExecMainStatus: status, Result: result, ExecMainStartTimestamp: t0, ExecMainExitTimestamp: t0.Add(time.Second)}
	}
	cases := []struct {
		name       string
		info       units.UnitInfo
		mode       units.Mode
		memLimited bool
		stopping   bool
		wantCode   int32
		wantSignal int32
		wantReason string
		wantMsg    string
	}{
		{"exit 0", exit(cldExited, 0, "success"), units.ModeHybrid, false, false, 0, 0, lifecycle.ReasonCompleted, ""},
		{"exit 3", exit(cldExited, 3, "exit-code"), units.ModeHybrid, false, false, 3, 0, lifecycle.ReasonError, ""},
		{"exec failed", exit(cldExited, 203, "exit-code"), units.ModeHybrid, false, false, 203, 0, lifecycle.ReasonError, "203/EXEC"},
		{"v2 oom-kill", exit(cldKilled, 9, "oom-kill"), units.ModeUnified, true, false, 137, 9, lifecycle.ReasonOOMKilled, ""},
		{"v2 SIGKILL without oom-kill", exit(cldKilled, 9, "signal"), units.ModeUnified, true, false, 137, 9, lifecycle.ReasonError, ""},
		{"v1 SIGKILL under a limit: inferred", exit(cldKilled, 9, "signal"), units.ModeHybrid, true, false, 137, 9, lifecycle.ReasonOOMKilled, "inferred"},
		{"v1 SIGKILL without a limit", exit(cldKilled, 9, "signal"), units.ModeHybrid, false, false, 137, 9, lifecycle.ReasonError, ""},
		{"v1 SIGKILL while stopping", exit(cldKilled, 9, "signal"), units.ModeHybrid, true, true, 137, 9, lifecycle.ReasonError, ""},
		{"v1 SIGKILL by systemd's stop timeout", exit(cldKilled, 9, "timeout"), units.ModeHybrid, true, false, 137, 9, lifecycle.ReasonError, ""},
		{"core dump", exit(cldDumped, 11, "core-dump"), units.ModeHybrid, false, false, 139, 11, lifecycle.ReasonError, ""},
		{"never ran", exit(0, 0, "resources"), units.ModeHybrid, false, false, 128, 0, lifecycle.ReasonStartError, "resources"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &run{Stopping: c.stopping}
			finish(in, c.info, c.mode, c.memLimited, t0.Add(time.Hour))
			if !in.Done || in.ExitCode != c.wantCode || in.Signal != c.wantSignal || in.Reason != c.wantReason || !bytes.Contains([]byte(in.Message), []byte(c.wantMsg)) {
				t.Errorf("finish = %+v", in)
			}
		})
	}
}

// TestForgetAndPodUIDs: PodUIDs finds pods from units and records; Forget removes units,
// record and emptyDirs, never hostPaths.
func TestForgetAndPodUIDs(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cmd("a", "1")
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "host", MountPath: "/host"}}
	pod := testPod("fg-1", v1.RestartPolicyNever, c)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}},
	}
	mustSync(t, rt, pod)
	a1, _ := UnitName("fg-1", "a", 1)
	u, _ := sd.Unit(a1)
	scratch := filepath.Join(rt.opts.StateDir, "pods", "fg-1", "volumes", "scratch")
	if fi, err := os.Stat(scratch); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("emptyDir %s: %v %v", scratch, fi, err)
	}
	wantBinds := []units.BindPath{{Source: scratch, Destination: "/scratch", Recursive: true}, {Source: host, Destination: "/host", Recursive: true}}
	if !reflect.DeepEqual(u.Props["BindPaths"], wantBinds) {
		t.Errorf("BindPaths %v, want %v", u.Props["BindPaths"], wantBinds)
	}
	// A unit of another pod only (no record).
	other, _ := UnitName("fg-2", "x", 3)
	sd.SetState(other, "failed", "failed")
	uids, err := rt.PodUIDs(t.Context())
	if err != nil || !reflect.DeepEqual(uids, []string{"fg-1", "fg-2"}) {
		t.Errorf("PodUIDs = %v, %v", uids, err)
	}
	sd.exit(a1, cldExited, 1, "exit-code")
	mustSync(t, rt, pod)
	if err := rt.Forget(t.Context(), "fg-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := sd.Unit(a1); ok {
		t.Error("failed unit kept after Forget")
	}
	if _, err := os.Stat(filepath.Join(rt.opts.StateDir, "pods", "fg-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod dir kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(host, "keep")); err != nil {
		t.Errorf("hostPath touched: %v", err)
	}
	if err := rt.Forget(t.Context(), "../etc"); err == nil {
		t.Error("Forget accepted a path as uid")
	}
}

// TestRelist: only pods whose units changed, or whose back-off ended, are listed.
func TestRelist(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	p1 := testPod("rl-1", "", cmd("a", "1"))
	p2 := testPod("rl-2", "", cmd("a", "1"))
	mustSync(t, rt, p1)
	mustSync(t, rt, p2)
	if got, err := rt.Relist(t.Context(), nil); err != nil || len(got.Due) != 0 {
		t.Errorf("Relist after sync = %v, %v", got, err)
	}
	u, _ := UnitName("rl-2", "a", 1)
	sd.exit(u, cldExited, 1, "exit-code")
	if got, _ := rt.Relist(t.Context(), nil); !reflect.DeepEqual(got.Due, []string{"rl-2"}) {
		t.Errorf("Relist after exit = %v", got.Due)
	}
}

// TestLogsNoInstance: no instance, no previous instance, unknown container.
func TestLogsNoInstance(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeHybrid)
	pod := testPod("lg-1", "", cmd("a", "1"))
	var buf bytes.Buffer
	for _, c := range []struct {
		name, container string
		opts            pods.LogOptions
	}{{"not started", "a", pods.LogOptions{}}, {"unknown container", "zzz", pods.LogOptions{}}} {
		if err := rt.Logs(t.Context(), pod, c.container, c.opts, &buf); !errors.Is(err, pods.ErrNoLogs) {
			t.Errorf("%s: %v, want ErrNoLogs", c.name, err)
		}
	}
	mustSync(t, rt, pod)
	if err := rt.Logs(t.Context(), pod, "a", pods.LogOptions{Previous: true}, &buf); !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("previous of the first instance: %v, want ErrNoLogs", err)
	}
}

// TestSyncPodStopsUnknownContainers: a running unit of a container that is no longer in the
// spec is stopped.
func TestSyncPodStopsUnknownContainers(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	old, _ := UnitName("uk-1", "gone", 1)
	if err := sd.StartService(t.Context(), old, nil); err != nil {
		t.Fatal(err)
	}
	pod := testPod("uk-1", "", cmd("a", "1"))
	st := mustSync(t, rt, pod)
	if _, ok := sd.Unit(old); ok || !allRunning(st) || len(st.ContainerStatuses) != 1 {
		t.Errorf("unknown container unit kept running: %v, %s", sd.Names(), describe(st))
	}
}

// TestSyncPodStopsRecordedExitedUnit: an exited unit whose end was recorded before slicelet
// stopped (crash between recording and stopping) is stopped by the next sync.
func TestSyncPodStopsRecordedExitedUnit(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	pod := testPod("rx-1", v1.RestartPolicyNever, cmd("a", "1"))
	a1, _ := UnitName("rx-1", "a", 1)
	mustSync(t, rt, pod)
	sd.exit(a1, cldExited, 0, "success")
	// Record the end as ContainerStatus would, without stopping the unit.
	if err := rt.rt.update("rx-1", a1, func(rn *run) { rn.Done, rn.Reason = true, lifecycle.ReasonCompleted }); err != nil {
		t.Fatal(err)
	}
	st := mustSync(t, rt.restart(t), pod)
	if _, ok := sd.Unit(a1); ok || st.Phase != v1.PodSucceeded {
		t.Errorf("exited unit kept: %v, phase %s", sd.Names(), st.Phase)
	}
}

// TestSyncPodMissingBinary: a command that is gone from the host fails its container
// (StartError, restart policy applies), not the whole SyncPod.
func TestSyncPodMissingBinary(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeHybrid)
	gone := v1.Container{Name: "gone", Command: []string{"/opt/removed/tool"}}
	pod := testPod("mb-1", v1.RestartPolicyNever, cmd("a", "1"), gone)
	if errs := rt.Validate(pod); len(errs) != 1 {
		t.Errorf("Validate = %v, want the missing command", errs)
	}
	st := mustSync(t, rt, pod)
	term := st.ContainerStatuses[1].State.Terminated
	if st.ContainerStatuses[0].State.Running == nil || term == nil || term.Reason != lifecycle.ReasonStartError || !bytes.Contains([]byte(term.Message), []byte("not runnable")) {
		t.Errorf("status %s %+v", describe(st), term)
	}
}

// TestStorageDirs: the emptyDir volumes (the worker's, in the runtime's state dir) are the pod's
// local storage; other volumes are not (the journal keeps the logs), and a UID that is not a
// path element gets nothing.
func TestStorageDirs(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeUnified)
	pod := testPod("11111111-2222-3333-4444-555555555555", v1.RestartPolicyAlways, cmd("app", "/bin/true"))
	pod.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
	}
	vols := rt.EmptyDirs(pod)
	want := filepath.Join(rt.opts.StateDir, "pods", string(pod.UID), "volumes", "scratch")
	if len(vols) != 1 || vols["scratch"] != want {
		t.Errorf("EmptyDirs = %v; want only scratch at %s", vols, want)
	}
	pod.UID = "../../etc"
	if vols := rt.EmptyDirs(pod); vols != nil {
		t.Errorf("StorageDirs of UID %q = %v, want none", pod.UID, vols)
	}
}
