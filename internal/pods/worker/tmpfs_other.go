//go:build !linux

package worker

import "errors"

// hostMounter has no tmpfs outside Linux.
type hostMounter struct{}

var errNoTmpfs = errors.New("memory-backed volumes need Linux")

// MountTmpfs implements Mounter.
func (hostMounter) MountTmpfs(string, int64) error { return errNoTmpfs }

// Unmount implements Mounter.
func (hostMounter) Unmount(string) error { return nil }

// IsMountPoint implements Mounter.
func (hostMounter) IsMountPoint(string) (bool, error) { return false, nil }

// FormatAndMount implements Mounter.
func (hostMounter) FormatAndMount(string, string, string, []string) error {
	return errors.New("local volumes on block devices need Linux")
}
