package slices

import "golang.org/x/sys/unix"

// filesystemSize returns the total size in bytes of the filesystem holding dir (f_blocks ×
// f_frsize, what cAdvisor reports as the root filesystem capacity).
func filesystemSize(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * st.Frsize, nil
}
