// Package crirt is slicelet's CRI runtime: a pods.Runtime that runs pods through a container
// runtime's CRI endpoint (k8s.io/cri-api runtime v1 over gRPC on a unix socket; containerd in
// practice), with the kubelet's semantics for init containers, sidecars, restart policies,
// back-off, pod phase and container statuses: package lifecycle's rules, the ones the built-in
// systemd runtime follows too.
//
// # Pods, sandboxes and containers
//
// A pod is one pod sandbox whose linux.cgroup_parent is the pod's slice (systemd cgroup driver:
// the slice name, so the runtime puts each container in cri-containerd-<id>.scope under it),
// host network unless Options.HostNetwork is false, and one CRI container per run of each of
// its containers. Sandboxes and containers carry the kubelet's labels (io.kubernetes.pod.uid,
// io.kubernetes.pod.name, io.kubernetes.pod.namespace, io.kubernetes.container.name) and the
// restart count in metadata.attempt and the io.kubernetes.container.restartCount annotation,
// plus slicelet.io/managed=true. Everything the runtime knows about a pod is rebuilt from the
// runtime itself on every sync, so a restarted slicelet adopts what runs and never starts a
// duplicate: the current instance of a container is its container with the highest attempt.
// Only the restart back-off is kept in StateDir (the kubelet keeps it in memory only and loses
// it on restart), with the pods' emptyDir volumes.
//
// A pod whose sandbox is no longer ready (it died, or was stopped behind slicelet's back) gets
// a new one, attempt = the highest so far + 1, and starts over in it as with the kubelet's
// computePodActions: its live containers are stopped, its init containers run again, in order,
// each to completion, before its regular containers restart; restart counts continue. Only
// instances in the current sandbox count towards initialization. Under restartPolicy Never once
// a container was created, or under OnFailure once every regular container succeeded, it gets
// no new sandbox and nothing runs again.
//
// # Logs
//
// The runtime writes each instance's output to LogRoot/<ns>_<name>_<uid>/<container>/<n>.log
// (n = restart count) in the CRI log format; Logs reads those files and writes plain lines.
//
// # Runtime down
//
// The endpoint is probed (Version) with exponential back-off until it answers, and again
// whenever a call fails with gRPC Unavailable. While it is down every call fails with an error
// that wraps pods.ErrRuntimeUnavailable and names the endpoint: the controller reports the pods
// Unknown and deletes nothing, and resyncs them when the runtime answers again.
package crirt
