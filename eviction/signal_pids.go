package eviction

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/procfs"
	"github.com/slicelet/slicelet/units"
)

// ReadPIDs observes pid.available: capacity = min(kernel.pid_max, kernel.threads-max) and
// available = capacity − the number of tasks. The kubelet counts tasks with sysinfo(2)'s
// procs, which is the kernel's nr_threads; /proc/loadavg's fourth field ("running/total")
// carries the same number and, unlike a syscall, can be read from an injected procfs root.
func ReadPIDs(procRoot string, now time.Time) (Observation, error) {
	capacity, err := procfs.PIDLimit(procRoot)
	if err != nil {
		return Observation{}, fmt.Errorf("pid capacity: %w", procfsError(err))
	}
	tasks, err := procfs.Tasks(procRoot)
	if err != nil {
		return Observation{}, fmt.Errorf("task count: %w", procfsError(err))
	}
	return newObservation(capacity-tasks, capacity, resource.DecimalSI, now), nil
}

// ReadPodProcesses returns the number of tasks in a pod's cgroup (podCgroupPath, e.g.
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice"): pids.current
// of the pids controller, or, where the controller is missing, the lines of cgroup.procs of
// the cgroup and its descendants.
func ReadPodProcesses(cgroupRoot string, mode units.Mode, podCgroupPath string) (int64, error) {
	dir, err := controllerDir(cgroupRoot, mode, "pids", podCgroupPath)
	if err != nil {
		return 0, err
	}
	n, err := readUint(filepath.Join(dir, "pids.current"))
	if err == nil {
		return n, nil
	}
	// No pids controller: count the processes of the whole subtree. On v1 the memory
	// hierarchy is always there for a pod slice.
	if dir, err = controllerDir(cgroupRoot, mode, "memory", podCgroupPath); err != nil {
		return 0, err
	}
	var count int64
	found := false
	walkErr := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = true
		count += int64(len(strings.Fields(string(b))))
		return nil
	})
	if walkErr != nil || !found {
		return 0, fmt.Errorf("processes of %s: no pids.current or cgroup.procs: %w", podCgroupPath, ErrUnavailable)
	}
	return count, nil
}
