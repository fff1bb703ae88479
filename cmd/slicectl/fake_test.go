package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// fakeDaemon is an in-memory api.Backend.
type fakeDaemon struct {
	mu       sync.Mutex
	pods     map[string]v1.Pod
	logs     map[string]string // "ns/name/container"
	lastLogs string            // "container opts" of the last Logs call
	// evictionX is the eviction manager's last decision as ExplainEviction returns it.
	evictionX eviction.Explanation
	// imageGC and containerGC are what CollectImages and CollectContainers return (DryRun is
	// set from the request); gcCalls records the requests as "images dry" / "containers run".
	imageGC     gc.ImageResult
	containerGC gc.ContainerResult
	gcCalls     []string
	// podMetrics and nodeMetrics are what the metrics endpoints return.
	podMetrics  []metricsv1beta1.PodMetrics
	nodeMetrics []metricsv1beta1.NodeMetrics
	// now is when the fixture was made (its pods are three hours old).
	now time.Time
	// graces are the DeletePodGrace calls, "namespace/name grace".
	graces []string
}

func (f *fakeDaemon) ListPods(context.Context) ([]v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []v1.Pod
	for _, p := range f.pods {
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeDaemon) GetPod(_ context.Context, ns, name string) (v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return v1.Pod{}, fmt.Errorf("pod %q: %w", ns+"/"+name, api.ErrNotFound)
	}
	return p, nil
}

// ApplyPod refuses what Pod Security baseline refuses (the daemon's default API level).
func (f *fakeDaemon) ApplyPod(_ context.Context, body []byte, dryRun bool) (api.ApplyResult, error) {
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return api.ApplyResult{}, &api.InvalidError{Problems: []string{err.Error()}}
	}
	pod := parsed[0]
	baseline, _ := admission.ParsePodSecurity("baseline", "latest")
	if d := admission.CheckPodSecurity(pod, baseline); !d.Admit {
		return api.ApplyResult{}, api.PodForbidden(pod.Name, d.Message)
	}
	uid, _ := slices.PodUID(pod, "api")
	pod.UID = types.UID(uid)
	pod.Annotations = map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	if old, ok := f.pods[key]; ok {
		if old.Annotations[pods.AnnotationSource] == pods.SourceFile {
			return api.ApplyResult{}, fmt.Errorf("pod %q comes from the manifest file %s: %w", key, old.Annotations[pods.AnnotationOrigin], api.ErrConflict)
		}
		if equality.Semantic.DeepEqual(old.Spec, pod.Spec) {
			return api.ApplyResult{Action: api.ActionUnchanged, Pod: old}, nil
		}
	}
	action := api.ActionCreated
	if _, ok := f.pods[key]; ok {
		action = api.ActionConfigured
	}
	if !dryRun {
		f.pods[key] = *pod
	}
	return api.ApplyResult{Action: action, Pod: *pod}, nil
}

func (f *fakeDaemon) DeletePod(_ context.Context, ns, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := ns + "/" + name
	p, ok := f.pods[key]
	switch {
	case !ok:
		return fmt.Errorf("pod %q: %w", key, api.ErrNotFound)
	case p.Annotations[pods.AnnotationSource] == pods.SourceFile:
		return fmt.Errorf("pod %q: %w: it comes from a manifest file: remove the manifest file %s", key, api.ErrConflict, p.Annotations[pods.AnnotationOrigin])
	}
	delete(f.pods, key)
	return nil
}

// DeletePodGrace records the grace (api.GracefulDeleter) and deletes.
func (f *fakeDaemon) DeletePodGrace(ctx context.Context, ns, name string, grace time.Duration) error {
	f.mu.Lock()
	f.graces = append(f.graces, fmt.Sprintf("%s/%s %s", ns, name, grace))
	f.mu.Unlock()
	return f.DeletePod(ctx, ns, name)
}

func (f *fakeDaemon) Logs(_ context.Context, ns, name, container string, opts pods.LogOptions, w io.Writer) error {
	f.mu.Lock()
	since := "-"
	if !opts.SinceTime.IsZero() {
		since = opts.SinceTime.UTC().Format(time.RFC3339Nano)
	}
	f.lastLogs = fmt.Sprintf("%s follow=%v previous=%v tail=%d since=%s timestamps=%v", container, opts.Follow, opts.Previous, opts.TailLines, since, opts.Timestamps)
	text, ok := f.logs[ns+"/"+name+"/"+container]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("container %q of pod %s/%s: %w", container, ns, name, api.ErrNotFound)
	}
	_, err := io.WriteString(w, text)
	return err
}

func (f *fakeDaemon) Node(context.Context) (v1.Node, error) {
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3800m"), v1.ResourceMemory: resource.MustParse("14760Mi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available",
					LastTransitionTime: metav1.NewTime(time.Now().Add(-3 * time.Hour))},
			},
		},
	}, nil
}

func (f *fakeDaemon) ExplainPod(_ context.Context, body []byte) (slices.PodExplanation, error) {
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return slices.PodExplanation{}, &api.InvalidError{Problems: []string{err.Error()}}
	}
	pod := parsed[0]
	pod.UID = "22222222-aaaa-bbbb-cccc-000000000001"
	return slices.ExplainPod(pod, slices.Options{}, units.ModeUnified, slices.Capacity{Memory: 16 << 30})
}

func (f *fakeDaemon) ExplainNode(context.Context) (slices.NodeExplanation, error) {
	return slices.ExplainNode(slices.Capacity{CPU: 4000, Memory: 16 << 30, Pids: 4194304}, slices.NodeConfig{}, nil, units.ModeUnified)
}

func (f *fakeDaemon) PodMetrics(context.Context) ([]metricsv1beta1.PodMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.podMetrics, nil
}

func (f *fakeDaemon) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodeMetrics, nil
}

func (f *fakeDaemon) ExplainEviction(context.Context) (eviction.Explanation, error) {
	return f.evictionX, nil
}

func (f *fakeDaemon) gcCall(kind string, dryRun bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mode := "run"
	if dryRun {
		mode = "dry"
	}
	f.gcCalls = append(f.gcCalls, kind+" "+mode)
}

func (f *fakeDaemon) CollectImages(_ context.Context, dryRun bool) (gc.ImageResult, error) {
	f.gcCall("images", dryRun)
	r := f.imageGC
	r.DryRun = dryRun
	return r, nil
}

func (f *fakeDaemon) CollectContainers(_ context.Context, dryRun bool) (gc.ContainerResult, error) {
	f.gcCall("containers", dryRun)
	r := f.containerGC
	r.DryRun = dryRun
	return r, nil
}

// startDaemon serves f on a temporary socket and returns the socket path.
func startDaemon(t *testing.T, f api.Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	if len(sock) > 100 {
		dir, err := os.MkdirTemp("", "ctl")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		sock = filepath.Join(dir, "s.sock")
	}
	s, err := api.NewServer(f, api.Options{Socket: sock, Group: "test", LookupGroup: func(string) (uint32, error) { return uint32(os.Getgid()), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock
}

// Fixture pods, created three hours ago.
func fixturePods(now time.Time) map[string]v1.Pod {
	created := metav1.NewTime(now.Add(-3 * time.Hour))
	restarted := metav1.NewTime(now.Add(-30 * time.Minute))
	started := metav1.NewTime(now.Add(-29 * time.Minute))
	burstable := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	always := v1.ContainerRestartPolicyAlways
	ready := []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}
	list := []v1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "aaaaaaaa-0000-0000-0000-000000000001", CreationTimestamp: created,
				Labels:      map[string]string{"app": "web"},
				Annotations: map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Command: []string{"/bin/sleep", "infinity"}, Resources: burstable,
				Env: []v1.EnvVar{{Name: "MODE", Value: "prod"}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, Conditions: ready, StartTime: &created,
				ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 3,
					State:                v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
					LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: created, FinishedAt: restarted}},
				}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "static", Namespace: "default", UID: "aaaaaaaa-0000-0000-0000-000000000002", CreationTimestamp: created,
				Annotations: map[string]string{pods.AnnotationSource: pods.SourceFile, pods.AnnotationOrigin: "/etc/slicelet/pods.d/static.yaml"}},
			Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "setup", Command: []string{"/bin/true"}}, {Name: "proxy", RestartPolicy: &always}},
				Containers:     []v1.Container{{Name: "app"}, {Name: "helper"}},
			},
			Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort, Conditions: ready,
				InitContainerStatuses: []v1.ContainerStatus{
					{Name: "setup", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
					{Name: "proxy", Ready: true, Started: ptr(true), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
				},
				ContainerStatuses: []v1.ContainerStatus{
					{Name: "app", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
					{Name: "helper", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
				}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default", UID: "aaaaaaaa-0000-0000-0000-000000000003", CreationTimestamp: created,
				Annotations: map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}, Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}}}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, QOSClass: v1.PodQOSBurstable, Reason: "OutOfcpu",
				Message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 8000, used: 100, capacity: 3800"},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: "default", UID: "aaaaaaaa-0000-0000-0000-000000000004", CreationTimestamp: created,
				Annotations: map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort,
				ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: 5,
					State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}},
					LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: restarted}},
				}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "kube-system", UID: "aaaaaaaa-0000-0000-0000-000000000005", CreationTimestamp: created,
				Annotations: map[string]string{pods.AnnotationSource: pods.SourceAPI, pods.AnnotationOrigin: "api"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "dns"}}},
			Status: v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort,
				ContainerStatuses: []v1.ContainerStatus{{Name: "dns", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}},
		},
	}
	m := map[string]v1.Pod{}
	for _, p := range list {
		m[p.Namespace+"/"+p.Name] = p
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func newFakeDaemon() *fakeDaemon {
	now := time.Now()
	return &fakeDaemon{
		now:  now,
		pods: fixturePods(now),
		logs: map[string]string{
			"default/web/app":       "one\ntwo\nthree\n",
			"default/static/app":    "static app\n",
			"default/static/helper": "static helper\n",
		},
	}
}

// Events serves the fixture's events: web admitted and started, big rejected, and web's
// container backing off five times (api.EventLister).
func (f *fakeDaemon) Events(since uint64) ([]v1.Event, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	web, big := f.pods["default/web"], f.pods["default/big"]
	at := func(p v1.Pod, typ, reason, msg string, count int32, first, last time.Duration) v1.Event {
		ref := v1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		return v1.Event{ObjectMeta: metav1.ObjectMeta{Name: p.Name + "." + reason, Namespace: p.Namespace},
			InvolvedObject: ref, Type: typ, Reason: reason, Message: msg, Count: count, Source: v1.EventSource{Component: "slicelet"},
			FirstTimestamp: metav1.NewTime(f.now.Add(-first)), LastTimestamp: metav1.NewTime(f.now.Add(-last))}
	}
	list := []v1.Event{
		at(web, v1.EventTypeNormal, "Admitted", "Admitted from api", 1, 3*time.Hour, 3*time.Hour),
		at(big, v1.EventTypeWarning, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 8000, used: 100, capacity: 3800", 1, 3*time.Hour, 3*time.Hour),
		at(web, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod web_default(aaaaaaaa-0000-0000-0000-000000000001)", 5, time.Hour, 30*time.Minute),
	}
	if since > 0 {
		return nil, 3
	}
	return list, 3
}
