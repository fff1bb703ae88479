package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// overlayReplaced are mount points under / that the init stage replaces with private mounts in
// every mode, so the overlay root does not bind the host's trees there first.
var overlayReplaced = []string{"/proc", "/dev"}

// validateOverlayStateRoot checks that the upper and work dirs under root can be named in
// overlayfs mount options, which split on ',' and ':' and treat '\' as an escape.
func validateOverlayStateRoot(root string) error {
	if strings.ContainsAny(root, ",:\\") {
		return fmt.Errorf("sandbox state root %q: contains ',', ':' or '\\', which overlayfs options cannot hold", root)
	}
	return nil
}

// overlaySubmounts returns the mount points of the mounts directly on top of the root mount (the
// topmost mount at "/"), sorted, without those in overlayReplaced. overlayfs shows only its
// lower layer's own file system, so these must be bound into the overlay root separately; each
// is bound recursively, which brings the mounts below it along.
func overlaySubmounts(mounts []mountEntry) ([]string, error) {
	rootID := -1
	for _, m := range mounts {
		if m.MountPoint != "/" {
			continue
		}
		// A mount stacked on "/" has the mount below it as its parent; the topmost one is
		// nobody's parent among the "/" entries.
		stackedOn := slices.ContainsFunc(mounts, func(o mountEntry) bool { return o.MountPoint == "/" && o.ParentID == m.ID && o.ID != m.ID })
		if !stackedOn {
			rootID = m.ID
		}
	}
	if rootID < 0 {
		return nil, errors.New("mountinfo: no mount at /")
	}
	var out []string
	for _, m := range mounts {
		if m.ParentID != rootID || m.MountPoint == "/" || slices.Contains(overlayReplaced, m.MountPoint) {
			continue
		}
		out = append(out, m.MountPoint)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// enterOverlayRoot makes an overlayfs of the host root (lower) and a fresh tmpfs (upper, work)
// the root of this mount namespace. It runs in the init stage, after / was made rprivate and the
// trees to re-attach later were cloned, and before anything else is mounted: the rest of the
// setup then builds the usual private mounts inside the new root.
//
// overlayfs never writes to a lower layer, so the host's root file system is only read; every
// write to the new root lands in the tmpfs, which exists only in this mount namespace and is
// gone when the instance's last process exits. The tmpfs sits on stateDir/overlay, where the
// host (whose mount namespace never sees it) has only an empty directory.
//
// It returns the device number of the overlay, for [checkOverlayRoot].
func enterOverlayRoot(stateDir string) (uint64, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, fmt.Errorf("overlay root: mountinfo: %w", err)
	}
	mounts, err := parseMountinfo(bytes.NewReader(mi))
	if err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	subs, err := overlaySubmounts(mounts)
	if err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	// Detached copies of the host's other mounts (recursive: /sys brings /sys/fs/cgroup, which
	// the setup later drops), taken before anything covers them. They are made read-only with
	// every other mount later on.
	trees := make([]int, len(subs))
	for n, p := range subs {
		if trees[n], err = cloneTree(p, true); err != nil {
			return 0, fmt.Errorf("overlay root: %w", err)
		}
	}

	dir := filepath.Join(stateDir, overlayDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	// A new tmpfs superblock in this namespace only (propagation is private).
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return 0, fmt.Errorf("overlay root: mount tmpfs on %s: %w", dir, err)
	}
	upper, work, root := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return 0, fmt.Errorf("overlay root: %w", err)
		}
	}
	// lowerdir=/ is the root mount alone: overlayfs does not descend into other mounts.
	opts := "lowerdir=/,upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return 0, fmt.Errorf("overlay root: mount overlay -o %s: %w", opts, err)
	}
	var ost unix.Stat_t
	if err := unix.Stat(root, &ost); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	// The upper dir's root would otherwise get the tmpfs' mode (0755 from Mkdir, umask 0):
	// overlayfs shows the upper root's attributes for /, so copy the host root's.
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	if err := os.Chmod(upper, os.FileMode(st.Mode&0o7777)); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	for n, p := range subs {
		target := filepath.Join(root, p)
		if err := makeMountPoint(trees[n], target); err != nil {
			return 0, fmt.Errorf("overlay root: %w", err)
		}
		if err := attachTree(trees[n], target); err != nil {
			return 0, fmt.Errorf("overlay root: %w", err)
		}
	}

	// pivot_root(".", "."): the old root ends up stacked on the new one at "/", and detaching it
	// leaves the overlay as this namespace's root (as runc does). Nothing of the host's view stays
	// reachable apart from the trees cloned before and attached here.
	if err := unix.Chdir(root); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return 0, fmt.Errorf("overlay root: pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return 0, fmt.Errorf("overlay root: detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return 0, fmt.Errorf("overlay root: %w", err)
	}
	if err := checkOverlayRoot(ost.Dev); err != nil {
		return 0, err
	}
	return ost.Dev, nil
}

// checkOverlayRoot refuses to go on unless / is the overlayfs the setup mounted (same device
// number, overlayfs magic). The setup makes / writable again
// after turning every mount read-only only in overlay mode, and only if this holds: a writable /
// that is the host's root file system would let the instance change the machine.
func checkOverlayRoot(dev uint64) error {
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		return fmt.Errorf("overlay root: stat /: %w", err)
	}
	if st.Dev != dev {
		return fmt.Errorf("overlay root: / is device %#x, want the overlay mounted by the setup (%#x); refusing to make it writable", st.Dev, dev)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/", &fs); err != nil {
		return fmt.Errorf("overlay root: statfs /: %w", err)
	}
	if fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return fmt.Errorf("overlay root: / has file system magic %#x, want overlayfs; refusing to make it writable", fs.Type)
	}
	return nil
}
