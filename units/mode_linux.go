package units

import "golang.org/x/sys/unix"

// DetectMode reports the cgroup layout mounted at cgroupRoot (normally "/sys/fs/cgroup") with
// statfs(2): cgroup2 at the root is ModeUnified; a tmpfs root with cgroup2 at
// <root>/unified is ModeHybrid; a tmpfs root without it is ModeLegacy. Anything else, or a
// root that cannot be read, is ModeUnknown with an error naming the path.
func DetectMode(cgroupRoot string) (Mode, error) {
	return detectMode(cgroupRoot, func(path string) (int64, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			return 0, err
		}
		return int64(st.Type), nil //nolint:unconvert // Type is int32 on some architectures.
	})
}
