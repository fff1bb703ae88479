package crirt

import (
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
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
	// Stale marks an init container whose Current ended in a sandbox other than the one the
	// pod runs in (or gets) now: the pod started over in a new sandbox, so the container runs
	// again, as instance Current.N+1, without back-off (the kubelet purges the init
	// containers of the old sandbox, so none is found to back off from).
	Stale bool
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

// state is where an instance stands.
func (in *instance) state() lifecycle.State {
	switch {
	case in.Done:
		return lifecycle.StateExited
	case in.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		return lifecycle.StateRunning
	}
	return lifecycle.StateStarting // created (or unknown), not seen running
}

// view is an instance as lifecycle sees it.
func (in *instance) view() *lifecycle.Instance {
	return &lifecycle.Instance{
		N:           in.N,
		ContainerID: ContainerID(in.ID),
		ImageID:     in.ImageRef,
		StartedAt:   in.StartedAt,
		FinishedAt:  in.FinishedAt,
		ExitCode:    in.ExitCode,
		Reason:      in.Reason,
		Message:     in.Message,
	}
}

// view is the record as lifecycle sees it. For the decisions (decisions set), a stale init
// container shows as its next instance, recorded but not created yet, so that Decide starts it
// in order under the next number; for the status it shows its last instance, as the kubelet
// keeps showing the terminated state of a purged init container until it runs again.
func (p *podRecord) view(decisions bool) *lifecycle.Pod {
	obs := &lifecycle.Pod{StartTime: p.StartTime, Initialized: p.Initialized, Images: true, Containers: make(map[string]*lifecycle.Container, len(p.Containers))}
	for name, cr := range p.Containers {
		c := &lifecycle.Container{Backoff: cr.Backoff, BackoffUpdated: cr.BackoffUpdated}
		if cur := cr.Current; cur != nil {
			c.State, c.Current = cur.state(), cur.view()
		}
		if prev := cr.Previous; prev != nil && prev.Done {
			c.Previous = prev.view()
		}
		if cur := cr.Current; cur != nil && cr.Stale && decisions {
			c.State, c.Current, c.Previous = lifecycle.StateNone, &lifecycle.Instance{N: cur.N + 1}, cur.view()
		}
		if w := cr.Wait; w != nil {
			c.Hold = &lifecycle.Hold{Reason: w.Reason, Message: w.Message, Until: w.Until}
		}
		obs.Containers[name] = c
	}
	return obs
}

// decide is lifecycle.Decide on the record.
func decide(pod *v1.Pod, rec *podRecord, now time.Time, b lifecycle.Backoff, killed bool) lifecycle.Plan {
	return lifecycle.Decide(pod, rec.view(true), now, b, killed)
}

// buildStatus is lifecycle.PodStatus on the record.
func buildStatus(pod *v1.Pod, rec *podRecord, p lifecycle.Plan) v1.PodStatus {
	return lifecycle.PodStatus(pod, rec.view(false), p)
}

// startsOver is the kubelet's computePodActions for a pod without a ready sandbox: whether it
// gets a new one (hadSandbox: it had one before), in which it starts over — every init
// container runs again, in order, before the regular containers. It gets none under
// restartPolicy Never once it had a sandbox and a container was created, nor when no regular
// container would start again (under OnFailure, those that succeeded are not) and
// initialization was done (a regular container was created).
func startsOver(pod *v1.Pod, rec *podRecord, hadSandbox bool) bool {
	created := func(name string) bool {
		cr := rec.Containers[name]
		return cr != nil && cr.Current != nil
	}
	policy := lifecycle.RestartPolicy(pod)
	if hadSandbox && policy == v1.RestartPolicyNever {
		for name := range rec.Containers {
			if created(name) {
				return false
			}
		}
	}
	for i := range pod.Spec.Containers {
		name := pod.Spec.Containers[i].Name
		succeeded := created(name) && rec.Containers[name].Current.Done && rec.Containers[name].Current.ExitCode == 0
		if policy != v1.RestartPolicyOnFailure || !succeeded {
			return true
		}
	}
	// Every regular container succeeded under OnFailure: they were created, so initialization
	// was done, and none starts again.
	return len(pod.Spec.Containers) == 0
}

// ContainerID is the status containerID of a CRI container, as the kubelet writes it for
// containerd: containerd://<id>.
func ContainerID(id string) string { return "containerd://" + id }
