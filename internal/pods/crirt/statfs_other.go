//go:build !linux

package crirt

import "errors"

// statfsBytes is Linux-only.
func statfsBytes(string) (int64, int64, error) {
	return 0, 0, errors.New("statfs: not supported on this system")
}
