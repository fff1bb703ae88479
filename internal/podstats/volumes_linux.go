package podstats

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statFS is the filesystem at path as the kubelet's fs.Info reads it (pkg/volume/util/fs):
// capacity f_blocks × f_bsize, available f_bavail × f_bsize, used (f_blocks − f_bfree) ×
// f_bsize, inodes f_files, free f_ffree, used the difference.
func statFS(path string) (VolumeUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return VolumeUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := int64(st.Bsize) //nolint:unconvert // Bsize is int32 on some architectures.
	return VolumeUsage{
		Capacity: int64(st.Blocks) * bsize, Available: int64(st.Bavail) * bsize, Used: (int64(st.Blocks) - int64(st.Bfree)) * bsize,
		Inodes: int64(st.Files), InodesFree: int64(st.Ffree), InodesUsed: int64(st.Files) - int64(st.Ffree),
	}, nil
}
