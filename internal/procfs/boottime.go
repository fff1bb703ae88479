package procfs

import (
	"fmt"
	"path/filepath"
	"time"
)

// BootTime is when the node booted (btime of root/stat): the node's start time in the
// kubelet's stats summary (its root container's creation).
func BootTime(root string) (time.Time, error) {
	p, err := open(root, "stat")
	if err != nil {
		return time.Time{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", filepath.Join(root, "stat"), err)
	}
	return time.Unix(int64(st.BootTime), 0), nil
}
