package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// TestSliceletNodeConformanceFeatures: what the node conformance specs ask of a node beyond
// running containers, each as the e2e spec shapes it, on a slicelet node: a pod placed by
// required node affinity on the node's name (e2e's SetNodeSelection), and one by a label added
// to the Node just before (the scheduling specs'); an active deadline
// (Failed, DeadlineExceeded); termination messages from the file and from the log
// (FallbackToLogsOnError); a subPathExpr of a memory-backed emptyDir; hostAliases in
// /etc/hosts; an ephemeral container added to a running pod; an in-place resize.
func TestSliceletNodeConformanceFeatures(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandbox(t, "^TestSliceletNodeConformanceFeatures$")
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	c := startDemoCluster(t, ctx, clusterdemo.Options{}, 120)
	pods := c.Admin.CoreV1().Pods("default")
	ctr := func(name, script string) v1.Container {
		return v1.Container{Name: name, Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh", "-c", script}}
	}
	pod := func(name string, cs ...v1.Container) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: nodeName, HostNetwork: true, RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64), Containers: cs}}
	}

	affinity := pod("affinity", ctr("main", "true"))
	affinity.Spec.NodeName = "" // the scheduler places it, by the node's name
	affinity.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{nodeName}}}}}}}}
	deadline := pod("deadline", ctr("main", "sleep 3600"))
	deadline.Spec.ActiveDeadlineSeconds = new(int64(3))
	fromFile := ctr("file", "printf OK > /dev/termination-log")
	fromLog := ctr("log", "echo -n DONE; exit 1") // as the e2e spec: no newline
	fromLog.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	termination := pod("termination", fromFile, fromLog)
	subpath := pod("subpath", ctr("main", "test -d /all/subpath && test -w /sub && grep -q ' /all tmpfs' /proc/mounts"))
	subpath.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
	subpath.Spec.Containers[0].Env = []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	subpath.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "work", MountPath: "/sub", SubPathExpr: "$(POD_NAME)"}, {Name: "work", MountPath: "/all"}}
	hosts := pod("hosts", ctr("main", "grep -q '^123.45.67.89\tfoo\tbar$' /etc/hosts && head -1 /etc/hosts | grep -q 'Kubernetes-managed hosts file (host network)'"))
	hosts.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	target := pod("target", ctr("main", "sleep 3600"))
	target.Spec.RestartPolicy = v1.RestartPolicyAlways
	target.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	// A label added to the Node now, as the scheduling specs add one: the pod the scheduler
	// places by it passes the node's admission (its node informer sees the label).
	if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, nodeName, types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"e2e.slicelet.test/fresh":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := pod("labelled", ctr("main", "true"))
	labelled.Spec.NodeName = ""
	labelled.Spec.NodeSelector = map[string]string{"e2e.slicelet.test/fresh": "yes"}
	for _, p := range []*v1.Pod{affinity, labelled, deadline, termination, subpath, hosts, target} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var last string
	waitFor := func(name, what string, cond func(p *v1.Pod) bool) *v1.Pod {
		t.Helper()
		var got *v1.Pod
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got, last = p, fmt.Sprintf("%s %s %q %+v %+v", p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses)
			return cond(p), nil
		}); err != nil {
			t.Fatalf("pod %s: %s: %v; last seen: %s", name, what, err, last)
		}
		return got
	}
	succeeded := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded }
	waitFor("affinity", "Succeeded on the node its affinity names", succeeded)
	waitFor("labelled", "Succeeded on the node by a label added a moment before", succeeded)
	waitFor("subpath", "Succeeded with its sub-path of a tmpfs", succeeded)
	waitFor("hosts", "Succeeded with its hostAliases in /etc/hosts", succeeded)
	waitFor("deadline", "Failed past its active deadline", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "DeadlineExceeded"
	})
	p := waitFor("termination", "both containers terminated", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && len(p.Status.ContainerStatuses) == 2 &&
			p.Status.ContainerStatuses[0].State.Terminated != nil && p.Status.ContainerStatuses[1].State.Terminated != nil
	})
	for _, cs := range p.Status.ContainerStatuses {
		want := map[string]string{"file": "OK", "log": "DONE"}[cs.Name]
		if got := cs.State.Terminated.Message; got != want {
			t.Errorf("container %s: termination message %q, want %q", cs.Name, got, want)
		}
	}
	// The logs of a pod that completed stay until it is deleted (e2e reads them after it
	// succeeded: TestContainerOutput); a little later too, after the node saw it terminal.
	time.Sleep(2 * time.Second)
	if out, err := pods.GetLogs("termination", &v1.PodLogOptions{Container: "log"}).DoRaw(ctx); err != nil || string(out) != "DONE" {
		t.Errorf("logs of the completed pod: %q, %v; want DONE", out, err)
	}

	// An ephemeral container, as kubectl debug adds it.
	waitFor("target", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	p, err := pods.Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debugger", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh", "-c", "while true; do echo polo; sleep 2; done"},
		Stdin: true, TTY: true, TerminationMessagePolicy: v1.TerminationMessageReadFile}}}
	if _, err := pods.UpdateEphemeralContainers(ctx, "target", p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("target", "its ephemeral container running", func(p *v1.Pod) bool {
		return len(p.Status.EphemeralContainerStatuses) == 1 && p.Status.EphemeralContainerStatuses[0].State.Running != nil
	})
	// Its output, as kubectl logs -c debugger (the kubelet API serves an ephemeral container's
	// log like any other's).
	poll(t, ctx, "the ephemeral container's log", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := pods.GetLogs("target", &v1.PodLogOptions{Container: "debugger"}).DoRaw(ctx)
		if err != nil {
			t.Logf("logs of debugger: %v", err)
			return false, nil
		}
		return strings.Contains(string(out), "polo"), nil
	})

	// An in-place resize through the resize subresource.
	p, err = pods.Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	if _, err := pods.UpdateResize(ctx, "target", p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitFor("target", "resized in place", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.ObservedGeneration == p.Generation && len(cs) == 1 && cs[0].AllocatedResources.Cpu().MilliValue() == 200 &&
			cs[0].Resources != nil && cs[0].Resources.Requests.Cpu().MilliValue() == 200
	})
	for _, cond := range p.Status.Conditions {
		if strings.HasPrefix(string(cond.Type), "PodResize") {
			t.Errorf("condition %+v after the resize", cond)
		}
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("restart count %d after the resize, want 0", n)
	}
}
