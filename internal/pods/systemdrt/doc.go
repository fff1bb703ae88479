// Package systemdrt is slicelet's built-in container runtime: every container of a pod runs as a
// transient systemd service inside the pod's slice, with the kubelet's semantics for init
// containers, sidecars, restart policies, back-off, pod phase and container statuses (package
// lifecycle's rules, shared with the CRI runtime).
//
// # Units
//
// Each run of a container is one unit, slicelet-<uid>-<container>-<n>.service (UnitName), where
// the pod UID and the container name have '-' replaced by '_' (neither may contain '_', so the
// mapping is reversible) and n counts the container's runs from 1. A restart is a new unit
// n+1; the dead unit n stays loaded while it is failed (systemd keeps failed units) until the
// next restart after it, so `systemctl status` shows the last dead instance, and its output
// stays in the journal under _SYSTEMD_UNIT=<unit>.
//
// Services have RemainAfterExit=yes and Restart=no: a main process that exits successfully
// leaves its unit active ("exited") instead of being garbage-collected at once, so its exit
// status is still readable when slicelet was not running at that moment. SyncPod records the
// final state (exit code, signal, reason, times) in the state directory and then stops the
// unit, which kills what the main process left behind, as the kernel does for a container's
// PID namespace. Restarts are the runtime's own, with the kubelet's back-off.
//
// # State
//
// StateDir/pods/<uid>/state.json holds each container's current and previous instance and its
// back-off, written atomically (temp file, fsync, rename, fsync of the directory). The runtime
// writes the instance it is about to start before it asks systemd, so after a crash at any
// point it finds either the unit (and adopts it) or no unit and an instance that never ran (and
// starts it under the same name): it never starts a second instance of a running container.
// emptyDir volumes live in StateDir/pods/<uid>/volumes/<name>.
//
// # Garbage collection
//
// The runtime is a gc.ContainerRuntime (gc.go): ListContainers reports every instance, the
// unit name as its ID, and RemoveContainer resets a dead instance's unit and marks it removed in
// the record (the instance stays there for restart count, back-off and last state), refusing
// a running one. Journal entries are journald's to rotate, so logs of removed instances stay
// readable. There are no images and no sandboxes.
//
// # Logs
//
// Logs runs journalctl(1) (--output=json, _SYSTEMD_UNIT=<unit>) instead of linking
// sd-journal through cgo: the journal's file format is systemd's business, and journalctl is
// installed wherever systemd is. Lines are told apart from those of an earlier unit of the same
// name by invocation ID, or, where journald could not record one, by time.
package systemdrt
