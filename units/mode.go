package units

import (
	"fmt"
	"path/filepath"
)

// Filesystem magic numbers from <linux/magic.h>.
const (
	cgroup2SuperMagic = 0x63677270
	tmpfsMagic        = 0x01021994
)

// statfsFunc returns the filesystem type (f_type of statfs(2)) of path.
type statfsFunc func(path string) (int64, error)

// detectMode decides the cgroup layout from the filesystem types at root and root/unified, the
// way systemd does it (cg_unified_cached in src/basic/cgroup-util.c).
func detectMode(root string, statfs statfsFunc) (Mode, error) {
	t, err := statfs(root)
	if err != nil {
		return ModeUnknown, fmt.Errorf("cgroup root %q: %w", root, err)
	}
	switch t {
	case cgroup2SuperMagic:
		return ModeUnified, nil
	case tmpfsMagic:
		unified := filepath.Join(root, "unified")
		u, err := statfs(unified)
		if err == nil && u == cgroup2SuperMagic {
			return ModeHybrid, nil
		}
		// No (or no cgroup2) "unified" below a tmpfs: plain cgroup v1.
		return ModeLegacy, nil
	default:
		return ModeUnknown, fmt.Errorf("cgroup root %q: filesystem type %#x is neither cgroup2 nor tmpfs", root, t)
	}
}

// ResourceNames are the systemd property names for the resource settings slicelet uses, for one
// cgroup mode, so callers never hard-code "CPUShares" vs "CPUWeight". An empty name means the
// setting does not exist in that mode (e.g. MemoryMin on cgroup v1) and must be left out.
type ResourceNames struct {
	// CPU is "CPUShares" (v1: 2..262144) or "CPUWeight" (v2: 1..10000); the value conversion is
	// the caller's (kubelet math).
	CPU string
	// MemoryMax is the hard memory limit: "MemoryLimit" (v1) or "MemoryMax" (v2).
	MemoryMax string
	// MemoryMin and MemoryLow are the v2 memory protections; "" on v1.
	MemoryMin string
	MemoryLow string
	// MemoryHigh is the v2 throttling limit; "" on v1.
	MemoryHigh string
	// CPUQuota and CPUQuotaPeriod are the same in both modes: "CPUQuotaPerSecUSec" (µs of CPU
	// time per second of wall time) and "CPUQuotaPeriodUSec".
	CPUQuota       string
	CPUQuotaPeriod string
	// TasksMax is "TasksMax" in both modes.
	TasksMax string
}

// ResourceNames returns the property names systemd applies in mode m. Unknown modes get the v2
// names, which is what current systemd expects; v1 hybrid and legacy get the v1 names.
func (m Mode) ResourceNames() ResourceNames {
	n := ResourceNames{
		CPUQuota:       "CPUQuotaPerSecUSec",
		CPUQuotaPeriod: "CPUQuotaPeriodUSec",
		TasksMax:       "TasksMax",
	}
	if m == ModeLegacy || m == ModeHybrid {
		n.CPU = "CPUShares"
		n.MemoryMax = "MemoryLimit"
		return n
	}
	n.CPU = "CPUWeight"
	n.MemoryMax = "MemoryMax"
	n.MemoryMin = "MemoryMin"
	n.MemoryLow = "MemoryLow"
	n.MemoryHigh = "MemoryHigh"
	return n
}
