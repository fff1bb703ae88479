package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/metricsutil"
	metricsapi "k8s.io/metrics/pkg/apis/metrics"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/internal/api"
)

// metricsCreationDelay is kubectl top's grace for a new pod without metrics
// (k8s.io/kubectl/pkg/cmd/top/top_pod.go): an older pod without them is an error naming it.
const metricsCreationDelay = 2 * time.Minute

// topClient is what top needs from the daemon (*api.Client).
type topClient interface {
	PodMetrics(ctx context.Context) ([]metricsv1beta1.PodMetrics, error)
	NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error)
	ListPods(ctx context.Context) ([]v1.Pod, error)
	GetPod(ctx context.Context, namespace, name string) (v1.Pod, error)
	Node(ctx context.Context) (api.NodeInfo, error)
}

// topPodOptions are kubectl top pod's options that slicectl has.
type topPodOptions struct {
	namespace     string
	name          string
	allNamespaces bool
	containers    bool
	noHeaders     bool
	sortBy        string
	sum           bool
}

// topNodeOptions are kubectl top node's.
type topNodeOptions struct {
	name      string
	noHeaders bool
	sortBy    string
}

// topCmd: top pods [NAME] [--containers] [-A] [--no-headers] [--sort-by cpu|memory] [--sum]
// and top node [NAME] [--no-headers] [--sort-by cpu|memory].
func (c *cli) topCmd(what string, pos []string, po topPodOptions) error {
	noHeaders, sortBy := po.noHeaders, po.sortBy
	po.allNamespaces = c.global.allNamespaces
	if err := c.checkOutput("top " + what); err != nil {
		return err
	}
	if sortBy != "" && sortBy != "cpu" && sortBy != "memory" {
		return usageErr("top %s: --sort-by accepts only cpu or memory", what)
	}
	if len(pos) > 1 {
		return usageErr("top %s: at most one NAME", what)
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if what == "node" || what == "nodes" || what == "no" {
		return topNode(c.ctx, cl, topNodeOptions{name: name, noHeaders: noHeaders, sortBy: sortBy}, c.stdout)
	}
	po.namespace, po.name, po.noHeaders, po.sortBy = c.global.namespace, name, noHeaders, sortBy
	if po.allNamespaces && po.name != "" {
		return usageErr("top pods: -A shows every pod; it cannot be combined with a name")
	}
	return topPods(c.ctx, cl, po, time.Now(), c.stdout, c.stderr)
}

// topPods prints pod metrics as kubectl top pod does (k8s.io/kubectl/pkg/cmd/top/top_pod.go):
// the same printer, the same messages when there are none.
func topPods(ctx context.Context, cl topClient, o topPodOptions, now time.Time, stdout, stderr io.Writer) error {
	all, err := cl.PodMetrics(ctx)
	if err != nil {
		return err
	}
	var items []metricsapi.PodMetrics
	for i := range all {
		m := &all[i]
		if (!o.allNamespaces && m.Namespace != o.namespace) || (o.name != "" && m.Name != o.name) {
			continue
		}
		var out metricsapi.PodMetrics
		if err := metricsv1beta1.Convert_v1beta1_PodMetrics_To_metrics_PodMetrics(m, &out, nil); err != nil {
			return fmt.Errorf("pod metrics %s/%s: %w", m.Namespace, m.Name, err)
		}
		items = append(items, out)
	}
	if len(items) == 0 {
		if err := emptyPodMetrics(ctx, cl, o, now); err != nil {
			return err
		}
		if o.allNamespaces {
			fmt.Fprintln(stderr, "No resources found")
		} else {
			fmt.Fprintf(stderr, "No resources found in %s namespace.\n", o.namespace)
		}
		return nil
	}
	return metricsutil.NewTopCmdPrinter(stdout, false).PrintPodMetrics(items, o.containers, o.allNamespaces, o.noHeaders, o.sortBy, o.sum)
}

// emptyPodMetrics is kubectl's verifyEmptyMetrics: why there are no metrics. A named pod that
// does not exist is that error; a pod older than metricsCreationDelay without metrics is an
// error naming it; pods that are all new mean "metrics not available yet"; no pods at all is no
// error.
func emptyPodMetrics(ctx context.Context, cl topClient, o topPodOptions, now time.Time) error {
	var pods []v1.Pod
	if o.name != "" {
		p, err := cl.GetPod(ctx, o.namespace, o.name)
		if err != nil {
			return err
		}
		pods = []v1.Pod{p}
	} else {
		list, err := cl.ListPods(ctx)
		if err != nil {
			return err
		}
		for _, p := range list {
			if o.allNamespaces || p.Namespace == o.namespace {
				pods = append(pods, p)
			}
		}
		if len(pods) == 0 {
			return nil
		}
	}
	for _, p := range pods {
		if age := now.Sub(p.CreationTimestamp.Time); age > metricsCreationDelay {
			//lint:ignore ST1005 kubectl's words, capital included
			return fmt.Errorf("Metrics not available for pod %s/%s, age: %s", p.Namespace, p.Name, age.String())
		}
	}
	return errors.New("metrics not available yet")
}

// topNode prints the node's metrics as kubectl top node does: CPU and memory, and their share
// of the node's allocatable.
func topNode(ctx context.Context, cl topClient, o topNodeOptions, stdout io.Writer) error {
	all, err := cl.NodeMetrics(ctx)
	if err != nil {
		return err
	}
	node, err := cl.Node(ctx)
	if err != nil {
		return err
	}
	if o.name != "" && o.name != node.Node.Name {
		return fmt.Errorf("node %q: %w (this node is %q)", o.name, api.ErrNotFound, node.Node.Name)
	}
	var items []metricsapi.NodeMetrics
	for i := range all {
		var out metricsapi.NodeMetrics
		if err := metricsv1beta1.Convert_v1beta1_NodeMetrics_To_metrics_NodeMetrics(&all[i], &out, nil); err != nil {
			return fmt.Errorf("node metrics: %w", err)
		}
		items = append(items, out)
	}
	if len(items) == 0 {
		return errors.New("metrics not available yet")
	}
	available := map[string]v1.ResourceList{node.Node.Name: node.Node.Status.Allocatable}
	return metricsutil.NewTopCmdPrinter(stdout, false).PrintNodeMetrics(items, available, o.noHeaders, o.sortBy)
}
