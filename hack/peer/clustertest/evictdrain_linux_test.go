package clustertest

import (
	"context"
	"regexp"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// evictionMessage is the shape of the kubelet's message for a memory eviction
// (pkg/kubelet/eviction/helpers.go, evictionMessage) of the hog, the only container over its
// request: the resource, the threshold and what was available, then the container, its usage
// and its request.
var evictionMessage = regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: ` + clusterdemo.EvictionThreshold +
	`, available: -?[0-9]+[KMG]i?\. Container hog was using [0-9]+[KMG]i?, request is 10Mi, has larger consumption of memory\. $`)

// TestSliceletNodeDrainAndEviction: a Deployment on a slicelet node is drained with kubectl
// drain (the Eviction API: the API server deletes each pod with its grace period, the node
// stops it and removes it; the node is unschedulable and the replacement pods stay Pending),
// and after uncordon a pod that fills kubepods.slice is evicted under memory pressure, reported
// as the kubelet reports it: Failed, reason Evicted, the kubelet's message, DisruptionTarget
// (TerminationByKubelet), the node's annotated Evicted event and MemoryPressure.
func TestSliceletNodeDrainAndEviction(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandbox(t, "^TestSliceletNodeDrainAndEviction$")
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c := startDemoCluster(t, ctx, clusterdemo.Options{}, 80)
	const replicas = 2
	pods, err := c.Deploy(ctx, replicas)
	if err != nil {
		t.Fatal(err)
	}
	drained, err := c.Drain(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	for name := range pods {
		if g, ok := drained.Graceful[name]; !ok || g != 5 {
			t.Errorf("pod %s: deleted gracefully with %d s (seen %v), want its 5 s and then removed by the node", name, g, ok)
		}
		if !drained.DisruptionTarget[name] {
			t.Errorf("pod %s: no DisruptionTarget (EvictionByEvictionAPI) while it stopped", name)
		}
	}
	t.Logf("drained: graceful %v, replacements Pending %v", drained.Graceful, drained.Pending)
	if err := c.Uncordon(ctx, replicas); err != nil {
		t.Fatal(err)
	}

	ev, err := c.Evict(ctx, "hog")
	if err != nil {
		t.Fatal(err)
	}
	p := ev.Pod
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != "Evicted" || !evictionMessage.MatchString(p.Status.Message) {
		t.Errorf("the evicted pod's status: %s, %q, %q; want Failed, Evicted and a message like %s", p.Status.Phase, p.Status.Reason, p.Status.Message, evictionMessage)
	}
	if dt := clusterdemo.PodCondition(p, v1.DisruptionTarget); dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != p.Status.Message {
		t.Errorf("DisruptionTarget %+v, want True, TerminationByKubelet, the status message", dt)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		if c := clusterdemo.PodCondition(p, ct); c == nil || c.Status != v1.ConditionFalse || c.Reason != "PodFailed" {
			t.Errorf("condition %s %+v, want False, PodFailed", ct, c)
		}
	}
	e := ev.Event
	if e.Type != v1.EventTypeWarning || e.Message != p.Status.Message || e.Source.Component != "kubelet" ||
		e.Annotations["starved_resource"] != "memory" || e.Annotations["offending_containers"] != "hog" || e.Annotations["offending_containers_usage"] == "" {
		t.Errorf("the Evicted event: %s %q from %+v, annotations %v", e.Type, e.Message, e.Source, e.Annotations)
	}
	mp := clusterdemo.NodeCondition(ev.Node, v1.NodeMemoryPressure)
	if mp.Reason != "KubeletHasInsufficientMemory" {
		t.Errorf("MemoryPressure %+v, want reason KubeletHasInsufficientMemory", mp)
	}
	// The Deployment's pods, within their requests, were not evicted.
	running, err := c.NodePods(ctx, clusterdemo.AppLabel)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range running {
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s %s %s after the eviction, want Running", name, p.Status.Phase, p.Status.Reason)
		}
	}
}
