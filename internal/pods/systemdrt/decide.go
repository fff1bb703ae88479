package systemdrt

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// state is where an instance stands, from what systemd and the record say.
func (in *instance) state() lifecycle.State {
	switch {
	case in.Done:
		return lifecycle.StateExited
	case !in.Created:
		return lifecycle.StateNone // recorded but never created
	case in.StartedAt.IsZero():
		return lifecycle.StateStarting
	}
	return lifecycle.StateRunning
}

// view is an instance as lifecycle sees it.
func (in *instance) view() *lifecycle.Instance {
	return &lifecycle.Instance{
		N:           in.N,
		ContainerID: ContainerID(in.Unit),
		StartedAt:   in.StartedAt,
		FinishedAt:  in.FinishedAt,
		ExitCode:    in.ExitCode,
		Signal:      in.Signal,
		Reason:      in.Reason,
		Message:     in.Message,
	}
}

// view is the record as lifecycle's decisions see it.
func (p *podRecord) view() *lifecycle.Pod {
	obs := &lifecycle.Pod{StartTime: p.StartTime, Initialized: p.Initialized, Containers: make(map[string]*lifecycle.Container, len(p.Containers))}
	for name, cr := range p.Containers {
		c := &lifecycle.Container{Backoff: cr.Backoff, BackoffUpdated: cr.BackoffUpdated}
		if cur := cr.Current; cur != nil {
			c.State, c.Current = cur.state(), cur.view()
		}
		if prev := cr.Previous; prev != nil && prev.Done {
			c.Previous = prev.view()
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

// ContainerID is the status containerID of a unit: systemd://<unit>.
func ContainerID(unit string) string { return "systemd://" + unit }
