package crirt

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// memSlices is a pods.Slices in memory.
type memSlices struct {
	mu        sync.Mutex
	destroyed []string
	orphans   int
}

func (m *memSlices) EnsurePod(_ context.Context, pod *v1.Pod) (slices.PodSlice, error) {
	return slices.PodSlice{UID: string(pod.UID), Unit: "kubepods-pod" + string(pod.UID) + ".slice"}, nil
}

func (m *memSlices) DestroyPod(_ context.Context, uid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.destroyed = append(m.destroyed, uid)
	return nil
}

func (m *memSlices) CleanupOrphans(context.Context) ([]slices.Orphan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.orphans++
	return nil, nil
}

func (m *memSlices) Pods() []slices.PodSlice { return nil }

type admitAll struct{}

func (admitAll) Admit(*v1.Pod, []*v1.Pod) (bool, string, string)      { return true, "", "" }
func (admitAll) AdmitSecurity(*v1.Pod, string) (bool, string, string) { return true, "", "" }

// TestControllerWithRuntimeDown: the pod controller over this runtime and a CRI server that goes
// away: the pod turns Unknown, nothing is stopped, removed or cleaned as an orphan, and when the
// server is back the pod is Running again with the same container. Real time: the controller
// ticks every second and gRPC needs real sockets.
func TestControllerWithRuntimeDown(t *testing.T) {
	e := newEnv(t)
	sl := &memSlices{}
	ctrl := pods.NewController(pods.ControllerOptions{Slices: sl, Runtime: e.rt, Admitter: admitAll{}, WantSources: []string{pods.SourceFile}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ctrl.Run(ctx)
	pod := fakePod("u1", v1.RestartPolicyAlways, app("main"))
	ctrl.Update(pods.Snapshot{Source: pods.SourceFile, Pods: []pods.Desired{{Pod: pod, Source: pods.SourceFile, Origin: "/etc/slicelet/pods.d/web.yaml"}}})

	waitPhase := func(phase v1.PodPhase) v1.Pod {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			p, ok := ctrl.Pod("default", "web")
			if ok && p.Status.Phase == phase {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod phase %s not reached: %+v", phase, p.Status)
			}
			<-tick.C
		}
	}
	p := waitPhase(v1.PodRunning)
	id := p.Status.ContainerStatuses[0].ContainerID

	e.srv.stop()
	p = waitPhase(v1.PodUnknown)
	if p.Status.Reason != pods.ReasonRuntimeUnavailable {
		t.Errorf("Unknown pod: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	e.srv.serve(t)
	p = waitPhase(v1.PodRunning)
	if got := p.Status.ContainerStatuses[0].ContainerID; got != id {
		t.Errorf("container after the runtime returned: %s, want %s", got, id)
	}
	if r := e.cri.removed(); r != "" || e.calls("StopContainer") != 0 || len(sl.destroyed) != 0 {
		t.Errorf("deleted on a transient failure: removed %q, stops %d, slices destroyed %v", r, e.calls("StopContainer"), sl.destroyed)
	}
}
