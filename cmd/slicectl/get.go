package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
)

// getCmd: get pods [NAME ...] [-o wide|json|yaml|name] [-A].
func (c *cli) getCmd(pos []string) error {
	output, all := c.global.output, c.global.allNamespaces
	// kubectl accepts "get pods NAME", "get pod NAME" and "get pod/NAME".
	names, err := podArgs("get", pos)
	if err != nil {
		return err
	}
	switch output {
	case "", "wide", "json", "yaml", "name":
	default:
		return usageErr("get: -o %q: must be wide, json, yaml or name", output)
	}
	if all && len(names) > 0 {
		return usageErr("get: -A lists every pod; it cannot be combined with names")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}

	var list []v1.Pod
	failed := false
	if len(names) > 0 {
		for _, name := range names {
			pod, err := cl.GetPod(c.ctx, c.global.namespace, name)
			if err != nil {
				if isFatal(err) {
					return err
				}
				failed = true
				fmt.Fprintf(c.stderr, "slicectl: %v\n", err)
				continue
			}
			list = append(list, pod)
		}
	} else {
		pods, err := cl.ListPods(c.ctx)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if all || p.Namespace == c.global.namespace {
				list = append(list, p)
			}
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].Namespace != list[j].Namespace {
				return list[i].Namespace < list[j].Namespace
			}
			return list[i].Name < list[j].Name
		})
		if len(list) == 0 && output != "json" && output != "yaml" {
			if all {
				fmt.Fprintln(c.stderr, "No resources found")
			} else {
				fmt.Fprintf(c.stderr, "No resources found in %s namespace.\n", c.global.namespace)
			}
			return nil
		}
	}
	if len(list) > 0 || len(names) == 0 {
		if err := printPods(c.stdout, list, output, all, len(names) == 1, time.Now()); err != nil {
			return err
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// podListOutput is what -o json|yaml prints for several pods (kubectl's List).
type podListOutput struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Items      []v1.Pod `json:"items"`
}

// printPods prints pods in the requested format; single is true when one pod was asked for by
// name (json/yaml then print the pod itself, not a list).
func printPods(w io.Writer, list []v1.Pod, output string, withNamespace, single bool, now time.Time) error {
	for i := range list {
		list[i].Kind, list[i].APIVersion = "Pod", "v1"
	}
	var doc any = podListOutput{APIVersion: "v1", Kind: "List", Items: list}
	if list == nil {
		doc = podListOutput{APIVersion: "v1", Kind: "List", Items: []v1.Pod{}}
	}
	if single && len(list) == 1 {
		doc = list[0]
	}
	switch output {
	case "json":
		return writeJSON(w, doc)
	case "yaml":
		data, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("yaml output: %w", err)
		}
		_, err = w.Write(data)
		return err
	case "name":
		for _, p := range list {
			fmt.Fprintf(w, "pod/%s\n", p.Name)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var head []string
	if withNamespace {
		head = append(head, "NAMESPACE")
	}
	head = append(head, "NAME", "READY", "STATUS", "RESTARTS", "AGE")
	if output == "wide" {
		head = append(head, "QOS", "SLICE", "SOURCE")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i := range list {
		r := newPodRow(&list[i], now)
		var cols []string
		if withNamespace {
			cols = append(cols, r.Namespace)
		}
		cols = append(cols, r.Name, r.Ready, r.Status, r.Restarts, r.Age)
		if output == "wide" {
			cols = append(cols, r.QOS, r.Slice, r.Source)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// nodeCmd: node [-o json|yaml] — capacity, allocatable, conditions and pod counts.
func (c *cli) nodeCmd(pos []string) error {
	output := c.global.output
	if len(pos) > 0 {
		return usageErr("node: unexpected argument %q", pos[0])
	}
	switch output {
	case "", "json", "yaml":
	default:
		return usageErr("node: -o %q: must be json or yaml", output)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	n, err := cl.Node(c.ctx)
	if err != nil {
		return err
	}
	switch output {
	case "json":
		return writeJSON(c.stdout, n)
	case "yaml":
		data, err := yaml.Marshal(n)
		if err != nil {
			return fmt.Errorf("yaml output: %w", err)
		}
		_, err = c.stdout.Write(data)
		return err
	}
	printNodeInfo(c.stdout, n, time.Now())
	return nil
}

// printNodeInfo prints the node the way kubectl describe node starts.
func printNodeInfo(w io.Writer, n api.NodeInfo, now time.Time) {
	fmt.Fprintf(w, "Name:         %s\n", orDash(n.Node.Name))
	fmt.Fprintln(w, "Conditions:")
	if len(n.Node.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tSINCE\tREASON\tMESSAGE")
		for _, c := range n.Node.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, ago(c.LastTransitionTime.Time, now), orDash(c.Reason), orDash(c.Message))
		}
		tw.Flush()
	}
	if len(n.Health) > 0 {
		fmt.Fprintln(w, "Health:")
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  PART\tSTATUS\tSINCE\tMESSAGE")
		for _, h := range n.Health {
			since := "-"
			if !h.Since.IsZero() {
				since = ago(h.Since, now)
			}
			msg := h.Message
			if h.Status == health.StatusHealthy && h.Failures == 0 {
				msg = "" // a note of a healthy part is not a problem
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", h.Code, h.Status, since, orDash(msg))
		}
		tw.Flush()
	}
	resources := func(title string, rl v1.ResourceList) {
		fmt.Fprintf(w, "%s:\n", title)
		names := make([]string, 0, len(rl))
		for name := range rl {
			names = append(names, string(name))
		}
		sort.Strings(names)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, name := range names {
			q := rl[v1.ResourceName(name)]
			fmt.Fprintf(tw, "  %s:\t%s\n", name, q.String())
		}
		tw.Flush()
	}
	resources("Capacity", n.Node.Status.Capacity)
	resources("Allocatable", n.Node.Status.Allocatable)
	p := n.Pods
	max := "no limit"
	if p.Max > 0 {
		max = fmt.Sprintf("max %d", p.Max)
	}
	fmt.Fprintf(w, "Pods:         %d active (%s), %d in total\n", p.Active, max, p.Total)
	var phases []string
	for _, ph := range []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed} {
		if k := p.Phases[ph]; k > 0 {
			s := fmt.Sprintf("%s %d", ph, k)
			if ph == v1.PodFailed && p.Rejected > 0 {
				s += fmt.Sprintf(" (%d rejected by admission)", p.Rejected)
			}
			phases = append(phases, s)
		}
	}
	if len(phases) > 0 {
		fmt.Fprintf(w, "  By phase:   %s\n", strings.Join(phases, ", "))
	}
	var qos []string
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		if k := p.QOS[q]; k > 0 {
			qos = append(qos, fmt.Sprintf("%s %d", q, k))
		}
	}
	if len(qos) > 0 {
		fmt.Fprintf(w, "  By QoS:     %s\n", strings.Join(qos, ", "))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
