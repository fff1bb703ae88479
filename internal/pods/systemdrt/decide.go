package systemdrt

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/slices"
)

// Waiting reasons, as the kubelet reports them.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
)

// Terminated reasons.
const (
	ReasonCompleted = "Completed"
	ReasonError     = "Error"
	ReasonOOMKilled = "OOMKilled"
	// ReasonStartError: systemd did not start the unit (the kubelet's StartError).
	ReasonStartError = "StartError"
	// ReasonUnknown: the unit vanished before its exit status could be read.
	ReasonUnknown = "ContainerStatusUnknown"
)

// runState is where a container stands.
type runState int

const (
	stateNone     runState = iota // no instance, or one recorded but never created
	stateStarting                 // created, main process not seen running yet
	stateRunning
	stateExited
)

func stateOf(cr *containerRecord) runState {
	if cr == nil || cr.Current == nil {
		return stateNone
	}
	cur := cr.Current
	switch {
	case cur.Done:
		return stateExited
	case !cur.Created:
		return stateNone
	case cur.StartedAt.IsZero():
		return stateStarting
	}
	return stateRunning
}

// startAction starts instance N of a container.
type startAction struct {
	Container string
	Init      bool
	N         int
}

// plan is what SyncPod must do now, and what the status says about waiting containers. It is
// computed by decide from the spec and the record alone.
type plan struct {
	Start []startAction
	// StopSidecars are running restartable init containers to stop: the pod's regular
	// containers have all ended for good.
	StopSidecars []string
	// Waiting holds the waiting state of containers held back (back-off).
	Waiting map[string]v1.ContainerStateWaiting
	// NextSync is the earliest end of a back-off, zero when none.
	NextSync time.Time
	// Initialized: every regular init container has succeeded.
	Initialized bool
	// InitFailed: a regular init container failed and restartPolicy is Never.
	InitFailed bool
	// Done: no container will run again (the pod is Succeeded or Failed).
	Done bool
	// Killed: the pod is being stopped for good (KillPod); nothing restarts.
	Killed bool
}

// restartPolicy is the pod's restartPolicy, Always when unset (the API default).
func restartPolicy(pod *v1.Pod) v1.RestartPolicy {
	if pod.Spec.RestartPolicy == "" {
		return v1.RestartPolicyAlways
	}
	return pod.Spec.RestartPolicy
}

// shouldRestart reports whether a regular container that exited with code restarts.
func shouldRestart(policy v1.RestartPolicy, code int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// decide computes the plan with the kubelet's rules (computePodActions and its init container
// part): regular init containers run one at a time, in order, each to success (a failure is
// retried with back-off unless restartPolicy is Never, which fails the pod); restartable init
// containers start in order and the next init container waits until they run; the regular
// containers all start once initialization is done and restart per restartPolicy; sidecars
// restart whenever they exit, until every regular container has ended for good, when they are
// stopped. killed is set for a pod being stopped: nothing is started.
func decide(pod *v1.Pod, rec *podRecord, now time.Time, b Backoff, killed bool) plan {
	p := plan{Waiting: map[string]v1.ContainerStateWaiting{}}
	policy := restartPolicy(pod)

	restart := func(c *v1.Container, init bool) {
		cr := rec.Containers[c.Name]
		cur := cr.Current
		if until, wait := b.Until(cr.Backoff, cr.BackoffUpdated, cur.FinishedAt, now); wait {
			p.Waiting[c.Name] = v1.ContainerStateWaiting{
				Reason: ReasonCrashLoopBackOff,
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
					cr.Backoff, c.Name, pod.Name, pod.Namespace, pod.UID),
			}
			if p.NextSync.IsZero() || until.Before(p.NextSync) {
				p.NextSync = until
			}
			return
		}
		p.Start = append(p.Start, startAction{Container: c.Name, Init: init, N: cur.N + 1})
	}
	start := func(c *v1.Container, init bool) {
		n := 1
		if cr := rec.Containers[c.Name]; cr != nil && cr.Current != nil {
			n = cr.Current.N // recorded but never created: same instance
		}
		p.Start = append(p.Start, startAction{Container: c.Name, Init: init, N: n})
	}

	// Have the regular containers ended for good?
	appsDone := len(pod.Spec.Containers) > 0
	for i := range pod.Spec.Containers {
		cr := rec.Containers[pod.Spec.Containers[i].Name]
		if stateOf(cr) != stateExited || shouldRestart(policy, cr.Current.ExitCode) {
			appsDone = false
			break
		}
	}

	blocked := false
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := rec.Containers[c.Name]
		st := stateOf(cr)
		if isSidecar(c) {
			switch {
			case blocked || p.InitFailed:
			case st == stateNone:
				if !appsDone {
					start(c, true)
				}
				blocked = true
			case st == stateStarting:
				blocked = true
			case st == stateRunning:
				if appsDone {
					p.StopSidecars = append(p.StopSidecars, c.Name)
				}
			case st == stateExited:
				if !appsDone {
					restart(c, true)
				}
			}
			continue
		}
		if rec.Initialized || blocked || p.InitFailed {
			continue
		}
		switch st {
		case stateNone:
			start(c, true)
			blocked = true
		case stateStarting, stateRunning:
			blocked = true
		case stateExited:
			if cr.Current.ExitCode == 0 {
				continue
			}
			if policy == v1.RestartPolicyNever {
				p.InitFailed = true
				continue
			}
			restart(c, true)
			blocked = true
		}
	}
	p.Initialized = rec.Initialized || (!blocked && !p.InitFailed)

	if p.InitFailed {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if isSidecar(c) && stateOf(rec.Containers[c.Name]) == stateRunning {
				p.StopSidecars = append(p.StopSidecars, c.Name)
			}
		}
	}
	if p.Initialized && !p.InitFailed {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			cr := rec.Containers[c.Name]
			switch stateOf(cr) {
			case stateNone:
				start(c, false)
			case stateExited:
				if shouldRestart(policy, cr.Current.ExitCode) {
					restart(c, false)
				}
			}
		}
	}
	p.Done = p.InitFailed || appsDone
	if killed {
		p.Start, p.StopSidecars, p.NextSync, p.Killed = nil, nil, time.Time{}, true
		clear(p.Waiting)
	}
	return p
}

// terminated converts a finished instance.
func terminated(in *instance) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    in.ExitCode,
		Signal:      in.Signal,
		Reason:      in.Reason,
		Message:     in.Message,
		StartedAt:   metav1.NewTime(in.StartedAt),
		FinishedAt:  metav1.NewTime(in.FinishedAt),
		ContainerID: ContainerID(in.Unit),
	}
}

// ContainerID is the status containerID of a unit: systemd://<unit>.
func ContainerID(unit string) string { return "systemd://" + unit }

// containerStatus builds one container's status. waitReason is the reason for a container that
// has not run yet.
func containerStatus(c *v1.Container, cr *containerRecord, p plan, waitReason string) v1.ContainerStatus {
	started := false
	cs := v1.ContainerStatus{Name: c.Name, Started: &started}
	if cr == nil || cr.Current == nil {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		return cs
	}
	cur := cr.Current
	cs.RestartCount = int32(cur.N - 1)
	if prev := cr.Previous; prev != nil && prev.Done {
		cs.LastTerminationState.Terminated = terminated(prev)
	}
	switch stateOf(cr) {
	case stateNone:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
	case stateStarting:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
		cs.ContainerID = ContainerID(cur.Unit)
	case stateRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		cs.ContainerID = ContainerID(cur.Unit)
		cs.Ready, started = true, true
	case stateExited:
		cs.ContainerID = ContainerID(cur.Unit)
		if w, ok := p.Waiting[c.Name]; ok {
			cs.State.Waiting = &w
			cs.LastTerminationState.Terminated = terminated(cur)
		} else {
			cs.State.Terminated = terminated(cur)
		}
	}
	return cs
}

// buildStatus derives the pod's status from the record and the plan.
func buildStatus(pod *v1.Pod, rec *podRecord, p plan) v1.PodStatus {
	st := v1.PodStatus{QOSClass: slices.QOSClass(pod)}
	if !rec.StartTime.IsZero() {
		t := metav1.NewTime(rec.StartTime)
		st.StartTime = &t
	}
	var notInit, notReady []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(c, rec.Containers[c.Name], p, ReasonPodInitializing)
		if isSidecar(c) {
			if !cs.Ready {
				notReady = append(notReady, c.Name)
			}
		} else if t := cs.State.Terminated; !p.Initialized && (t == nil || t.ExitCode != 0) {
			notInit = append(notInit, c.Name)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	wait := ReasonContainerCreating
	if !p.Initialized {
		wait = ReasonPodInitializing
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := containerStatus(c, rec.Containers[c.Name], p, wait)
		if !cs.Ready {
			notReady = append(notReady, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Phase = podPhase(pod, st.ContainerStatuses, p)

	cond := func(t v1.PodConditionType, ok bool, reason, message string) v1.PodCondition {
		if ok {
			return v1.PodCondition{Type: t, Status: v1.ConditionTrue}
		}
		return v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: message}
	}
	initMsg := fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	readyReason, readyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		readyReason, readyMsg = "PodCompleted", ""
	}
	ready := len(notReady) == 0 && st.Phase == v1.PodRunning
	st.Conditions = []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, true, "", ""),
		cond(v1.PodInitialized, p.Initialized, "ContainersNotInitialized", initMsg),
		cond(v1.ContainersReady, ready, readyReason, readyMsg),
		cond(v1.PodReady, ready, readyReason, readyMsg),
		cond(v1.PodScheduled, true, "", ""),
	}
	return st
}

// podPhase is the kubelet's getPhase: Failed when an init container failed under
// restartPolicy Never; for a killed pod whose containers all ended, Succeeded if all exited 0,
// else Failed; Pending until initialization is done or while a regular container
// waits to run for the first time; Running while one runs (or, restartPolicy Always or
// OnFailure, will run again); Succeeded when all ended with 0; Failed when all ended and one
// failed under Never.
func podPhase(pod *v1.Pod, statuses []v1.ContainerStatus, p plan) v1.PodPhase {
	if p.InitFailed {
		return v1.PodFailed
	}
	if !p.Initialized {
		return v1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		policy := restartPolicy(pod)
		switch {
		case p.Killed && stopped == succeeded:
			// A killed pod is terminal whatever its policy (the kubelet's podIsTerminal).
			return v1.PodSucceeded
		case p.Killed:
			return v1.PodFailed
		case policy == v1.RestartPolicyAlways:
			return v1.PodRunning
		case stopped == succeeded:
			return v1.PodSucceeded
		case policy == v1.RestartPolicyNever:
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}
