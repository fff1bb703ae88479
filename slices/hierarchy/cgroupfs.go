package hierarchy

import (
	"fmt"
	"strconv"
	"time"
)

// Cgroupfs is what the slice manager needs from the cgroup filesystem, beyond what systemd
// does: reading what is left after a stop, killing stragglers, and writing the knobs systemd
// has no property for (hugetlb limits). Paths are cgroup paths as systemd reports them in
// ControlGroup (e.g. "/kubepods.slice/kubepods-burstable.slice"), never filesystem paths.
type Cgroupfs interface {
	// Dirs returns the filesystem directories of the cgroup path in every mounted hierarchy that
	// has it (v2: one; hybrid: one per v1 controller plus name=systemd and unified).
	Dirs(cgroupPath string) []string
	// Pids returns every process in the cgroup and its descendants, across all hierarchies.
	Pids(cgroupPath string) ([]int, error)
	// Kill SIGKILLs every process left in the cgroup and its descendants, never one outside
	// it (a PID reused by another process is never signalled), and waits up to wait for them
	// to exit. It returns how many it signalled and the processes still running after the
	// wait (exited ones waiting to be reaped do not count).
	Kill(cgroupPath string, wait time.Duration) (KillResult, error)
	// Remove deletes the cgroup's directories depth-first, retrying briefly while the kernel
	// still holds them busy. A cgroup that does not exist is not an error.
	Remove(cgroupPath string) error
	// HasController reports whether the controller (e.g. "hugetlb") is usable.
	HasController(name string) bool
	// Write writes value to the controller's file of the cgroup (e.g. "hugetlb",
	// "hugetlb.2MB.limit_in_bytes").
	Write(cgroupPath, controller, file, value string) error
	// Read returns the trimmed contents of a controller file of the cgroup.
	Read(cgroupPath, controller, file string) (string, error)
}

// KillResult is what one Cgroupfs.Kill did.
type KillResult struct {
	// Signalled counts the processes that were sent SIGKILL (with cgroup.kill: those listed
	// when it was written).
	Signalled int
	// Left are the processes still running in the cgroup after the wait.
	Left []int
}

// ReadInt reads a controller file holding one integer; "max" reads as -1.
func ReadInt(c Cgroupfs, cgroupPath, controller, file string) (int64, error) {
	s, err := c.Read(cgroupPath, controller, file)
	if err != nil {
		return 0, err
	}
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s %s: value %q: %w", cgroupPath, file, s, err)
	}
	return v, nil
}
