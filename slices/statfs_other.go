//go:build !linux

package slices

import "errors"

// filesystemSize is only implemented on Linux.
func filesystemSize(string) (int64, error) {
	return 0, errors.New("filesystem size: only supported on linux")
}
