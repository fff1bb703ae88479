package main

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// podRow is one line of `get pods`, computed the way kubectl's table printer does.
type podRow struct {
	Name, Namespace string
	Ready           string
	Status          string
	Restarts        string
	Age             string
	QOS             string
	Slice           string
	Source          string
}

// ago formats the time since t as kubectl does ("5m", "3h12m", "2d"); "<unknown>" for zero.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// newPodRow computes the row of a pod. The STATUS column follows kubectl: the phase, replaced by
// status.reason (e.g. an admission rejection such as OutOfcpu), "Init:i/n", "Init:<reason>" while
// init containers run or fail, a container's waiting or terminated reason, "Signal:N" or
// "ExitCode:N" for a terminated container without one, and "Terminating" while deleted.
func newPodRow(p *v1.Pod, now time.Time) podRow {
	r := podRow{Name: p.Name, Namespace: p.Namespace, Age: ago(p.CreationTimestamp.Time, now)}
	total, ready, restarts := len(p.Spec.Containers), 0, int32(0)
	var lastRestart time.Time
	noteRestart := func(cs *v1.ContainerStatus) {
		restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
	}
	sidecars := map[string]bool{}
	for i := range p.Spec.InitContainers {
		if lifecycle.IsSidecar(&p.Spec.InitContainers[i]) {
			sidecars[p.Spec.InitContainers[i].Name] = true
			total++
		}
	}

	reason := string(p.Status.Phase)
	if reason == "" {
		reason = string(v1.PodPending)
	}
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}

	initializing := false
	for i := range p.Status.InitContainerStatuses {
		cs := &p.Status.InitContainerStatuses[i]
		noteRestart(cs)
		if sidecars[cs.Name] {
			if cs.Started != nil && *cs.Started {
				if cs.Ready {
					ready++
				}
				continue
			}
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			switch {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing {
		hasRunning := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := &p.Status.ContainerStatuses[i]
			noteRestart(cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// A pod with a completed container and a running one is still running.
		if reason == "Completed" && hasRunning {
			reason = "Running"
			if !podReady(p) {
				reason = "NotReady"
			}
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}

	r.Ready = fmt.Sprintf("%d/%d", ready, total)
	r.Status = reason
	r.Restarts = fmt.Sprint(restarts)
	if restarts > 0 && !lastRestart.IsZero() {
		r.Restarts = fmt.Sprintf("%d (%s ago)", restarts, ago(lastRestart, now))
	}
	r.QOS = string(qosOf(p))
	r.Slice = sliceOf(p)
	r.Source = sourceOf(p)
	return r
}

// podReady is the pod's Ready condition.
func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// qosOf is status.qosClass, computed from the spec when the status has none.
func qosOf(p *v1.Pod) v1.PodQOSClass {
	if p.Status.QOSClass != "" {
		return p.Status.QOSClass
	}
	return slices.QOSClass(p)
}

// sliceOf is the pod's systemd slice, "<none>" when its UID cannot name one.
func sliceOf(p *v1.Pod) string {
	s, err := slices.PodSliceName(qosOf(p), string(p.UID))
	if err != nil {
		return "<none>"
	}
	return s
}

// sourceOf is "api", "file:<manifest path>" or "<unknown>".
func sourceOf(p *v1.Pod) string {
	src := p.Annotations[pods.AnnotationSource]
	switch {
	case src == "":
		return "<unknown>"
	case src == pods.SourceFile && p.Annotations[pods.AnnotationOrigin] != "":
		return src + ":" + p.Annotations[pods.AnnotationOrigin]
	}
	return src
}
