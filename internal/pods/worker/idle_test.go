package worker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// ipRT is fakeRT with pod networks (SandboxNetwork) whose IP reads are counted.
type ipRT struct {
	*fakeRT
	mu  sync.Mutex
	ips int
}

func (r *ipRT) PodSandboxIPs(_ context.Context, id string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips++
	return []string{"10.88.0." + strings.TrimPrefix(id, "sb")}, nil
}

// calls is the runtime calls made so far, by name.
func (r *ipRT) calls() map[string]int {
	r.fakeRT.mu.Lock()
	out := map[string]int{}
	for k, v := range r.fakeRT.calls {
		out[k] = v
	}
	r.fakeRT.mu.Unlock()
	r.mu.Lock()
	out["PodSandboxStatus"] = r.ips
	r.mu.Unlock()
	return out
}

func diffCalls(before, after map[string]int) string {
	var out []string
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, d))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// idleNode is a worker over n running pods of one container each, synced once.
func idleNode(t *testing.T, n int) (*Worker, *ipRT, *testingclock.FakeClock, []*v1.Pod) {
	t.Helper()
	rt := &ipRT{fakeRT: newFakeRT()}
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
	w, _ := newTestWorkerWith(t, rt.fakeRT, "", func(o *Options) { o.Runtime, o.Clock = rt, clk })
	var list []*v1.Pod
	for i := range n {
		pod := testPod(fmt.Sprintf("idle-%d", i), v1.RestartPolicyAlways, "app")
		pod.Name = fmt.Sprintf("web-%d", i)
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("%s not running: %+v", pod.Name, st)
		}
		list = append(list, pod)
	}
	if _, err := w.Relist(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return w, rt, clk, list
}

// TestIdleMinuteRuntimeCalls counts the runtime calls of one idle minute of a node of 10
// running pods: a relist every second and each pod's steady resync once, as the controller
// runs them. The resyncs take the relist's listing and the sandbox's IPs read at its first
// sync: the relists' 120 listings are the minute's only calls.
func TestIdleMinuteRuntimeCalls(t *testing.T) {
	const n = 10
	w, rt, clk, list := idleNode(t, n)
	before := rt.calls()
	for s := range 60 {
		clk.Step(time.Second)
		if _, err := w.Relist(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if s%6 == 0 { // the pods' resyncs, spread over the minute
			for _, pod := range list[s/6*n/10 : (s/6+1)*n/10] {
				if st := mustSync(t, w, pod); !running(st) || len(st.PodIPs) != 1 {
					t.Fatalf("%s: %+v", pod.Name, st)
				}
			}
		}
	}
	got := diffCalls(before, rt.calls())
	t.Logf("runtime calls in one idle minute, %d pods: %s", n, got)
	if want := "ListContainers=60 ListPodSandbox=60"; got != want {
		t.Errorf("one idle minute: %s, want %s (the relists' only)", got, want)
	}
}

// TestResyncListsAfterAChange: a sync lists the pod itself when the last relist's listing is
// older than ListingMaxAge, or when anything was changed through the runtime since it began
// (a sync that started a container): it never acts on a listing that misses what slicelet
// did. A change the runtime made on its own (a container that exited) is seen at the next
// relist, whose listing the sync then takes.
func TestResyncListsAfterAChange(t *testing.T) {
	w, rt, clk, list := idleNode(t, 2)
	pod := list[0]
	step := func(name string, do func(), wantLists string) {
		t.Helper()
		before := rt.calls()
		do()
		after := rt.calls()
		got := fmt.Sprintf("ListContainers=%d ListPodSandbox=%d", after["ListContainers"]-before["ListContainers"], after["ListPodSandbox"]-before["ListPodSandbox"])
		if got != wantLists {
			t.Errorf("%s: %s, want %s", name, got, wantLists)
		}
	}
	sync := func() v1.PodStatus { return mustSync(t, w, pod) }

	step("resync after a relist", func() { sync() }, "ListContainers=0 ListPodSandbox=0")
	clk.Step(ListingMaxAge + time.Second)
	step("resync with the listing too old", func() { sync() }, "ListContainers=1 ListPodSandbox=1")

	// The container exits: the next relist sees it, and the sync restarts it from that
	// listing; the restart is a change, so the sync after it lists the pod itself.
	rt.exit(string(pod.UID), "app", 1, "Error")
	step("relist", func() {
		res, err := w.Relist(t.Context(), nil)
		if err != nil || fmt.Sprint(res.Due) != "["+string(pod.UID)+"]" {
			t.Fatalf("relist: due %v, %v", res.Due, err)
		}
	}, "ListContainers=1 ListPodSandbox=1")
	var st v1.PodStatus
	// It decides from the relist's listing, then lists the pod once after acting (its
	// status shows the new run).
	step("sync restarting the container", func() { st = sync() }, "ListContainers=1 ListPodSandbox=1")
	if !running(st) || st.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("after the exit: %+v", st.ContainerStatuses)
	}
	step("sync after the restart", func() { st = sync() }, "ListContainers=1 ListPodSandbox=1")
	if !running(st) || st.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("after the restart: %+v", st.ContainerStatuses)
	}
	step("relist", func() { _, _ = w.Relist(t.Context(), nil) }, "ListContainers=1 ListPodSandbox=1")
	step("resync after that relist", func() { st = sync() }, "ListContainers=0 ListPodSandbox=0")
	if !running(st) || st.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("resync: %+v", st.ContainerStatuses)
	}
}
