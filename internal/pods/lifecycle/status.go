package lifecycle

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/slices"
)

// PodStatus derives the pod's status from what the runtime observed and the plan: QoS class,
// start time, a status for every container of the spec (init containers first, ephemeral
// containers apart: they count neither for the phase nor for readiness), the phase (PodPhase)
// and the kubelet's conditions.
func PodStatus(pod *v1.Pod, obs *Pod, p Plan) v1.PodStatus {
	st := v1.PodStatus{QOSClass: slices.QOSClass(pod)}
	if !obs.StartTime.IsZero() {
		t := metav1.NewTime(obs.StartTime)
		st.StartTime = &t
	}
	var notInit, notReady []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := ContainerStatus(c, obs.Containers[c.Name], obs.Images, p, ReasonPodInitializing)
		if !IsSidecar(c) {
			// A regular init container is ready once it succeeded, not while it runs (the
			// kubelet's prober manager, UpdatePodStatus).
			t := cs.State.Terminated
			cs.Ready = t != nil && t.ExitCode == 0
		}
		if IsSidecar(c) {
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
		cs := ContainerStatus(c, obs.Containers[c.Name], obs.Images, p, wait)
		if !cs.Ready {
			notReady = append(notReady, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Phase = PodPhase(pod, st.ContainerStatuses, p)
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		cs := ContainerStatus(c, obs.Containers[c.Name], obs.Images, p, ReasonContainerCreating)
		// No probe looks at an ephemeral container: the kubelet's prober manager leaves its
		// started unset and its ready false.
		cs.Started, cs.Ready = nil, false
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
	}

	cond := func(t v1.PodConditionType, ok bool, reason, message string) v1.PodCondition {
		if ok {
			return v1.PodCondition{Type: t, Status: v1.ConditionTrue}
		}
		return v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: message}
	}
	initMsg := fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	readyReason, readyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	// A terminal pod's containers are not ready, with the phase's reason and no message
	// (pkg/kubelet/status/generate.go, generateContainersReadyConditionForTerminalPhase).
	switch st.Phase {
	case v1.PodSucceeded:
		readyReason, readyMsg = "PodCompleted", ""
	case v1.PodFailed:
		readyReason, readyMsg = "PodFailed", ""
	}
	ready := len(notReady) == 0 && st.Phase == v1.PodRunning
	initialized := cond(v1.PodInitialized, p.Initialized, "ContainersNotInitialized", initMsg)
	if st.Phase == v1.PodSucceeded {
		// GeneratePodInitializedCondition: a pod that completed was initialized.
		initialized = v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: "PodCompleted"}
	}
	st.Conditions = []v1.PodCondition{
		// True while a ready sandbox needs no replacement (the kubelet's
		// GeneratePodReadyToStartContainersCondition), with no reason either way.
		{Type: v1.PodReadyToStartContainers, Status: conditionStatus(obs.SandboxReady)},
		initialized,
		// Ready before ContainersReady, as the kubelet appends them (pkg/kubelet/kubelet_pods.go,
		// generateAPIPodStatus): the API shows a kubelet node's pods in this order.
		cond(v1.PodReady, ready, readyReason, readyMsg),
		cond(v1.ContainersReady, ready, readyReason, readyMsg),
		cond(v1.PodScheduled, true, "", ""),
	}
	return st
}

// terminated is the terminated state of an instance that ended.
func terminated(in *Instance) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    in.ExitCode,
		Signal:      in.Signal,
		Reason:      in.Reason,
		Message:     in.Message,
		StartedAt:   metav1.NewTime(in.StartedAt),
		FinishedAt:  metav1.NewTime(in.FinishedAt),
		ContainerID: in.ContainerID,
	}
}

// ContainerStatus builds the status of container c from what was observed of it (nil: never
// ran). images is Pod.Images; waitReason is the waiting reason of a container that has not run
// yet. A container held back (in p.Waiting) shows that waiting state; one in back-off also shows
// its dead instance as the last termination.
func ContainerStatus(c *v1.Container, cr *Container, images bool, p Plan, waitReason string) v1.ContainerStatus {
	started := false
	cs := v1.ContainerStatus{Name: c.Name, Started: &started}
	if images {
		cs.Image = c.Image
	}
	state := cr.state()
	if w, ok := p.Waiting[c.Name]; ok && state == StateNone {
		cs.State.Waiting = &w
		return cs
	}
	if cr == nil || cr.Current == nil {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		return cs
	}
	cur := cr.Current
	// The resources the container runs with, and the requests allocated to it: the spec's,
	// which the worker actuates in place on a resize (the kubelet's
	// convertContainerStatusResources, from its allocated pod).
	cs.Resources = c.Resources.DeepCopy()
	cs.AllocatedResources = c.Resources.Requests.DeepCopy()
	cs.RestartCount = int32(cur.N - 1)
	cs.ImageID = cur.ImageID
	if prev := cr.Previous; prev != nil {
		cs.LastTerminationState.Terminated = terminated(prev)
	}
	switch state {
	case StateNone:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
	case StateStarting:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
		cs.ContainerID = cur.ContainerID
	case StateRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		cs.ContainerID = cur.ContainerID
		started = !cr.NotStarted
		cs.Ready = started && !cr.NotReady
	case StateExited:
		cs.ContainerID = cur.ContainerID
		if w, ok := p.Waiting[c.Name]; ok {
			cs.State.Waiting = &w
			cs.LastTerminationState.Terminated = terminated(cur)
		} else {
			cs.State.Terminated = terminated(cur)
		}
	}
	return cs
}

// PodPhase is the kubelet's getPhase: Failed when an init container failed under
// restartPolicy Never; for a killed pod whose containers all ended, Succeeded if all exited 0,
// else Failed; Pending until initialization is done or while a regular container waits to run
// for the first time; Running while one runs (or, restartPolicy Always or OnFailure, will run
// again); Succeeded when all ended with 0; Failed when all ended and one failed under Never.
func PodPhase(pod *v1.Pod, statuses []v1.ContainerStatus, p Plan) v1.PodPhase {
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
		policy := RestartPolicy(pod)
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

// conditionStatus is True or False.
func conditionStatus(b bool) v1.ConditionStatus {
	if b {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}
