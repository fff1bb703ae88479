package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
)

// eventsOptions are the flags of events.
type eventsOptions struct {
	forObject string
	types     []string
	watch     bool
	noHeaders bool
}

func newEventsCmd(c *cli) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List the node's pod events, as kubectl events does",
		Long: `List the events slicelet recorded about pods: admission (Admitted, or the rejection's reason such
as OutOfcpu), the containers' Created, Started, Killing, BackOff and Failed, and Evicted. slicelet
keeps at most 50 events a pod and 1000 in all, across restarts.`,
		Example: `  slicectl events
  slicectl events -A --types Warning
  slicectl events --for pod/web -w`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return c.eventsCmd(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.forObject, "for", "", "only the events of this pod (pod/NAME or NAME)")
	f.StringSliceVar(&o.types, "types", nil, "only events of these types (Normal, Warning)")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every new event")
	f.BoolVar(&o.noHeaders, "no-headers", false, "leave out the header line")
	return cmd
}

// eventSelector is the field selector of events' flags.
func (c *cli) eventSelector(o eventsOptions) (string, error) {
	var parts []string
	if !c.global.allNamespaces {
		parts = append(parts, "involvedObject.namespace="+c.global.namespace)
	}
	if o.forObject != "" {
		names, err := podNames([]string{o.forObject})
		if err != nil {
			return "", usageErr("events: --for %s", err.Error())
		}
		parts = append(parts, "involvedObject.name="+names[0])
	}
	for _, t := range o.types {
		if t != v1.EventTypeNormal && t != v1.EventTypeWarning {
			return "", usageErr("events: --types %q: want Normal or Warning", t)
		}
	}
	if len(o.types) == 1 {
		parts = append(parts, "type="+o.types[0])
	}
	return strings.Join(parts, ","), nil
}

// eventsCmd is events [-A] [--for pod/NAME] [--types T] [-w] [-o json|yaml].
func (c *cli) eventsCmd(o eventsOptions) error {
	if err := c.checkOutput("events", "json", "yaml"); err != nil {
		return err
	}
	sel, err := c.eventSelector(o)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	list, err := cl.ListEvents(c.ctx, sel)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 3, ' ', 0)
	header := !o.noHeaders
	print := func(e v1.Event) error {
		switch c.global.output {
		case "json", "yaml":
			return printObject(c.stdout, c.global.output, &e)
		}
		if header {
			h := "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE"
			if c.global.allNamespaces {
				h = "NAMESPACE\t" + h
			}
			fmt.Fprintln(tw, h)
			header = false
		}
		if c.global.allNamespaces {
			fmt.Fprintf(tw, "%s\t", e.Namespace)
		}
		obj := "pod/" + e.InvolvedObject.Name
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ago(e.LastTimestamp.Time, time.Now()), e.Type, e.Reason, obj, strings.TrimSpace(e.Message))
		return nil
	}
	if len(list.Items) == 0 && !o.watch && c.global.output == "" {
		c.noResources()
		return nil
	}
	for _, e := range list.Items {
		if err := print(e); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil || !o.watch {
		return err
	}
	err = cl.WatchEvents(c.ctx, sel, list.ResourceVersion, func(_ watch.EventType, e v1.Event) error {
		if err := print(e); err != nil {
			return err
		}
		return tw.Flush()
	})
	if c.ctx.Err() != nil {
		return nil
	}
	return err
}

// printObject prints one object as -o json or yaml (kubectl's 2-space JSON).
func printObject(w io.Writer, output string, obj any) error {
	if output == "json" {
		return writeJSON(w, obj)
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("yaml output: %w", err)
	}
	_, err = w.Write(data)
	return err
}

// podEvents returns a pod's events for describe; a daemon that records none gives none.
func (c *cli) podEvents(cl *api.Client, p *v1.Pod) ([]v1.Event, error) {
	list, err := cl.ListEvents(c.ctx, "involvedObject.namespace="+p.Namespace+",involvedObject.name="+p.Name)
	var se *api.StatusError
	if errors.As(err, &se) && se.Code == 404 {
		return nil, nil
	}
	var out []v1.Event
	for _, e := range list.Items {
		if p.UID == "" || e.InvolvedObject.UID == p.UID {
			out = append(out, e)
		}
	}
	return out, err
}

// describeEvents prints the Events section of describe as kubectl does
// (k8s.io/kubectl/pkg/describe.DescribeEvents).
func describeEvents(w io.Writer, list []v1.Event, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(w, "Events:  <none>")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Events:")
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	for _, e := range list {
		age := ago(e.LastTimestamp.Time, now)
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, ago(e.FirstTimestamp.Time, now))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source.Component, strings.TrimSpace(e.Message))
	}
	tw.Flush()
}
