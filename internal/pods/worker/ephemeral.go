package worker

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// ephemeralRefusals are what slicelet cannot do of the ephemeral container c (index i of
// spec.ephemeralContainers), with its field paths: the registry's refusals of a container's
// fields for a pod from the API server, the only source of ephemeral containers
// (podfields.RefusalsFrom), and targetContainerName (sharing a container's process namespace).
// An ephemeral container is added to a running pod: what it asks for holds that container back
// (CreateContainerConfigError with these paths), never the pod.
func ephemeralRefusals(c *v1.Container, i int) field.ErrorList {
	ep := field.NewPath("spec", "ephemeralContainers").Index(i)
	var out field.ErrorList
	for _, e := range podfields.RefusalsFrom(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}}}, podfields.APIServer) {
		rest, ok := strings.CutPrefix(e.Field, "spec.containers[0].")
		if !ok {
			continue
		}
		e.Field = ep.String() + "." + rest
		out = append(out, e)
	}
	return out
}

// ephemeralHold is the reason an ephemeral container of pod cannot start, "" when it can (or
// name is not an ephemeral container).
func ephemeralHold(pod *v1.Pod, name string) string {
	c, i := lifecycle.EphemeralContainer(pod, name)
	if c == nil {
		return ""
	}
	errs := ephemeralRefusals(c, i)
	if t := pod.Spec.EphemeralContainers[i].TargetContainerName; t != "" {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "ephemeralContainers").Index(i).Child("targetContainerName"),
			fmt.Sprintf("sharing the process namespace of container %q is not implemented by slicelet yet", t)))
	}
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}
