package worker

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

func execProbe(period, failures int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/check"}}},
		PeriodSeconds: period, FailureThreshold: failures}
}

// TestReadinessProbe: a readiness probe that fails keeps the container unready (and the pod's
// Ready and ContainersReady conditions False) while the pod runs; its success makes the pod due
// for a sync, which reports it ready.
func TestReadinessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(1)
		w, events := newTestWorker(t, f, "")
		pod := testPod("rp-1", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(10, 1)
		st := mustSync(t, w, pod)
		if st.Phase != v1.PodRunning || st.ContainerStatuses[0].Ready || condition(st, v1.PodReady) != v1.ConditionFalse || condition(st, v1.ContainersReady) != v1.ConditionFalse {
			t.Fatalf("before any probe: phase %s, ready %v, conditions %+v", st.Phase, st.ContainerStatuses[0].Ready, st.Conditions)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if st := mustSync(t, w, pod); st.ContainerStatuses[0].Ready || st.Phase != v1.PodRunning {
			t.Fatalf("after a failed probe: ready %v, phase %s", st.ContainerStatuses[0].Ready, st.Phase)
		}
		if got := drain(events); !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "Warning Unhealthy Readiness probe failed: ") }) {
			t.Errorf("events %q: want Unhealthy", got)
		}
		f.setExecCode(0)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if due := w.NextSync("rp-1"); due.After(time.Now()) || due.IsZero() {
			t.Errorf("NextSync %v after the verdict changed, want now", due)
		}
		st = mustSync(t, w, pod)
		if !st.ContainerStatuses[0].Ready || condition(st, v1.PodReady) != v1.ConditionTrue {
			t.Errorf("after a successful probe: ready %v, conditions %+v", st.ContainerStatuses[0].Ready, st.Conditions)
		}
	})
}

// TestLivenessProbe: a liveness probe that fails failureThreshold times kills the container
// (Killing "Container app failed liveness probe, will be restarted") and the sync restarts it;
// the next kill waits for the restart back-off.
func TestLivenessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(1)
		w, events := newTestWorker(t, f, "")
		pod := testPod("lp-1", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, 2)
		if st := mustSync(t, w, pod); !running(st) || !st.ContainerStatuses[0].Ready {
			t.Fatalf("not running and ready (no readiness probe): %+v", st)
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		drain(events)
		st := mustSync(t, w, pod)
		if cs := st.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil {
			t.Fatalf("after two failures: %+v, want restarted", cs)
		}
		got := drain(events)
		for _, want := range []string{"Normal Killing Container app failed liveness probe, will be restarted", "Normal Started Container started"} {
			if !slices.Contains(got, want) {
				t.Errorf("events %q: want %q", got, want)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		st = mustSync(t, w, pod)
		if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
			t.Errorf("second liveness failure: state %+v, want CrashLoopBackOff", st.ContainerStatuses[0].State)
		}
	})
}

// TestStartupProbe: with a startup probe the container is neither started nor ready until it
// succeeds; the liveness probe does not run before.
func TestStartupProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(1)
		w, _ := newTestWorker(t, f, "")
		pod := testPod("sp-1", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].StartupProbe = execProbe(1, 100)
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
		mustSync(t, w, pod)
		time.Sleep(5500 * time.Millisecond)
		synctest.Wait()
		st := mustSync(t, w, pod)
		cs := st.ContainerStatuses[0]
		if *cs.Started || cs.Ready || cs.RestartCount != 0 {
			t.Fatalf("startup probe failing: started %v ready %v restarts %d; the liveness probe must wait", *cs.Started, cs.Ready, cs.RestartCount)
		}
		f.setExecCode(0)
		time.Sleep(time.Second)
		synctest.Wait()
		cs = mustSync(t, w, pod).ContainerStatuses[0]
		if !*cs.Started || !cs.Ready {
			t.Errorf("startup probe succeeded: started %v ready %v", *cs.Started, cs.Ready)
		}
	})
}

// TestSidecarStartupProbeGatesInit: the init container after a sidecar with a startup probe
// waits until that probe succeeded.
func TestSidecarStartupProbeGatesInit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(1)
		w, _ := newTestWorker(t, f, "")
		pod := testPod("sc-1", v1.RestartPolicyAlways, "app")
		always := v1.ContainerRestartPolicyAlways
		side := v1.Container{Name: "side", Command: []string{"/bin/sleep", "1"}, RestartPolicy: &always, StartupProbe: execProbe(1, 100)}
		pod.Spec.InitContainers = []v1.Container{side, {Name: "init", Command: []string{"/bin/true"}}}
		mustSync(t, w, pod)
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		st := mustSync(t, w, pod)
		if init := st.InitContainerStatuses[1]; init.State.Waiting == nil || init.RestartCount != 0 || f.callsTo("CreateContainer") != 1 {
			t.Fatalf("the sidecar has not started, yet init: %+v (%d creates)", init.State, f.callsTo("CreateContainer"))
		}
		f.setExecCode(0)
		time.Sleep(time.Second)
		synctest.Wait()
		mustSync(t, w, pod)
		if n := f.callsTo("CreateContainer"); n != 2 {
			t.Errorf("%d creates after the sidecar started, want 2 (the init container)", n)
		}
	})
}

// probeCounts is a ProbeMetrics counting results by "probe_type/result/container".
type probeCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *probeCounts) ProbeResult(probeType, result, container, _, _, _ string, _ time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[probeType+"/"+result+"/"+container]++
}

// TestLivenessProbeGraceAndMetrics: a liveness kill uses the probe's
// terminationGracePeriodSeconds; every probe is counted (prober_probe_total's labels).
func TestLivenessProbeGraceAndMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		f.setExecCode(1)
		counts := &probeCounts{n: map[string]int{}}
		w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.ProbeMetrics = counts })
		pod := testPod("lg-1", v1.RestartPolicyAlways, "app")
		probeGrace := int64(3)
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
		pod.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = &probeGrace
		st := mustSync(t, w, pod)
		id := strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "fake://")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		mustSync(t, w, pod)
		// The replacement's prober probes at once, as the kubelet's worker does: wait for it.
		synctest.Wait()
		f.mu.Lock()
		grace := f.grace[id]
		f.mu.Unlock()
		if grace != 3*time.Second {
			t.Errorf("liveness kill with grace %s, want the probe's 3s", grace)
		}
		counts.mu.Lock()
		defer counts.mu.Unlock()
		if counts.n["Liveness/failed/app"] != 2 {
			t.Errorf("probe counts %v, want two failed liveness probes of app: the killed instance's and its replacement's first", counts.n)
		}
	})
}
