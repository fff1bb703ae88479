// Package runtimetest is the pod-lifecycle conformance suite the pod worker passes over every
// runtime (the built-in systemd runtime and the CRI runtime): pods start and report Running, containers
// exit and restart per restartPolicy with their restart count, init containers run in order,
// KillPod honours the grace period, a new runtime instance adopts what the previous one
// started, Forget drops the pod, and Logs serves the current and previous instance with
// TailLines and Follow, ExecSync runs a command in a running container, probes decide
// readiness and restarts, lifecycle hooks run around the start and the stop, ConfigMaps,
// Secrets and the Downward API reach env and volumes (a changed ConfigMap in place).
//
// A runtime's integration test (inside the systemd sandbox) calls
//
//	runtimetest.Run(t, runtimetest.Harness{NewRuntime: ..., Slice: ..., Container: ...})
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	stdslices "slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

// Harness adapts a runtime to the suite.
type Harness struct {
	// NewRuntime returns the pod worker over a new runtime instance over the harness's shared
	// state (the same state dir, systemd or CRI endpoint). The suite calls it once for most cases and again to model
	// a restart of slicelet: the second instance must adopt what the first started. The
	// runtime's restart back-off should be short (a few hundred ms), or the restart cases wait
	// the kubelet's 10 s.
	NewRuntime func(t *testing.T) *worker.Worker
	// Slice creates the pod's slice (hierarchy.Manager.EnsurePod) and returns it.
	Slice func(t *testing.T, pod *v1.Pod) slices.PodSlice
	// DestroySlice removes the pod's slice after KillPod; optional.
	DestroySlice func(t *testing.T, uid string)
	// Container returns a container with that name that runs the POSIX shell script (busybox
	// sh is enough): for the systemd runtime Command ["/bin/sh", "-c", script]; for the CRI
	// runtime the same with an image that has /bin/sh.
	Container func(name, script string) v1.Container
	// Timeout bounds each wait for a state; 30 s when zero.
	Timeout time.Duration
	// Objects are the ConfigMaps and Secrets the workers NewRuntime returns see
	// (worker.Options.Objects): the suite adds its own (source "api"). The cases that need
	// them are skipped when nil.
	Objects *pods.Objects
}

// suite is one run.
type suite struct {
	h  Harness
	rt *worker.Worker

	objMu      sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// Run runs the suite's cases as parallel subtests of t.
func Run(t *testing.T, h Harness) {
	if h.NewRuntime == nil || h.Slice == nil || h.Container == nil {
		t.Fatal("runtimetest: Harness needs NewRuntime, Slice and Container")
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	s := &suite{h: h, rt: h.NewRuntime(t), configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"RunningThenKillWithGrace", s.runningThenKill},
		{"RestartAlways", s.restartAlways},
		{"RestartOnFailure", s.restartOnFailure},
		{"RestartNever", s.restartNever},
		{"FinishedPodReleased", s.finishedPodReleased},
		{"InitContainersInOrder", s.initContainers},
		{"AdoptAfterNewRuntimeAndForget", s.adoptAndForget},
		{"Logs", s.logs},
		{"LogsFollow", s.logsFollow},
		{"ExecSync", s.execSync},
		{"ReadinessProbe", s.readinessProbe},
		{"LivenessProbe", s.livenessProbe},
		{"StartupProbe", s.startupProbe},
		{"PreStopHook", s.preStopHook},
		{"PostStartHook", s.postStartHook},
		{"ConfigMapVolume", s.configMapVolume},
		{"MissingConfigMap", s.missingConfigMap},
		{"EnvFromObjectsAndDownwardAPI", s.envFromObjects},
	}
	t.Run("group", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t)
			})
		}
	})
}

// newPod returns a pod with a fresh UID (never reused across runs: log directories and
// records of an earlier run must not leak in).
func newPod(name string, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "rtt", UID: types.UID("rtt-" + name + "-" + hex.EncodeToString(b))},
		Spec:       v1.PodSpec{Containers: cs, RestartPolicy: policy, TerminationGracePeriodSeconds: &grace},
	}
}

// sync ensures the pod's slice and syncs it once with rt.
func (s *suite) sync(t *testing.T, rt *worker.Worker, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	st, err := rt.SyncPod(t.Context(), pod, s.h.Slice(t, pod))
	if err != nil {
		t.Fatalf("SyncPod %s: %v", pod.Name, err)
	}
	return st
}

// until syncs the pod every 100 ms, as the controller's resync would, until cond holds.
func (s *suite) until(t *testing.T, rt *worker.Worker, pod *v1.Pod, what string, cond func(v1.PodStatus) bool) v1.PodStatus {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st := s.sync(t, rt, pod)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %s: not reached in %s; last status: phase %s, %s", pod.Name, what, s.h.Timeout, st.Phase, Describe(st))
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-tick.C:
		}
	}
}

// cleanup kills and forgets the pod at the end of the test.
func (s *suite) cleanup(t *testing.T, pod *v1.Pod) {
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = s.rt.KillPod(ctx, pod, 0)
		if s.h.DestroySlice != nil {
			s.h.DestroySlice(t, string(pod.UID))
		}
		_ = s.rt.Forget(ctx, string(pod.UID))
	})
}

// Describe summarizes container statuses for failure messages.
func Describe(st v1.PodStatus) string {
	var parts []string
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			s := cs.Name + "="
			switch {
			case cs.State.Running != nil:
				s += "running"
			case cs.State.Terminated != nil:
				s += fmt.Sprintf("terminated(%d %s %s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason, cs.State.Terminated.Message)
			case cs.State.Waiting != nil:
				s += fmt.Sprintf("waiting(%s %s)", cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
			s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
			if lt := cs.LastTerminationState.Terminated; lt != nil {
				s += fmt.Sprintf(" last=%d", lt.ExitCode)
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

func status(st v1.PodStatus, name string) v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs
			}
		}
	}
	return v1.ContainerStatus{}
}

func allRunning(st v1.PodStatus) bool {
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready {
			return false
		}
	}
	return true
}

func condition(st v1.PodStatus, c v1.PodConditionType) v1.ConditionStatus {
	for _, pc := range st.Conditions {
		if pc.Type == c {
			return pc.Status
		}
	}
	return ""
}

// loop is a script that runs until it is killed, printing a marker first; with trapTerm it
// exits 0 on SIGTERM, else it ignores SIGTERM.
func loop(marker string, trapTerm bool) string {
	trap := "trap '' TERM"
	if trapTerm {
		trap = "trap 'exit 0' TERM"
	}
	return trap + "; echo " + marker + "; while true; do sleep 0.1; done"
}

// runningThenKill: two containers run, are Ready and keep restart count 0; KillPod with a
// 1 s grace ends the one that handles SIGTERM cleanly (exit 0) and kills the one that ignores it
// (exit 137) after the grace period; the killed pod is Failed (not every container succeeded).
func (s *suite) runningThenKill(t *testing.T) {
	pod := newPod("kill", v1.RestartPolicyAlways, s.h.Container("polite", loop("up", true)), s.h.Container("stubborn", loop("up", false)))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "all containers running", allRunning)
	for _, cs := range st.ContainerStatuses {
		if cs.RestartCount != 0 || cs.ContainerID == "" || cs.Started == nil || !*cs.Started {
			t.Errorf("container %s: restarts %d, id %q, started %v", cs.Name, cs.RestartCount, cs.ContainerID, cs.Started)
		}
	}
	if condition(st, v1.PodReady) != v1.ConditionTrue || st.StartTime == nil {
		t.Errorf("running pod: Ready=%s startTime %v", condition(st, v1.PodReady), st.StartTime)
	}
	// Running is not "trap installed": on a loaded machine the shell may not yet have run its
	// trap when the kill comes, and SIGTERM's default action ends it with 143. The marker is
	// printed after the trap.
	for _, c := range []string{"polite", "stubborn"} {
		s.logsUntil(t, pod, c, pods.LogOptions{}, "up")
	}
	t0 := time.Now()
	st, err := s.rt.KillPod(t.Context(), pod, time.Second)
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	polite, stubborn := status(st, "polite"), status(st, "stubborn")
	if polite.State.Terminated == nil || polite.State.Terminated.ExitCode != 0 {
		t.Errorf("polite after KillPod: %s", Describe(st))
	}
	if stubborn.State.Terminated == nil || stubborn.State.Terminated.ExitCode != 137 {
		t.Errorf("stubborn after KillPod: want exit 137 (SIGKILL after the grace period): %s", Describe(st))
	}
	if took < 900*time.Millisecond {
		t.Errorf("KillPod returned after %s, before the 1 s grace period of a container ignoring SIGTERM", took)
	}
	if st.Phase != v1.PodFailed {
		t.Errorf("killed pod phase %s, want Failed", st.Phase)
	}
	// Nothing restarts a killed pod's containers behind the runtime's back.
	uids, err := s.rt.PodUIDs(t.Context())
	if err != nil || !stdslices.Contains(uids, string(pod.UID)) {
		t.Errorf("PodUIDs after KillPod = %v, %v; want it to hold %s until Forget", uids, err, pod.UID)
	}
}

// restartAlways: a container that exits 1 is restarted again and again; the restart count
// grows, the last termination is kept, the phase stays Running.
func (s *suite) restartAlways(t *testing.T) {
	pod := newPod("always", v1.RestartPolicyAlways, s.h.Container("crash", "echo crashing; exit 1"))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "restart count 2", func(st v1.PodStatus) bool {
		return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].RestartCount >= 2
	})
	cs := st.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if cur := cs.State.Terminated; cur != nil {
		last = cur
	}
	if last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Errorf("terminated state after restarts: %s", Describe(st))
	}
	if st.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running (restartPolicy Always)", st.Phase)
	}
}

// restartOnFailure: with OnFailure a container that exits 0 is not restarted, one that fails is.
func (s *suite) restartOnFailure(t *testing.T) {
	pod := newPod("onfailure", v1.RestartPolicyOnFailure, s.h.Container("ok", "exit 0"), s.h.Container("bad", "exit 3"))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "bad restarted, ok completed", func(st v1.PodStatus) bool {
		ok, bad := status(st, "ok"), status(st, "bad")
		return ok.State.Terminated != nil && bad.RestartCount >= 1
	})
	ok, bad := status(st, "ok"), status(st, "bad")
	if ok.RestartCount != 0 || ok.State.Terminated.ExitCode != 0 || ok.State.Terminated.Reason != "Completed" {
		t.Errorf("ok: %s", Describe(st))
	}
	last := bad.LastTerminationState.Terminated
	if bad.State.Terminated != nil {
		last = bad.State.Terminated
	}
	if last == nil || last.ExitCode != 3 {
		t.Errorf("bad: %s", Describe(st))
	}
	if st.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running while a container will restart", st.Phase)
	}
}

// restartNever: with Never nothing restarts; a pod whose container exits 0 is Succeeded, one
// whose container fails is Failed, and later syncs change neither.
func (s *suite) restartNever(t *testing.T) {
	cases := []struct {
		name   string
		script string
		code   int32
		phase  v1.PodPhase
		reason string
	}{
		{"never-ok", "exit 0", 0, v1.PodSucceeded, "Completed"},
		{"never-bad", "exit 2", 2, v1.PodFailed, "Error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := newPod(c.name, v1.RestartPolicyNever, s.h.Container("main", c.script))
			s.cleanup(t, pod)
			st := s.until(t, s.rt, pod, "phase "+string(c.phase), func(st v1.PodStatus) bool { return st.Phase == c.phase })
			for range 3 {
				st = s.sync(t, s.rt, pod)
			}
			cs := st.ContainerStatuses[0]
			if st.Phase != c.phase || cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != c.code || cs.State.Terminated.Reason != c.reason {
				t.Errorf("after more syncs: phase %s, %s; want %s, exit %d %s, no restart", st.Phase, Describe(st), c.phase, c.code, c.reason)
			}
		})
	}
}

// finishedPodReleased: a pod whose containers ended for good has no ready sandbox left (the
// kubelet kills a finished pod: its sandbox is stopped) and its emptyDir is gone, while its
// status keeps the exit code and its logs stay readable, also through a new runtime instance
// (slicelet restarted), which starts nothing and makes no new sandbox.
func (s *suite) finishedPodReleased(t *testing.T) {
	c := s.h.Container("main", "echo done; exit 3")
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/srv"}}
	pod := newPod("finished", v1.RestartPolicyNever, c)
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "failed", func(st v1.PodStatus) bool { return st.Phase == v1.PodFailed })
	check := func(rt *worker.Worker, when string) {
		t.Helper()
		st := s.sync(t, rt, pod)
		cs := status(st, "main")
		if st.Phase != v1.PodFailed || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 || cs.RestartCount != 0 {
			t.Errorf("%s: phase %s, %s; want Failed, exit 3, no restart", when, st.Phase, Describe(st))
		}
		sbs, err := rt.SandboxGC().ListSandboxes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sb := range sbs {
			if sb.PodUID == string(pod.UID) {
				n++
				if sb.Ready {
					t.Errorf("%s: sandbox %s still ready", when, sb.ID)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d sandboxes, want the one it ran in, stopped", when, n)
		}
		var buf bytes.Buffer
		if err := rt.Logs(t.Context(), pod, "main", pods.LogOptions{}, &buf); err != nil || buf.String() != "done\n" {
			t.Errorf("%s: logs %q, %v; want \"done\\n\"", when, buf.String(), err)
		}
		if dirs := rt.EmptyDirs(pod); len(dirs) == 1 {
			if _, err := os.Stat(dirs["scratch"]); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: emptyDir %s: %v, want removed", when, dirs["scratch"], err)
			}
		}
	}
	check(s.rt, "after it finished")
	check(s.h.NewRuntime(t), "after a restart")
}

// initContainers: two init containers run one after the other, each to completion, before the
// app container; they append to a shared emptyDir, and the app prints what they wrote.
func (s *suite) initContainers(t *testing.T) {
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/srv"}}
	one := s.h.Container("one", "sleep 0.3; echo one >> /srv/order")
	two := s.h.Container("two", "echo two >> /srv/order")
	app := s.h.Container("app", "cat /srv/order; "+loop("app-up", true))
	one.VolumeMounts, two.VolumeMounts, app.VolumeMounts = mount, mount, mount
	pod := newPod("init", v1.RestartPolicyAlways, app)
	pod.Spec.InitContainers = []v1.Container{one, two}
	pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	s.cleanup(t, pod)

	st := s.sync(t, s.rt, pod)
	if st.Phase != v1.PodPending || condition(st, v1.PodInitialized) != v1.ConditionFalse {
		t.Errorf("first sync: phase %s Initialized=%s, want Pending/False", st.Phase, condition(st, v1.PodInitialized))
	}
	if app := status(st, "app"); app.State.Waiting == nil || app.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("app before init finished: %s", Describe(st))
	}
	st = s.until(t, s.rt, pod, "app running", allRunning)
	for _, name := range []string{"one", "two"} {
		cs := status(st, name)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.RestartCount != 0 {
			t.Errorf("init container %s: %s", name, Describe(st))
		}
	}
	if condition(st, v1.PodInitialized) != v1.ConditionTrue {
		t.Errorf("Initialized=%s after init containers", condition(st, v1.PodInitialized))
	}
	out := s.logsUntil(t, pod, "app", pods.LogOptions{}, "app-up")
	if !strings.HasPrefix(out, "one\ntwo\n") {
		t.Errorf("app saw the init containers' output %q, want one then two", out)
	}
}

// logsUntil reads a container's logs until they contain want.
func (s *suite) logsUntil(t *testing.T, pod *v1.Pod, container string, opts pods.LogOptions, want string) string {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		var buf bytes.Buffer
		err := s.rt.Logs(t.Context(), pod, container, opts, &buf)
		if err == nil && strings.Contains(buf.String(), want) {
			return buf.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs of %s/%s (%+v): %q, %v; want %q", pod.Name, container, opts, buf.String(), err, want)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// adoptAndForget: a second runtime instance over the same state adopts the running container
// (same container ID, no restart, no duplicate), kills it, and Forget removes the pod from
// PodUIDs.
func (s *suite) adoptAndForget(t *testing.T) {
	pod := newPod("adopt", v1.RestartPolicyAlways, s.h.Container("main", loop("up", true)))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "running", allRunning)
	id := st.ContainerStatuses[0].ContainerID

	rt2 := s.h.NewRuntime(t)
	uids, err := rt2.PodUIDs(t.Context())
	if err != nil || !stdslices.Contains(uids, string(pod.UID)) {
		t.Fatalf("new runtime's PodUIDs = %v, %v; want %s", uids, err, pod.UID)
	}
	for range 3 {
		st = s.sync(t, rt2, pod)
	}
	cs := st.ContainerStatuses[0]
	if !allRunning(st) || cs.ContainerID != id || cs.RestartCount != 0 {
		t.Fatalf("after adoption: %s, id %s (was %s); want the same running container", Describe(st), cs.ContainerID, id)
	}
	st, err = rt2.KillPod(t.Context(), pod, time.Second)
	if err != nil || status(st, "main").State.Terminated == nil {
		t.Fatalf("KillPod by the new runtime: %v, %s", err, Describe(st))
	}
	if s.h.DestroySlice != nil {
		s.h.DestroySlice(t, string(pod.UID))
	}
	if err := rt2.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	uids, err = rt2.PodUIDs(t.Context())
	if err != nil || stdslices.Contains(uids, string(pod.UID)) {
		t.Errorf("PodUIDs after Forget = %v, %v; want no %s", uids, err, pod.UID)
	}
}

// logs: the current instance's lines in order, TailLines, Previous after a restart, and
// ErrNoLogs for a previous instance that does not exist.
func (s *suite) logs(t *testing.T) {
	pod := newPod("logs", v1.RestartPolicyAlways, s.h.Container("main", "for i in 1 2 3 4 5; do echo line-$i; done; exit 1"))
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "restarted once", func(st v1.PodStatus) bool {
		return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].RestartCount >= 1
	})
	all := "line-1\nline-2\nline-3\nline-4\nline-5\n"
	if got := s.logsUntil(t, pod, "main", pods.LogOptions{Previous: true}, "line-5"); got != all {
		t.Errorf("previous logs = %q, want %q", got, all)
	}
	if got := s.logsUntil(t, pod, "main", pods.LogOptions{Previous: true, TailLines: 2}, "line-5"); got != "line-4\nline-5\n" {
		t.Errorf("previous logs, tail 2 = %q", got)
	}

	fresh := newPod("nologs", v1.RestartPolicyAlways, s.h.Container("main", loop("only-run", true)))
	s.cleanup(t, fresh)
	s.until(t, s.rt, fresh, "running", allRunning)
	if got := s.logsUntil(t, fresh, "main", pods.LogOptions{}, "only-run"); got != "only-run\n" {
		t.Errorf("current logs = %q", got)
	}
	err := s.rt.Logs(t.Context(), fresh, "main", pods.LogOptions{Previous: true}, &bytes.Buffer{})
	if !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("previous logs of a container that never restarted: %v, want ErrNoLogs", err)
	}
	if err := s.rt.Logs(t.Context(), fresh, "nosuch", pods.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, pods.ErrNoLogs) {
		t.Errorf("logs of an unknown container: %v, want ErrNoLogs", err)
	}
}

// logsFollow: Follow streams lines written after it started and returns once the instance
// ended.
func (s *suite) logsFollow(t *testing.T) {
	pod := newPod("follow", v1.RestartPolicyNever, s.h.Container("main", "echo first; sleep 1; echo second; sleep 0.5; echo third"))
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "started", func(st v1.PodStatus) bool {
		cs := status(st, "main")
		return cs.State.Running != nil || cs.State.Terminated != nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), s.h.Timeout)
	defer cancel()
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.rt.Logs(ctx, pod, "main", pods.LogOptions{Follow: true}, &buf) }()
	// Keep syncing while following: a runtime may learn of the exit only through a sync.
	s.until(t, s.rt, pod, "succeeded", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Logs Follow: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Logs Follow did not return after the container ended")
	}
	if got := buf.String(); got != "first\nsecond\nthird\n" {
		t.Errorf("followed logs = %q", got)
	}
}

// execSync: a command runs in the running container with the container's environment; its
// stdout, stderr and exit code come back; a container that does not run cannot exec.
func (s *suite) execSync(t *testing.T) {
	c := s.h.Container("main", loop("up", true))
	c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hello"}}
	pod := newPod("exec", v1.RestartPolicyAlways, c)
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "running", allRunning)
	res, err := s.rt.ExecSync(t.Context(), pod, "main", []string{"/bin/sh", "-c", `echo "$GREETING"; echo oops >&2; exit 3`}, 10*time.Second)
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if string(res.Stdout) != "hello\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Errorf("ExecSync: stdout %q stderr %q exit %d; want hello, oops, 3", res.Stdout, res.Stderr, res.ExitCode)
	}
	if _, err := s.rt.ExecSync(t.Context(), pod, "nosuch", []string{"true"}, time.Second); err == nil {
		t.Error("ExecSync in a container that does not exist succeeded")
	}
}
