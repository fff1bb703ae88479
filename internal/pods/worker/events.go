package worker

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records events about pods and their containers: the Eventf of client-go's
// record.EventRecorder (the kubelet's recorder), which satisfies it. It is declared here, the
// one method the worker calls, so that the worker links no more of client-go than its caller
// chooses to.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Event reasons, the kubelet's (pkg/kubelet/events/event.go).
const (
	EventCreated           = "Created"
	EventStarted           = "Started"
	EventFailed            = "Failed"
	EventKilling           = "Killing"
	EventBackOff           = "BackOff"
	EventPulling           = "Pulling"
	EventPulled            = "Pulled"
	EventErrImageNeverPull = "ErrImageNeverPull"
	EventSandboxChanged    = "SandboxChanged"
	// EventFailedCreatePodSandBox: the sandbox could not be created (its RuntimeClass
	// unknown, the runtime's refusal).
	EventFailedCreatePodSandBox = "FailedCreatePodSandBox"
)

// The kubelet's messages of a container created and started (pkg/kubelet/kuberuntime/
// kuberuntime_container.go startContainer, v1.37): the event's field path names the container.
const (
	messageCreated = "Container created"
	messageStarted = "Container started"
)

// containerRef is the reference of a pod's container as the kubelet's events carry it
// (kubecontainer.GenerateContainerRef): the pod, with the container's field path; for a
// container that is not in the spec, the pod alone.
func containerRef(pod *v1.Pod, container string) *v1.ObjectReference {
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", container)
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			ref.FieldPath = fmt.Sprintf("spec.containers{%s}", container)
		}
	}
	return ref
}

// containerEvent records an event about a container of the pod. Pods without a name (orphans
// found in the runtime) get none: there is nothing to attach it to.
func (w *Worker) containerEvent(pod *v1.Pod, container, eventType, reason, format string, args ...any) {
	if pod.Name == "" {
		return
	}
	w.events.Eventf(containerRef(pod, container), eventType, reason, format, args...)
}

// podEvent records an event about the pod.
func (w *Worker) podEvent(pod *v1.Pod, eventType, reason, format string, args ...any) {
	if pod.Name == "" {
		return
	}
	w.events.Eventf(containerRef(pod, ""), eventType, reason, format, args...)
}
