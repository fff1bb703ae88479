package lifecycle

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// DefaultGracePeriod is terminationGracePeriodSeconds' default.
const DefaultGracePeriod = 30 * time.Second

// RestartPolicy is the pod's restartPolicy, Always when unset (the API default).
func RestartPolicy(pod *v1.Pod) v1.RestartPolicy {
	if pod.Spec.RestartPolicy == "" {
		return v1.RestartPolicyAlways
	}
	return pod.Spec.RestartPolicy
}

// ShouldRestart reports whether a regular container that exited with code restarts under
// policy: never under Never, on failure only under OnFailure, always under Always.
func ShouldRestart(policy v1.RestartPolicy, code int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// IsSidecar reports whether c is a restartable init container (restartPolicy Always).
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// ContainerByName finds a container of the pod, init or regular, and reports whether it is an
// init container; nil when the pod has none of that name.
func ContainerByName(pod *v1.Pod, name string) (*v1.Container, bool) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], true
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	if c, _ := EphemeralContainer(pod, name); c != nil {
		return c, false
	}
	return nil, false
}

// EphemeralContainer is the ephemeral container of that name as a container (the kubelet's
// conversion: the two share their fields) and its index; nil when there is none.
func EphemeralContainer(pod *v1.Pod, name string) (*v1.Container, int) {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), i
		}
	}
	return nil, -1
}

// GracePeriod is the pod's terminationGracePeriodSeconds, DefaultGracePeriod when unset (or
// negative, which validation rejects).
func GracePeriod(pod *v1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		return time.Duration(*g) * time.Second
	}
	return DefaultGracePeriod
}

// RunAsUser is the container's securityContext.runAsUser, else the pod's, else nil.
func RunAsUser(pod *v1.Pod, c *v1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return nil
}

// RunAsGroup is the container's securityContext.runAsGroup, else the pod's, else nil.
func RunAsGroup(pod *v1.Pod, c *v1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsGroup != nil {
		return c.SecurityContext.RunAsGroup
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsGroup
	}
	return nil
}
