package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
)

// getOptions are get's flags besides the global ones.
type getOptions struct {
	selector, fieldSelector string
	watch, watchOnly        bool
	print                   podPrintOptions
}

// getCmd: get pods [NAME ...] with kubectl's selectors, watch and printers.
func (c *cli) getCmd(pos []string, o getOptions) error {
	if len(pos) > 0 {
		if kind := objectKinds[strings.ToLower(pos[0])]; kind != "" {
			return c.getObjectsCmd(kind, pos)
		}
	}
	output, all := c.global.output, c.global.allNamespaces
	// kubectl accepts "get pods NAME", "get pod NAME" and "get pod/NAME".
	names, err := podArgs("get", pos)
	if err != nil {
		return err
	}
	switch {
	case all && len(names) > 0:
		return usageErr("get: -A lists every pod; it cannot be combined with names")
	case len(names) > 0 && (o.selector != "" || o.fieldSelector != ""):
		return usageErr("get: names cannot be combined with -l or --field-selector")
	case len(names) > 0 && (o.watch || o.watchOnly):
		return usageErr("get: -w watches the namespace's pods; select one with --field-selector metadata.name=NAME")
	}
	o.print.withNamespace = all
	pr, err := newPodPrinter(output, o.print, time.Now)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if o.watch || o.watchOnly {
		return c.watchPods(cl, pr, o)
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
		pl, err := cl.ListPodList(c.ctx, c.listOptions(o))
		if err != nil {
			return err
		}
		list = pl.Items
		sortByNamespaceName(list)
		if len(list) == 0 && (output == "" || output == "wide" || output == "name") {
			c.noResources()
			return nil
		}
	}
	if len(list) > 0 || len(names) == 0 {
		if err := pr.printList(c.stdout, list, len(names) == 1); err != nil {
			return err
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// noResources is kubectl's note for an empty list.
func (c *cli) noResources() {
	if c.global.allNamespaces {
		fmt.Fprintln(c.stderr, "No resources found")
	} else {
		fmt.Fprintf(c.stderr, "No resources found in %s namespace.\n", c.global.namespace)
	}
}

// listOptions are the selectors of -l and --field-selector, plus the namespace unless -A.
func (c *cli) listOptions(o getOptions) api.ListOptions {
	fs := o.fieldSelector
	if !c.global.allNamespaces {
		ns := "metadata.namespace=" + c.global.namespace
		if fs == "" {
			fs = ns
		} else {
			fs = ns + "," + fs
		}
	}
	return api.ListOptions{LabelSelector: o.selector, FieldSelector: fs}
}

// sortByNamespaceName orders pods as kubectl lists them.
func sortByNamespaceName(list []v1.Pod) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Namespace != list[j].Namespace {
			return list[i].Namespace < list[j].Namespace
		}
		return list[i].Name < list[j].Name
	})
}

// watchPods is get -w (the pods, then every change) and --watch-only (the changes), streamed
// by the daemon's watch; it ends with the daemon's watch or on interrupt.
func (c *cli) watchPods(cl *api.Client, pr *podPrinter, o getOptions) error {
	lo := c.listOptions(o)
	if o.watchOnly {
		pl, err := cl.ListPodList(c.ctx, lo)
		if err != nil {
			return err
		}
		lo.ResourceVersion = pl.ResourceVersion
	}
	var initial []v1.Pod
	inInitial := !o.watchOnly
	err := cl.WatchPods(c.ctx, lo, func(e api.WatchEvent) error {
		switch {
		case e.Type == watch.Bookmark:
			if inInitial {
				inInitial = false
				sortByNamespaceName(initial)
				if len(initial) == 0 && pr.table {
					c.noResources()
					return nil
				}
				for _, p := range initial {
					if err := pr.printOne(c.stdout, p); err != nil {
						return err
					}
				}
				initial = nil
			}
			return nil
		case inInitial:
			initial = append(initial, e.Pod)
			return nil
		}
		return pr.printOne(c.stdout, e.Pod)
	})
	if c.ctx.Err() != nil {
		return nil // interrupted, as kubectl get -w ends
	}
	return err
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
