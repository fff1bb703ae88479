package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Resize reasons of the PodResizePending condition (the kubelet's allocation manager).
const (
	// ReasonResizeInfeasible: the resize can never be done on this node.
	ReasonResizeInfeasible = "Infeasible"
	// ReasonResizeDeferred: the resize does not fit now, next to the other pods.
	ReasonResizeDeferred = "Deferred"
)

// resizable calls f on the containers whose resources may change in place: the regular
// containers and the sidecars (the kubelet's IsResizableContainer; regular init containers
// and ephemeral containers are not).
func resizable(pod *v1.Pod, f func(c *v1.Container)) {
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			f(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i])
	}
}

// Resizable reports whether the container of that name may be resized in place.
func Resizable(pod *v1.Pod, name string) bool {
	ok := false
	resizable(pod, func(c *v1.Container) { ok = ok || c.Name == name })
	return ok
}

// ResizeRequested reports whether want asks for other resources than allocated (the same pod,
// a newer version): a container's, or the pod-level resources.
func ResizeRequested(allocated, want *v1.Pod) bool {
	if !apiequality.Semantic.DeepEqual(allocated.Spec.Resources, want.Spec.Resources) {
		return true
	}
	changed := false
	resizable(want, func(c *v1.Container) {
		if old, _ := ContainerByName(allocated, c.Name); old != nil && !apiequality.Semantic.DeepEqual(old.Resources, c.Resources) {
			changed = true
		}
	})
	return changed
}

// ResizeRestarts are the containers whose resize needs a restart (resizePolicy
// RestartContainer for a resource that changes), "name (resource)", sorted.
func ResizeRestarts(allocated, want *v1.Pod) []string {
	var out []string
	resizable(want, func(c *v1.Container) {
		old, _ := ContainerByName(allocated, c.Name)
		if old == nil {
			return
		}
		for _, p := range c.ResizePolicy {
			if p.RestartPolicy != v1.RestartContainer {
				continue
			}
			r := p.ResourceName
			if !old.Resources.Requests[r].Equal(c.Resources.Requests[r]) || !old.Resources.Limits[r].Equal(c.Resources.Limits[r]) {
				out = append(out, fmt.Sprintf("%s (%s)", c.Name, r))
			}
		}
	})
	slices.Sort(out)
	return out
}

// WithAllocatedResources is want with the resources of allocated: the pod a resize that is not
// done yet leaves running (the kubelet's allocated pod).
func WithAllocatedResources(want, allocated *v1.Pod) *v1.Pod {
	out := want.DeepCopy()
	out.Spec.Resources = allocated.Spec.Resources.DeepCopy()
	resizable(out, func(c *v1.Container) {
		if old, _ := ContainerByName(allocated, c.Name); old != nil {
			c.Resources = *old.Resources.DeepCopy()
		}
	})
	return out
}

// ResizeRestartMessage is the PodResizePending message of a resize that needs restarts.
func ResizeRestartMessage(restarts []string) string {
	return "resizePolicy RestartContainer is not implemented by slicelet yet: " + strings.Join(restarts, ", ")
}
