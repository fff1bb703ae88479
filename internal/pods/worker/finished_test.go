package worker

import (
	"bytes"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// readySandboxes counts the pod's ready sandboxes in f.
func (f *fakeRT) readySandboxes(uid string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, sb := range f.sandboxes {
		if sb.PodUID == uid && sb.Ready {
			n++
		}
	}
	return n
}

// TestFinishedPodReleasesItsSandbox: a pod with nothing left running and nothing to start has
// its sandbox stopped, as the kubelet's computePodActions kills it (KillPod when no container
// is kept and none starts; an init container failed under Never); the next syncs create no new
// sandbox; its status keeps the exit codes, its containers stay for their logs, and its
// emptyDir is removed. A pod that restarts a container keeps its sandbox.
func TestFinishedPodReleasesItsSandbox(t *testing.T) {
	type exit struct {
		name string
		code int32
	}
	cases := []struct {
		name     string
		policy   v1.RestartPolicy
		init     []string // regular init containers
		sidecar  bool     // a restartable init container "proxy"
		exits    []exit   // in order, each followed by a sync
		released bool
		phase    v1.PodPhase
	}{
		{name: "Never, succeeded", policy: v1.RestartPolicyNever, exits: []exit{{"app", 0}}, released: true, phase: v1.PodSucceeded},
		{name: "Never, failed", policy: v1.RestartPolicyNever, exits: []exit{{"app", 2}}, released: true, phase: v1.PodFailed},
		{name: "Never, one of two still runs", policy: v1.RestartPolicyNever, exits: []exit{{"app", 0}}, phase: v1.PodRunning},
		{name: "OnFailure, succeeded", policy: v1.RestartPolicyOnFailure, exits: []exit{{"app", 0}}, released: true, phase: v1.PodSucceeded},
		{name: "OnFailure, failed: restarts", policy: v1.RestartPolicyOnFailure, exits: []exit{{"app", 1}}, phase: v1.PodRunning},
		{name: "Always, succeeded: restarts", policy: v1.RestartPolicyAlways, exits: []exit{{"app", 0}}, phase: v1.PodRunning},
		{name: "Never, init failed", policy: v1.RestartPolicyNever, init: []string{"setup"}, exits: []exit{{"setup", 1}}, released: true, phase: v1.PodFailed},
		{name: "Never, sidecar stopped with the pod", policy: v1.RestartPolicyNever, sidecar: true, exits: []exit{{"app", 0}}, released: true, phase: v1.PodSucceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRT()
			f.logs = "done\n"
			w, _ := newTestWorker(t, f, "")
			names := []string{"app"}
			if tc.name == "Never, one of two still runs" {
				names = append(names, "other")
			}
			pod := testPod("fin-1", tc.policy, names...)
			for _, n := range tc.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Command: []string{"/bin/true"}})
			}
			if tc.sidecar {
				always := v1.ContainerRestartPolicyAlways
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: "proxy", Command: []string{"/bin/sleep", "1"}, RestartPolicy: &always})
			}
			pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			dir := w.volumePath("fin-1", emptyDirPlugin, "scratch")
			mustSync(t, w, pod)
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("emptyDir not prepared: %v", err)
			}
			var st v1.PodStatus
			for _, e := range tc.exits {
				f.exit("fin-1", e.name, e.code, "")
				st = mustSync(t, w, pod)
			}
			sandboxes := f.callsTo("RunPodSandbox")
			st2 := mustSync(t, w, pod) // a later sync
			if st.Phase != tc.phase || st2.Phase != tc.phase {
				t.Fatalf("phase %s then %s, want %s", st.Phase, st2.Phase, tc.phase)
			}
			ready := f.readySandboxes("fin-1")
			if tc.released {
				if ready != 0 || f.callsTo("StopPodSandbox") == 0 {
					t.Errorf("%d ready sandboxes, %d StopPodSandbox calls: the finished pod's sandbox must be stopped", ready, f.callsTo("StopPodSandbox"))
				}
				if f.callsTo("RunPodSandbox") != sandboxes {
					t.Errorf("a finished pod got a new sandbox")
				}
				if f.callsTo("RemoveContainer") != 0 {
					t.Errorf("a finished pod's containers were removed: their logs and exit codes go with them")
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("emptyDir of a finished pod: %v, want removed", err)
				}
				for _, e := range tc.exits {
					if cs := findStatus(st2, e.name); cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != e.code {
						t.Errorf("container %s: status %+v, want its exit code %d", e.name, cs, e.code)
					}
				}
				var out bytes.Buffer
				if err := w.Logs(t.Context(), pod, "app", pods.LogOptions{}, &out); err != nil || out.String() != "done\n" {
					t.Errorf("logs of a finished pod: %q, %v", out.String(), err)
				}
				return
			}
			if ready != 1 {
				t.Errorf("%d ready sandboxes, want the pod's one: it still runs", ready)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("emptyDir of a running pod: %v", err)
			}
		})
	}
}

func findStatus(st v1.PodStatus, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// TestFinishedPodEphemeralStopped: an ephemeral container still running when the pod's
// containers finish is stopped with the pod (killPodWithSyncResult stops every running
// container) and the sandbox released.
func TestFinishedPodEphemeralStopped(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("fin-2", v1.RestartPolicyNever, "app")
	mustSync(t, w, pod)
	pod = pod.DeepCopy()
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Command: []string{"/bin/sh"}}}}
	mustSync(t, w, pod)
	f.exit("fin-2", "app", 0, lifecycle.ReasonCompleted)
	st := mustSync(t, w, pod)
	if st.Phase != v1.PodSucceeded || f.readySandboxes("fin-2") != 0 {
		t.Fatalf("phase %s, %d ready sandboxes; want Succeeded and none", st.Phase, f.readySandboxes("fin-2"))
	}
	if len(st.EphemeralContainerStatuses) != 1 || st.EphemeralContainerStatuses[0].State.Terminated == nil {
		t.Errorf("debugger %+v, want terminated", st.EphemeralContainerStatuses)
	}
}
