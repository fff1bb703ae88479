package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// describeCmd: describe pod NAME ...
func (c *cli) describeCmd(pos []string) error {
	names, err := podArgs("describe", pos)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErr("describe pod: NAME is required")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	failed := false
	for i, name := range names {
		pod, err := cl.GetPod(c.ctx, c.global.namespace, name)
		if err != nil {
			if isFatal(err) {
				return err
			}
			failed = true
			fmt.Fprintf(c.stderr, "slicectl: %v\n", err)
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		evs, err := c.podEvents(cl, &pod)
		if err != nil {
			return err
		}
		describePod(c.stdout, &pod, time.Now())
		describeEvents(c.stdout, evs, time.Now())
	}
	if failed {
		return errReported
	}
	return nil
}

// timeFormat is kubectl describe's.
const timeFormat = time.RFC1123Z

func fmtTime(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.Format(timeFormat)
}

// describePod prints a pod as kubectl describe does, with slicelet's additions: its slice, its
// source and origin, and an admission rejection's reason.
func describePod(w io.Writer, p *v1.Pod, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	defer tw.Flush()
	kv := func(indent int, key string, value any) {
		fmt.Fprintf(tw, "%s%s:\t%v\n", strings.Repeat("  ", indent), key, value)
	}
	kv(0, "Name", p.Name)
	kv(0, "Namespace", p.Namespace)
	kv(0, "UID", orNoneStr(string(p.UID)))
	prio := "0"
	if p.Spec.Priority != nil {
		prio = fmt.Sprint(*p.Spec.Priority)
	}
	kv(0, "Priority", prio)
	kv(0, "Priority Class Name", orNoneStr(p.Spec.PriorityClassName))
	mapLines(tw, "Labels", p.Labels, "=")
	mapLines(tw, "Annotations", p.Annotations, ": ")
	src := p.Annotations[pods.AnnotationSource]
	switch src {
	case pods.SourceFile:
		kv(0, "Source", fmt.Sprintf("file (%s)", orNoneStr(p.Annotations[pods.AnnotationOrigin])))
	case "":
		kv(0, "Source", "<unknown>")
	default:
		kv(0, "Source", src)
	}
	kv(0, "Created", fmt.Sprintf("%s (%s ago)", fmtTime(p.CreationTimestamp), ago(p.CreationTimestamp.Time, now)))
	if p.Status.StartTime != nil {
		kv(0, "Start Time", fmtTime(*p.Status.StartTime))
	}
	if p.DeletionTimestamp != nil {
		kv(0, "Status", fmt.Sprintf("Terminating (lasts %s)", ago(p.DeletionTimestamp.Time, now)))
	} else {
		kv(0, "Status", orNoneStr(string(p.Status.Phase)))
	}
	if p.Status.Reason != "" {
		kv(0, "Reason", p.Status.Reason)
	}
	if p.Status.Message != "" {
		kv(0, "Message", p.Status.Message)
	}
	kv(0, "QoS Class", qosOf(p))
	kv(0, "Slice", sliceOf(p))
	kv(0, "Restart Policy", orNoneStr(string(p.Spec.RestartPolicy)))
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		kv(0, "Termination Grace Period", fmt.Sprintf("%ds", *g))
	}

	if len(p.Spec.InitContainers) > 0 {
		fmt.Fprintln(tw, "Init Containers:")
		for i := range p.Spec.InitContainers {
			describeContainer(tw, &p.Spec.InitContainers[i], findStatus(p.Status.InitContainerStatuses, p.Spec.InitContainers[i].Name), kv)
		}
	}
	fmt.Fprintln(tw, "Containers:")
	for i := range p.Spec.Containers {
		describeContainer(tw, &p.Spec.Containers[i], findStatus(p.Status.ContainerStatuses, p.Spec.Containers[i].Name), kv)
	}

	fmt.Fprintln(tw, "Conditions:")
	if len(p.Status.Conditions) == 0 {
		fmt.Fprintln(tw, "  <none>")
	} else {
		fmt.Fprintln(tw, "  Type\tStatus\tReason")
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason))
		}
	}
	if len(p.Spec.Volumes) > 0 {
		fmt.Fprintln(tw, "Volumes:")
		for _, v := range p.Spec.Volumes {
			fmt.Fprintf(tw, "  %s:\n", v.Name)
			switch {
			case v.EmptyDir != nil:
				kv(2, "Type", "EmptyDir (a directory that lives as long as the pod)")
				if v.EmptyDir.SizeLimit != nil {
					kv(2, "SizeLimit", v.EmptyDir.SizeLimit.String())
				}
			case v.HostPath != nil:
				kv(2, "Type", "HostPath (bare host directory volume)")
				kv(2, "Path", v.HostPath.Path)
			default:
				kv(2, "Type", "<unsupported>")
			}
		}
	}
}

func orNoneStr(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// mapLines prints a label or annotation map, one entry per line, sorted.
func mapLines(tw io.Writer, title string, m map[string]string, sep string) {
	if len(m) == 0 {
		fmt.Fprintf(tw, "%s:\t<none>\n", title)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		label := title + ":"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(tw, "%s\t%s%s%s\n", label, k, sep, m[k])
	}
}

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// describeContainer prints one container: command, state, last state, readiness, restarts,
// resources and environment.
func describeContainer(tw io.Writer, c *v1.Container, cs *v1.ContainerStatus, kv func(int, string, any)) {
	fmt.Fprintf(tw, "  %s:\n", c.Name)
	if c.Image != "" {
		kv(2, "Image", c.Image)
	}
	if lifecycle.IsSidecar(c) {
		kv(2, "Restart Policy", "Always (sidecar)")
	}
	if len(c.Command) > 0 {
		fmt.Fprintf(tw, "    Command:\n")
		for _, a := range c.Command {
			fmt.Fprintf(tw, "      %s\n", a)
		}
	}
	if len(c.Args) > 0 {
		fmt.Fprintf(tw, "    Args:\n")
		for _, a := range c.Args {
			fmt.Fprintf(tw, "      %s\n", a)
		}
	}
	if cs == nil {
		kv(2, "State", "Waiting")
		kv(3, "Reason", "<no status yet>")
		kv(2, "Ready", "False")
		kv(2, "Restart Count", 0)
	} else {
		describeState(kv, "State", cs.State)
		if cs.LastTerminationState != (v1.ContainerState{}) {
			describeState(kv, "Last State", cs.LastTerminationState)
		}
		kv(2, "Ready", boolWord(cs.Ready))
		kv(2, "Restart Count", cs.RestartCount)
	}
	resourceLines(tw, "Limits", c.Resources.Limits)
	resourceLines(tw, "Requests", c.Resources.Requests)
	if len(c.Env) > 0 {
		fmt.Fprintf(tw, "    Environment:\n")
		for _, e := range c.Env {
			v := e.Value
			if e.ValueFrom != nil {
				v = "<set from a reference>"
			}
			fmt.Fprintf(tw, "      %s:\t%s\n", e.Name, v)
		}
	}
	if c.WorkingDir != "" {
		kv(2, "Working Dir", c.WorkingDir)
	}
	if len(c.VolumeMounts) > 0 {
		fmt.Fprintf(tw, "    Mounts:\n")
		for _, m := range c.VolumeMounts {
			ro := "rw"
			if m.ReadOnly {
				ro = "ro"
			}
			fmt.Fprintf(tw, "      %s from %s (%s)\n", m.MountPath, m.Name, ro)
		}
	}
}

// describeState prints a container state with its details.
func describeState(kv func(int, string, any), title string, s v1.ContainerState) {
	switch {
	case s.Running != nil:
		kv(2, title, "Running")
		kv(3, "Started", fmtTime(s.Running.StartedAt))
	case s.Terminated != nil:
		t := s.Terminated
		kv(2, title, "Terminated")
		kv(3, "Reason", orNoneStr(t.Reason))
		if t.Message != "" {
			kv(3, "Message", t.Message)
		}
		kv(3, "Exit Code", t.ExitCode)
		if t.Signal != 0 {
			kv(3, "Signal", t.Signal)
		}
		kv(3, "Started", fmtTime(t.StartedAt))
		kv(3, "Finished", fmtTime(t.FinishedAt))
	case s.Waiting != nil:
		kv(2, title, "Waiting")
		kv(3, "Reason", orNoneStr(s.Waiting.Reason))
		if s.Waiting.Message != "" {
			kv(3, "Message", s.Waiting.Message)
		}
	default:
		kv(2, title, "Waiting")
	}
}

func boolWord(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// resourceLines prints a container's limits or requests, sorted by resource name.
func resourceLines(tw io.Writer, title string, rl v1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	fmt.Fprintf(tw, "    %s:\n", title)
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		q := rl[v1.ResourceName(n)]
		fmt.Fprintf(tw, "      %s:\t%s\n", n, q.String())
	}
}
