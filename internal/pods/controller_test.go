package pods

import (
	"cmp"
	"context"
	"fmt"
	"io"
	stdslices "slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/slices"
)

// fakeSlices records slice operations.
type fakeSlices struct {
	mu        sync.Mutex
	ensured   map[string]int
	destroyed []string
	orphans   int
	failOnce  map[string]bool
}

func (f *fakeSlices) EnsurePod(_ context.Context, pod *v1.Pod) (slices.PodSlice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uid := string(pod.UID)
	if f.failOnce[uid] {
		delete(f.failOnce, uid)
		return slices.PodSlice{}, fmt.Errorf("slice %s: injected failure", uid)
	}
	f.ensured[uid]++
	return slices.PodSlice{UID: uid, Unit: "kubepods-pod" + uid + ".slice"}, nil
}
func (f *fakeSlices) DestroyPod(_ context.Context, uid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = append(f.destroyed, uid)
	return nil
}
func (f *fakeSlices) CleanupOrphans(context.Context) ([]slices.Orphan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orphans++
	return nil, nil
}
func (f *fakeSlices) Pods() []slices.PodSlice { return nil }

// orphanCleanups is how many times CleanupOrphans ran.
func (f *fakeSlices) orphanCleanups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orphans
}

// fakeRuntime reports every synced pod Running. Its relist reports the UIDs sent on changed as
// due, and for the pods it is given that are in adopt, that status; while down every call fails
// with ErrRuntimeUnavailable.
type fakeRuntime struct {
	mu       sync.Mutex
	synced   map[string]int
	killed   []string
	forgot   []string
	present  []string
	changed  chan string
	adopt    map[string]v1.PodStatus
	relisted [][]string // the fresh pods each relist was given
	down     bool
	gate     chan struct{} // when set, SyncPod waits for it
	entered  []string      // the UIDs SyncPod was called for, in order
	onKill   func(uid string)
	graces   []time.Duration // the grace of every KillPod, in order
	status   *v1.PodStatus   // when set, what SyncPod returns (Running otherwise)
	started  time.Time       // when set, the status's startTime
	phase    v1.PodPhase     // the phase SyncPod reports; Running when empty
}

func (f *fakeRuntime) Name() string                     { return "fake" }
func (f *fakeRuntime) Validate(*v1.Pod) field.ErrorList { return nil }
func (f *fakeRuntime) SyncPod(ctx context.Context, pod *v1.Pod, _ slices.PodSlice) (v1.PodStatus, error) {
	f.mu.Lock()
	f.entered = append(f.entered, string(pod.UID))
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return v1.PodStatus{}, ctx.Err()
		}
	}
	if err := f.unavailable(); err != nil {
		return v1.PodStatus{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced[string(pod.UID)]++
	if f.status != nil {
		return *f.status.DeepCopy(), nil
	}
	st := v1.PodStatus{Phase: cmp.Or(f.phase, v1.PodRunning)}
	if !f.started.IsZero() {
		st.StartTime = &metav1.Time{Time: f.started}
	}
	return st, nil
}

// syncs is how many times SyncPod ran for uid (read under the lock: SyncPod runs on the
// controller's goroutines).
func (f *fakeRuntime) syncs(uid string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced[uid]
}

func (f *fakeRuntime) unavailable() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fmt.Errorf("cri runtime unix:///run/x.sock: %w", ErrRuntimeUnavailable)
	}
	return nil
}
func (f *fakeRuntime) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}
func (f *fakeRuntime) Relist(_ context.Context, fresh []*v1.Pod) (Relisted, error) {
	if err := f.unavailable(); err != nil {
		return Relisted{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var res Relisted
	var uids []string
	for _, p := range fresh {
		uids = append(uids, string(p.UID))
		if st, ok := f.adopt[string(p.UID)]; ok {
			if res.Statuses == nil {
				res.Statuses = map[string]v1.PodStatus{}
			}
			res.Statuses[string(p.UID)] = st
		}
	}
	if len(uids) > 0 {
		f.relisted = append(f.relisted, uids)
	}
	select {
	case uid := <-f.changed:
		res.Due = []string{uid}
	default:
	}
	return res, nil
}
func (f *fakeRuntime) NextSync(string) time.Time { return time.Time{} }
func (f *fakeRuntime) KillPod(_ context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error) {
	if f.onKill != nil {
		f.onKill(string(pod.UID))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = append(f.killed, string(pod.UID))
	f.graces = append(f.graces, grace)
	return v1.PodStatus{Phase: v1.PodSucceeded}, nil
}
func (f *fakeRuntime) Forget(_ context.Context, uid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgot = append(f.forgot, uid)
	return nil
}
func (f *fakeRuntime) PodUIDs(context.Context) ([]string, error) {
	if err := f.unavailable(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.present...), nil
}
func (f *fakeRuntime) Logs(context.Context, *v1.Pod, string, LogOptions, io.Writer) error {
	return ErrNoLogs
}

// maxPods admits up to n pods.
type maxPods int

func (n maxPods) Admit(_ *v1.Pod, admitted []*v1.Pod) (bool, string, string) {
	if len(admitted) >= int(n) {
		return false, "OutOfpods", fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(admitted), int(n))
	}
	return true, "", ""
}

// AdmitSecurity refuses API pods in the host network (a stand-in for Pod Security baseline).
func (maxPods) AdmitSecurity(pod *v1.Pod, source string) (bool, string, string) {
	if source == SourceAPI && pod.Spec.HostNetwork {
		return false, "Forbidden", `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`
	}
	return true, "", ""
}

func desired(source, name, uid string) Desired {
	return Desired{Source: source, Origin: source + ":" + name, Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)}}}
}

func newTestController(admit Admitter, want ...string) (*Controller, *fakeSlices, *fakeRuntime) {
	s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
	rt := &fakeRuntime{synced: map[string]int{}}
	return NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: admit, WantSources: want}), s, rt
}

func TestControllerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile, SourceAPI)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)

		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a"), desired(SourceFile, "b", "uid-b")}})
		synctest.Wait()
		if s.ensured["uid-a"] == 0 || rt.syncs("uid-b") == 0 {
			t.Fatalf("pods not synced: slices %v runtime %v", s.ensured, rt.synced)
		}
		if s.orphanCleanups() != 0 {
			t.Fatal("orphans cleaned before every source reported")
		}
		pods := c.Pods()
		if len(pods) != 2 || pods[0].Name != "a" || pods[0].Status.Phase != v1.PodRunning || pods[0].Annotations[AnnotationSource] != SourceFile {
			t.Fatalf("Pods() = %+v", pods)
		}

		c.Update(Snapshot{Source: SourceAPI})
		synctest.Wait()
		if s.orphanCleanups() != 1 {
			t.Errorf("orphan cleanup ran %d times after all sources reported, want 1", s.orphanCleanups())
		}

		// b removed from its source: stopped, slice destroyed, forgotten.
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if fmt.Sprint(rt.killed, s.destroyed, rt.forgot) != "[uid-b] [uid-b] [uid-b]" {
			t.Errorf("delete: killed %v destroyed %v forgot %v", rt.killed, s.destroyed, rt.forgot)
		}
		if _, ok := c.Pod("default", "b"); ok {
			t.Error("deleted pod still listed")
		}

		// Steady pods are resynced every steadyResync, not every tick.
		before := rt.syncs("uid-a")
		time.Sleep(steadyResync + time.Second)
		synctest.Wait()
		if got := rt.syncs("uid-a") - before; got != 1 {
			t.Errorf("steady pod synced %d times in %v, want 1", got, steadyResync+time.Second)
		}
	})
}

func TestControllerRejectsAndReportsDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, _ := newTestController(maxPods(1), SourceFile, SourceAPI)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "web", "uid-api"), desired(SourceAPI, "extra", "uid-x")}})
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "web", "uid-file")}})
		synctest.Wait()

		// The API pod keeps its name; the file's is refused, naming both.
		problems := c.Problems()
		want := "pod default/web from file:web (file source) refused: the same namespace/name is already defined by api:web (api source)"
		if len(problems) != 1 || !strings.Contains(problems[0].Error, want) || problems[0].Origin != "file:web" {
			t.Errorf("problems = %+v, want %q", problems, want)
		}
		// extra and web are API pods: one fits, in namespace/name order extra first.
		x, _ := c.Pod("default", "extra")
		web, _ := c.Pod("default", "web")
		if x.Status.Phase != v1.PodRunning {
			t.Errorf("extra: %+v", x.Status)
		}
		if web.Status.Phase != v1.PodFailed || web.Status.Reason != "OutOfpods" || web.Annotations[AnnotationSource] != SourceAPI {
			t.Errorf("web: %+v %v", web.Status, web.Annotations)
		}
		if s.ensured["uid-file"] != 0 || s.ensured["uid-api"] != 0 {
			t.Error("a rejected pod got a slice")
		}
	})
}

// TestControllerRefusesSharedUID: a pod claiming the UID of a running pod (an API pod exported
// and dropped into the manifest directory under another name, or the other way round) is
// refused with a problem naming both, at every reconcile, and the running pod is left alone.
func TestControllerRefusesSharedUID(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second Desired
	}{
		{"a file copies an API pod", desired(SourceAPI, "web", "uid-x"), desired(SourceFile, "web-copy", "uid-x")},
		{"an API pod copies a file", desired(SourceFile, "web", "uid-x"), desired(SourceAPI, "web-copy", "uid-x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _, rt := newTestController(maxPods(10), SourceFile, SourceAPI)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go c.Run(ctx)
				snap := func(ds ...Desired) {
					for _, src := range []string{SourceFile, SourceAPI} {
						s := Snapshot{Source: src}
						for _, d := range ds {
							if d.Source == src {
								s.Pods = append(s.Pods, d)
							}
						}
						c.Update(s)
					}
				}
				snap(tc.first)
				synctest.Wait()
				if p, ok := c.Pod("default", "web"); !ok || p.Status.Phase != v1.PodRunning {
					t.Fatalf("the first pod does not run: %+v", p.Status)
				}
				want := fmt.Sprintf(`pod default/web-copy from %s (%s source) refused: metadata.uid "uid-x" is already used by pod default/web from %s (%s source)`,
					tc.second.Origin, tc.second.Source, tc.first.Origin, tc.first.Source)
				for round := range 20 {
					snap(tc.first, tc.second)
					synctest.Wait()
					problems := c.Problems()
					if len(problems) != 1 || !strings.Contains(problems[0].Error, want) || problems[0].Origin != tc.second.Origin {
						t.Fatalf("round %d: problems = %+v, want %q", round, problems, want)
					}
					p, ok := c.Pod("default", "web")
					if !ok || p.Annotations[AnnotationSource] != tc.first.Source || p.Status.Phase != v1.PodRunning {
						t.Fatalf("round %d: the running pod is %+v %v", round, p.Annotations, p.Status)
					}
					if _, ok := c.Pod("default", "web-copy"); ok {
						t.Fatalf("round %d: the copy is listed as a pod", round)
					}
				}
				rt.mu.Lock()
				killed := rt.killed
				rt.mu.Unlock()
				if len(killed) != 0 {
					t.Errorf("containers killed: %v", killed)
				}
			})
		})
	}
}

// TestControllerClusterSource: the cluster's pods (cluster mode) run beside the other sources,
// keep their name against a manifest file, and a pod the cluster source stops sending is
// deleted.
func TestControllerClusterSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, _ := newTestController(maxPods(10), SourceFile, SourceAPI, SourceCluster)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{desired(SourceCluster, "web", "uid-cluster"), desired(SourceCluster, "db", "uid-db")}})
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "web", "uid-file")}})
		c.Update(Snapshot{Source: SourceAPI})
		synctest.Wait()
		problems := c.Problems()
		want := "pod default/web from file:web (file source) refused: the same namespace/name is already defined by cluster:web (cluster source)"
		if len(problems) != 1 || !strings.Contains(problems[0].Error, want) {
			t.Errorf("problems = %+v, want %q", problems, want)
		}
		web, _ := c.Pod("default", "web")
		if web.UID != "uid-cluster" || web.Status.Phase != v1.PodRunning || web.Annotations[AnnotationSource] != SourceCluster {
			t.Errorf("web: %s %+v %v", web.UID, web.Status, web.Annotations)
		}
		c.Update(Snapshot{Source: SourceCluster, Pods: []Desired{desired(SourceCluster, "web", "uid-cluster")}})
		synctest.Wait()
		s.mu.Lock()
		destroyed := stdslices.Contains(s.destroyed, "uid-db")
		s.mu.Unlock()
		if _, ok := c.Pod("default", "db"); ok || !destroyed {
			t.Errorf("db is still there (slices destroyed: %v)", destroyed)
		}
	})
}

func TestControllerRetriesFailedSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile)
		s.failOnce["uid-a"] = true
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "a"); !strings.Contains(p.Status.Message, "injected failure") {
			t.Errorf("sync error not visible: %+v", p.Status)
		}
		if s.orphanCleanups() != 0 {
			t.Error("orphans cleaned while an admitted pod has no slice")
		}
		time.Sleep(busyResync + DefaultTick)
		synctest.Wait()
		if rt.syncs("uid-a") != 1 {
			t.Errorf("runtime syncs after retry = %d, want 1", rt.syncs("uid-a"))
		}
		if s.orphanCleanups() != 1 {
			t.Errorf("orphan cleanup after recovery ran %d times, want 1", s.orphanCleanups())
		}
	})
}

func TestControllerOrphanRuntimePods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceFile)
		rt.present = []string{"uid-a", "uid-gone"}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if fmt.Sprint(rt.killed, rt.forgot) != "[uid-gone] [uid-gone]" {
			t.Errorf("orphan runtime pods: killed %v forgot %v", rt.killed, rt.forgot)
		}
	})
}

// TestControllerRelist: a pod whose containers changed (a container exited) is synced at the next
// tick, not at the steady resync ten seconds later.
func TestControllerRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceFile)
		rt.changed = make(chan string, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		before := rt.syncs("uid-a")
		rt.changed <- "uid-a"
		time.Sleep(DefaultTick + time.Millisecond)
		synctest.Wait()
		if got := rt.syncs("uid-a") - before; got != 1 {
			t.Errorf("syncs after a relist change = %d, want 1 within a tick", got)
		}
	})
}

// pickyRuntime refuses pods that name an image.
type pickyRuntime struct{ *fakeRuntime }

func (pickyRuntime) Name() string { return "systemd" }
func (pickyRuntime) Validate(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	for i, c := range pod.Spec.Containers {
		if c.Image != "" {
			errs = append(errs, field.Invalid(field.NewPath("spec", "containers").Index(i).Child("image"), c.Image, "images need the cri runtime"))
		}
	}
	return errs
}

func TestControllerRejectsWhatTheRuntimeCannotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := pickyRuntime{&fakeRuntime{synced: map[string]int{}}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		d := desired(SourceFile, "img", "uid-img")
		d.Pod.Spec.Containers = []v1.Container{{Name: "c", Image: "nginx"}}
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{d}})
		synctest.Wait()
		p, _ := c.Pod("default", "img")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != ReasonUnsupported || !strings.Contains(p.Status.Message, `spec.containers[0].image: Invalid value: "nginx"`) {
			t.Errorf("status = %+v", p.Status)
		}
		if s.ensured["uid-img"] != 0 {
			t.Error("an unsupported pod got a slice")
		}
	})
}

// TestControllerRejectsBySourceSecurity: the source's security policy is checked first, before
// the runtime's validation, and only for the source it applies to; the refused pod is shown
// Failed with the policy's reason and message and never gets a slice.
func TestControllerRejectsBySourceSecurity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := pickyRuntime{&fakeRuntime{synced: map[string]int{}}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile, SourceAPI}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		api := desired(SourceAPI, "host", "uid-api")
		api.Pod.Spec.HostNetwork = true
		api.Pod.Spec.Containers = []v1.Container{{Name: "c", Image: "nginx"}} // the runtime would refuse it too
		file := desired(SourceFile, "filehost", "uid-file")
		file.Pod.Spec.HostNetwork = true
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{api}})
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{file}})
		synctest.Wait()
		p, _ := c.Pod("default", "host")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "Forbidden" || p.Status.Message != `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)` {
			t.Errorf("api pod status = %+v", p.Status)
		}
		if s.ensured["uid-api"] != 0 {
			t.Error("a refused pod got a slice")
		}
		if f, _ := c.Pod("default", "filehost"); f.Status.Phase != v1.PodRunning {
			t.Errorf("file pod status = %+v, want Running (its source's policy admits it)", f.Status)
		}
	})
}

// TestControllerRuntimeUnavailable: while the runtime is down a pod is Unknown and nothing is
// deleted (no kill, no forget, no orphan cleanup of slices or runtime pods); when it returns the
// pod is resynced to Running and orphans are judged.
func TestControllerRuntimeUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile)
		rt.present = []string{"uid-a", "uid-gone"}
		rt.down = true
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		time.Sleep(3 * DefaultTick)
		synctest.Wait()
		p, _ := c.Pod("default", "a")
		if p.Status.Phase != v1.PodUnknown || p.Status.Reason != ReasonRuntimeUnavailable || !strings.Contains(p.Status.Message, "unix:///run/x.sock") {
			t.Errorf("status while the runtime is down = %+v, want phase Unknown naming the endpoint", p.Status)
		}
		if len(rt.killed) != 0 || len(rt.forgot) != 0 || len(s.destroyed) != 0 || s.orphanCleanups() != 0 {
			t.Errorf("deleted while the runtime was down: killed %v forgot %v destroyed %v orphan cleanups %d", rt.killed, rt.forgot, s.destroyed, s.orphanCleanups())
		}

		rt.setDown(false)
		time.Sleep(busyResync + DefaultTick)
		synctest.Wait()
		p, _ = c.Pod("default", "a")
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("status after the runtime returned = %+v, want Running", p.Status)
		}
		if fmt.Sprint(rt.killed, rt.forgot) != "[uid-gone] [uid-gone]" || s.orphanCleanups() != 1 {
			t.Errorf("after recovery: killed %v forgot %v orphan cleanups %d; want only uid-gone, once", rt.killed, rt.forgot, s.orphanCleanups())
		}
	})
}

// TestControllerOnChange: the change hook fires when a pod gets its slice and phase, and when a
// deleted pod is gone; a steady resync does not fire it. GCPodState tells known, terminated and
// all-sources-ready.
func TestControllerOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes int
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile, SourceAPI},
			OnChange: func() { changes++ }})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)

		if st := c.GCPodState(); st.AllSourcesReady || len(st.Known) != 0 {
			t.Errorf("GCPodState before any source = %+v", st)
		}
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if changes != 2 { // slice, then phase Running
			t.Errorf("start: %d changes, want 2", changes)
		}
		time.Sleep(steadyResync + time.Second)
		synctest.Wait()
		if changes != 2 {
			t.Errorf("a steady resync fired the hook: %d changes", changes)
		}
		c.Update(Snapshot{Source: SourceAPI})
		synctest.Wait()
		if st := c.GCPodState(); !st.AllSourcesReady || !st.Known["uid-a"] || len(st.Terminated) != 0 {
			t.Errorf("GCPodState = %+v", st)
		}
		c.Update(Snapshot{Source: SourceFile})
		synctest.Wait()
		if changes != 3 {
			t.Errorf("delete: %d changes, want 3", changes)
		}
		if st := c.GCPodState(); st.Known["uid-a"] {
			t.Errorf("deleted pod still known: %+v", st)
		}
	})
}

// TestControllerOnStatus: the status hook fires when a pod is admitted, when a sync gives it
// another status (its phase, or only its containers' readiness), and not when a resync gives
// the same status again.
func TestControllerOnStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var statuses, changes int
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile},
			OnChange: func() { changes++ }, OnStatus: func() { statuses++ }})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if statuses != 2 { // admitted (Pending), then Running
			t.Errorf("start: %d status changes, want 2", statuses)
		}
		time.Sleep(steadyResync + time.Second)
		synctest.Wait()
		if statuses != 2 {
			t.Errorf("a resync to the same status fired the hook: %d status changes", statuses)
		}
		rt.mu.Lock()
		rt.status = &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true}}}
		rt.mu.Unlock()
		before := changes
		time.Sleep(steadyResync + time.Second)
		synctest.Wait()
		if statuses != 3 || changes != before {
			t.Errorf("readiness only: %d status changes (want 3), %d changes (want %d)", statuses, changes, before)
		}
	})
}

// TestControllerRuntimeGoesAway: a steady Running pod is reported Unknown within a tick of the
// runtime's relist failing, not at its steady resync ten seconds later.
func TestControllerRuntimeGoesAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceFile)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		if p, _ := c.Pod("default", "a"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("status = %+v", p.Status)
		}
		rt.setDown(true)
		time.Sleep(DefaultTick + time.Millisecond)
		synctest.Wait()
		if p, _ := c.Pod("default", "a"); p.Status.Phase != v1.PodUnknown {
			t.Errorf("a tick after the runtime went away: %+v, want Unknown", p.Status)
		}
	})
}

// TestControllerAdoptsAfterRestart: after slicelet restarts, the pods the sources report are
// given their status from one relist, before any of them is synced: a pod that kept running is
// Running at once and never Pending; Adopted closes only once every wanted source reported and
// that relist ran; the slow syncs that follow do not change the status.
func TestControllerAdoptsAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceFile, SourceAPI)
		running := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
		rt.adopt = map[string]v1.PodStatus{"uid-a": running, "uid-b": running}
		rt.gate = make(chan struct{}) // syncs wait: the statuses must come from the relist
		var phases []v1.PodPhase
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)

		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		select {
		case <-c.Adopted():
			t.Fatal("adopted before every wanted source reported")
		default:
		}
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "b", "uid-b")}})
		synctest.Wait()
		select {
		case <-c.Adopted():
		default:
			t.Fatal("not adopted after every source reported and a relist ran")
		}
		for _, p := range c.Pods() {
			phases = append(phases, p.Status.Phase)
			if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
				t.Errorf("pod %s at adoption: %+v, want the relisted Running status", p.Name, p.Status)
			}
		}
		rt.mu.Lock()
		relisted := fmt.Sprint(rt.relisted)
		synced := len(rt.synced)
		rt.mu.Unlock()
		// Each pod was handed to a relist exactly once, and none was synced yet.
		if relisted != "[[uid-a] [uid-b]]" || synced != 0 {
			t.Errorf("relists %s, synced pods %d; want each pod in one relist, no sync yet", relisted, synced)
		}
		close(rt.gate)
		time.Sleep(steadyResync + time.Second)
		synctest.Wait()
		for _, p := range c.Pods() {
			if p.Status.Phase != v1.PodRunning {
				t.Errorf("pod %s after its syncs: %s", p.Name, p.Status.Phase)
			}
		}
		if len(phases) != 2 {
			t.Errorf("pods at adoption: %v", phases)
		}
	})
}

// TestControllerAdoptsWithRuntimeDown: with the runtime unreachable at start, the pods are
// Unknown at adoption (never Pending) and nothing is deleted.
func TestControllerAdoptsWithRuntimeDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile)
		rt.down = true
		rt.present = []string{"uid-orphan"}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()
		<-c.Adopted()
		if p, _ := c.Pod("default", "a"); p.Status.Phase != v1.PodUnknown || p.Status.Reason != ReasonRuntimeUnavailable {
			t.Errorf("status at adoption with the runtime down: %+v", p.Status)
		}
		if len(rt.killed) != 0 || len(s.destroyed) != 0 {
			t.Errorf("deleted with the runtime down: killed %v destroyed %v", rt.killed, s.destroyed)
		}
	})
}

// TestControllerNewPodsFirst: pods never synced go before the resyncs of running pods that came
// due earlier, so a burst of new pods is not held back by the steady resyncs of many running
// ones.
func TestControllerNewPodsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(100), SourceFile)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		var old []Desired
		for i := range 20 {
			old = append(old, desired(SourceFile, fmt.Sprintf("old-%02d", i), fmt.Sprintf("uid-old-%02d", i)))
		}
		c.Update(Snapshot{Source: SourceFile, Pods: old})
		synctest.Wait()
		// Syncs now wait at the gate, one token each. The 20 running pods come due for their
		// steady resync: 8 are in flight, 12 wait.
		gate := make(chan struct{}, 100)
		rt.mu.Lock()
		rt.gate, rt.entered = gate, nil
		rt.mu.Unlock()
		time.Sleep(steadyResync + DefaultTick)
		synctest.Wait()
		fresh := stdslices.Clone(old)
		for i := range 5 {
			fresh = append(fresh, desired(SourceFile, fmt.Sprintf("new-%d", i), fmt.Sprintf("uid-new-%d", i)))
		}
		c.Update(Snapshot{Source: SourceFile, Pods: fresh})
		synctest.Wait()
		for range syncWorkers {
			gate <- struct{}{}
		}
		synctest.Wait()
		rt.mu.Lock()
		entered := stdslices.Clone(rt.entered)
		rt.mu.Unlock()
		if len(entered) != 2*syncWorkers {
			t.Fatalf("%d syncs started, want %d: %v", len(entered), 2*syncWorkers, entered)
		}
		for i := range 5 {
			if uid := fmt.Sprintf("uid-new-%d", i); !stdslices.Contains(entered[syncWorkers:], uid) {
				t.Errorf("new pod %s waits behind resyncs: started %v", uid, entered)
			}
		}
		close(gate)
	})
}

// TestControllerHeldProblemKeepsOrphans: while a source reports a held problem (a stored API pod
// that does not load) nothing is destroyed as an orphan and the pod it stands for is listed,
// Unknown with the problem; once an apply or delete resolves it, orphans are judged again.
func TestControllerHeldProblemKeepsOrphans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile, SourceAPI)
		rt.present = []string{"uid-a", "uid-unreadable"}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		held := Problem{Origin: "/var/lib/slicelet/pods/api-aside/default_victim.json", Error: "truncated", Pod: "default/victim", Hold: true}
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		c.Update(Snapshot{Source: SourceAPI, Problems: []Problem{held}})
		synctest.Wait()
		if len(rt.killed) != 0 || s.orphanCleanups() != 0 {
			t.Fatalf("orphans judged while a held problem is reported: killed %v, slice cleanups %d", rt.killed, s.orphanCleanups())
		}
		p, ok := c.Pod("default", "victim")
		if !ok || p.Status.Phase != v1.PodUnknown || p.Status.Reason != ReasonUnreadable || p.Status.Message != "truncated" || p.Annotations[AnnotationSource] != SourceAPI {
			t.Fatalf("held pod: %v %+v", ok, p)
		}
		if list := c.Pods(); len(list) != 2 || list[1].Name != "victim" {
			t.Fatalf("Pods() = %d pods", len(list))
		}
		// Resolved (deleted through the API): the pod's units are orphans now.
		c.Update(Snapshot{Source: SourceAPI})
		time.Sleep(DefaultTick)
		synctest.Wait()
		if fmt.Sprint(rt.killed) != "[uid-unreadable]" || s.orphanCleanups() != 1 {
			t.Errorf("after the problem is resolved: killed %v, slice cleanups %d", rt.killed, s.orphanCleanups())
		}
		if _, ok := c.Pod("default", "victim"); ok {
			t.Error("resolved pod still listed")
		}
	})
}

// TestControllerWouldAdmit: the dry-run admission runs the same steps as a new pod's, in order,
// without admitting anything, and leaves a pod's own earlier version out of the count.
func TestControllerWouldAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := pickyRuntime{&fakeRuntime{synced: map[string]int{}}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(1), WantSources: []string{SourceFile}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a")}})
		synctest.Wait()

		host := desired(SourceAPI, "host", "uid-h").Pod
		host.Spec.HostNetwork = true
		img := desired(SourceAPI, "img", "uid-i").Pod
		img.Spec.Containers = []v1.Container{{Name: "c", Image: "nginx"}}
		for _, tc := range []struct {
			name   string
			pod    *v1.Pod
			ok     bool
			reason string
		}{
			{"security first", host, false, "Forbidden"},
			{"then the runtime", img, false, ReasonUnsupported},
			{"then the node: full", desired(SourceAPI, "b", "uid-b").Pod, false, "OutOfpods"},
			{"a new version of an admitted pod replaces it", desired(SourceAPI, "a", "uid-a2").Pod, true, ""},
		} {
			ok, reason, msg := c.WouldAdmit(tc.pod, SourceAPI)
			if ok != tc.ok || reason != tc.reason {
				t.Errorf("%s: WouldAdmit = %v %q %q, want %v %q", tc.name, ok, reason, msg, tc.ok, tc.reason)
			}
		}
		if len(c.Pods()) != 1 {
			t.Errorf("WouldAdmit admitted something: %v", c.Pods())
		}
	})
}

// eventLog records events as "Type Reason namespace/name: message".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	m, _ := meta.Accessor(object)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s/%s: %s", eventtype, reason, m.GetNamespace(), m.GetName(), fmt.Sprintf(messageFmt, args...)))
}

// TestControllerEvents: an admitted pod gets Normal Admitted, a rejected one Warning with the
// rejection's reason and message.
func TestControllerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		log := &eventLog{}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(1), WantSources: []string{SourceAPI}, Recorder: log})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "a", "uid-a"), desired(SourceAPI, "b", "uid-b")}})
		synctest.Wait()
		log.mu.Lock()
		defer log.mu.Unlock()
		want := []string{
			"Normal Admitted default/a: Admitted from api:a",
			"Warning OutOfpods default/b: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1",
		}
		if strings.Join(log.events, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(log.events, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestControllerDeletionGrace: a grace set before the source deletes the pod replaces its
// terminationGracePeriodSeconds (default 30 s); without one, the pod's own applies.
func TestControllerDeletionGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newTestController(maxPods(10), SourceAPI)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "fast", "uid-fast"), desired(SourceAPI, "slow", "uid-slow")}})
		synctest.Wait()
		if c.SetDeletionGrace("default", "nosuch", time.Second) {
			t.Error("SetDeletionGrace found a pod that does not exist")
		}
		if !c.SetDeletionGrace("default", "fast", 3*time.Second) {
			t.Fatal("SetDeletionGrace did not find fast")
		}
		c.Update(Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "slow", "uid-slow")}})
		synctest.Wait()
		c.Update(Snapshot{Source: SourceAPI})
		synctest.Wait()
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if !stdslices.Equal(rt.graces, []time.Duration{3 * time.Second, 30 * time.Second}) || !stdslices.Equal(rt.killed, []string{"uid-fast", "uid-slow"}) {
			t.Errorf("killed %v with graces %v; want uid-fast in 3s, uid-slow in 30s", rt.killed, rt.graces)
		}
	})
}

// TestResyncAfter: a pod in motion is synced again within busyResync; a steady one at the
// kubelet's sync frequency, unless it has volumes made from objects, which a resync rewrites.
func TestResyncAfter(t *testing.T) {
	running := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	waiting := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	withVolume := func(v v1.VolumeSource) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "v", VolumeSource: v}}}}
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		status v1.PodStatus
		want   time.Duration
	}{
		{"pending", &v1.Pod{}, v1.PodStatus{Phase: v1.PodPending}, busyResync},
		{"waiting container", &v1.Pod{}, waiting, busyResync},
		{"steady", &v1.Pod{}, running, steadyResync},
		{"steady with an emptyDir", withVolume(v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}), running, steadyResync},
		{"steady with a configMap volume", withVolume(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}), running, objectVolumeResync},
		{"steady with a secret volume", withVolume(v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}), running, objectVolumeResync},
		{"steady with a projected volume", withVolume(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}), running, objectVolumeResync},
		{"steady with a downwardAPI volume", withVolume(v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}), running, objectVolumeResync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resyncAfter(tc.pod, tc.status); got != tc.want {
				t.Errorf("resyncAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeAllocator refuses the pods named in refuse and records what it was asked.
type fakeAllocator struct {
	refuse map[string]bool
	asked  []string
	active [][]string
}

func (f *fakeAllocator) Allocate(pod *v1.Pod, active []*v1.Pod, _ bool) (bool, string, string) {
	f.asked = append(f.asked, pod.Name)
	var names []string
	for _, p := range active {
		names = append(names, p.Name)
	}
	f.active = append(f.active, names)
	if f.refuse[pod.Name] {
		return false, "UnexpectedAdmissionError", "Allocate failed due to no devices, which is unexpected"
	}
	return true, "", ""
}

// TestControllerAllocatesAfterAdmission: the allocator runs for a pod admission admitted
// (with the pods admitted before it), never for one it refused; its refusal is the pod's
// status and the pod gets no slice.
func TestControllerAllocatesAfterAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		alloc := &fakeAllocator{refuse: map[string]bool{"b": true}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(2), Allocator: alloc, WantSources: []string{SourceFile}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "a", "uid-a"), desired(SourceFile, "b", "uid-b"),
			desired(SourceFile, "c", "uid-c"), desired(SourceFile, "d", "uid-d")}})
		synctest.Wait()
		if want := []string{"a", "b", "c"}; !stdslices.Equal(alloc.asked, want) {
			t.Errorf("allocator asked for %v, want %v (d is over max pods)", alloc.asked, want)
		}
		if len(alloc.active) == 3 && !stdslices.Equal(alloc.active[2], []string{"a"}) {
			t.Errorf("c allocated next to %v, want [a]", alloc.active[2])
		}
		p, _ := c.Pod("default", "b")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "UnexpectedAdmissionError" {
			t.Errorf("b status = %+v", p.Status)
		}
		if s.ensured["uid-b"] != 0 {
			t.Error("a pod the allocator refused got a slice")
		}
	})
}
