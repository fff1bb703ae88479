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

// view is the record as lifecycle's decisions see it.
func (p *podRecord) view() *lifecycle.Pod {
	obs := &lifecycle.Pod{StartTime: p.StartTime, Initialized: p.Initialized, Images: true, Containers: make(map[string]*lifecycle.Container, len(p.Containers))}
	for name, cr := range p.Containers {
		c := &lifecycle.Container{Backoff: cr.Backoff, BackoffUpdated: cr.BackoffUpdated}
		if cur := cr.Current; cur != nil {
			c.State, c.Current = cur.state(), cur.view()
		}
		if prev := cr.Previous; prev != nil && prev.Done {
			c.Previous = prev.view()
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
	return lifecycle.Decide(pod, rec.view(), now, b, killed)
}

// buildStatus is lifecycle.PodStatus on the record.
func buildStatus(pod *v1.Pod, rec *podRecord, p lifecycle.Plan) v1.PodStatus {
	return lifecycle.PodStatus(pod, rec.view(), p)
}

// ContainerID is the status containerID of a CRI container, as the kubelet writes it for
// containerd: containerd://<id>.
func ContainerID(id string) string { return "containerd://" + id }
