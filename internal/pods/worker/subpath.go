package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// subPathHost is the host path of sub-path sub (lifecycle.SubPath, relative and without "..")
// of the volume at volume: created as directories with the volume's mode when missing, as the
// kubelet's SafeMakeDir, one element at a time; a symbolic link on the way (a container may
// have made one in its volume) is followed only while it stays inside the volume. The result
// is the resolved path, checked to be inside the volume (the kubelet's PrepareSafeSubpath
// refuses a sub-path that leaves it).
func subPathHost(volume, sub string) (string, error) {
	base, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(base)
	if err != nil {
		return "", err
	}
	perm := fi.Mode().Perm()
	cur := base
	for _, part := range strings.Split(filepath.Clean(sub), string(filepath.Separator)) {
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(cur, part)
		st, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(next, perm); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
			// Mkdir applies the umask: the kubelet sets the volume's mode as it is.
			if err := os.Chmod(next, perm); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case st.Mode()&fs.ModeSymlink != 0:
			if next, err = filepath.EvalSymlinks(next); err != nil {
				return "", err
			}
		}
		if !within(base, next) {
			return "", fmt.Errorf("subPath %q leaves its volume", sub)
		}
		cur = next
	}
	return cur, nil
}

// within reports whether path is base or below it (both clean and absolute).
func within(base, path string) bool {
	return path == base || strings.HasPrefix(path, base+string(filepath.Separator))
}
