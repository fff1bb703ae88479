// Package sandbox boots a throwaway real systemd as PID 1 of private namespaces, for tests and
// demos on machines that do not run systemd themselves.
//
// The recipe (systemd-sandbox.md in the project's shared docs) keeps every effect inside the
// instance: its own cgroup directory in every hierarchy is the root of its cgroup
// namespace, every host mount is read-only inside, /tmp, /run, /dev and /sys/fs/cgroup are
// private, and every unit that would act on the shared kernel (tmpfiles, udev, sysctl,
// modules-load, ...) is masked. Only the journal and the system bus boot. With
// [Options.OverlayRoot] the root is instead a writable overlay of the host root whose upper layer
// is a tmpfs of the instance's own (for package installs); the other host mounts stay read-only.
//
// A binary that starts instances re-executes itself (/proc/self/exe) for the launcher and the
// namespace setup steps: importing this package installs an init function that takes over the
// process when SLICELET_SANDBOX_STAGE is set, before main or any test runs. The setup uses
// open_tree, move_mount and mount_setattr, so the kernel must be 5.12 or newer.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
)

// DefaultStateRoot holds one directory per instance. It must be a host path that stays visible
// inside the instance: /tmp, /run, /var/tmp and /var/lib/systemd get fresh tmpfs mounts there.
const DefaultStateRoot = "/var/lib/slicelet-sandbox"

// BootTarget is the unit an instance's systemd boots into instead of default.target. It is the
// sandbox's own: tests that look for units named slicelet* inside must leave it out.
const BootTarget = bootTarget

// DefaultBootTimeout bounds the wait for `systemctl is-system-running` to report running.
const DefaultBootTimeout = 30 * time.Second

// Options configures [Start].
type Options struct {
	// Name identifies the instance: its state directory, cgroup directories, hostname and the
	// container= value systemd sees. Lower-case letters, digits and '-'; default random.
	Name string
	// StateRoot is the parent of the instance's state directory; default [DefaultStateRoot].
	StateRoot string
	// BootTimeout bounds the boot; default [DefaultBootTimeout].
	BootTimeout time.Duration
	// Log receives progress lines (boot time, degraded units); default discarded.
	Log io.Writer
	// ExtraBinds are host paths bind-mounted read-write at the same path inside, e.g. a repository
	// checkout. Paths under /tmp etc. are fine: they are attached after the private tmpfs mounts.
	ExtraBinds []string
	// Detached starts the launcher in its own session without a parent-death signal, so that the
	// instance outlives the calling process (hack/sandbox start). Stop it later via [Attach].
	Detached bool
	// OverlayRoot gives the instance a writable root: an overlayfs whose lower layer is the host's
	// root file system and whose upper layer is a tmpfs private to the instance, so that a package
	// manager can write /usr, /etc and /var inside while nothing reaches the host; it all vanishes
	// with the instance. Other host mounts (/sys, separate file systems under /) are bound in
	// read-only, as without the overlay; the state dir and ExtraBinds stay the host's, writable.
	OverlayRoot bool
}

// statePrefixesHiddenInside are host paths that the instance replaces with fresh tmpfs or
// private mounts; a state root below them would be invisible inside.
var statePrefixesHiddenInside = []string{
	"/tmp", "/run", "/var/tmp", "/var/lib/systemd", "/var/log/journal", "/dev", "/proc", "/sys",
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,47}$`)

// validateName checks an instance name; it becomes a cgroup directory, a hostname and a file name.
func validateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("sandbox name %q: want 1-48 of [a-z0-9-], starting with a letter or digit", name)
	}
	return nil
}

// validateStateRoot checks that root is absolute and visible inside an instance.
func validateStateRoot(root string) error {
	if !path.IsAbs(root) || path.Clean(root) != root {
		return fmt.Errorf("sandbox state root %q: want a clean absolute path", root)
	}
	if root == "/" {
		return fmt.Errorf("sandbox state root %q: must not be /", root)
	}
	for _, p := range statePrefixesHiddenInside {
		if root == p || strings.HasPrefix(root, p+"/") {
			return fmt.Errorf("sandbox state root %q: under %s, which is private inside the instance", root, p)
		}
	}
	return nil
}

// instanceConfig is written by Start into the state directory and read by the launcher, the
// namespace setup step and Attach.
type instanceConfig struct {
	Name       string      `json:"name"`
	StateDir   string      `json:"state_dir"`
	Cgroups    []hierarchy `json:"cgroups"`
	Decoys     []string    `json:"decoys"`
	Symlinks   []symlink   `json:"symlinks,omitempty"`
	Masks      []string    `json:"masks"`
	ExtraBinds []string    `json:"extra_binds,omitempty"`
	// OverlayRoot: see [Options.OverlayRoot].
	OverlayRoot bool `json:"overlay_root,omitempty"`
}

// symlink is a symbolic link directly under /sys/fs/cgroup on the host (e.g. cpu -> cpu,cpuacct),
// recreated inside.
type symlink struct {
	Name   string `json:"name"`
	Target string `json:"target"`
}

// instancePIDs identifies the running processes of an instance. Start times (from
// /proc/<pid>/stat) guard against a reused PID: a stale file never gets a signal sent to a
// stranger.
type instancePIDs struct {
	InitPID       int    `json:"init_pid"`
	InitStart     uint64 `json:"init_start"`
	LauncherPID   int    `json:"launcher_pid"`
	LauncherStart uint64 `json:"launcher_start"`
}

// Status describes one instance found in a state root.
type Status struct {
	// Name is the instance name.
	Name string
	// StateDir is its host state directory.
	StateDir string
	// InitPID is the host PID of its systemd; 0 when unknown.
	InitPID int
	// Running is true when that systemd is still alive.
	Running bool
}

// Files in an instance's state directory.
const (
	configFile  = "config.json"
	pidsFile    = "pids.json"
	launcherLog = "launcher.log"
	consoleLog  = "console.log"
	// overlayDir is the mount point of the overlay root's tmpfs (upper and work dirs) in the
	// init's private mount namespace; on the host it stays an empty directory.
	overlayDir   = "overlay"
	lockFileName = ".lock"
)

// poll calls probe at once and then every interval until it reports done or fails, or ctx ends
// (then it returns ctx's error). The readiness wait and the cgroup removal retry use it.
func poll(ctx context.Context, interval time.Duration, probe func() (done bool, err error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := probe()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
