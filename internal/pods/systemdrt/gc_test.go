package systemdrt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/units"
)

// crashLoop runs a container that crashed twice: instance 1 and 2 are dead (both units loaded
// and failed), the container waits in CrashLoopBackOff.
func crashLoop(t *testing.T, rt *testRT, sd *fakeSystemd, uid string) (*v1.Pod, func(int) string) {
	t.Helper()
	pod := testPod(uid, v1.RestartPolicyAlways, cmd("app", "1"))
	unit := func(n int) string { u, _ := UnitName(uid, "app", n); return u }
	mustSync(t, rt, pod)
	time.Sleep(time.Second)
	sd.exit(unit(1), cldExited, 3, "exit-code")
	mustSync(t, rt, pod) // restarted at once
	time.Sleep(time.Second)
	sd.exit(unit(2), cldExited, 4, "exit-code")
	st := mustSync(t, rt, pod)
	if cs := st.ContainerStatuses[0]; cs.State.Waiting == nil || cs.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || cs.RestartCount != 1 {
		t.Fatalf("not crash-looping: %s", describe(st))
	}
	return pod, unit
}

func listed(t *testing.T, rt *testRT) []string {
	t.Helper()
	cs, err := rt.gc.ListContainers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.ID+"="+c.State)
	}
	return out
}

func loadedUnits(sd *fakeSystemd) []string {
	var out []string
	for _, n := range sd.Names() {
		if _, ok := parseUnit(n); ok {
			out = append(out, n)
		}
	}
	return out
}

func TestListContainers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		start := time.Now()
		_, unit := crashLoop(t, rt, sd, "gc-1")
		cs, err := rt.gc.ListContainers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := []gc.Container{
			{ID: unit(1), PodUID: "gc-1", Name: "app", State: gc.StateExited, CreatedAt: start},
			{ID: unit(2), PodUID: "gc-1", Name: "app", State: gc.StateExited, CreatedAt: start.Add(time.Second)},
		}
		if !slices.EqualFunc(cs, want, func(a, b gc.Container) bool {
			return a.ID == b.ID && a.PodUID == b.PodUID && a.Name == b.Name && a.State == b.State && a.CreatedAt.Equal(b.CreatedAt) && a.ImageID == ""
		}) {
			t.Errorf("ListContainers\n%+v\nwant\n%+v", cs, want)
		}
		// A running pod's instance is listed running; a unit of a pod without a record (an
		// older slicelet's, state dir lost) is listed from systemd.
		mustSync(t, rt, testPod("gc-2", v1.RestartPolicyAlways, cmd("web")))
		sd.SetState("slicelet-gc_3-old-1.service", "failed", "failed")
		got := listed(t, rt)
		wantIDs := []string{unit(1) + "=exited", unit(2) + "=exited", "slicelet-gc_2-web-1.service=running", "slicelet-gc_3-old-1.service=exited"}
		if !slices.Equal(got, wantIDs) {
			t.Errorf("listed %q, want %q", got, wantIDs)
		}
	})
}

// TestCollectorKeepsNewestDeadInstance drives gc.Collector over the runtime: with
// MaxPerPodContainer=1 only the newest dead instance stays; restart count, back-off, last
// state and the next restart are unaffected.
func TestCollectorKeepsNewestDeadInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod, unit := crashLoop(t, rt, sd, "gc-1")
		col, err := gc.NewCollector(gc.CollectorOptions{
			Containers:      rt.gc,
			ImagePolicy:     gc.ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80},
			ContainerPolicy: gc.ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
			PodState: func() gc.PodState {
				return gc.PodState{Known: map[string]bool{"gc-1": true}, AllSourcesReady: true}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := col.CollectContainers(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Removed, []string{unit(1)}) {
			t.Fatalf("removed %q, want %q", res.Removed, unit(1))
		}
		if got := loadedUnits(sd); !slices.Equal(got, []string{unit(2)}) {
			t.Errorf("units left %q, want only the newest dead instance", got)
		}
		if got := listed(t, rt); !slices.Equal(got, []string{unit(2) + "=exited"}) {
			t.Errorf("listed %q after gc", got)
		}
		// A second run has nothing left to do.
		if res, err := col.CollectContainers(t.Context(), false); err != nil || len(res.Remove) != 0 {
			t.Errorf("second run: %+v, %v", res.Remove, err)
		}

		st := mustSync(t, rt, pod)
		cs := st.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.State.Waiting == nil || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 4 {
			t.Errorf("status after gc: %+v", cs)
		}
		// The back-off still ends 10 s after the last crash and instance 3 starts.
		time.Sleep(10 * time.Second)
		st = mustSync(t, rt, pod)
		if !allRunning(st) || st.ContainerStatuses[0].RestartCount != 2 {
			t.Fatalf("after the back-off: %s restarts %d", describe(st), st.ContainerStatuses[0].RestartCount)
		}
		if got := listed(t, rt); !slices.Equal(got, []string{unit(2) + "=exited", unit(3) + "=running"}) {
			t.Errorf("listed %q", got)
		}
		// `logs --previous` still finds instance 2 (kept) with its invocation filter.
		n, _, since, err := rt.rt.instanceFor(t.Context(), "gc-1", "app", true)
		if err != nil || n != 2 || since.IsZero() {
			t.Errorf("previous instance %d since %v, %v", n, since, err)
		}
	})
}

func TestRemoveContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		pod, unit := crashLoop(t, rt, sd, "gc-1")

		// The current dead instance goes too (e.g. eviction reclaim); restart logic keeps its
		// record.
		if err := rt.gc.RemoveContainer(t.Context(), "systemd://"+unit(2)); err != nil {
			t.Fatal(err)
		}
		if _, ok := sd.Unit(unit(2)); ok {
			t.Errorf("unit %s still loaded", unit(2))
		}
		if got := listed(t, rt); !slices.Equal(got, []string{unit(1) + "=exited"}) {
			t.Errorf("listed %q", got)
		}
		// Removing again is success (idempotent).
		if err := rt.gc.RemoveContainer(t.Context(), unit(2)); err != nil {
			t.Errorf("second removal: %v", err)
		}
		// The removal survives a restart of slicelet.
		if got := listed(t, rt.restart(t)); !slices.Equal(got, []string{unit(1) + "=exited"}) {
			t.Errorf("listed after restart %q", got)
		}
		time.Sleep(10 * time.Second)
		st := mustSync(t, rt, pod)
		if !allRunning(st) || st.ContainerStatuses[0].RestartCount != 2 || st.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode != 4 {
			t.Fatalf("restart after gc removed the current dead instance: %s %+v", describe(st), st.ContainerStatuses[0])
		}

		// The running instance is refused and left alone, by the worker and by the runtime.
		err := rt.gc.RemoveContainer(t.Context(), unit(3))
		if !errors.Is(err, worker.ErrContainerRunning) {
			t.Fatalf("removing the running instance: %v", err)
		}
		if err := rt.rt.RemoveContainer(t.Context(), unit(3)); !errors.Is(err, ErrInstanceRunning) {
			t.Fatalf("removing the running instance from the runtime: %v", err)
		}
		if u, ok := sd.Unit(unit(3)); !ok || u.Status.ActiveState != "active" {
			t.Errorf("running unit touched: %+v", u)
		}
		if err := rt.gc.StopContainer(t.Context(), unit(3)); !errors.Is(err, worker.ErrContainerRunning) {
			t.Errorf("stopping the running instance: %v", err)
		}

		for _, bad := range []string{"docker://abc", "slicelet-x.service", "kubepods.slice"} {
			if err := rt.gc.RemoveContainer(t.Context(), bad); err == nil {
				t.Errorf("RemoveContainer(%q) accepted", bad)
			}
		}
	})
}

// TestRemoveOrphanUnit: a unit of a pod without a record is reset, and no record is written.
func TestRemoveOrphanUnit(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeHybrid)
	name := "slicelet-gc_9-old-1.service"
	sd.SetState(name, "failed", "failed")
	if err := rt.gc.RemoveContainer(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if _, ok := sd.Unit(name); ok {
		t.Error("orphan unit still loaded")
	}
	if _, err := os.Stat(filepath.Join(rt.opts.StateDir, "pods", "gc-9")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a record was written for an orphan: %v", err)
	}
	// An orphan unit that is still running is refused.
	sd.SetState("slicelet-gc_9-old-2.service", "active", "running")
	if err := rt.gc.RemoveContainer(t.Context(), "slicelet-gc_9-old-2.service"); !errors.Is(err, ErrInstanceRunning) {
		t.Errorf("running orphan: %v", err)
	}
	// An ended unit awaiting its stop (RemainAfterExit) is stopped, then reset.
	sd.SetState("slicelet-gc_9-old-3.service", "active", "exited")
	if err := rt.gc.RemoveContainer(t.Context(), "slicelet-gc_9-old-3.service"); err != nil {
		t.Fatal(err)
	}
	var stops []string
	for _, c := range sd.CallsTo("Stop") {
		stops = append(stops, c.Unit)
	}
	if !slices.Equal(stops, []string{"slicelet-gc_9-old-3.service"}) {
		t.Errorf("stops %q", stops)
	}
}

// TestListContainersSkips: a pod whose record is unreadable is left out instead of failing the
// whole listing, and a pod whose KillPod waits out its grace period does not hold the listing
// back: its containers are listed.
func TestListContainersSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, sd := newTestRuntime(t, units.ModeHybrid)
		_, unit := crashLoop(t, rt, sd, "gc-1")
		slow := testPod("gc-2", v1.RestartPolicyAlways, cmd("web"))
		mustSync(t, rt, slow)
		bad := filepath.Join(rt.opts.StateDir, "pods", "gc-3")
		if err := os.MkdirAll(bad, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bad, "state.json"), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		sd.mu.Lock()
		sd.ignore = map[syscall.Signal]bool{syscall.SIGTERM: true}
		sd.mu.Unlock()
		killed := make(chan error, 1)
		go func() {
			_, err := rt.KillPod(t.Context(), slow, time.Minute)
			killed <- err
		}()
		time.Sleep(time.Second) // KillPod waits in its grace period
		got := listed(t, rt)
		if want := []string{unit(1) + "=exited", unit(2) + "=exited", "slicelet-gc_2-web-1.service=running"}; !slices.Equal(got, want) {
			t.Errorf("listed %q, want %q", got, want)
		}
		select {
		case err := <-killed:
			t.Fatalf("KillPod returned before its grace period: %v", err)
		default:
		}
		time.Sleep(time.Minute)
		if err := <-killed; err != nil {
			t.Fatal(err)
		}
	})
}
