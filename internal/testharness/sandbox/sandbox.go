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
	// checkout: shorthand for [Bind]s whose Target is their Source.
	ExtraBinds []string
	// Binds are host files or directories made visible inside, read-write or read-only, at the
	// same or another path (see [Bind]). Paths under /tmp etc. are fine: they are attached after
	// the private tmpfs mounts.
	Binds []Bind
	// FileBinds put host files, read-only, over paths inside, including paths in the instance's
	// own /proc and /dev (see [FileBind]).
	FileBinds []FileBind
	// Symlinks are symbolic links created inside (see [Symlink]).
	Symlinks []Symlink
	// Detached starts the launcher in its own session without a parent-death signal, so that the
	// instance outlives the calling process (hack/sandbox start). Stop it later via [Attach].
	Detached bool
	// OverlayRoot gives the instance a writable root: an overlayfs whose lower layer is the host's
	// root file system and whose upper layer is a tmpfs private to the instance, so that a package
	// manager can write /usr, /etc and /var inside while nothing reaches the host; it all vanishes
	// with the instance. Other host mounts (/sys, separate file systems under /) are bound in
	// read-only, as without the overlay; the state dir and the binds stay the host's.
	OverlayRoot bool
	// NetSysctls leaves /proc/sys/net writable inside (the rest of /proc/sys stays read-only):
	// those settings are the instance's own network namespace's, as systemd-nspawn leaves them
	// with --private-network. For a node whose CNI plugins set them (portmap's route_localnet
	// on the pods' bridge).
	NetSysctls bool
}

// privateTmpfs are the directories that get a fresh tmpfs inside, with their modes. A missing
// directory is skipped: creating it would write to the host.
var privateTmpfs = []struct {
	dir  string
	mode string
}{
	{"/run", "0755"},
	{"/tmp", "1777"},
	{"/var/tmp", "1777"},
	{"/var/log/journal", "2755"},
	{"/var/lib/systemd", "0755"},
}

// kernelFileSystems are the machine's kernel file systems. The instance mounts its own /proc and
// /dev and its own cgroupfs under /sys/fs/cgroup, and sees the rest of /sys read-only.
var kernelFileSystems = []string{"/proc", "/sys", "/dev"}

// privateInside returns the host directories whose contents the instance never sees: those it
// covers with its own tmpfs, /proc, /dev and cgroupfs. A host path below one of them is hidden
// inside unless a bind brings it in.
func privateInside() []string {
	out := make([]string, 0, len(privateTmpfs)+3)
	for _, t := range privateTmpfs {
		out = append(out, t.dir)
	}
	return append(out, "/proc", "/dev", cgroupRoot)
}

// under reports whether the clean absolute path p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
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
	for _, p := range append(privateInside(), kernelFileSystems...) {
		if under(root, p) {
			return fmt.Errorf("sandbox state root %q: under %s, which is private inside the instance", root, p)
		}
	}
	return nil
}

// instanceConfig is written by Start into the state directory and read by the launcher, the
// namespace setup step and Attach.
type instanceConfig struct {
	Name     string      `json:"name"`
	StateDir string      `json:"state_dir"`
	Cgroups  []hierarchy `json:"cgroups"`
	Decoys   []string    `json:"decoys"`
	// CgroupLinks are the symbolic links directly under /sys/fs/cgroup.
	CgroupLinks []cgroupLink `json:"cgroup_links,omitempty"`
	Masks       []string     `json:"masks"`
	// Binds, FileBinds and Symlinks: see [Options]; Binds include the ExtraBinds, all of them
	// checked and put in order by [planMounts].
	Binds     []Bind     `json:"binds,omitempty"`
	FileBinds []FileBind `json:"file_binds,omitempty"`
	Symlinks  []Symlink  `json:"symlinks,omitempty"`
	// OverlayRoot: see [Options.OverlayRoot].
	OverlayRoot bool `json:"overlay_root,omitempty"`
	// NetSysctls: see [Options.NetSysctls].
	NetSysctls bool `json:"net_sysctls,omitempty"`
}

// cgroupLink is a symbolic link directly under /sys/fs/cgroup on the host (e.g. cpu -> cpu,cpuacct),
// recreated inside.
type cgroupLink struct {
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
