package apitest

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// Daemon is a Backend with the daemon's optional interfaces: events (the API's EventLister)
// and deletion with a grace period (its GracefulDeleter).
type Daemon[R any] struct {
	*Backend[R]
	// Now is when the fixture was made (its pods are three hours old).
	Now time.Time
	// Graces are the DeletePodGrace calls, "namespace/name grace".
	Graces []string
}

// DeletePodGrace records the grace and deletes.
func (f *Daemon[R]) DeletePodGrace(ctx context.Context, ns, name string, grace time.Duration) error {
	f.Mu.Lock()
	f.Graces = append(f.Graces, fmt.Sprintf("%s/%s %s", ns, name, grace))
	f.Mu.Unlock()
	return f.DeletePod(ctx, ns, name)
}

// Events serves the fixture's events: web admitted and started, big rejected, and web's
// container backing off five times.
func (f *Daemon[R]) Events(since uint64) ([]v1.Event, uint64) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	web, big := f.Pods["default/web"], f.Pods["default/big"]
	at := func(p v1.Pod, typ, reason, msg string, count int32, first, last time.Duration) v1.Event {
		ref := v1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		return v1.Event{ObjectMeta: metav1.ObjectMeta{Name: p.Name + "." + reason, Namespace: p.Namespace},
			InvolvedObject: ref, Type: typ, Reason: reason, Message: msg, Count: count, Source: v1.EventSource{Component: "slicelet"},
			FirstTimestamp: metav1.NewTime(f.Now.Add(-first)), LastTimestamp: metav1.NewTime(f.Now.Add(-last))}
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

// NewDaemon is a Daemon with no pods, node "node1" and kubectl's apply (ApplySpec); its fields
// are for the test to fill.
func NewDaemon[R any](h Hooks[R]) *Daemon[R] {
	now := time.Now()
	nodeX, err := slices.ExplainNode(slices.Capacity{CPU: 4000, Memory: 16 << 30, Pids: 4194304}, slices.NodeConfig{}, nil, units.ModeUnified)
	if err != nil {
		panic(err)
	}
	status := nodeStatus()
	status.Conditions[0].Message = "kubelet has sufficient memory available"
	status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-3 * time.Hour))
	return &Daemon[R]{Now: now, Backend: &Backend[R]{
		Hooks:           h,
		Pods:            map[string]v1.Pod{},
		LogText:         map[string]string{},
		NodeObject:      v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: status},
		Apply:           ApplySpec,
		ApplyConflict:   "pod %q comes from the manifest file %s: %w",
		DeleteConflict:  "pod %q: %w: it comes from a manifest file: remove the manifest file %s",
		ExplainUID:      "22222222-aaaa-bbbb-cccc-000000000001",
		ExplainMode:     units.ModeUnified,
		NodeExplanation: nodeX,
	}}
}

// NewDaemonFixture is slicectl's daemon: NewDaemon with the fixture's pods (FixturePods) and
// their containers' logs.
func NewDaemonFixture[R any](h Hooks[R]) *Daemon[R] {
	d := NewDaemon(h)
	d.Pods = FixturePods(d.Now)
	d.LogText = map[string]string{
		"default/web/app":       "one\ntwo\nthree\n",
		"default/static/app":    "static app\n",
		"default/static/helper": "static helper\n",
	}
	return d
}

// FixturePods are pods created three hours before now, by "namespace/name": default/web
// (running, restarted after an OOM kill), default/static (from a manifest file, with init
// containers and a sidecar), default/big (rejected: OutOfcpu), default/crash (CrashLoopBackOff)
// and kube-system/dns (ContainerCreating).
func FixturePods(now time.Time) map[string]v1.Pod {
	created := metav1.NewTime(now.Add(-3 * time.Hour))
	restarted := metav1.NewTime(now.Add(-30 * time.Minute))
	started := metav1.NewTime(now.Add(-29 * time.Minute))
	burstable := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	always := v1.ContainerRestartPolicyAlways
	sidecarStarted := true
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
					{Name: "proxy", Ready: true, Started: &sidecarStarted, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
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
