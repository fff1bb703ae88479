// Package gc is image and container garbage collection with the kubelet's rules
// (pkg/kubelet/images/image_gc_manager.go, pkg/kubelet/kuberuntime/kuberuntime_gc.go).
//
// The planners (PlanImageGC, PlanDeleteUnusedImages, Detect, PlanContainerGC, PlanSandboxGC,
// PlanLogDirGC) are decisions without I/O, in the shape of containerd's pkg/gc: the caller
// passes the images, containers, sandboxes and image filesystem in with the policy and the
// time, and gets back a plan — what to remove, in which order, and why everything else stays.
//
// The Collector executes plans against a runtime through two small interfaces declared here,
// ImageRuntime (the CRI runtime) and ContainerRuntime (CRI and the built-in systemd runtime),
// keeps the images' first-detected and last-used records in a JSON file across restarts, and
// reports what really happened: what was removed, what failed, and — beyond the kubelet — the
// space really freed, measured once the runtime's image filesystem numbers are newer than the
// last deletion.
package gc
