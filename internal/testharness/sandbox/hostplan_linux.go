package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// planInstance reads the host's cgroup mounts and unit directories and returns the instance's
// configuration, without the binds and links of its [Options].
func planInstance(name, stateDir string) (*instanceConfig, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	mounts, err := parseMountinfo(bytes.NewReader(mi))
	if err != nil {
		return nil, err
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("own cgroups: %w", err)
	}
	own, err := parseProcCgroup(bytes.NewReader(cg))
	if err != nil {
		return nil, err
	}
	hs, err := planHierarchies(mounts, own, name)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if h.Rel == "" {
			return nil, fmt.Errorf("cgroup layout: cgroup2 mounted at %s; the sandbox needs the v1/hybrid layout", cgroupRoot)
		}
	}
	pc, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("proc cgroups: %w", err)
	}
	enabled, err := enabledControllers(bytes.NewReader(pc))
	if err != nil {
		return nil, err
	}
	var links []cgroupLink
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup root: %w", err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			t, err := os.Readlink(filepath.Join(cgroupRoot, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("cgroup symlink: %w", err)
			}
			links = append(links, cgroupLink{Name: e.Name(), Target: t})
		}
	}
	taken := map[string]bool{}
	for _, l := range links {
		taken[l.Name] = true
	}
	var decoys []string
	for _, d := range decoyDirs(enabled, hs) {
		if !taken[d] {
			decoys = append(decoys, d)
		}
	}
	masks, err := MaskList(os.DirFS("/"), DefaultUnitDirs)
	if err != nil {
		return nil, err
	}
	return &instanceConfig{
		Name:        name,
		StateDir:    stateDir,
		Cgroups:     hs,
		Decoys:      decoys,
		CgroupLinks: links,
		Masks:       masks,
	}, nil
}

// createCgroups makes the instance's directory in every hierarchy. cpuset starts empty in v1;
// a task cannot join it until cpus and mems are copied from the parent.
func createCgroups(hs []hierarchy) error {
	for _, h := range hs {
		if err := os.Mkdir(h.Dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", h.Dir, err)
		}
		if slices.Contains(h.Controllers, "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h.Parent, f))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", h.Parent, err)
				}
				if err := os.WriteFile(filepath.Join(h.Dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", h.Dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes the instance's cgroup directories depth-first, retrying for up to wait:
// systemd's transient units and exiting tasks are collected asynchronously.
func removeCgroups(hs []hierarchy, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var last error
	err := poll(ctx, pollInterval, func() (bool, error) {
		var errs []error
		for _, h := range hs {
			if err := removeTree(h.Dir); err != nil {
				errs = append(errs, err)
			}
		}
		last = errors.Join(errs...)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("sandbox cgroups: %w", last)
	}
	return nil
}

// removeTree rmdirs dir and every cgroup below it, deepest first. A missing dir is fine.
func removeTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var errs []error
	for _, d := range slices.Backward(dirs) {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
