// Package vmtest runs a Go test binary inside a throwaway qemu VM whose
// kernel has a pure cgroup v2 hierarchy with the cpu, memory, pids and io
// controllers, and whose PID 1 is the host's own systemd (with journald and
// dbus). It exists because the machines the project is developed and tested
// on only offer cgroup v1 hybrid, where limits on the unified tree are
// accepted and silently not applied; production hosts run cgroup v2.
//
// In short: the Debian kernel package is downloaded (never installed, /boot
// is never touched), its bzImage converted to an ELF vmlinux that qemu boots
// through the PVH entry, and a small initramfs (busybox-static, the virtio,
// 9p and overlay modules, an /init and an /etc skeleton) is built; all of it
// once, cached under build/vm of the repository (or $SLICELET_VM_CACHE).
// Each [Run] boots qemu with software emulation (TCG), the host's /usr
// shared read-only over 9p and a fresh per-run directory shared read-write;
// a runner unit runs the binary, records its exit code and output, and
// powers the VM off.
package vmtest

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults for the zero values of [Options].
const (
	DefaultTimeout = 120 * time.Second
	DefaultMem     = 1024 // MiB
	DefaultSMP     = 2
)

// EnvCache names the environment variable that overrides the cache
// directory (default: build/vm in the repository holding the current
// directory's go.mod).
const EnvCache = "SLICELET_VM_CACHE"

// ErrPrerequisite is wrapped by every error that means the VM cannot be used
// on this machine at all (a missing package, not root, not x86-64), as
// opposed to a VM that was tried and failed. Callers may skip on it outside
// CI; with CI=true it must be a failure.
var ErrPrerequisite = errors.New("vm prerequisite missing")

// Options describe one run of a binary in a VM.
type Options struct {
	// Binary is the host path of the executable to run in the guest, usually
	// a test binary (os.Executable()). It is copied into the run's io
	// directory, so it may live anywhere on the host. It runs with the
	// guest's /usr, which is the host's, so a dynamically linked (cgo)
	// binary works as on the host.
	Binary string
	// Args are passed to Binary unchanged (e.g. -test.v -test.run=X).
	Args []string
	// Env entries (NAME=value) are added to the guest environment of
	// Binary, e.g. SLICELET_SYSTEMDTEST=vm.
	Env []string
	// Timeout bounds the whole run: boot, Binary, poweroff. Zero means
	// DefaultTimeout. A VM still running then is killed and Run returns an
	// error with the tail of its console.
	Timeout time.Duration
	// Mem is the guest memory in MiB (zero: DefaultMem).
	Mem int
	// SMP is the number of guest CPUs (zero: DefaultSMP).
	SMP int
	// ExtraFiles are copied into the io directory next to Binary before
	// the boot: key is the name in the guest's /mnt/io (relative, may
	// contain subdirectories), value is the host path of the file.
	ExtraFiles map[string]string
	// Dir, if set, is a host directory shared read-write with the guest and
	// made Binary's working directory, as go test does with the package
	// directory (testdata, golden files). It is shared at the same path, or
	// at /mnt/wd when the guest has its own of that path (/tmp, /usr, /run,
	// …: the guest's systemd-tmpfiles empties /tmp at boot, which must never
	// reach the host). Empty: Binary runs in /mnt/io.
	Dir string
}

// Result is what came back from a run.
type Result struct {
	// ExitCode is the exit status of Binary in the guest (128+n for a
	// signal n, as the shell reports it); -1 when the run did not finish.
	ExitCode int
	// Output is Binary's combined stdout and stderr.
	Output []byte
	// Console is the VM's serial console: kernel messages, systemd's
	// errors, the runner's progress lines.
	Console []byte
	// Duration is the wall time of the VM, from qemu's start to its exit.
	Duration time.Duration
}

// hostPathTestFlags are the go test binary flags whose values are host
// paths: the guest cannot see them (the binary fails at once on
// -test.testlogfile, which go test always passes), and what they would
// write would stay in the VM.
var hostPathTestFlags = []string{
	"test.testlogfile", "test.coverprofile", "test.cpuprofile", "test.memprofile",
	"test.blockprofile", "test.mutexprofile", "test.trace", "test.outputdir",
	"test.gocoverdir", "test.fuzzcachedir",
}

// GuestTestArgs returns the arguments of a go test binary (os.Args[1:])
// without the flags that name host paths, ready for [Options.Args]. It
// accepts both -flag=value and -flag value, with one or two dashes.
func GuestTestArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(hostPathTestFlags, name) {
			out = append(out, a)
			continue
		}
		if !hasValue {
			i++ // the value is the next argument
		}
	}
	return out
}

// guestOwnedDirs are the guest paths the guest mounts or cleans its own of. An Options.Dir at or
// under one of them is shared at guestAltWorkDir instead of its own path.
var guestOwnedDirs = []string{"/usr", "/tmp", "/var/tmp", "/run", "/proc", "/sys", "/dev", "/etc", "/mnt", "/bin", "/sbin", "/lib", "/lib64", "/root", "/var/lib", "/var/log"}

// guestAltWorkDir is where a Dir the guest owns the path of is shared instead.
const guestAltWorkDir = "/mnt/wd"

// checkDir reports why dir cannot be Options.Dir, or nil.
func checkDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("vm options: Dir %q is not a clean absolute path", dir)
	}
	if dir == "/" {
		return errors.New(`vm options: Dir "/" would share the host's root`)
	}
	return nil
}

// guestDir is the guest path Dir is shared at: its own path, or guestAltWorkDir when the guest
// has its own of that path (e.g. a package checked out under /tmp, where the guest's
// systemd-tmpfiles cleans: sharing it there would let the guest empty host files).
func guestDir(dir string) string {
	for _, g := range guestOwnedDirs {
		if dir == g || strings.HasPrefix(dir, g+"/") {
			return guestAltWorkDir
		}
	}
	return dir
}
