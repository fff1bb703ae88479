// Package lifecycle holds the kubelet's container lifecycle rules, pure, as the pod worker
// (package worker) applies them for every runtime:
//
//   - which containers start or restart now (Decide: init containers in order, sidecars,
//     restart policies, the restart Backoff, holds after a failed pull or create);
//   - the pod's status (PodStatus, ContainerStatus, PodPhase) and the kubelet's reasons;
//   - $(VAR) expansion of env values, commands and args (Expand);
//   - a container's cgroup values (ContainerResources) and the spec's defaults (RestartPolicy,
//     GracePeriod, RunAsUser, RunAsGroup, IsSidecar, ContainerByName);
//   - the preparation of a pod's volumes on the host (PrepareVolumes, PrepareHostPath).
//
// Everything except the volume helpers is pure: the worker describes what it observed as a Pod
// (one Container per container it knows about) and gets data back; starting, stopping and
// recording are the worker's. The volume helpers create and check only the directories and
// files that the pod's spec and the runtime's callback name.
package lifecycle
