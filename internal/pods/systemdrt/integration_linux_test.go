package systemdrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	stdslices "slices"
	"strconv"
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
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

// itEnv is a real systemd (the sandbox), a slice manager and a runtime.
type itEnv struct {
	sd    *units.Manager
	cg    *hierarchy.CgroupFS
	sl    *hierarchy.Manager
	rt    *worker.Worker
	back  *Runtime
	state string
	log   *slog.Logger
	cap   slices.Capacity
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fastBackoff keeps restart tests short; the kubelet's values are tested with the fake.
var fastBackoff = lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 400 * time.Millisecond}

func newIT(t *testing.T) *itEnv {
	t.Helper()
	env := systemdtest.Require(t)
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sd, err := units.Connect(ctx, units.Options{Logger: log, CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	capacity, err := slices.ReadCapacity("/proc", "/sys", "")
	if err != nil {
		t.Fatal(err)
	}
	cg := hierarchy.NewCgroupFS(env.CgroupRoot)
	sl := hierarchy.New(sd, cg, hierarchy.Config{
		Capacity: capacity,
		Node:     slices.NodeConfig{Enforcement: slices.Enforcement{Pods: true}},
		Pod:      slices.DefaultOptions(),
	}, log)
	if err := sl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	it := &itEnv{sd: sd, cg: cg, sl: sl, state: t.TempDir(), log: log, cap: capacity}
	it.rt = it.runtime(t)
	t.Cleanup(func() { it.cleanup() })
	return it
}

// runtime returns the pod worker over a new runtime over the environment's state (a new one
// models a restart of slicelet).
func (it *itEnv) runtime(t *testing.T) *worker.Worker {
	t.Helper()
	rt, err := New(Options{Systemd: it.sd, StateDir: it.state, Logger: it.log})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Options{Runtime: rt, Recorder: &record.FakeRecorder{}, StateDir: it.state, Logger: it.log,
		MemoryCapacity: it.cap.Memory, Resources: slices.DefaultOptions(), Backoff: fastBackoff, HostNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	it.back = rt
	return w
}

// cleanup removes every container unit and kubepods slice.
func (it *itEnv) cleanup() {
	ctx := context.Background()
	list, _ := it.sd.List(ctx, allUnitsPattern)
	for _, u := range list {
		if _, _, _, ok := ParseUnitName(u.Name); !ok {
			continue // not a container (e.g. the VM's test runner)
		}
		_ = it.sd.Stop(ctx, u.Name)
		_ = it.sd.ResetFailed(ctx, u.Name)
	}
	for _, p := range it.sl.Pods() {
		_ = it.sl.DestroyPod(ctx, p.UID)
	}
}

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func itPod(name, uid string, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: cs, RestartPolicy: policy, TerminationGracePeriodSeconds: &grace},
	}
}

func sh(name, script string) v1.Container {
	return v1.Container{Name: name, Command: []string{"/bin/sh", "-c", script}}
}

// sync ensures the pod's slice and syncs the pod once.
func (it *itEnv) sync(t *testing.T, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	ps, err := it.sl.EnsurePod(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	st, err := it.rt.SyncPod(t.Context(), pod, ps)
	if err != nil {
		t.Fatalf("SyncPod %s: %v", pod.Name, err)
	}
	return st
}

// syncUntil syncs the pod until cond holds, as the controller's resync would, for at most 20 s.
func (it *itEnv) syncUntil(t *testing.T, pod *v1.Pod, what string, cond func(v1.PodStatus) bool) v1.PodStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st := it.sync(t, pod)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %s: not reached in 20s; last status: phase %s, containers %s", pod.Name, what, st.Phase, describe(st))
		}
		<-tick.C
	}
}

// activeUnits lists the pod's container units that are not dead.
func (it *itEnv) activeUnits(t *testing.T, uid string) []string {
	t.Helper()
	list, err := it.sd.List(t.Context(), podPattern(uid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list {
		if u.ActiveState == "active" || u.ActiveState == "activating" || u.ActiveState == "deactivating" {
			out = append(out, u.Name)
		}
	}
	return out
}

// TestIntegrationQoSClasses: a pod per QoS class runs /bin/sleep in its pod slice with the
// container's limits on the unit; KillPod leaves no process in the slice and Forget no unit or
// state.
func TestIntegrationQoSClasses(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	sleep := func(res v1.ResourceRequirements) v1.Container {
		return v1.Container{Name: "sleep", Command: []string{"sleep", "infinity"}, Resources: res}
	}
	cases := []struct {
		pod  *v1.Pod
		qos  v1.PodQOSClass
		mem  string // container memory limit in bytes on cgroup v1, "" for none
		oom  int
		cpuQ string
	}{
		{itPod("g", "qos-g", "", sleep(v1.ResourceRequirements{Requests: rl("100m", "64Mi"), Limits: rl("100m", "64Mi")})), v1.PodQOSGuaranteed, "67108864", -997, "10000"},
		{itPod("bu", "qos-bu", "", sleep(v1.ResourceRequirements{Requests: rl("100m", "32Mi"), Limits: rl("200m", "64Mi")})), v1.PodQOSBurstable, "67108864", 0, "20000"},
		{itPod("be", "qos-be", "", sleep(v1.ResourceRequirements{})), v1.PodQOSBestEffort, "", 1000, "-1"},
	}
	for _, c := range cases {
		st := it.sync(t, c.pod)
		if !allRunning(st) || st.QOSClass != c.qos {
			t.Fatalf("pod %s: phase %s qos %s, containers %s", c.pod.Name, st.Phase, st.QOSClass, describe(st))
		}
		cs := st.ContainerStatuses[0]
		unit, _ := UnitName(string(c.pod.UID), "sleep", 1)
		if cs.ContainerID != "systemd://"+unit || cs.RestartCount != 0 || !cs.Ready || cs.Started == nil || !*cs.Started {
			t.Errorf("pod %s: status %+v", c.pod.Name, cs)
		}
		info, err := it.sd.Properties(ctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		ps, _ := it.sl.EnsurePod(ctx, c.pod)
		if info.ControlGroup != ps.CgroupPath+"/"+unit || info.MainPID == 0 {
			t.Errorf("pod %s: unit cgroup %s (pid %d), want in %s", c.pod.Name, info.ControlGroup, info.MainPID, ps.CgroupPath)
		}
		if !it.sd.Mode().V2() {
			if c.mem != "" {
				assertCgroupFile(t, it, info.ControlGroup, "memory", "memory.limit_in_bytes", c.mem)
			}
			assertCgroupFile(t, it, info.ControlGroup, "cpu", "cpu.cfs_quota_us", c.cpuQ)
		}
		// The kubelet's score where the kernel lets systemd lower it, else systemd's own.
		kubelet := slices.ContainerOOMScoreAdj(c.pod, &c.pod.Spec.Containers[0], it.cap.Memory)
		if c.qos != v1.PodQOSBurstable && kubelet != c.oom {
			t.Errorf("pod %s: kubelet oom score %d, want %d", c.pod.Name, kubelet, c.oom)
		}
		want, _ := it.back.oom.Apply(kubelet)
		data, err := os.ReadFile("/proc/" + strconv.Itoa(int(info.MainPID)) + "/oom_score_adj")
		if err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(want) {
			t.Errorf("pod %s: oom_score_adj %q (%v), want %d", c.pod.Name, data, err, want)
		}

		start := time.Now()
		st, err = it.rt.KillPod(ctx, c.pod, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod %s: KillPod took %s", c.pod.Name, time.Since(start).Round(time.Millisecond))
		if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 143 || term.Signal != 15 || st.Phase != v1.PodFailed {
			t.Errorf("pod %s: after KillPod %s %s", c.pod.Name, st.Phase, describe(st))
		}
		if pids, err := it.cg.Pids(ps.CgroupPath); err != nil || len(pids) > 0 {
			t.Errorf("pod %s: processes left in the pod slice after KillPod: %v (%v)", c.pod.Name, pids, err)
		}
		if left := it.activeUnits(t, string(c.pod.UID)); len(left) > 0 {
			t.Errorf("pod %s: units left: %v", c.pod.Name, left)
		}
		if err := it.rt.Forget(ctx, string(c.pod.UID)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(it.state, "pods", string(c.pod.UID))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod %s: state dir left after Forget: %v", c.pod.Name, err)
		}
		if err := it.sl.DestroyPod(ctx, string(c.pod.UID)); err != nil {
			t.Fatal(err)
		}
	}
}

func assertCgroupFile(t *testing.T, it *itEnv, cgPath, controller, file, want string) {
	t.Helper()
	got, err := it.cg.Read(cgPath, controller, file)
	if err != nil {
		t.Errorf("%s %s: %v", cgPath, file, err)
		return
	}
	if strings.TrimSpace(got) != want {
		t.Errorf("%s %s = %q, want %q", cgPath, file, got, want)
	}
}

// TestIntegrationThreeContainersStartup measures SyncPod → all containers running for a
// three-container pod (one SyncPod call).
func TestIntegrationThreeContainersStartup(t *testing.T) {
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "a measurement, meaningless in the emulated guest; starting containers on cgroup v2 is every other test's")
	it := newIT(t)
	pod := itPod("three", "three-1", "",
		v1.Container{Name: "a", Command: []string{"/bin/sleep", "infinity"}},
		v1.Container{Name: "b", Command: []string{"/bin/sleep", "infinity"}},
		v1.Container{Name: "c", Command: []string{"/bin/sleep", "infinity"}})
	ps, err := it.sl.EnsurePod(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	var samples []time.Duration
	for round := range 20 {
		start := time.Now()
		st, err := it.rt.SyncPod(t.Context(), pod, ps)
		d := time.Since(start)
		if err != nil || !allRunning(st) {
			t.Fatalf("round %d: %v, %s", round, err, describe(st))
		}
		samples = append(samples, d)
		if _, err := it.rt.KillPod(t.Context(), pod, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := it.rt.Forget(t.Context(), string(pod.UID)); err != nil {
			t.Fatal(err)
		}
	}
	sorted := stdslices.Clone(samples)
	stdslices.Sort(sorted)
	t.Logf("SyncPod → 3 containers running, 20 rounds: p50 %s, p90 %s, max %s", sorted[10].Round(time.Millisecond), sorted[18].Round(time.Millisecond), sorted[19].Round(time.Millisecond))
	if len(it.activeUnits(t, string(pod.UID))) != 0 {
		t.Error("units left")
	}
}

// TestIntegrationRestartPolicies: exit codes and restart policies with real exits.
func TestIntegrationRestartPolicies(t *testing.T) {
	it := newIT(t)

	// OnFailure: exit 3 restarts with back-off, a new unit each time.
	onf := itPod("onfailure", "rp-onfailure", v1.RestartPolicyOnFailure, sh("fail", "exit 3"))
	st := it.syncUntil(t, onf, "two restarts", func(st v1.PodStatus) bool { return st.ContainerStatuses[0].RestartCount >= 2 })
	cs := st.ContainerStatuses[0]
	if st.Phase != v1.PodRunning {
		t.Errorf("OnFailure: phase %s, want Running", st.Phase)
	}
	last := cs.LastTerminationState.Terminated
	if last == nil || last.ExitCode != 3 || last.Reason != lifecycle.ReasonError {
		t.Errorf("OnFailure: last termination %+v", last)
	}

	// Never: exit 3 fails the pod, no restart.
	never := itPod("never", "rp-never", v1.RestartPolicyNever, sh("fail", "exit 3"))
	st = it.syncUntil(t, never, "Failed", func(st v1.PodStatus) bool { return st.Phase == v1.PodFailed })
	cs = st.ContainerStatuses[0]
	if term := cs.State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != lifecycle.ReasonError || cs.RestartCount != 0 {
		t.Errorf("Never: %+v restarts %d", cs.State, cs.RestartCount)
	}
	if term := cs.State.Terminated; term != nil && (term.StartedAt.IsZero() || term.FinishedAt.Before(&term.StartedAt)) {
		t.Errorf("Never: times %v .. %v", term.StartedAt, term.FinishedAt)
	}

	// OnFailure with exit 0: Succeeded.
	ok := itPod("ok", "rp-ok", v1.RestartPolicyOnFailure, sh("ok", "exit 0"))
	st = it.syncUntil(t, ok, "Succeeded", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })
	if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != lifecycle.ReasonCompleted {
		t.Errorf("OnFailure exit 0: %s", describe(st))
	}

	// Always with exit 0: restarted, pod Running.
	always := itPod("always", "rp-always", v1.RestartPolicyAlways, sh("ok", "exit 0"))
	st = it.syncUntil(t, always, "a restart", func(st v1.PodStatus) bool { return st.ContainerStatuses[0].RestartCount >= 1 })
	if st.Phase != v1.PodRunning {
		t.Errorf("Always: phase %s", st.Phase)
	}
	// Dead instances older than the previous one are reset, so the pod keeps at most one
	// failed unit per container.
	list, _ := it.sd.List(t.Context(), podPattern(string(onf.UID)))
	failed := 0
	for _, u := range list {
		if u.ActiveState == "failed" {
			failed++
		}
	}
	if failed > 2 {
		t.Errorf("OnFailure pod keeps %d failed units", failed)
	}
}

// TestIntegrationInitContainers: init containers run in order to completion, pass data to the
// app container through an emptyDir, and a sidecar keeps running.
func TestIntegrationInitContainers(t *testing.T) {
	it := newIT(t)
	always := v1.ContainerRestartPolicyAlways
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/srv"}}
	first := sh("first", "echo one > /srv/f")
	first.VolumeMounts = mount
	second := sh("second", "test -f /srv/f && echo two >> /srv/f")
	second.VolumeMounts = mount
	side := v1.Container{Name: "side", Command: []string{"/bin/sleep", "infinity"}, RestartPolicy: &always}
	app := sh("app", "cat /srv/f; exec sleep infinity")
	app.VolumeMounts = mount
	pod := itPod("init", "init-1", v1.RestartPolicyAlways, app)
	pod.Spec.InitContainers = []v1.Container{first, side, second}
	pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}

	st := it.sync(t, pod)
	if st.Phase != v1.PodPending && st.Phase != v1.PodRunning {
		t.Errorf("first sync: phase %s, want Pending (init containers running) or Running", st.Phase)
	}
	st = it.syncUntil(t, pod, "Running", allRunning)
	ics := st.InitContainerStatuses
	f1, f2 := ics[0].State.Terminated, ics[2].State.Terminated
	if f1 == nil || f2 == nil || f1.ExitCode != 0 || f2.ExitCode != 0 || ics[1].State.Running == nil {
		t.Fatalf("init containers: %s", describe(st))
	}
	if f2.StartedAt.Before(&f1.FinishedAt) {
		t.Errorf("second init container started %v before the first finished %v", f2.StartedAt, f1.FinishedAt)
	}
	if c := condition(st, v1.PodInitialized); c != v1.ConditionTrue {
		t.Errorf("Initialized = %s", c)
	}
	var out bytes.Buffer
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "two") && time.Now().Before(deadline) {
		out.Reset()
		if err := it.rt.Logs(t.Context(), pod, "app", pods.LogOptions{}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != "one\ntwo\n" {
		t.Errorf("app logs %q, want the file the init containers wrote", out.String())
	}
	data, err := os.ReadFile(filepath.Join(it.state, "pods", string(pod.UID), "volumes", "work", "f"))
	if err != nil || string(data) != "one\ntwo\n" {
		t.Errorf("emptyDir content %q (%v)", data, err)
	}
	if _, err := it.rt.KillPod(t.Context(), pod, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := it.rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(it.state, "pods", string(pod.UID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("emptyDir left after Forget: %v", err)
	}
}

// TestIntegrationOOMKilled: a container above its memory limit is OOMKilled.
func TestIntegrationOOMKilled(t *testing.T) {
	it := newIT(t)
	hog := sh("hog", `x=$(head -c 200m /dev/zero | tr "\0" a); sleep 1`)
	hog.Resources = v1.ResourceRequirements{Requests: rl("", "16Mi"), Limits: rl("", "32Mi")}
	pod := itPod("oom", "oom-1", v1.RestartPolicyNever, hog)
	st := it.syncUntil(t, pod, "Failed", func(st v1.PodStatus) bool { return st.Phase == v1.PodFailed })
	term := st.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != lifecycle.ReasonOOMKilled || term.ExitCode != 137 {
		t.Fatalf("status %+v", st.ContainerStatuses[0].State)
	}
	t.Logf("OOM kill reported: %+v", *term)
}

// TestIntegrationKillPodGrace: a container that ignores its stop signal is killed when the grace
// period ends, and nothing of the pod is left.
func TestIntegrationKillPodGrace(t *testing.T) {
	it := newIT(t)
	ready := filepath.Join(t.TempDir(), "trapped")
	c := sh("stubborn", `trap "" TERM; touch `+ready+`; sleep infinity & wait; sleep infinity`)
	// Root, to write to the test's private directory.
	c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(0))}
	pod := itPod("stubborn", "kill-1", "", c)
	it.syncUntil(t, pod, "Running", allRunning)
	// Kill only once the shell ignores SIGTERM: under the VM's emulation the signal can otherwise
	// arrive before the trap is set.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container never set its trap")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	st, err := it.rt.KillPod(t.Context(), pod, time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	term := st.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.Signal != 9 || term.Reason != lifecycle.ReasonError {
		t.Errorf("after KillPod: %+v", st.ContainerStatuses[0].State)
	}
	// At least the 1 s given; well under the pod's own 30 s, which a KillPod that ignored the
	// grace it was given would wait out (the upper bound leaves the rest to a loaded machine).
	if took < time.Second || took > 25*time.Second {
		t.Errorf("KillPod with 1s grace took %s", took)
	}
	ps, _ := it.sl.EnsurePod(t.Context(), pod)
	if pids, err := it.cg.Pids(ps.CgroupPath); err != nil || len(pids) > 0 {
		t.Errorf("processes left: %v (%v)", pids, err)
	}
}

// TestIntegrationAdoptAfterRestart: a new Runtime over the same state dir adopts the running
// containers without starting duplicates, also when it crashed between StartService and
// saving its record.
func TestIntegrationAdoptAfterRestart(t *testing.T) {
	it := newIT(t)
	pod := itPod("adopt", "adopt-1", "",
		v1.Container{Name: "a", Command: []string{"/bin/sleep", "infinity"}},
		v1.Container{Name: "b", Command: []string{"/bin/sleep", "infinity"}})
	st := it.syncUntil(t, pod, "Running", allRunning)
	ids := []string{st.ContainerStatuses[0].ContainerID, st.ContainerStatuses[1].ContainerID}

	// slicelet restarts: a new Runtime.
	it.rt = it.runtime(t)
	uids, err := it.rt.PodUIDs(t.Context())
	if err != nil || len(uids) != 1 || uids[0] != "adopt-1" {
		t.Errorf("PodUIDs = %v, %v", uids, err)
	}
	st = it.sync(t, pod)
	if !allRunning(st) || st.ContainerStatuses[0].ContainerID != ids[0] || st.ContainerStatuses[1].ContainerID != ids[1] {
		t.Errorf("after restart: %s ids %s %s", describe(st), st.ContainerStatuses[0].ContainerID, st.ContainerStatuses[1].ContainerID)
	}
	if st.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("restart count %d", st.ContainerStatuses[0].RestartCount)
	}

	// Crash right after StartService: the record never heard of the units.
	if err := os.Remove(filepath.Join(it.state, "pods", "adopt-1", "state.json")); err != nil {
		t.Fatal(err)
	}
	it.rt = it.runtime(t)
	for range 3 {
		st = it.sync(t, pod)
	}
	if !allRunning(st) || st.ContainerStatuses[0].ContainerID != ids[0] || st.ContainerStatuses[1].ContainerID != ids[1] {
		t.Errorf("after lost state: %s", describe(st))
	}
	if active := it.activeUnits(t, "adopt-1"); len(active) != 2 {
		t.Errorf("active units %v, want exactly 2", active)
	}
}

// TestIntegrationLogs: container output is in the journal under the pod's unit; --previous
// shows the instance before a restart.
func TestIntegrationLogs(t *testing.T) {
	it := newIT(t)
	pod := itPod("logs", "logs-1", v1.RestartPolicyAlways, sh("talk", `echo "out $(date +%N)"; echo err >&2; exit 1`))
	var buf bytes.Buffer
	if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{}, &buf); !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("Logs before start = %v, want ErrNoLogs", err)
	}
	it.syncUntil(t, pod, "a restart", func(st v1.PodStatus) bool { return st.ContainerStatuses[0].RestartCount >= 1 })
	var prev string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		buf.Reset()
		if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{Previous: true}, &buf); err != nil {
			t.Fatal(err)
		}
		if prev = buf.String(); strings.Contains(prev, "err") {
			break
		}
	}
	if !strings.HasPrefix(prev, "out ") || !strings.Contains(prev, "\nerr\n") {
		t.Errorf("previous logs %q", prev)
		out, _ := exec.Command("journalctl", "--no-pager", "-o", "json", "--output-fields=MESSAGE,_SYSTEMD_UNIT,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,UNIT", "_SYSTEMD_UNIT=slicelet-logs_1-talk-1.service", "+", "UNIT=slicelet-logs_1-talk-1.service").CombinedOutput()
		t.Logf("journal:\n%s", out)
		data, _ := os.ReadFile(filepath.Join(it.state, "pods", "logs-1", "state.json"))
		t.Logf("state:\n%s", data)
	}
	buf.Reset()
	if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{Previous: true, TailLines: 1}, &buf); err != nil || buf.String() != "err\n" {
		t.Errorf("tail 1 = %q, %v", buf.String(), err)
	}
	// The container's output is findable by pod in the journal.
	byPod, err := exec.Command("journalctl", "--no-pager", "-o", "cat", "POD_UID=logs-1", "CONTAINER_NAME=talk").CombinedOutput()
	if err != nil || !strings.Contains(string(byPod), "out ") || !strings.Contains(string(byPod), "err") {
		t.Errorf("journalctl POD_UID=logs-1 CONTAINER_NAME=talk: %v\n%s", err, byPod)
	}
	// Follow ends by itself once the instance has ended.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	buf.Reset()
	if err := it.rt.Logs(ctx, pod, "talk", pods.LogOptions{Follow: true}, &buf); err != nil || ctx.Err() != nil {
		t.Errorf("follow: %v (ctx %v)", err, ctx.Err())
	}
}

// TestIntegrationLogsFollow: Follow streams a running container's output and returns by itself
// when the container has ended.
func TestIntegrationLogsFollow(t *testing.T) {
	it := newIT(t)
	pod := itPod("follow", "follow-1", v1.RestartPolicyNever, sh("talk", "echo a; sleep 0.3; echo b; sleep 0.3; echo c"))
	it.sync(t, pod)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var buf bytes.Buffer
	start := time.Now()
	if err := it.rt.Logs(ctx, pod, "talk", pods.LogOptions{Follow: true}, &buf); err != nil || ctx.Err() != nil {
		t.Fatalf("follow: %v (ctx %v)", err, ctx.Err())
	}
	if buf.String() != "a\nb\nc\n" {
		t.Errorf("followed %q", buf.String())
	}
	t.Logf("follow returned %s after start", time.Since(start).Round(time.Millisecond))
	buf.Reset()
	if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{TailLines: 2}, &buf); err != nil || buf.String() != "b\nc\n" {
		t.Errorf("tail 2 = %q, %v", buf.String(), err)
	}
	// Timestamps: journald's reception time before every line; SinceTime from the second
	// line's time leaves the first out.
	buf.Reset()
	if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{Timestamps: true}, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("timestamps: %q", buf.String())
	}
	var second time.Time
	for i, l := range lines {
		ts, msg, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || msg != []string{"a", "b", "c"}[i] {
			t.Fatalf("timestamps: line %q: %v", l, err)
		}
		if i == 1 {
			second = at
		}
	}
	buf.Reset()
	if err := it.rt.Logs(t.Context(), pod, "talk", pods.LogOptions{SinceTime: second}, &buf); err != nil || buf.String() != "b\nc\n" {
		t.Errorf("since the second line = %q, %v", buf.String(), err)
	}
}

// TestIntegrationContainerSpec: env (with $(VAR) expansion), workingDir, runAsUser/runAsGroup
// and a read-only hostPath reach the process.
func TestIntegrationContainerSpec(t *testing.T) {
	it := newIT(t)
	host := filepath.Join(t.TempDir(), "host")
	dirOrCreate := v1.HostPathDirectoryOrCreate
	c := sh("spec", `echo "$GREETING"; pwd; id -u; id -g; cat /srv/in; touch /srv/out 2>/dev/null && echo writable || echo read-only`)
	c.Env = []v1.EnvVar{{Name: "NAME", Value: "world"}, {Name: "GREETING", Value: "hello $(NAME)"}}
	c.WorkingDir = "/tmp"
	c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(65534)), RunAsGroup: ptr(int64(65534))}
	c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/srv", ReadOnly: true}}
	pod := itPod("spec", "spec-1", v1.RestartPolicyNever, c)
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &dirOrCreate}}}}
	// DirectoryOrCreate would create it; the test needs a file in it before the command runs.
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "in"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it.syncUntil(t, pod, "Succeeded", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })
	var out bytes.Buffer
	want := "hello world\n/tmp\n65534\n65534\nfrom the host\nread-only\n"
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		out.Reset()
		if err := it.rt.Logs(t.Context(), pod, "spec", pods.LogOptions{}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if _, err := os.Stat(filepath.Join(host, "out")); err == nil {
		t.Error("the container wrote into a read-only hostPath")
	}
}

// TestIntegrationContainerGC: a crash-looping container leaves dead units behind; container GC
// with MaxPerPodContainer=1 leaves only the newest dead instance loaded, `logs --previous`
// still reads the kept instance's output, and the container keeps restarting.
func TestIntegrationContainerGC(t *testing.T) {
	it := newIT(t)
	uid := "gc-crash"
	pod := itPod("crash", uid, v1.RestartPolicyAlways, sh("crash", `echo "run $(date +%N)"; exit 1`))
	// With the test's short back-off a sync finds the crashed run past its back-off as often
	// as within it, so wait for the count only: the run the last sync left (instance
	// restarts+1, started by it or ended) ends on its own, and no sync starts another.
	st := it.syncUntil(t, pod, "two restarts", func(st v1.PodStatus) bool {
		return st.ContainerStatuses[0].RestartCount >= 2
	})
	restarts := int(st.ContainerStatuses[0].RestartCount)
	current, _ := UnitName(uid, "crash", restarts+1)
	previous, _ := UnitName(uid, "crash", restarts)
	loadedContainerUnits := func() []string {
		list, err := it.sd.List(t.Context(), podPattern(uid))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range list {
			out = append(out, u.Name+"="+u.ActiveState)
		}
		return out
	}
	bothFailed := func(got []string) bool {
		return stdslices.Equal(got, []string{previous + "=failed", current + "=failed"}) || stdslices.Equal(got, []string{current + "=failed", previous + "=failed"})
	}
	got := loadedContainerUnits()
	for deadline := time.Now().Add(10 * time.Second); !bothFailed(got) && time.Now().Before(deadline); got = loadedContainerUnits() {
		time.Sleep(50 * time.Millisecond)
	}
	if !bothFailed(got) {
		t.Fatalf("before gc: units %q, want %s and %s failed", got, previous, current)
	}

	col, err := gc.NewCollector(gc.CollectorOptions{
		Containers:      it.rt.ContainerGC(),
		ImagePolicy:     gc.ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80},
		ContainerPolicy: gc.ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		PodState:        func() gc.PodState { return gc.PodState{Known: map[string]bool{uid: true}, AllSourcesReady: true} },
		Logger:          it.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := col.CollectContainers(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !stdslices.Equal(res.Removed, []string{previous}) {
		t.Errorf("removed %q, want %q", res.Removed, previous)
	}
	if got := loadedContainerUnits(); !stdslices.Equal(got, []string{current + "=failed"}) {
		t.Errorf("after gc: units %q, want only %s", got, current)
	}

	// The kept (current) instance's output is still there, and so is the removed one's: the
	// journal is not GC's to delete.
	for _, previousLogs := range []bool{false, true} {
		var out string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(out, "run ") {
			var buf bytes.Buffer
			if err := it.rt.Logs(t.Context(), pod, "crash", pods.LogOptions{Previous: previousLogs}, &buf); err != nil {
				t.Fatal(err)
			}
			out = buf.String()
		}
		if !strings.HasPrefix(out, "run ") {
			t.Errorf("logs (previous %v) after gc: %q", previousLogs, out)
		}
	}

	// Restart logic does not depend on the removed instance.
	st = it.syncUntil(t, pod, "another restart", func(st v1.PodStatus) bool {
		return int(st.ContainerStatuses[0].RestartCount) > restarts
	})
	if st.Phase != v1.PodRunning {
		t.Errorf("after gc: phase %s", st.Phase)
	}
}

// TestIntegrationExecSync: a command runs next to a running container, as the container: its
// environment, user and mounts; its output and exit code come back, and a command that outlives
// its timeout is killed and the call fails. Nothing of it stays loaded.
func TestIntegrationExecSync(t *testing.T) {
	it := newIT(t)
	c := sh("app", "exec sleep infinity")
	c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hello"}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "work", MountPath: "/srv"}}
	pod := itPod("exec", "exec-1", v1.RestartPolicyAlways, c)
	pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	it.syncUntil(t, pod, "running", allRunning)
	res, err := it.rt.ExecSync(t.Context(), pod, "app", []string{"/bin/sh", "-c", `echo "$GREETING"; touch /srv/mark; echo oops >&2; exit 3`}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Errorf("exec: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(it.state, "pods", "exec-1", "volumes", "work", "mark")); err != nil {
		t.Errorf("the command did not see the container's mount: %v", err)
	}
	start := time.Now()
	if _, err := it.rt.ExecSync(t.Context(), pod, "app", []string{"sleep", "30"}, time.Second); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("exec past its timeout: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("timed-out exec took %s", took)
	}
	list, err := it.sd.List(t.Context(), unitPrefix+"-exec-*"+units.SuffixService)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("exec units left: %+v", list)
	}
}

// lineCounter is a follower's writer: the highest "line N" seen; first is closed at the first.
type lineCounter struct {
	mu    sync.Mutex
	max   int
	first chan struct{}
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if n, err := strconv.Atoi(strings.TrimPrefix(line, "line ")); err == nil && n > l.max {
			if l.max == 0 {
				close(l.first)
			}
			l.max = n
		}
	}
	return len(p), nil
}

// childInotify counts the inotify instances held by this process's children.
func childInotify(t *testing.T) int {
	me := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	n := 0
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		if f := strings.Fields(rest); len(f) < 2 || f[1] != me {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if target, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); target == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n
}

// TestIntegrationManyFollowers: 200 followers of a pod's containers (a log shipper on a full
// node) follow at once, and the runtime's journalctl processes hold one inotify instance
// between them (root's fs.inotify.max_user_instances is 128 for the whole host).
func TestIntegrationManyFollowers(t *testing.T) {
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "journal followers and inotify instances do not depend on the cgroup layout")
	it := newIT(t)
	var cs []v1.Container
	for i := range 4 {
		cs = append(cs, sh(fmt.Sprintf("talk%d", i), "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.1; done"))
	}
	pod := itPod("followers", "followers-1", v1.RestartPolicyNever, cs...)
	it.sync(t, pod)
	before := childInotify(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	n := 200
	if v, err := strconv.Atoi(os.Getenv("FOLLOWERS")); err == nil {
		n = v
	}
	var wg sync.WaitGroup
	counters := make([]*lineCounter, n)
	for i := range n {
		lc := &lineCounter{first: make(chan struct{})}
		counters[i] = lc
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := it.rt.Logs(ctx, pod, fmt.Sprintf("talk%d", i%4), pods.LogOptions{Follow: true}, lc)
			if ctx.Err() == nil {
				lc.mu.Lock()
				t.Errorf("follower %d ended at line %d while its container runs: %v", i, lc.max, err)
				lc.mu.Unlock()
			}
		}()
	}
	for i, lc := range counters {
		select {
		case <-lc.first:
		case <-ctx.Done():
			t.Fatalf("follower %d got no line", i)
		}
	}
	// Every follower has read what was there and follows (the lines it then gets are
	// TestIntegrationLogsFollow's and TestJournalHubShares's): polled, the hub's count is the
	// fact checked.
	for it.back.hub.Followers() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d followers follow", it.back.hub.Followers(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	during := childInotify(t)
	t.Logf("inotify instances of the runtime's journalctl processes: %d before, %d with %d followers; %d followers in the hub", before, during, n, it.back.hub.Followers())
	if during-before > 2 {
		t.Errorf("%d followers hold %d inotify instances, want at most 2 (one shared journalctl --follow)", n, during-before)
	}
	cancel()
	wg.Wait()
}
