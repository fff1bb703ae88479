package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// hostMounter mounts with mount(2) in slicelet's own mount namespace, which must be the host's
// (PID 1's): a tmpfs mounted in a namespace of slicelet's own (a unit's ProtectSystem= or
// PrivateMounts= gives it one) would never reach the runtime's containers.
type hostMounter struct{}

// MountTmpfs implements Mounter, as the kubelet's emptyDir setupTmpfs (size= only).
func (hostMounter) MountTmpfs(dir string, size int64) error {
	if err := hostMountNamespace(); err != nil {
		return err
	}
	opts := ""
	if size > 0 {
		opts = fmt.Sprintf("size=%d", size)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// hostMountNamespace is an error when slicelet runs in a mount namespace of its own.
func hostMountNamespace() error {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	host, err2 := os.Readlink("/proc/1/ns/mnt")
	if err1 == nil && err2 == nil && self != host {
		return errors.New("slicelet runs in a mount namespace of its own (the unit's ProtectSystem=, PrivateMounts=...), where a mount would not reach the containers")
	}
	return nil
}

// FormatAndMount implements Mounter with the kubelet's own SafeFormatAndMount (k8s.io/mount-utils:
// blkid, mkfs.<fstype>, mount).
func (hostMounter) FormatAndMount(device, dir, fstype string, options []string) error {
	if err := hostMountNamespace(); err != nil {
		return err
	}
	return mount.NewSafeFormatAndMount(mount.New(""), utilexec.New()).FormatAndMount(device, dir, fstype, options)
}

// Unmount implements Mounter.
func (hostMounter) Unmount(dir string) error {
	if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// IsMountPoint implements Mounter: dir is on another device than its parent (the kubelet's
// IsLikelyNotMountPoint).
func (hostMounter) IsMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}
