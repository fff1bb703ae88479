package csi

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// fsGroupChangePolicy is the pod's fsGroupChangePolicy (Always when unset).
func fsGroupChangePolicy(pod *v1.Pod) v1.PodFSGroupChangePolicy {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroupChangePolicy != nil {
		return *sc.FSGroupChangePolicy
	}
	return v1.FSGroupChangeAlways
}

// The kubelet's masks (pkg/volume/volume_linux.go): files get group read-write, directories
// group read-write-execute and setgid, so what the pod's processes create is the group's too.
const (
	rwMask   fs.FileMode = 0o660
	execMask fs.FileMode = 0o110
)

// setVolumeOwnership gives the volume at dir to the group gid (the kubelet's
// SetVolumeOwnership): every file and directory chowned to the group (symbolic links left
// alone), group read-write added, and on directories group execute and setgid. With
// OnRootMismatch nothing is walked when the volume's root already has the group and the modes.
func setVolumeOwnership(dir string, gid int64, policy v1.PodFSGroupChangePolicy) error {
	if policy == v1.FSGroupChangeOnRootMismatch && !needsOwnershipChange(dir, gid) {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		mode := info.Mode() | rwMask
		if info.IsDir() {
			mode |= execMask | fs.ModeSetgid
		}
		if mode == info.Mode() {
			return nil
		}
		return os.Chmod(path, mode&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky))
	})
}

// needsOwnershipChange reports whether the volume's root lacks the group, its modes or setgid
// (requiresPermissionChange).
func needsOwnershipChange(dir string, gid int64) bool {
	info, err := os.Stat(dir)
	if err != nil {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != gid {
		return true
	}
	m := info.Mode()
	return m&fs.ModeSetgid == 0 || m&rwMask != rwMask || m&execMask != execMask
}
