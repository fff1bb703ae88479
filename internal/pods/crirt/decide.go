package crirt

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/slices"
)

// Waiting and terminated reasons, as the kubelet reports them (the same strings as the systemd
// runtime's).
const (
	// ReasonContainerCreating: created, not running yet.
	ReasonContainerCreating = systemdrt.ReasonContainerCreating
	// ReasonPodInitializing: waiting for the init containers.
	ReasonPodInitializing = systemdrt.ReasonPodInitializing
	// ReasonCrashLoopBackOff: waiting for the restart back-off to end.
	ReasonCrashLoopBackOff = systemdrt.ReasonCrashLoopBackOff
	// ReasonCompleted: exited with code 0.
	ReasonCompleted = systemdrt.ReasonCompleted
	// ReasonError: exited with another code.
	ReasonError = systemdrt.ReasonError
	// ReasonErrImagePull: pulling the image failed.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonImagePullBackOff: waiting to pull the image again after a failure.
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonErrImageNeverPull: imagePullPolicy Never and the image is not present.
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// ReasonCreateContainerError: the runtime refused to create the container.
	ReasonCreateContainerError = "CreateContainerError"
)

// instance is one run of a container: one CRI container.
type instance struct {
	// N counts the container's runs from 1: CRI attempt + 1.
	N         int
	ID        string
	SandboxID string
	State     runtimeapi.ContainerState
	CreatedAt time.Time
	// StartedAt is zero until the container ran.
	StartedAt time.Time
	// Done is set when the container exited (or can no longer run: its sandbox is gone).
	Done       bool
	FinishedAt time.Time
	ExitCode   int32
	Reason     string
	Message    string
	ImageRef   string
}

// waitErr holds a container back because its last start attempt failed before a container
// existed (image pull, create): the kubelet's ErrImagePull/ImagePullBackOff and
// CreateContainerError, retried with back-off.
type waitErr struct {
	Reason  string
	Message string
	// Until is when the next attempt may run.
	Until time.Time
	// Delay is the current back-off.
	Delay time.Duration
}

// containerRecord is what a sync knows about one container of a pod.
type containerRecord struct {
	// Current is the latest instance, Previous the one before it.
	Current  *instance
	Previous *instance
	// Backoff and BackoffUpdated are the kubelet's restart back-off entry.
	Backoff        time.Duration
	BackoffUpdated time.Time
	// Wait holds the container back after a failed pull or create.
	Wait *waitErr
}

// podRecord is a pod as the runtime shows it, rebuilt at every sync.
type podRecord struct {
	UID         string
	StartTime   time.Time
	Initialized bool
	Containers  map[string]*containerRecord
}

func (p *podRecord) container(name string) *containerRecord {
	c := p.Containers[name]
	if c == nil {
		c = &containerRecord{}
		p.Containers[name] = c
	}
	return c
}

// runState is where a container stands.
type runState int

const (
	stateNone     runState = iota // no instance
	stateStarting                 // created (or unknown), not seen running
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
	case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning
	}
	return stateStarting
}

// startAction starts instance N of a container.
type startAction struct {
	Container string
	Init      bool
	N         int
}

// plan is what SyncPod must do now, computed by decide from the spec and the record alone.
type plan struct {
	Start        []startAction
	StopSidecars []string
	Waiting      map[string]v1.ContainerStateWaiting
	NextSync     time.Time
	Initialized  bool
	InitFailed   bool
	Done         bool
	Killed       bool
}

func restartPolicy(pod *v1.Pod) v1.RestartPolicy {
	if pod.Spec.RestartPolicy == "" {
		return v1.RestartPolicyAlways
	}
	return pod.Spec.RestartPolicy
}

func shouldRestart(policy v1.RestartPolicy, code int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// decide computes the plan with the kubelet's rules (computePodActions), the same as the
// systemd runtime's: regular init containers one at a time, in order, each to success (a
// failure is retried with back-off unless restartPolicy is Never, which fails the pod);
// restartable init containers start in order and the next init container waits until they run;
// the regular containers start once initialization is done and restart per restartPolicy;
// sidecars restart until every regular container has ended for good, then they are stopped.
// A container held back by a failed pull or create waits until its back-off ends.
func decide(pod *v1.Pod, rec *podRecord, now time.Time, b systemdrt.Backoff, killed bool) plan {
	p := plan{Waiting: map[string]v1.ContainerStateWaiting{}}
	policy := restartPolicy(pod)

	held := func(c *v1.Container) bool {
		cr := rec.Containers[c.Name]
		if cr == nil || cr.Wait == nil || !now.Before(cr.Wait.Until) {
			return false
		}
		reason := cr.Wait.Reason
		if reason == ReasonErrImagePull {
			reason = ReasonImagePullBackOff
		}
		p.Waiting[c.Name] = v1.ContainerStateWaiting{Reason: reason, Message: cr.Wait.Message}
		if p.NextSync.IsZero() || cr.Wait.Until.Before(p.NextSync) {
			p.NextSync = cr.Wait.Until
		}
		return true
	}
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
		if held(c) {
			return
		}
		p.Start = append(p.Start, startAction{Container: c.Name, Init: init, N: cur.N + 1})
	}
	start := func(c *v1.Container, init bool) {
		if held(c) {
			return
		}
		p.Start = append(p.Start, startAction{Container: c.Name, Init: init, N: 1})
	}

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

// ContainerID is the status containerID of a CRI container, as the kubelet writes it for
// containerd: containerd://<id>.
func ContainerID(id string) string { return "containerd://" + id }

func terminated(in *instance) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    in.ExitCode,
		Reason:      in.Reason,
		Message:     in.Message,
		StartedAt:   metav1.NewTime(in.StartedAt),
		FinishedAt:  metav1.NewTime(in.FinishedAt),
		ContainerID: ContainerID(in.ID),
	}
}

// containerStatus builds one container's status; waitReason is the reason of a container that
// has not run yet.
func containerStatus(c *v1.Container, cr *containerRecord, p plan, waitReason string) v1.ContainerStatus {
	started := false
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &started}
	if w, ok := p.Waiting[c.Name]; ok && stateOf(cr) == stateNone {
		cs.State.Waiting = &w
		return cs
	}
	if cr == nil || cr.Current == nil {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		return cs
	}
	cur := cr.Current
	cs.RestartCount = int32(cur.N - 1)
	cs.ImageID = cur.ImageRef
	if prev := cr.Previous; prev != nil && prev.Done {
		cs.LastTerminationState.Terminated = terminated(prev)
	}
	cs.ContainerID = ContainerID(cur.ID)
	switch stateOf(cr) {
	case stateStarting:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
	case stateRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		cs.Ready, started = true, true
	case stateExited:
		if w, ok := p.Waiting[c.Name]; ok {
			cs.State.Waiting = &w
			cs.LastTerminationState.Terminated = terminated(cur)
		} else {
			cs.State.Terminated = terminated(cur)
		}
	}
	return cs
}

// buildStatus derives the pod's status from the record and the plan (the systemd runtime's
// rules: phase, conditions, container statuses).
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

// podPhase is the kubelet's getPhase (see the systemd runtime's podPhase).
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
