package eviction

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/slicelet/slicelet/units"
)

// ReadCgroupCPU reads the CPU time a cgroup's tasks have used since it was created, as cAdvisor
// reads it for the kubelet's summary (usageCoreNanoSeconds): on cgroup v2 usage_usec of
// cpu.stat, on v1 cpuacct.usage of the cpuacct hierarchy (nanoseconds). The error wraps
// ErrUnavailable when the cgroup or the file is missing (a container starting or gone, a root
// cgroup without cpu.stat).
func ReadCgroupCPU(cgroupRoot string, mode units.Mode, cgroupPath string) (time.Duration, error) {
	if mode == units.ModeUnified {
		stat, err := readKeyValues(filepath.Join(cgroupRoot, cgroupPath, "cpu.stat"))
		if err != nil {
			return 0, fmt.Errorf("cpu of %s: %w", cgroupPath, err)
		}
		usec, ok := stat["usage_usec"]
		if !ok {
			return 0, fmt.Errorf("cpu of %s: cpu.stat has no usage_usec: %w", cgroupPath, ErrUnavailable)
		}
		return time.Duration(usec) * time.Microsecond, nil
	}
	dir, err := controllerDir(cgroupRoot, mode, "cpuacct", cgroupPath)
	if err != nil {
		return 0, err
	}
	ns, err := readUint(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, fmt.Errorf("cpu of %s: %w", cgroupPath, err)
	}
	return time.Duration(ns), nil
}
