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
