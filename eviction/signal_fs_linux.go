package eviction

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ReadFs observes a filesystem with statfs(2) of path: bytes (available = f_bavail × f_bsize,
// capacity = f_blocks × f_bsize, cAdvisor's numbers) and inodes (available = f_ffree,
// capacity = f_files). path is the state directory for nodefs.* and the runtime's image
// directory for imagefs.* (the same filesystem for the systemd runtime). A filesystem that
// reports no inodes (btrfs, some overlay setups report f_files = 0) gives no inode
// observation: inodes is nil then.
func ReadFs(path string, now time.Time) (bytes Observation, inodes *Observation, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Observation{}, nil, fmt.Errorf("statfs %s: %w", path, ErrUnavailable)
		}
		return Observation{}, nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := int64(st.Bsize) //nolint:unconvert // Bsize is int32 on some architectures.
	bytes = newObservation(int64(st.Bavail)*bsize, int64(st.Blocks)*bsize, resource.BinarySI, now)
	if st.Files > 0 {
		o := newObservation(int64(st.Ffree), int64(st.Files), resource.DecimalSI, now)
		inodes = &o
	}
	return bytes, inodes, nil
}
