package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubectl/pkg/metricsutil"
	metricsapi "k8s.io/metrics/pkg/apis/metrics"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// TestIntegrationTopAndOffendingContainer: slicelet as a service with kubepods.slice limited to
// 400 MiB and memory.available<150Mi (so allocatableMemory.available<150Mi on kubepods.slice)
// runs an API pod of two containers, app (sleeps) and hog (holds 100 MiB, then on a signal from
// the test 300 MiB). Before the pressure, `slicectl top pods --containers` (the API's metrics,
// printed with kubectl's printer) names hog as the container using the most memory, and `top
// node` has the node; once hog grows, the pod is evicted and its eviction annotations and
// message name hog — and only hog — as the offending container, in the kubelet's words.
//
// The same daemon holds manifest-directory pods to Pod Security baseline: a host-network pod
// there is Failed with reason Forbidden and the API server's message, and the API refuses one
// with 403 (slicectl apply exits 1 with that message).
func TestIntegrationTopAndOffendingContainer(t *testing.T) {
	probe := t.TempDir()
	capacity, err := slices.ReadCapacity("/proc", "/sys", probe)
	if err != nil {
		t.Fatal(err)
	}
	const kubepods = 400 << 20
	if capacity.Memory < kubepods+(256<<20) {
		t.Fatalf("the machine has %d bytes of memory; this test needs 656 MiB", capacity.Memory)
	}
	d := newDaemonEnv(t, fmt.Sprintf(`[node]
system_reserved = { memory = "%d" }
[eviction]
hard = { "memory.available" = "150Mi" }
monitoring_interval = "1s"
pressure_transition_period = "3s"
[pods.security.file]
enforce = "baseline"
`, capacity.Memory-kubepods))
	sd, ctx := d.sd, t.Context()
	unit := "slicelet-top-it.service"
	t.Cleanup(func() {
		_ = sd.Stop(context.Background(), unit)
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = sd.Stop(context.Background(), s)
		}
	})
	agentService(t, sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)
	var slicectl string
	if d.env.Where != "vm" { // the guest has neither make build's bin/ nor a module to build one from
		slicectl = slicectlBinary(t)
	}
	cli := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := exec.Command(slicectl, append(args, "--socket", d.sock)...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}

	// Pod Security: the file source at baseline refuses a host-network pod, shown on the pod;
	// the API source (baseline by default) refuses it at apply.
	hostnet := "apiVersion: v1\nkind: Pod\nmetadata: {name: hostnet}\nspec:\n  hostNetwork: true\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n"
	if err := os.WriteFile(filepath.Join(d.podsDir, "hostnet.yaml"), []byte(hostnet), 0o644); err != nil {
		t.Fatal(err)
	}
	const psaMsg = `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`
	waitFor(t, 30*time.Second, "the host-network file pod refused", func() bool {
		p, err := client.GetPod(ctx, "default", "hostnet")
		return err == nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Forbidden" && p.Status.Message == psaMsg
	})
	hostAPI := []byte(strings.Replace(hostnet, "name: hostnet", "name: hostnet-api", 1))
	var forbidden *api.ForbiddenError
	if _, err := client.ApplyPod(ctx, hostAPI); !errors.As(err, &forbidden) || err.Error() != `pods "hostnet-api" is forbidden: `+psaMsg {
		t.Errorf("API apply of a host-network pod: %v", err)
	}
	if slicectl != "" {
		f := filepath.Join(t.TempDir(), "hostnet-api.yaml")
		if err := os.WriteFile(f, hostAPI, 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := cli("apply", "-f", f)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(errOut, `pods "hostnet-api" is forbidden: `+psaMsg) {
			t.Errorf("slicectl apply: %v\n%s", err, errOut)
		}
		out, _, err := cli("get", "pod", "hostnet")
		if err != nil || !regexp.MustCompile(`(?m)^hostnet\s+0/1\s+Forbidden\s`).MatchString(out) {
			t.Errorf("slicectl get pod hostnet: %v\n%s", err, out)
		}
		out, _, err = cli("describe", "pod", "hostnet")
		if err != nil || !strings.Contains(out, "Reason:") || !strings.Contains(out, psaMsg) {
			t.Errorf("slicectl describe pod hostnet: %v\n%s", err, out)
		}
	}
	if err := os.Remove(filepath.Join(d.podsDir, "hostnet.yaml")); err != nil {
		t.Fatal(err)
	}

	// The hog: 100 MiB at once, 300 MiB once the gate file exists. dd fills its buffer (every
	// page touched) and blocks writing it to a pipe nobody reads.
	gate := filepath.Join(t.TempDir(), "grow")
	hold := func(size string) string {
		return "dd if=/dev/zero bs=" + size + " count=1 iflag=fullblock status=none"
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hoggy}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    command: [/bin/sleep, infinity]
    resources: {requests: {memory: 20Mi}}
  - name: hog
    command: [/bin/sh, -c, "%s | (while [ ! -e %s ]; do sleep 0.2; done; %s | sleep 100000)"]
    resources: {requests: {memory: 10Mi}}
    securityContext: {runAsUser: 0}  # root, to see the gate in the test's private directory
`, hold("100M"), gate, hold("200M"))
	res, err := client.ApplyPod(ctx, []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Pod.Annotations[api.AnnotationAppliedBy]; !strings.HasPrefix(got, "uid=0 gid=0 pid=") {
		t.Errorf("applied-by = %q", got)
	}

	// top: hog's container metrics, from two samples of its cgroup.
	var hoggy metricsv1beta1.PodMetrics
	waitFor(t, 60*time.Second, "metrics of hoggy with hog at 100 MiB", func() bool {
		list, err := client.PodMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if m.Name == "hoggy" {
				hoggy = m
				for _, c := range m.Containers {
					if c.Name == "hog" && c.Usage.Memory().Value() >= 100<<20 {
						return true
					}
				}
			}
		}
		return false
	})
	if len(hoggy.Containers) != 2 {
		t.Errorf("hoggy's container metrics: %+v", hoggy.Containers)
	}
	want := regexp.MustCompile(`^hoggy\s+hog\s+\d+m\s+1\d\dMi\s*\n`) // first when sorted by memory
	var top string
	if slicectl != "" {
		out, errOut, err := cli("top", "pods", "--containers", "--sort-by", "memory", "--no-headers")
		if err != nil {
			t.Fatalf("slicectl top: %v\n%s", err, errOut)
		}
		top = out
		if out, _, err := cli("top", "node"); err != nil || !strings.Contains(out, "CPU(cores)") || !strings.Contains(out, "MEMORY(%)") {
			t.Errorf("slicectl top node: %v\n%s", err, out)
		}
	} else {
		top = printTop(t, hoggy)
		nodes, err := client.NodeMetrics(ctx)
		if err != nil || len(nodes) != 1 || nodes[0].Usage.Memory().Value() <= 0 {
			t.Errorf("node metrics: %+v, %v", nodes, err)
		}
	}
	t.Logf("top pods --containers --sort-by memory:\n%s", top)
	if !want.MatchString(top) {
		t.Errorf("top does not name hog first:\n%s", top)
	}

	// Pressure: hog grows to 300 MiB; hoggy is evicted and hog named as the offender.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var evicted v1.Pod
	waitFor(t, 60*time.Second, "hoggy evicted", func() bool {
		evicted, err = client.GetPod(ctx, "default", "hoggy")
		return err == nil && evicted.Status.Phase == v1.PodFailed && evicted.Status.Reason == "Evicted"
	})
	// hog held 100 MiB and was growing to 300 MiB: the eviction came once kubepods.slice's
	// working set passed 250 MiB, so hog used more than 200 MiB then (the kubelet prints the
	// bytes as a binary-SI quantity: "259616Ki").
	ann := evicted.Annotations
	t.Logf("eviction: %s %v", evicted.Status.Message, ann)
	used, err := resource.ParseQuantity(ann[pods.AnnotationEvictionPrefix+"offending_containers_usage"])
	if err != nil || used.Value() < 200<<20 || ann[pods.AnnotationEvictionPrefix+"offending_containers"] != "hog" ||
		ann[pods.AnnotationEvictionPrefix+"starved_resource"] != "memory" {
		t.Errorf("eviction annotations: %v", ann)
	}
	msg := regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: 150Mi, available: \d+(Ki|Mi)\. ` +
		`Container hog was using (\d+(Ki|Mi)), request is 10Mi, has larger consumption of memory\. $`)
	if m := msg.FindStringSubmatch(evicted.Status.Message); m == nil || m[2] != used.String() {
		t.Errorf("eviction message %q (usage annotation %s)", evicted.Status.Message, used.String())
	}
	if err := client.DeletePod(ctx, "default", "hoggy"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "pods gone", func() bool {
		list, err := client.ListPods(ctx)
		return err == nil && len(list) == 0
	})
}

// printTop prints a pod's metrics as `slicectl top pods --containers --sort-by memory
// --no-headers` does (kubectl's printer), for where there is no slicectl binary.
func printTop(t *testing.T, m metricsv1beta1.PodMetrics) string {
	t.Helper()
	var out metricsapi.PodMetrics
	if err := metricsv1beta1.Convert_v1beta1_PodMetrics_To_metrics_PodMetrics(&m, &out, nil); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := metricsutil.NewTopCmdPrinter(&b, false).PrintPodMetrics([]metricsapi.PodMetrics{out}, true, false, true, "memory", false); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
