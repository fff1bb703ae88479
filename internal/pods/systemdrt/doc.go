// Package systemdrt is slicelet's built-in container runtime: a worker.Runtime that runs every
// container of a pod as a transient systemd service inside the pod's slice. It has no
// lifecycle logic: the pod worker (package worker) decides what starts, restarts and stops,
// and builds each container's configuration; this package maps the worker's CRI-shaped calls
// to systemd and keeps what systemd forgets.
//
// # Sandboxes and containers
//
// A sandbox is the pod slice (the controller creates it) plus the runtime's record of the pod;
// its ID is the pod UID (<uid>.<attempt> for a later one). A container run is one unit,
// slicelet-<uid>-<container>-<n>.service (UnitName), where the pod UID and the container name
// have '-' replaced by '_' (neither may contain '_', so the mapping is reversible) and n is the
// run's restart count + 1; its ID is the unit name. CreateContainer records the run with its
// configuration; StartContainer starts its unit. A run created but not started (slicelet
// stopped in between) is listed created and started by the next slicelet under the same name;
// a unit found without a run (slicelet stopped before recording it, or the state dir was lost)
// is adopted. So a running container is never started twice.
//
// Services have Type=exec, RemainAfterExit=yes and Restart=no: a main process that exits
// successfully leaves its unit active ("exited") instead of being garbage-collected at once, so
// its exit status is still readable when slicelet was not running at that moment.
// ContainerStatus records the final state (exit code, signal, reason, times; OOMKilled from
// systemd's oom-kill result, inferred on cgroup v1) and then stops the unit, which kills what
// the main process left behind, as the kernel does for a container's PID namespace. Of a
// container's dead runs the record keeps the latest; older failed units are reset, so systemd
// does not keep them loaded. StopContainer signals the unit's processes with the container's
// stop signal and SIGKILL after the grace period, because a unit stopped by systemd after a
// clean SIGTERM would be garbage-collected with its exit status. ExecSync runs a command as a
// transient service next to the run, with its environment, user and mounts.
//
// # State
//
// StateDir/pods/<uid>/state.json holds the pod's sandboxes and runs, written atomically (temp
// file, fsync, rename, fsync of the directory) before systemd hears of a run. The directory is
// shared with the pod worker (its record and the pod's emptyDir volumes). A record of the
// previous format (version 1) is read and converted.
//
// # Logs
//
// Logs runs journalctl(1) (--output=json, _SYSTEMD_UNIT=<unit>) instead of linking
// sd-journal through cgo: the journal's file format is systemd's business, and journalctl is
// installed wherever systemd is. Lines are told apart from those of an earlier unit of the same
// name by invocation ID, or, where journald could not record one, by time. Journal entries are
// journald's to rotate: the output of a run container GC removed stays readable.
package systemdrt
