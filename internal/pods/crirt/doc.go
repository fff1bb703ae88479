// Package crirt is slicelet's CRI runtime: a worker.Runtime and worker.ImageService over a
// container runtime's CRI endpoint (k8s.io/cri-api runtime v1 over gRPC on a unix socket;
// containerd in practice), and the image side of GC (gc.ImageRuntime). It has no lifecycle
// logic: the pod worker (package worker) builds the sandbox and container configurations and
// decides what runs; each call here is the CRI call, on what slicelet created (the
// slicelet.io/managed label) and, for a pod slicelet runs, on what the kubelet created for it.
//
// # Pods, sandboxes and containers
//
// A pod is one pod sandbox whose linux.cgroup_parent is the pod's slice (systemd cgroup driver:
// the slice name, so the runtime puts each container in cri-containerd-<id>.scope under it),
// and one CRI container per run of each of its containers, with the kubelet's labels and
// annotations. Everything about a pod is rebuilt from the runtime at every sync, so a restarted
// slicelet adopts what runs — and so does a slicelet started on a node the kubelet ran: the
// kubelet's sandboxes and containers carry the same labels (io.kubernetes.pod.uid,
// io.kubernetes.container.name, the attempt as restart count) less slicelet's mark, and those
// of a pod slicelet runs (the same UID) are listed as the pod's and kept running. Sandboxes
// and containers of pods slicelet does not know are listed only when they bear its mark. A pod whose sandbox is no longer ready gets a new one from the
// worker, as with the kubelet's computePodActions.
//
// # Logs
//
// The runtime's containers write their output to LogRoot/<ns>_<name>_<uid>/<container>/<n>.log
// (n = restart count) in the CRI log format: RunPodSandbox and CreateContainer fill in the log
// directory and path. Logs reads those files and writes plain lines, also while the runtime is
// down; RemoveContainer removes a container's file, RemovePodSandbox the pod's directory with
// its last sandbox.
//
// # Runtime down
//
// The endpoint is probed (Version) with exponential back-off until it answers, and again
// whenever a call fails with gRPC Unavailable. While it is down every call fails with an error
// that wraps pods.ErrRuntimeUnavailable and names the endpoint: the controller reports the pods
// Unknown and deletes nothing, and resyncs them when the runtime answers again.
package crirt
