// Package gc plans image and container garbage collection with the kubelet's rules
// (pkg/kubelet/images/image_gc_manager.go, pkg/kubelet/kuberuntime/kuberuntime_gc.go; spec
// ../shared/spec/kubelet.md §4 and §5).
//
// Everything here is a decision without I/O, in the shape of containerd's pkg/gc: the caller
// lists images, containers, sandboxes and the image filesystem, passes them in with the policy
// and the time, and gets back a plan — what to remove, in which order, and why everything else
// stays. Executing a plan (CRI RemoveImage, StopContainer, RemoveContainer, systemd units) and
// persisting image records belong to the caller.
package gc
