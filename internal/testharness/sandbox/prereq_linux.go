package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// requiredFiles are executables the recipe needs at fixed paths.
var requiredFiles = []string{systemdBinary, "/lib/systemd/systemd-journald", "/usr/bin/dbus-daemon"}

// requiredTools are looked up on PATH.
var requiredTools = []string{"nsenter", "setpriv", "systemctl"}

// Prerequisites returns nil when this machine can run a sandbox: root, systemd, dbus, util-linux,
// cgroup namespaces and a v1/hybrid cgroup layout. Otherwise the error lists everything missing.
func Prerequisites() error {
	return checkPrerequisites(realHost)
}

// hostProbe is what checkPrerequisites looks at; tests replace it.
type hostProbe struct {
	euid     func() int
	stat     func(string) (os.FileInfo, error)
	lookPath func(string) (string, error)
	// fsType returns the statfs magic of a path.
	fsType func(string) (int64, error)
}

var realHost = hostProbe{
	euid:     os.Geteuid,
	stat:     os.Stat,
	lookPath: exec.LookPath,
	fsType: func(p string) (int64, error) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		return st.Type, err
	},
}

func checkPrerequisites(h hostProbe) error {
	var errs []error
	if id := h.euid(); id != 0 {
		errs = append(errs, fmt.Errorf("user: euid %d, want root", id))
	}
	for _, f := range requiredFiles {
		if st, err := h.stat(f); err != nil {
			errs = append(errs, fmt.Errorf("file %s: %w", f, err))
		} else if st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("file %s: not executable", f))
		}
	}
	for _, t := range requiredTools {
		if _, err := h.lookPath(t); err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", t, err))
		}
	}
	if _, err := h.stat("/proc/self/ns/cgroup"); err != nil {
		errs = append(errs, fmt.Errorf("kernel: no cgroup namespaces: %w", err))
	}
	if t, err := h.fsType(cgroupRoot); err != nil {
		errs = append(errs, fmt.Errorf("cgroup layout: %w", err))
	} else if t != unix.TMPFS_MAGIC {
		// The recipe re-creates a hybrid tree (tmpfs with v1 hierarchies and cgroup2 at unified);
		// a pure cgroup v2 host is tested in a VM instead (internal/testharness/vmtest).
		errs = append(errs, fmt.Errorf("cgroup layout: %s is not the v1/hybrid tmpfs layout", cgroupRoot))
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox prerequisites missing: %w", errors.Join(errs...))
	}
	return nil
}
