package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func cpuMem(cpu, mem string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
}

// TestTop: slicectl top prints what kubectl top prints (its printer), from the daemon's
// metrics.k8s.io lists, and says what kubectl says when there are none.
func TestTop(t *testing.T) {
	f := newFakeDaemon()
	sock := startDaemon(t, f)
	window := metav1.Duration{Duration: 10 * time.Second}
	f.PodMetricsList = []metricsv1beta1.PodMetrics{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Window: window, Containers: []metricsv1beta1.ContainerMetrics{
			{Name: "app", Usage: cpuMem("12m", "80Mi")}, {Name: "hog", Usage: cpuMem("1", "600Mi")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "static"}, Window: window, Containers: []metricsv1beta1.ContainerMetrics{
			{Name: "app", Usage: cpuMem("2m", "10Mi")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "dns"}, Window: window, Containers: []metricsv1beta1.ContainerMetrics{
			{Name: "dns", Usage: cpuMem("5m", "20Mi")}}},
	}
	runCases(t, sock, []cliCase{
		{name: "pods", args: []string{"top", "pods"}, golden: true, out: []string{
			"NAME     CPU(cores)   MEMORY(bytes)   \n",
			"static   2m           10Mi            \n",
			"web      1012m        680Mi           \n",
		}},
		{name: "containers", args: []string{"top", "pod", "--containers"}, golden: true, out: []string{
			"POD      NAME   CPU(cores)   MEMORY(bytes)   \n",
			"static   app    2m           10Mi            \n",
			"web      app    12m          80Mi            \n",
			"web      hog    1000m        600Mi           \n",
		}},
		{name: "one pod sorted by memory", args: []string{"top", "pod", "web", "--containers", "--sort-by", "memory", "--no-headers"}, golden: true, out: []string{
			"web   hog   1000m   600Mi   \n",
			"web   app   12m     80Mi    \n",
		}},
		{name: "every namespace", args: []string{"top", "pods", "-A"}, out: []string{
			"NAMESPACE NAME CPU(cores) MEMORY(bytes)\n", "kube-system dns 5m 20Mi\n", "default web 1012m 680Mi\n",
		}},
		{name: "a pod with no metrics (3h old)", args: []string{"top", "pod", "crash"}, code: exitFailure,
			errOut: []string{"slicectl: Metrics not available for pod default/crash, age: 3h"}},
		{name: "no such pod", args: []string{"top", "pod", "nope"}, code: exitFailure, errOut: []string{`pod "default/nope": not found`}},
		{name: "empty namespace", args: []string{"top", "pods", "-n", "nothing"}, errOut: []string{"No resources found in nothing namespace.\n"}},
		{name: "bad sort", args: []string{"top", "pods", "--sort-by", "name"}, code: exitUsage, errOut: []string{"--sort-by accepts only cpu or memory"}},
		{name: "node before two samples", args: []string{"top", "node"}, code: exitFailure, errOut: []string{"slicectl: metrics not available yet\n"}},
		{name: "unknown resource", args: []string{"top", "deployments"}, code: exitUsage, errOut: []string{`unknown resource "deployments"`}},
	})

	f.NodeMetricsList = []metricsv1beta1.NodeMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Window: window, Usage: cpuMem("950m", "7380Mi")}}
	runCases(t, sock, []cliCase{
		// Allocatable of the fake node: 3800m cpu, 14760Mi memory.
		{name: "node", args: []string{"top", "node"}, golden: true, out: []string{
			"NAME    CPU(cores)   CPU(%)   MEMORY(bytes)   MEMORY(%)   \n",
			"node1   950m         25%      7380Mi          50%         \n",
		}},
		{name: "another node", args: []string{"top", "node", "node2"}, code: exitFailure, errOut: []string{`node "node2": not found`}},
	})
}

// TestTopPodsNewPods: pods younger than kubectl's two minutes without metrics are "not
// available yet", not an error naming them.
func TestTopPodsNewPods(t *testing.T) {
	f := newFakeDaemon()
	sock := startDaemon(t, f)
	code, _, errOut := runCLI(t, "top", "pods", "--socket", sock)
	if code != exitFailure || !strings.HasPrefix(errOut, "slicectl: Metrics not available for pod default/") || !strings.Contains(errOut, ", age: 3h0m") {
		t.Errorf("old pods without metrics: exit %d, %q", code, errOut)
	}
	for k, p := range f.Pods {
		p.CreationTimestamp = metav1.NewTime(time.Now())
		f.Pods[k] = p
	}
	code, _, errOut = runCLI(t, "top", "pods", "--socket", sock)
	if code != exitFailure || errOut != "slicectl: metrics not available yet\n" {
		t.Errorf("new pods without metrics: exit %d, %q", code, errOut)
	}
}
