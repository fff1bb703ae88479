package lifecycle

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// State is where a container's latest instance stands.
type State int

const (
	// StateNone: no instance, or one that was recorded but never created (it is started
	// again under the same number).
	StateNone State = iota
	// StateStarting: created, its process not seen running yet.
	StateStarting
	// StateRunning: its process runs.
	StateRunning
	// StateExited: it ended, or can no longer run.
	StateExited
)

// Instance is one run of a container, as its status shows it.
type Instance struct {
	// N counts the container's runs from 1 (restart count + 1).
	N int
	// ContainerID is the status containerID, <runtime>://<id>.
	ContainerID string
	// ImageID is the status imageID; empty for a runtime without images.
	ImageID string
	// StartedAt is when its process started; FinishedAt when it ended.
	StartedAt  time.Time
	FinishedAt time.Time
	// ExitCode, Signal, Reason and Message are its final state once it ended.
	ExitCode int32
	Signal   int32
	Reason   string
	Message  string
}

// Hold keeps a container from starting until Until: its last start attempt failed before an
// instance existed (image pull, create), and it is retried with back-off (the kubelet's
// ErrImagePull/ImagePullBackOff and CreateContainerError).
type Hold struct {
	// Reason and Message are the waiting state shown meanwhile; ReasonErrImagePull shows as
	// ReasonImagePullBackOff, as the kubelet does once the pull is being backed off.
	Reason  string
	Message string
	// Until is when the next attempt may run.
	Until time.Time
}

// Container is what a runtime observed of one container of a pod.
type Container struct {
	// State is where Current stands; StateNone when Current is nil.
	State State
	// Current is the latest instance, nil when there is none.
	Current *Instance
	// Previous is the instance before Current when it ended; nil otherwise.
	Previous *Instance
	// Backoff and BackoffUpdated are the kubelet's restart back-off entry (flowcontrol.Backoff):
	// the current delay and the exit time it was last advanced for.
	Backoff        time.Duration
	BackoffUpdated time.Time
	// Hold holds the container back after a failed pull or create; nil when none.
	Hold *Hold
	// DefinitionChanged: Current was stopped because the container's definition (its image)
	// changed; it starts again whatever the restart policy.
	DefinitionChanged bool
	// NotStarted and NotReady are the probes' verdicts on a running Current (the kubelet's
	// prober manager): its startup probe has not succeeded yet; its readiness probe has not
	// succeeded (or it is not started). Both false: started and ready, as without probes.
	NotStarted, NotReady bool
}

// Pod is what a runtime observed of a pod: the decisions' input besides the spec.
type Pod struct {
	// StartTime is when the runtime first saw the pod; zero when unknown.
	StartTime time.Time
	// Initialized is set once every regular init container has succeeded (or a regular
	// container was created): the kubelet never runs them again for the same pod.
	Initialized bool
	// Images says that the runtime runs images: container statuses name the spec's image.
	Images bool
	// SandboxReady says the pod has a ready sandbox (its network set up): containers can
	// start without a new one.
	SandboxReady bool
	// Containers are the containers the runtime knows about, by name; a container of the spec
	// that is missing has never run.
	Containers map[string]*Container
}

// state is where the container stands; a nil container has never run.
func (c *Container) state() State {
	if c == nil || c.Current == nil {
		return StateNone
	}
	return c.State
}

// StartAction starts instance N of a container.
type StartAction struct {
	// Container is the container's name.
	Container string
	// Init is set for an init container (regular or sidecar).
	Init bool
	// N is the number of the instance to start.
	N int
}

// Plan is what a sync must do now, and what the status says about waiting containers. Decide
// computes it from the spec and the observed pod alone.
type Plan struct {
	// Start are the instances to start, in order.
	Start []StartAction
	// StopSidecars are running restartable init containers to stop: the pod's regular
	// containers have all ended for good, or a regular init container failed for good.
	StopSidecars []string
	// Waiting holds the waiting state of containers held back (back-off, failed pull or
	// create), by name.
	Waiting map[string]v1.ContainerStateWaiting
	// NextSync is the earliest end of a back-off or hold, zero when none.
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

// Decide computes the plan with the kubelet's rules (computePodActions and its init container
// part): regular init containers run one at a time, in order, each to success (a failure is
// retried with back-off unless restartPolicy is Never, which fails the pod); restartable init
// containers start in order and the next init container waits until they run; the regular
// containers all start once initialization is done and restart per restartPolicy; sidecars
// restart whenever they exit, until every regular container has ended for good, when they are
// stopped; ephemeral containers start once, whatever the initialization, until the pod is done.
// A container with a Hold waits until it ends. killed is set for a pod being stopped: nothing
// is started.
func Decide(pod *v1.Pod, obs *Pod, now time.Time, b Backoff, killed bool) Plan {
	p := Plan{Waiting: map[string]v1.ContainerStateWaiting{}}
	policy := RestartPolicy(pod)

	held := func(c *v1.Container) bool {
		cr := obs.Containers[c.Name]
		if cr == nil || cr.Hold == nil || !now.Before(cr.Hold.Until) {
			return false
		}
		reason := cr.Hold.Reason
		if reason == ReasonErrImagePull {
			reason = ReasonImagePullBackOff
		}
		p.Waiting[c.Name] = v1.ContainerStateWaiting{Reason: reason, Message: cr.Hold.Message}
		if p.NextSync.IsZero() || cr.Hold.Until.Before(p.NextSync) {
			p.NextSync = cr.Hold.Until
		}
		return true
	}
	restart := func(c *v1.Container, init bool) {
		cr := obs.Containers[c.Name]
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
		p.Start = append(p.Start, StartAction{Container: c.Name, Init: init, N: cur.N + 1})
	}
	start := func(c *v1.Container, init bool) {
		if held(c) {
			return
		}
		n := 1
		if cr := obs.Containers[c.Name]; cr != nil && cr.Current != nil {
			n = cr.Current.N // recorded but never created: the same instance
		}
		p.Start = append(p.Start, StartAction{Container: c.Name, Init: init, N: n})
	}

	// Have the regular containers ended for good?
	appsDone := len(pod.Spec.Containers) > 0
	for i := range pod.Spec.Containers {
		cr := obs.Containers[pod.Spec.Containers[i].Name]
		if cr.state() != StateExited || ShouldRestart(policy, cr.Current.ExitCode) || cr.DefinitionChanged {
			appsDone = false
			break
		}
	}

	blocked := false
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := obs.Containers[c.Name]
		st := cr.state()
		if IsSidecar(c) {
			switch {
			case blocked || p.InitFailed:
			case st == StateNone:
				if !appsDone {
					start(c, true)
				}
				blocked = true
			case st == StateStarting:
				blocked = true
			case st == StateRunning:
				if appsDone {
					p.StopSidecars = append(p.StopSidecars, c.Name)
				}
			case st == StateExited:
				if !appsDone {
					restart(c, true)
				}
			}
			continue
		}
		if obs.Initialized || blocked || p.InitFailed {
			continue
		}
		switch st {
		case StateNone:
			start(c, true)
			blocked = true
		case StateStarting, StateRunning:
			blocked = true
		case StateExited:
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
	p.Initialized = obs.Initialized || (!blocked && !p.InitFailed)

	if p.InitFailed {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if IsSidecar(c) && obs.Containers[c.Name].state() == StateRunning {
				p.StopSidecars = append(p.StopSidecars, c.Name)
			}
		}
	}
	if p.Initialized && !p.InitFailed {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			cr := obs.Containers[c.Name]
			switch cr.state() {
			case StateNone:
				start(c, false)
			case StateExited:
				if ShouldRestart(policy, cr.Current.ExitCode) || cr.DefinitionChanged {
					restart(c, false)
				}
			}
		}
	}
	p.Done = p.InitFailed || appsDone
	if !p.Done {
		// Ephemeral containers start once, initialized or not, and never restart
		// (kuberuntime_manager.go computePodActions).
		for i := range pod.Spec.EphemeralContainers {
			c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			if obs.Containers[c.Name].state() == StateNone {
				start(c, false)
			}
		}
	}
	if killed {
		p.Start, p.StopSidecars, p.NextSync, p.Killed = nil, nil, time.Time{}, true
		clear(p.Waiting)
	}
	return p
}
