package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// TestSliceletNodeReadiness: an API pod whose readiness probe (exec `cat /tmp/ready`) passes
// until the container removes the file is reported Ready, then not Ready, in the pod's Ready
// and ContainersReady conditions and its container's ready flag, and the EndpointSlice of the
// Service selecting it follows (its endpoint ready, then not); its lifecycle reaches the API
// server as the kubelet's events: Pulled, Created, Started and the readiness probe's
// Unhealthy, with the kubelet's messages.
func TestSliceletNodeReadiness(t *testing.T) {
	const nodeIP = "10.251.0.1" // a private address, in the sandbox only
	if !systemdtest.Inside() {
		runInSandbox(t, "^TestSliceletNodeReadiness$")
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	// The node's address is not loopback (the API server refuses loopback addresses in
	// EndpointSlices): one on lo of the sandbox's own network namespace.
	if out, err := exec.CommandContext(ctx, "ip", "address", "add", nodeIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip address add %s: %v: %s", nodeIP, err, out)
	}
	c, err := clusterdemo.Start(ctx, clusterdemo.Options{Work: os.Getenv(workEnv), BinDir: os.Getenv(binEnv), Slicelet: os.Getenv(sliceletEnv),
		Out: t.Output(), Log: slog.New(slog.NewTextHandler(t.Output(), nil)), Logf: t.Logf, NodeIP: nodeIP})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("slicelet's journal:\n%s", c.Journal(context.WithoutCancel(ctx), 80))
		}
		if err := c.Close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.WaitNodeReady(ctx); err != nil {
		t.Fatal(err)
	}
	// Ready for 20 s (the file exists from the start), then not: the container removes it.
	script := `touch /tmp/ready; sleep 20; rm -f /tmp/ready; trap 'exit 0' TERM; while true; do sleep 0.2; done`
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "readiness", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: nodeName,
			// On the host's network its podIP is the node's address (the sandbox runtime gives
			// pods no network of their own: no CNI), which the EndpointSlice then carries.
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", script},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
					PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}}},
		},
	}
	pod.Labels = map[string]string{"app": "readiness"}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "readiness", Namespace: "default"},
		Spec: v1.ServiceSpec{Selector: pod.Labels, Ports: []v1.ServicePort{{Port: 80}}}}
	if _, err := c.Admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ready: the pod's conditions and container say want, and so does the Service's
	// EndpointSlice (the controller manager's EndpointSlice controller) for the pod's endpoint.
	var last string // what the last poll saw, for a failure's message
	ready := func(want bool) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := c.Admin.CoreV1().Pods("default").Get(ctx, "readiness", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.Phase == v1.PodFailed {
				return false, fmt.Errorf("pod failed: %s: %s", p.Status.Reason, p.Status.Message)
			}
			last = fmt.Sprintf("pod %s podIPs %v conditions %+v", p.Status.Phase, p.Status.PodIPs, p.Status.Conditions)
			if !conditionIs(p, v1.PodReady, want) || !conditionIs(p, v1.ContainersReady, want) ||
				len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Ready != want || p.Status.Phase != v1.PodRunning {
				return false, nil
			}
			slices, err := c.Admin.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=readiness"})
			if err != nil {
				return false, err
			}
			last += fmt.Sprintf("; EndpointSlices %+v", slices.Items)
			for _, es := range slices.Items {
				for _, ep := range es.Endpoints {
					if ep.TargetRef != nil && ep.TargetRef.UID == p.UID {
						t.Logf("EndpointSlice %s: %v ready=%v", es.Name, ep.Addresses, ptr.Deref(ep.Conditions.Ready, false))
						return ptr.Deref(ep.Conditions.Ready, false) == want, nil
					}
				}
			}
			return false, nil
		}
	}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, ready(true)); err != nil {
		t.Fatalf("pod Ready: %v; last seen: %s", err, last)
	}
	t.Logf("Ready after %v", time.Since(start).Round(time.Millisecond))
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, ready(false)); err != nil {
		t.Fatalf("pod not Ready once the probe fails: %v; last seen: %s", err, last)
	}
	t.Logf("not Ready after %v", time.Since(start).Round(time.Millisecond))

	// The events, through the API server (forwarded by client-go's broadcaster).
	want := map[string]string{
		"Pulled":    fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", peerrun.TestImage),
		"Created":   "Container created",
		"Started":   "Container started",
		"Unhealthy": "Readiness probe failed: ",
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=readiness"})
		if err != nil {
			return false, err
		}
		for reason, msg := range want {
			found := false
			for _, e := range list.Items {
				exact := reason != "Unhealthy"
				found = found || e.Reason == reason && e.InvolvedObject.FieldPath == "spec.containers{main}" &&
					(exact && e.Message == msg || !exact && strings.HasPrefix(e.Message, msg))
			}
			if !found {
				t.Logf("no %s event %q yet", reason, msg)
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("events: %v", err)
	}
}

// conditionIs reports whether the pod's condition t has the status want.
func conditionIs(p *v1.Pod, t v1.PodConditionType, want bool) bool {
	s := v1.ConditionFalse
	if want {
		s = v1.ConditionTrue
	}
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == s
		}
	}
	return false
}
