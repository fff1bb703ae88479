package hierarchy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
)

// CgroupFS is the Cgroupfs of a mounted cgroup tree under Root (normally "/sys/fs/cgroup"),
// in either layout: pure v2 (Root is a cgroup2 mount) or v1/hybrid (one directory per
// hierarchy under Root).
type CgroupFS struct {
	// Root is where the cgroup filesystems are mounted.
	Root string
	// Unified is true when Root itself is a cgroup2 mount.
	Unified bool

	// noCgroupKill makes Kill use pidfds on cgroup v2 too (tests of that path).
	noCgroupKill bool
}

// NewCgroupFS returns the cgroup filesystem under root, detecting its layout.
func NewCgroupFS(root string) *CgroupFS {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return &CgroupFS{Root: root, Unified: err == nil}
}

// hierarchies lists the mounted hierarchy directories under Root.
func (c *CgroupFS) hierarchies() []string {
	if c.Unified {
		return []string{c.Root}
	}
	entries, err := os.ReadDir(c.Root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		// Hierarchies are directories; comounts like "cpu,cpuacct" appear as symlinks to them.
		if e.IsDir() {
			out = append(out, filepath.Join(c.Root, e.Name()))
		}
	}
	return out
}

// Dirs implements Cgroupfs.
func (c *CgroupFS) Dirs(cgroupPath string) []string {
	var out []string
	for _, h := range c.hierarchies() {
		dir := filepath.Join(h, filepath.Clean("/"+cgroupPath))
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// Pids implements Cgroupfs.
func (c *CgroupFS) Pids(cgroupPath string) ([]int, error) {
	seen := map[int]bool{}
	var pids []int
	var errs []error
	for _, dir := range c.Dirs(cgroupPath) {
		got, err := cgroups.GetAllPids(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", dir, err))
			continue
		}
		for _, p := range got {
			if !seen[p] {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	return pids, errors.Join(errs...)
}

// Remove implements Cgroupfs.
func (c *CgroupFS) Remove(cgroupPath string) error {
	var errs []error
	for _, dir := range c.Dirs(cgroupPath) {
		if err := cgroups.RemovePath(dir); err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// controllerDir is the directory holding the controller's files for the cgroup.
func (c *CgroupFS) controllerDir(cgroupPath, controller string) string {
	if c.Unified {
		return filepath.Join(c.Root, filepath.Clean("/"+cgroupPath))
	}
	return filepath.Join(c.Root, controller, filepath.Clean("/"+cgroupPath))
}

// HasController implements Cgroupfs.
func (c *CgroupFS) HasController(name string) bool {
	if c.Unified {
		b, err := os.ReadFile(filepath.Join(c.Root, "cgroup.controllers"))
		return err == nil && slices.Contains(strings.Fields(string(b)), name)
	}
	// A v1 controller is usable when its hierarchy is a real mount, which we recognise by the
	// controller's own files (a decoy directory has none).
	_, err := os.Stat(filepath.Join(c.Root, name, "cgroup.procs"))
	return err == nil
}

// Write implements Cgroupfs. On cgroup v2 a controller systemd does not manage (hugetlb) is
// not enabled in the parents' cgroup.subtree_control, so its files do not exist; Write enables
// it from the root down to the cgroup's parent and tries again, as libcontainer's fs2 driver
// does for the kubelet.
func (c *CgroupFS) Write(cgroupPath, controller, file, value string) error {
	dir := c.controllerDir(cgroupPath, controller)
	err := cgroups.WriteFile(dir, file, value)
	if err != nil && c.Unified && errors.Is(err, fs.ErrNotExist) && c.HasController(controller) {
		if eerr := c.enable(cgroupPath, controller); eerr != nil {
			return fmt.Errorf("cgroup %s %s: %w", cgroupPath, file, eerr)
		}
		err = cgroups.WriteFile(dir, file, value)
	}
	if err != nil {
		return fmt.Errorf("cgroup %s %s: %w", cgroupPath, file, err)
	}
	return nil
}

// enable writes +controller to cgroup.subtree_control of every ancestor of cgroupPath, root
// first.
func (c *CgroupFS) enable(cgroupPath, controller string) error {
	parts := strings.Split(strings.Trim(filepath.Clean("/"+cgroupPath), "/"), "/")
	dir := c.Root
	for _, p := range parts {
		if err := cgroups.WriteFile(dir, "cgroup.subtree_control", "+"+controller); err != nil {
			return fmt.Errorf("enable %s in %s: %w", controller, dir, err)
		}
		dir = filepath.Join(dir, p)
	}
	return nil
}

// Read implements Cgroupfs.
func (c *CgroupFS) Read(cgroupPath, controller, file string) (string, error) {
	s, err := cgroups.ReadFile(c.controllerDir(cgroupPath, controller), file)
	if err != nil {
		return "", fmt.Errorf("cgroup %s %s: %w", cgroupPath, file, err)
	}
	return strings.TrimSpace(s), nil
}
