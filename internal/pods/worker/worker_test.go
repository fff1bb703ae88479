package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

func mustSync(t *testing.T, w *Worker, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	st, err := w.SyncPod(t.Context(), pod, testSlice(pod))
	if err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	return st
}

func running(st v1.PodStatus) bool {
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

// TestEvents: the kubelet's container events, with the container's field path: Created and
// Started for each start, none for a run that ended (the kubelet records none), BackOff once
// per run that waits for its restart, Killing for each stop.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		w, events := newTestWorker(t, f, "")
		pod := testPod("ev-1", v1.RestartPolicyAlways, "app")
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("not running: %+v", st)
		}
		want := []string{"Normal Created Container created", "Normal Started Container started"}
		if got := drain(events); !reflect.DeepEqual(got, want) {
			t.Errorf("start events %q, want %q", got, want)
		}
		f.exit("ev-1", "app", 137, lifecycle.ReasonOOMKilled)
		mustSync(t, w, pod) // restarted at once
		f.exit("ev-1", "app", 1, lifecycle.ReasonError)
		mustSync(t, w, pod) // back-off 10 s
		mustSync(t, w, pod) // still waiting: no second BackOff
		want = []string{
			"Normal Created Container created", "Normal Started Container started",
			"Warning BackOff Back-off restarting failed container app in pod web_default(ev-1)",
		}
		if got := drain(events); !reflect.DeepEqual(got, want) {
			t.Errorf("restart events %q,\n want %q", got, want)
		}
		time.Sleep(10 * time.Second)
		mustSync(t, w, pod)
		if _, err := w.KillPod(t.Context(), pod, time.Second); err != nil {
			t.Fatal(err)
		}
		got := drain(events)
		if !slices.Contains(got, "Normal Killing Stopping container app") || slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "Warning Failed") }) {
			t.Errorf("kill events %q: want Killing, and no Failed", got)
		}
	})
}

// TestAdoptFromOneListing: a restarted slicelet's worker gives every running pod its Running
// status from one relist: one listing of all containers and sandboxes, no listing per pod, and
// nothing started or stopped.
func TestAdoptFromOneListing(t *testing.T) {
	f := newFakeRT()
	dir := t.TempDir()
	w, _ := newTestWorker(t, f, dir)
	var podList []*v1.Pod
	for i := range 50 {
		pod := testPod(fmt.Sprintf("ad-%d", i), v1.RestartPolicyAlways, "a", "b")
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("pod %d not running", i)
		}
		podList = append(podList, pod)
	}
	before := map[string]int{}
	for _, m := range []string{"ListContainers", "ListPodSandbox", "ContainerStatus", "CreateContainer", "StartContainer", "StopContainer", "RunPodSandbox"} {
		before[m] = f.callsTo(m)
	}
	f.mu.Lock()
	f.listed = nil
	f.mu.Unlock()

	w2, _ := newTestWorker(t, f, dir) // slicelet restarted
	res, err := w2.Relist(t.Context(), podList)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Statuses) != len(podList) {
		t.Fatalf("%d statuses, want %d", len(res.Statuses), len(podList))
	}
	for _, pod := range podList {
		if st := res.Statuses[string(pod.UID)]; !running(st) || st.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod %s after restart: %+v", pod.UID, st)
		}
	}
	f.mu.Lock()
	listed := slices.Clone(f.listed)
	f.mu.Unlock()
	if !reflect.DeepEqual(listed, []string{""}) || f.callsTo("ListPodSandbox")-before["ListPodSandbox"] != 1 {
		t.Errorf("listings %q and %d sandbox listings; want one of each, for every pod at once", listed, f.callsTo("ListPodSandbox")-before["ListPodSandbox"])
	}
	if n := f.callsTo("ContainerStatus") - before["ContainerStatus"]; n != 100 {
		t.Errorf("%d container inspections, want one per container (100)", n)
	}
	for _, m := range []string{"CreateContainer", "StartContainer", "StopContainer", "RunPodSandbox"} {
		if f.callsTo(m) != before[m] {
			t.Errorf("%s called by the relist", m)
		}
	}
	// A second relist has nothing new to tell about these pods.
	if res, err := w2.Relist(t.Context(), podList); err != nil || len(res.Statuses) != 0 || len(res.Due) != 0 {
		t.Errorf("second relist: %+v, %v", res, err)
	}
	// The syncs that follow agree with the relist.
	for _, pod := range podList[:3] {
		if st := mustSync(t, w2, pod); !running(st) || !reflect.DeepEqual(st, res2(t, w2, pod)) {
			t.Errorf("sync after adoption: %+v", st)
		}
	}
}

// res2 syncs once more and returns the status (a steady pod's status does not change).
func res2(t *testing.T, w *Worker, pod *v1.Pod) v1.PodStatus { return mustSync(t, w, pod) }

// TestRelistDue: only pods whose containers changed, or whose back-off ended, are due.
func TestRelistDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		w, _ := newTestWorker(t, f, "")
		p1, p2 := testPod("rl-1", "", "a"), testPod("rl-2", "", "a")
		mustSync(t, w, p1)
		mustSync(t, w, p2)
		if res, err := w.Relist(t.Context(), nil); err != nil || len(res.Due) != 0 {
			t.Errorf("relist after sync = %+v, %v", res, err)
		}
		f.exit("rl-2", "a", 1, lifecycle.ReasonError)
		if res, _ := w.Relist(t.Context(), nil); !reflect.DeepEqual(res.Due, []string{"rl-2"}) {
			t.Errorf("relist after exit = %v", res.Due)
		}
		mustSync(t, w, p2) // restarted at once
		f.exit("rl-2", "a", 1, lifecycle.ReasonError)
		mustSync(t, w, p2) // back-off 10 s
		time.Sleep(10 * time.Second)
		if res, _ := w.Relist(t.Context(), nil); !reflect.DeepEqual(res.Due, []string{"rl-2"}) {
			t.Errorf("relist when the back-off ended = %v", res.Due)
		}
	})
}

// TestContainerGCKeepsTheRecord: container GC removes dead runs through the worker; the pod's
// restart count, last termination state and the restart policy's verdict survive, a running
// container is refused, and the record survives a restart of slicelet.
func TestContainerGCKeepsTheRecord(t *testing.T) {
	f := newFakeRT()
	dir := t.TempDir()
	w, _ := newTestWorker(t, f, dir)
	pod := testPod("gc-1", v1.RestartPolicyOnFailure, "ok", "bad")
	mustSync(t, w, pod)
	f.exit("gc-1", "bad", 3, lifecycle.ReasonError)
	f.exit("gc-1", "ok", 0, lifecycle.ReasonCompleted)
	st := mustSync(t, w, pod) // bad restarts at once
	gcrt := w.ContainerGC()
	list, err := gcrt.ListContainers(t.Context())
	if err != nil || len(list) != 3 {
		t.Fatalf("gc list = %+v, %v", list, err)
	}
	for _, c := range list {
		err := gcrt.RemoveContainer(t.Context(), c.ID)
		if c.State == "running" {
			if err == nil || !strings.Contains(err.Error(), ErrContainerRunning.Error()) {
				t.Errorf("removing the running %s: %v", c.Name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("removing %s: %v", c.ID, err)
		}
	}
	w2, _ := newTestWorker(t, f, dir)
	after := mustSync(t, w2, pod)
	for i, cs := range after.ContainerStatuses {
		was := st.ContainerStatuses[i]
		if cs.RestartCount != was.RestartCount || !equality.Semantic.DeepEqual(cs.LastTerminationState, was.LastTerminationState) ||
			(cs.State.Terminated == nil) != (was.State.Terminated == nil) {
			t.Errorf("%s after gc: %+v\n before: %+v", cs.Name, cs, was)
		}
	}
	if f.callsTo("CreateContainer") != 3 {
		t.Errorf("%d creates: the succeeded container must not run again", f.callsTo("CreateContainer"))
	}
}

// TestForget: the pod's sandboxes, containers, record and volumes go.
func TestForget(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("fg-1", v1.RestartPolicyNever, "a")
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/s"}}
	mustSync(t, w, pod)
	vol := w.EmptyDirs(pod)["scratch"]
	if fi, err := os.Stat(vol); err != nil || !fi.IsDir() {
		t.Fatalf("emptyDir %s: %v", vol, err)
	}
	if _, err := w.KillPod(t.Context(), pod, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Forget(t.Context(), "fg-1"); err != nil {
		t.Fatal(err)
	}
	if uids, err := w.PodUIDs(t.Context()); err != nil || len(uids) != 0 {
		t.Errorf("PodUIDs after Forget = %v, %v", uids, err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(vol))); !os.IsNotExist(err) {
		t.Errorf("pod dir kept: %v", err)
	}
}

// TestExecSync runs in the running run of the container, and fails for one that does not run.
func TestExecSync(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("ex-1", v1.RestartPolicyAlways, "a")
	st := mustSync(t, w, pod)
	res, err := w.ExecSync(t.Context(), pod, "a", []string{"true"}, time.Second)
	if err != nil || string(res.Stdout) != fmt.Sprint(strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "fake://"), []string{"true"}) {
		t.Errorf("ExecSync = %q, %v", res.Stdout, err)
	}
	if _, err := w.ExecSync(t.Context(), pod, "nope", []string{"true"}, time.Second); err == nil {
		t.Error("ExecSync in a container that does not run succeeded")
	}
}

// TestValidateProbes: probes need one handler, none on a regular init container, and the API's
// limits; what is refused names its field path.
func TestValidateProbes(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	pod := testPod("va-1", "", "app")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{}
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{}, TCPSocket: &v1.TCPSocketAction{}}}
	pod.Spec.InitContainers = []v1.Container{{Name: "i", ReadinessProbe: &v1.Probe{}}}
	got := w.Validate(pod).ToAggregate().Error()
	for _, want := range []string{"spec.containers[0].livenessProbe: Required value", "spec.containers[0].startupProbe.successThreshold: Invalid value",
		"spec.containers[0].readinessProbe: Forbidden: may not specify more than 1 handler type", "spec.initContainers[0].readinessProbe: Forbidden"} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate = %s\n want %q", got, want)
		}
	}
	ok := testPod("va-2", "", "app")
	ok.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	if errs := w.Validate(ok); len(errs) > 0 {
		t.Errorf("Validate(a valid liveness probe) = %v", errs)
	}
}

// TestBackoffAdoptedCrashLoop: a crash loop that another agent ran (the kubelet, before the node
// changed agent: this worker has no record of it) keeps the kubelet's back-off: run 3 ended
// just now, so the next run waits 40 s, as under the agent that ran it, then 80 s; it is not
// restarted at once and at 10 s as a crash loop seen for the first time. Handed back, the first
// agent does not take up its own stale entry either.
func TestBackoffAdoptedCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		other, _ := newTestWorker(t, f, t.TempDir())
		pod := testPod("bo-1", v1.RestartPolicyAlways, "app")
		mustSync(t, other, pod)
		for _, wait := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
			f.exit("bo-1", "app", 1, lifecycle.ReasonError)
			time.Sleep(wait)
			if st := mustSync(t, other, pod); !running(st) {
				t.Fatalf("the other agent did not restart after %s: %+v", wait, st.ContainerStatuses)
			}
		}
		f.exit("bo-1", "app", 1, lifecycle.ReasonError) // run 3 ends under the other agent

		w, _ := newTestWorker(t, f, t.TempDir()) // the node changed agent
		waiting := func(want string) {
			t.Helper()
			st := mustSync(t, w, pod)
			cs := st.ContainerStatuses[0]
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != lifecycle.ReasonCrashLoopBackOff || !strings.HasPrefix(cs.State.Waiting.Message, want) {
				t.Fatalf("state %+v restart count %d, want CrashLoopBackOff %q", cs.State, cs.RestartCount, want)
			}
		}
		waiting("back-off 40s ")
		time.Sleep(39 * time.Second)
		waiting("back-off 40s ")
		time.Sleep(time.Second)
		st := mustSync(t, w, pod)
		if !running(st) || st.ContainerStatuses[0].RestartCount != 4 {
			t.Fatalf("after 40 s: %+v, want run 4 running", st.ContainerStatuses)
		}
		f.exit("bo-1", "app", 1, lifecycle.ReasonError)
		waiting("back-off 1m20s ")

		// Back to the first agent: its record's entry was advanced for run 3, and run 4 is
		// not its own, so it too waits 80 s rather than its stale 40 s.
		st = mustSync(t, other, pod)
		if cs := st.ContainerStatuses[0]; cs.State.Waiting == nil || !strings.HasPrefix(cs.State.Waiting.Message, "back-off 1m20s ") {
			t.Fatalf("back under the first agent: %+v, want back-off 1m20s", cs.State)
		}
	})
}
