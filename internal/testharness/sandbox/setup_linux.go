package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Paths inside the instance (all on its private /run tmpfs).
const (
	innerDir       = "/run/slicelet-sandbox"
	innerUnitDir   = innerDir + "/units"
	innerEmptyDir  = innerDir + "/empty"
	innerSystemdCf = "/run/systemd/system.conf.d/slicelet-sandbox.conf"
	systemdBinary  = "/lib/systemd/systemd"
)

// procReadOnly are /proc entries that reach the shared kernel; they are bound read-only onto
// themselves (as systemd-nspawn does).
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi"}

// droppedCaps are removed from the bounding set of the instance: they act on the whole machine
// (clock, modules, reboot, raw I/O, kernel log, audit, MAC policy).
var droppedCaps = []string{
	"sys_module", "sys_time", "sys_boot", "sys_rawio", "mac_admin", "mac_override", "syslog",
	"wake_alarm", "block_suspend", "audit_control", "sys_pacct",
}

// devNodes are the character devices of the private /dev (major, minor from devices.txt).
var devNodes = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// runInit is the init stage: PID 1 of the new namespaces. It builds the private mount tree and
// execs systemd; it only returns on failure, and then the namespace dies with it.
func runInit(stateDir, ptsPath string) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("sandbox init: running as pid %d, want 1 of a new pid namespace", os.Getpid())
	}
	cfg, err := readConfig(stateDir)
	if err != nil {
		return err
	}
	setprivPath, err := exec.LookPath("setpriv")
	if err != nil {
		return fmt.Errorf("setpriv: %w", err)
	}
	unix.Umask(0)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "sandbox init: "+format+"\n", args...)
	}

	// Nothing done here may propagate back to the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / rprivate: %w", err)
	}

	// Detached copies of what is re-attached later, taken while the host view is still in place:
	// the state dir (stays writable), the binds and file binds (possibly under the host /tmp that
	// is hidden next), and the console pty (the host /dev is replaced). The read-only ones are
	// made so while still detached, before anything inside can reach them.
	stateTree, err := cloneTree(stateDir, false)
	if err != nil {
		return err
	}
	bindTrees := make([]int, len(cfg.Binds))
	for n, b := range cfg.Binds {
		if bindTrees[n], err = cloneTree(b.Source, true); err != nil {
			return err
		}
		if b.ReadOnly {
			if err := readOnlyTree(bindTrees[n], b.Source); err != nil {
				return err
			}
		}
	}
	fileTrees := make([]int, len(cfg.FileBinds))
	for n, f := range cfg.FileBinds {
		if fileTrees[n], err = cloneTree(f.Source, false); err != nil {
			return err
		}
		if err := readOnlyTree(fileTrees[n], f.Source); err != nil {
			return err
		}
	}
	consoleTree, err := cloneTree(ptsPath, false)
	if err != nil {
		return err
	}

	// Overlay mode: from here on, the root is an overlay of the host root with a private tmpfs
	// as its upper layer, and the host's other mounts are bound into it.
	var overlayDev uint64
	if cfg.OverlayRoot {
		if overlayDev, err = enterOverlayRoot(stateDir); err != nil {
			return err
		}
	}

	// Drop the host's views that get private replacements. The copied /sys/fs/cgroup must go
	// before anything else touches it: systemd remounts that tmpfs read-only, which would change
	// the superblock the host shares.
	for _, p := range []string{cgroupRoot, "/dev", "/proc"} {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}

	// Every remaining mount becomes read-only, per mount (mount_setattr), never per superblock.
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make mounts read-only: %w", err)
	}
	// ... except the overlay root itself (this mount alone, not the host mounts bound into it):
	// dpkg must write /usr, /etc and /var, and every write lands in the instance's tmpfs.
	if cfg.OverlayRoot {
		if err := checkOverlayRoot(overlayDev); err != nil {
			return err
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make the overlay root writable: %w", err)
		}
	}

	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, t := range privateTmpfs {
		if _, err := os.Stat(t.dir); err != nil {
			logf("no %s on the host, leaving it out", t.dir)
			continue
		}
		if err := unix.Mount("tmpfs", t.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+t.mode); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", t.dir, err)
		}
	}
	if err := attachTree(stateTree, stateDir); err != nil {
		return err
	}
	for n, b := range cfg.Binds {
		if err := makeMountPoint(bindTrees[n], b.Target); err != nil {
			return err
		}
		if err := attachTree(bindTrees[n], b.Target); err != nil {
			return err
		}
	}
	if err := setupDev(consoleTree); err != nil {
		return err
	}
	if err := setupCgroupfs(cfg); err != nil {
		return err
	}
	if err := checkCgroupNamespaceRoot(); err != nil {
		return err
	}
	for _, p := range procReadOnly {
		if err := bindReadOnly(p); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
	}
	if cfg.NetSysctls {
		// A bind of the instance's own /proc/sys/net, without the read-only flag: the
		// settings there are those of the network namespace of whoever writes them.
		if err := unix.Mount("/proc/sys/net", "/proc/sys/net", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/sys/net: %w", err)
		}
		// The bind copies the read-only flag of /proc/sys's: clear it.
		if err := unix.MountSetattr(unix.AT_FDCWD, "/proc/sys/net", unix.AT_RECURSIVE, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make /proc/sys/net writable: %w", err)
		}
	}
	// Last, so that files can go over the instance's own /proc and /dev.
	for n, f := range cfg.FileBinds {
		if err := makeMountPoint(fileTrees[n], f.Target); err != nil {
			return err
		}
		if err := attachTree(fileTrees[n], f.Target); err != nil {
			return err
		}
	}
	for _, l := range cfg.Symlinks {
		if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
			return fmt.Errorf("sandbox symlink %s: %w", l.Path, err)
		}
		if err := os.Symlink(l.Target, l.Path); err != nil {
			return fmt.Errorf("sandbox symlink: %w", err)
		}
	}
	if err := setHostname(cfg.Name); err != nil {
		return err
	}
	if err := writeUnits(cfg.Masks); err != nil {
		return err
	}

	var drop []string
	for _, c := range droppedCaps {
		drop = append(drop, "-"+c)
	}
	argv := []string{
		"setpriv", "--bounding-set=" + strings.Join(drop, ","), "--",
		systemdBinary, "--unit=" + bootTarget, "--show-status=no", "--log-target=journal-or-kmsg",
	}
	// A clean environment: container= puts systemd in container mode (no release agent, no clock
	// or kmod setup, SIGRTMIN+4 powers off); generators would read the host's fstab and more.
	env := []string{
		"container=" + cfg.Name,
		"SYSTEMD_UNIT_PATH=" + innerUnitDir + ":",
		"SYSTEMD_GENERATOR_PATH=" + innerEmptyDir,
		"SYSTEMD_ENVIRONMENT_GENERATOR_PATH=" + innerEmptyDir,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}
	logf("exec %s", strings.Join(argv, " "))
	return fmt.Errorf("exec systemd: %w", syscall.Exec(setprivPath, argv, env))
}

// setHostname names the UTS namespace after the instance. systemd sets the hostname from
// /etc/hostname at boot, so a file with the name is bound over the host's (read-only) one.
func setHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if _, err := os.Stat("/etc/hostname"); err != nil {
		return nil // systemd keeps the name set above
	}
	src := filepath.Join(innerDir, "hostname")
	if err := os.MkdirAll(innerDir, 0o755); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := os.WriteFile(src, []byte(name+"\n"), 0o644); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := unix.Mount(src, "/etc/hostname", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("hostname: bind over /etc/hostname: %w", err)
	}
	return nil
}

// cloneTree returns a detached copy of the mount tree at p (open_tree(2)), to attach later.
func cloneTree(p string, recursive bool) (int, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, flags)
	if err != nil {
		return -1, fmt.Errorf("clone mount of %s: %w", p, err)
	}
	return fd, nil
}

// readOnlyTree makes a detached tree from cloneTree, and every mount in it, read-only.
func readOnlyTree(fd int, source string) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("make the bind of %s read-only: %w", source, err)
	}
	return nil
}

// makeMountPoint creates target, if missing, as the same kind (directory or file) as the tree
// to be attached there. It only succeeds on the private tmpfs mounts; the rest is read-only.
func makeMountPoint(treeFD int, target string) error {
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(treeFD, &st); err != nil {
		return fmt.Errorf("mount point %s: %w", target, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", target, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", target, err)
	}
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		return fmt.Errorf("mount point %s: %w", target, err)
	}
	return nil
}

// attachTree mounts a tree from cloneTree at target.
func attachTree(fd int, target string) error {
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach mount at %s: %w", target, err)
	}
	return nil
}

// bindReadOnly binds p onto itself and makes that bind read-only.
func bindReadOnly(p string) error {
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	return nil
}

// setupDev mounts a private /dev: a few safe device nodes, a new devpts instance, /dev/shm and
// the console. No /dev/kmsg: the instance must not write to the machine's kernel log.
func setupDev(consoleTree int) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=0755,size=4m"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devNodes {
		p := "/dev/" + d.name
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_STRICTATIME, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	links := [][2]string{
		{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
		{"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return fmt.Errorf("symlink %s: %w", l[1], err)
		}
	}
	if err := os.WriteFile("/dev/console", nil, 0o600); err != nil {
		return fmt.Errorf("create /dev/console: %w", err)
	}
	return attachTree(consoleTree, "/dev/console")
}

// setupCgroupfs mounts a private /sys/fs/cgroup inside the cgroup namespace, so every hierarchy's
// root is the instance's own directory, and makes its tmpfs read-only as systemd would.
func setupCgroupfs(cfg *instanceConfig) error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", flags, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount %s tmpfs: %w", cgroupRoot, err)
	}
	for _, h := range cfg.Cgroups {
		dir := filepath.Join(cgroupRoot, h.Rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		if err := unix.Mount("cgroup", dir, h.FSType, flags, h.Options); err != nil {
			return fmt.Errorf("mount %s -o %q at %s: %w", h.FSType, h.Options, dir, err)
		}
	}
	for _, l := range cfg.CgroupLinks {
		if err := os.Symlink(l.Target, filepath.Join(cgroupRoot, l.Name)); err != nil {
			return fmt.Errorf("cgroup symlink %s: %w", l.Name, err)
		}
	}
	for _, d := range cfg.Decoys {
		dir := filepath.Join(cgroupRoot, d)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("decoy %s: %w", dir, err)
		}
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("decoy %s: %w", dir, err)
		}
	}
	// Our own tmpfs superblock, so remounting it read-only touches nothing on the host.
	if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", flags|unix.MS_REMOUNT|unix.MS_RDONLY, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("remount %s read-only: %w", cgroupRoot, err)
	}
	return nil
}

// checkCgroupNamespaceRoot refuses to boot unless this process sits at the root of its cgroup
// namespace in every hierarchy. Anywhere else, systemd's cgroups would land outside the
// instance's directories.
func checkCgroupNamespaceRoot() error {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return fmt.Errorf("own cgroups: %w", err)
	}
	lines, err := parseProcCgroup(bytes.NewReader(b))
	if err != nil {
		return err
	}
	for _, l := range lines {
		if l.Path != "/" {
			return fmt.Errorf("own cgroup %q in hierarchy %q: not the namespace root, refusing to boot", l.Path, strings.Join(l.Controllers, ","))
		}
	}
	return nil
}

// writeUnits fills the private unit directory, the empty generator directory and the manager
// drop-in.
func writeUnits(masks []string) error {
	for _, d := range []string{innerUnitDir, innerEmptyDir, filepath.Dir(innerSystemdCf)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	for _, f := range unitFiles(masks) {
		p := filepath.Join(innerUnitDir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", filepath.Dir(p), err)
		}
		if f.Mask {
			if err := os.Symlink("/dev/null", p); err != nil {
				return fmt.Errorf("mask %s: %w", f.Path, err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			return fmt.Errorf("unit %s: %w", f.Path, err)
		}
	}
	if err := os.WriteFile(innerSystemdCf, []byte(systemConf), 0o644); err != nil {
		return fmt.Errorf("manager drop-in: %w", err)
	}
	return nil
}
