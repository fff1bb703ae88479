package crirt

import "golang.org/x/sys/unix"

// statfsBytes returns a filesystem's size and the space unprivileged writers may still use.
func statfsBytes(path string) (capacity, available int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}
