package worker

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestEphemeralContainers: an ephemeral container added to a running pod starts once, with
// stdin and tty, its status apart; one asking for what slicelet cannot do waits with its field
// path and the pod runs on (the Ephemeral Containers conformance specs).
func TestEphemeralContainers(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("ec-1", "", "app")
	mustSync(t, w, pod)
	pod = pod.DeepCopy()
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Command: []string{"/bin/sh"}, Stdin: true, TTY: true}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "target", Command: []string{"/bin/sh"}}, TargetContainerName: "app"},
	}
	st := mustSync(t, w, pod)
	if st.Phase != v1.PodRunning || len(st.EphemeralContainerStatuses) != 2 {
		t.Fatalf("phase %s, ephemeral statuses %+v", st.Phase, st.EphemeralContainerStatuses)
	}
	if dbg := st.EphemeralContainerStatuses[0]; dbg.State.Running == nil {
		t.Errorf("debugger %+v, want running", dbg.State)
	}
	wt := st.EphemeralContainerStatuses[1].State.Waiting
	if wt == nil || wt.Reason != lifecycle.ReasonCreateContainerConfigError || !strings.Contains(wt.Message, "spec.ephemeralContainers[1].targetContainerName: Forbidden") {
		t.Errorf("target container waiting %+v, want CreateContainerConfigError naming targetContainerName", wt)
	}
	var dbgCfg int
	for _, cfg := range f.configs {
		if cfg.Metadata.Name == "debugger" {
			dbgCfg++
			if !cfg.Stdin || !cfg.Tty {
				t.Errorf("debugger config stdin %v tty %v", cfg.Stdin, cfg.Tty)
			}
		}
	}
	f.exit("ec-1", "debugger", 0, lifecycle.ReasonCompleted)
	st = mustSync(t, w, pod)
	if dbgCfg != 1 || f.callsTo("CreateContainer") != 2 || st.EphemeralContainerStatuses[0].State.Terminated == nil {
		t.Errorf("debugger created %d times (%d creates), status %+v: it must run once", dbgCfg, f.callsTo("CreateContainer"), st.EphemeralContainerStatuses[0].State)
	}
}
