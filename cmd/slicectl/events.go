package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
)

// printPodEvents prints the pod's events after its description, as kubectl describe does; a
// daemon that keeps no events (an older one) prints nothing.
func (c *cli) printPodEvents(cl *api.Client, pod *v1.Pod) error {
	events, err := cl.PodEvents(c.ctx, pod.Namespace, pod.Name)
	var se *api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	describeEvents(c.stdout, events, time.Now())
	return nil
}

// describeEvents is kubectl describe's Events section: Type, Reason, Age ("5s (x3 over 25s)"
// for a repeated event), From, Message; "<none>" without events.
func describeEvents(w io.Writer, events []v1.Event, now time.Time) {
	if len(events) == 0 {
		fmt.Fprintln(w, "Events:  <none>")
		return
	}
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	for _, e := range events {
		age := ago(e.LastTimestamp.Time, now)
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, ago(e.FirstTimestamp.Time, now))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source.Component, strings.TrimSpace(e.Message))
	}
}
