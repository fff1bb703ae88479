// Package worker is slicelet's pod worker: the kubelet's kuberuntime manager (SyncPod with
// computePodActions, KillPod, the PLEG's relist) over a small CRI-shaped Runtime that it
// declares. It owns everything about a pod's lifecycle once, for every runtime: desired against
// observed state, init / sidecar (restartable init) / app ordering, restart policy and the
// kubelet's back-off, holds after a failed pull or create, container statuses and the pod's
// phase and conditions (package lifecycle's rules), termination with grace (stop signal, grace,
// SIGKILL; sidecars last), exit and OOM reasons, sandbox re-creation, volume preparation, env
// expansion and the CRI configurations, the kubelet's container events, and the bookkeeping
// that survives a restart of slicelet and container GC.
//
// A Runtime only creates, starts, stops, removes, lists and inspects sandboxes and containers,
// reads logs and runs commands in containers: systemdrt maps these calls to transient units in
// the pod slice, crirt to a CRI endpoint. What a runtime cannot run it says in Validate.
//
// # State
//
// Everything about a pod is rebuilt from the runtime at every sync: the current run of a
// container is its container with the highest attempt, so a restarted slicelet adopts what runs
// and never starts a duplicate (a container created but never started is started, not created
// again). StateDir/pods/<uid>/worker.json keeps what the runtime does not: the restart back-off,
// the sandbox in which the init containers are done, and each container's last run that ended,
// so that restart counts, last termination states and the restart policy's verdict survive
// container GC. emptyDir volumes live in StateDir/pods/<uid>/volumes/<name>.
package worker
