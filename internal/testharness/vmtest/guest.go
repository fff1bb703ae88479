package vmtest

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Guest paths and names shared by the initramfs, the runner unit and Run.
const (
	guestIODir      = "/mnt/io"
	runnerUnit      = "vmtest-runner.service"
	runnerScript    = "/etc/slicelet-vmtest/runner.sh"
	runnerDropIn    = "runner.conf" // in the io dir; /init installs it as a drop-in of runnerUnit
	runScriptName   = "run.sh"
	outputName      = "output.log"
	exitCodeName    = "exit-code"
	consoleMarker   = "slicelet-vmtest:" // prefix of every line the guest side writes to the console
	initFailMessage = "slicelet-vmtest-init: failed:"
	initDoneMessage = "slicelet-vmtest-init: starting systemd"
	guardEnv        = "SLICELET_VMTEST_GUARD" // seconds the runner gives run.sh before SIGQUIT
	guardFileName   = "guard-expired"         // in the io dir: the guard fired
	guardMessage    = "timed out in the guest, sent SIGQUIT after"
	workDirFile     = "workdir" // in the io dir: the host path of Options.Dir, mounted at the same path
)

// initramfsModules are the kernel modules the guest needs, in any order:
// virtio over MMIO (microvm has no PCI), 9p over virtio for the host's /usr
// and the io dir, and overlay for tests that need one. Debian builds them as
// modules; the initramfs computes their load order from their dependencies.
var initramfsModules = []string{
	"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
	"virtio_mmio", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay",
}

// mergedUsrDirs are the top-level directories that a merged-/usr system
// (Debian 12) keeps as symlinks into /usr; the guest root recreates them
// because it only gets the host's /usr.
var mergedUsrDirs = []string{"bin", "sbin", "lib", "lib64"}

// initScript is /init of the initramfs: it builds the guest root (a tmpfs
// with the host's /usr over 9p read-only, the io dir over 9p read-write and
// the /etc skeleton) and hands over to the host's systemd. Any failure powers
// the VM off at once with a message on the console rather than leaving a
// kernel panic or a hang for the host timeout to find.
func initScript(modules []string, usrLinks []string) string {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
export PATH=/bin:/sbin
fail() { echo "` + initFailMessage + ` $*" >/dev/console; poweroff -f; sleep 10; }
mount -t proc proc /proc || fail mount /proc
mount -t sysfs sysfs /sys || fail mount /sys
mount -t devtmpfs devtmpfs /dev || fail mount /dev
exec </dev/console >/dev/console 2>&1
`)
	for _, m := range modules {
		fmt.Fprintf(&b, "insmod /lib/modules/%s.ko || fail insmod %s\n", m, m)
	}
	// msize 512000: large 9p messages make reading binaries from /usr fast;
	// cache=loose for /usr (read-only, the host does not change it during a
	// run), cache=none for the io dir so what the guest writes is on the
	// host the moment the write returns, even if the guest dies after.
	b.WriteString(`mkdir -p /newroot
mount -t tmpfs -o mode=0755 root /newroot || fail mount tmpfs root
mkdir -p /newroot/usr /newroot/mnt/io
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose usr /newroot/usr || fail mount 9p usr
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none io /newroot/mnt/io || fail mount 9p io
cd /newroot || fail cd /newroot
if [ -f mnt/io/` + workDirFile + ` ]; then
	wd=$(cat mnt/io/` + workDirFile + `)
	mkdir -p ".${wd}" || fail mkdir "${wd}"
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none wd ".${wd}" || fail mount 9p "${wd}"
fi
`)
	for _, l := range usrLinks {
		fmt.Fprintf(&b, "ln -s usr/%s %s\n", l, l)
	}
	b.WriteString(`mkdir -p proc sys dev run tmp root var/tmp var/log var/lib var/cache mnt
chmod 1777 tmp var/tmp
chmod 0700 root
cp -a /skel/etc etc || fail copy /etc skeleton
tr -d '-' </proc/sys/kernel/random/uuid >etc/machine-id
if [ -f mnt/io/` + runnerDropIn + ` ]; then
	mkdir -p etc/systemd/system/` + runnerUnit + `.d
	cp mnt/io/` + runnerDropIn + ` etc/systemd/system/` + runnerUnit + `.d/run.conf || fail copy runner drop-in
fi
cd /
umount /sys
umount /proc
mount --move /dev /newroot/dev || fail move /dev
# No generators: under TCG each one (a process linking libsystemd-shared
# over 9p) costs boot time, and none has anything to do in this guest (no
# fstab, no disks, gettys masked). systemd reads these paths from its own
# environment, which it does not pass on to services.
export SYSTEMD_GENERATOR_PATH=/nonexistent SYSTEMD_ENVIRONMENT_GENERATOR_PATH=/nonexistent
echo "` + initDoneMessage + `" >/dev/console
exec switch_root /newroot /lib/systemd/systemd
`)
	return b.String()
}

// runnerScriptText waits for the boot to finish, runs the per-run script
// from the io dir and leaves its exit code next to its output. The exit code
// file appears only once complete (written, then renamed), so a missing one
// always means the run did not finish. Progress lines go to the console so
// that a hung run shows how far it got.
const runnerScriptText = `#!/bin/sh
state=$(systemctl is-system-running --wait)
echo "` + consoleMarker + ` system ${state}"
if [ "${state}" != running ]; then
	systemctl --failed --no-legend --plain | sed 's/^/` + consoleMarker + ` failed unit: /'
fi
echo "` + consoleMarker + ` running ` + runScriptName + `"
if [ -n "${` + guardEnv + `}" ]; then
	timeout --signal=QUIT --kill-after=10 "${` + guardEnv + `}" sh ` + guestIODir + `/` + runScriptName + ` >` + guestIODir + `/` + outputName + ` 2>&1 </dev/null
	rc=$?
	if [ "${rc}" = 124 ]; then
		echo "` + consoleMarker + ` ` + runScriptName + ` ` + guardMessage + ` ${` + guardEnv + `}s"
		: >` + guestIODir + `/` + guardFileName + `
	fi
else
	sh ` + guestIODir + `/` + runScriptName + ` >` + guestIODir + `/` + outputName + ` 2>&1 </dev/null
	rc=$?
fi
echo "${rc}" >` + guestIODir + `/` + exitCodeName + `.tmp && mv ` + guestIODir + `/` + exitCodeName + `.tmp ` + guestIODir + `/` + exitCodeName + `
echo "` + consoleMarker + ` ` + runScriptName + ` exited ${rc}"
`

// runnerUnitText is the unit that runs the test and powers the VM off.
// SuccessAction= and FailureAction= belong in [Unit]: systemd ignores them
// in [Service] (with a warning), and the VM would then never stop.
// poweroff-force skips stopping services one by one, which only costs time
// in a throwaway VM. Type=exec: the unit is started once the script runs,
// so its start job does not hold up "is-system-running --wait" inside it.
const runnerUnitText = `[Unit]
Description=slicelet vmtest runner
After=basic.target dbus.socket systemd-journald.socket
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=exec
ExecStart=` + runnerScript + `
StandardOutput=journal+console
StandardError=journal+console
`

// guardFor returns how long the runner lets the binary run before it sends
// SIGQUIT, for a run with the given timeout, or 0 for no guard. The guard
// leaves 30 s of the timeout for the boot (≈10 s) and for the Go runtime to
// write every goroutine's stack into the output (SIGQUIT's default action in
// a Go program) and the VM to power off, so a hung test shows where it hung;
// shorter timeouts get no guard and end with the host killing the VM. It is
// a variable so that tests can shorten it.
var guardFor = func(timeout time.Duration) time.Duration {
	if timeout < 60*time.Second {
		return 0
	}
	return timeout - 30*time.Second
}

// runnerDropInText is the per-run drop-in of the runner unit: the guard for
// the binary (see guardFor) and, as the last resort inside the guest,
// RuntimeMaxSec= at the whole timeout: the unit is then killed and
// FailureAction= powers the VM off.
func runnerDropInText(timeout, guard time.Duration) string {
	s := fmt.Sprintf("[Service]\nRuntimeMaxSec=%d\n", int(math.Ceil(timeout.Seconds())))
	if guard > 0 {
		s += fmt.Sprintf("Environment=%s=%d\n", guardEnv, int(math.Ceil(guard.Seconds())))
	}
	return s
}

// maskedUnits cost boot time and no test needs them; masking them (a
// symlink to /dev/null in the guest's /etc) keeps the boot to what a
// systemd test needs: journald, dbus, udev and the runner. Templates are
// masked as a whole. Services that read /etc state the guest does not have
// (ldconfig, hwdb, catalog: ConditionNeedsUpdate=) would otherwise run on
// every boot.
var maskedUnits = []string{
	"modprobe@.service", "modprobe@configfs.service", "modprobe@dm_mod.service",
	"modprobe@drm.service", "modprobe@efi_pstore.service", "modprobe@fuse.service",
	"modprobe@loop.service",
	"sys-kernel-config.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount",
	"sys-fs-fuse-connections.mount", "dev-hugepages.mount", "dev-mqueue.mount",
	"proc-sys-fs-binfmt_misc.automount", "proc-sys-fs-binfmt_misc.mount", "systemd-binfmt.service",
	"systemd-sysusers.service", "systemd-random-seed.service", "systemd-sysctl.service",
	"systemd-remount-fs.service", "systemd-journal-flush.service", "systemd-logind.service",
	"systemd-user-sessions.service", "systemd-tmpfiles-setup-dev.service",
	"systemd-tmpfiles-clean.timer", "systemd-update-utmp.service",
	"systemd-update-utmp-runlevel.service", "systemd-update-done.service",
	"systemd-machine-id-commit.service", "systemd-journal-catalog-update.service",
	"systemd-hwdb-update.service", "ldconfig.service", "systemd-firstboot.service",
	"systemd-modules-load.service", "kmod-static-nodes.service",
	"getty@.service", "serial-getty@.service", "getty-static.service", "getty.target",
	"systemd-ask-password-wall.path", "systemd-ask-password-console.path",
}

// skeletonPasswd and skeletonGroup hold the accounts the guest's systemd,
// dbus, udev rules and tmpfiles refer to (Debian's base-passwd plus the
// system users the host's packages create).
const skeletonPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
messagebus:x:100:101::/nonexistent:/usr/sbin/nologin
systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin
`

const skeletonGroup = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:15:
dialout:x:20:
cdrom:x:24:
floppy:x:25:
tape:x:26:
audio:x:29:
utmp:x:43:
video:x:44:
plugdev:x:46:
staff:x:50:
users:x:100:
messagebus:x:101:
input:x:102:
kvm:x:103:
render:x:104:
sgx:x:105:
systemd-journal:x:999:
systemd-network:x:998:
nogroup:x:65534:
`

// skeletonFile is one entry of the guest's /etc skeleton, relative to /etc.
type skeletonFile struct {
	Path    string
	Mode    uint32
	Data    string
	Symlink string // when set, the entry is a symlink to this target
}

// etcSkeleton is the guest's whole /etc. Only /usr is shared with the
// guest: the host's /etc enables services that have nothing to do with a
// test (and would start them), so the guest gets this instead.
func etcSkeleton() []skeletonFile {
	files := []skeletonFile{
		{Path: "passwd", Mode: 0o644, Data: skeletonPasswd},
		{Path: "group", Mode: 0o644, Data: skeletonGroup},
		{Path: "shadow", Mode: 0o640, Data: "root:*:1::::::\n"},
		{Path: "nsswitch.conf", Mode: 0o644, Data: "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"},
		{Path: "hostname", Mode: 0o644, Data: "slicelet-vmtest\n"},
		{Path: "hosts", Mode: 0o644, Data: "127.0.0.1 localhost slicelet-vmtest\n"},
		// The guest has no network, but programs copy the file into what they start
		// (containerd into every pod sandbox, and fails without it).
		{Path: "resolv.conf", Mode: 0o644, Data: "# slicelet-vmtest: no network, no name servers\n"},
		{Path: "os-release", Symlink: "../usr/lib/os-release"},
		{Path: "fstab", Mode: 0o644, Data: ""},
		{Path: "systemd/system/default.target", Symlink: "/lib/systemd/system/multi-user.target"},
		{Path: "systemd/system/" + runnerUnit, Mode: 0o644, Data: runnerUnitText},
		{Path: "systemd/system/multi-user.target.wants/" + runnerUnit, Symlink: "/etc/systemd/system/" + runnerUnit},
		{Path: "systemd/system.conf.d/slicelet-vmtest.conf", Mode: 0o644,
			Data: "[Manager]\nDefaultLimitCORE=0\nDefaultTimeoutStopSec=10s\n"},
		{Path: strings.TrimPrefix(runnerScript, "/etc/"), Mode: 0o755, Data: runnerScriptText},
	}
	for _, u := range maskedUnits {
		files = append(files, skeletonFile{Path: "systemd/system/" + u, Symlink: "/dev/null"})
	}
	return files
}

// kernelCmdline is the guest kernel's command line. tsc_early_khz is needed
// on microvm under TCG: without it, boots hung calibrating the clock (4 of
// 17 when the recipe was measured); the host's TSC rate is right because
// TCG's TSC reads the host's. cgroup_no_v1=all and
// systemd.unified_cgroup_hierarchy=1 make the pure cgroup v2 layout
// production hosts have. panic=-1 turns a panic into a reboot, which
// -no-reboot turns into qemu exiting.
func kernelCmdline(tscKHz int64) string {
	parts := []string{
		"console=ttyS0",
		"panic=-1",
		"quiet",
		"loglevel=3",
		"systemd.unified_cgroup_hierarchy=1",
		"cgroup_no_v1=all",
		"systemd.firstboot=0",
		"systemd.show_status=error",
	}
	if tscKHz > 0 {
		parts = append(parts, "tsc_early_khz="+strconv.FormatInt(tscKHz, 10))
	}
	return strings.Join(parts, " ")
}

// qemuSpec is what one qemu invocation needs.
type qemuSpec struct {
	Kernel, Initrd string
	IODir          string // shared read-write with the guest as /mnt/io
	WorkDir        string // if set, shared read-write at the same path
	Console        string // file that receives the serial console
	Mem, SMP       int    // MiB, CPUs
	TSCKHz         int64
}

// qemuArgs returns the qemu-system-x86_64 arguments for spec.
//
// Why software emulation: /dev/kvm on this machine kind is PVM-based nested
// virtualisation that only accelerates specially built guest kernels; a
// stock kernel under -accel kvm dies with "KVM internal error … emulation
// failure". microvm has no PCI and no firmware, which keeps TCG boots short.
func qemuArgs(s qemuSpec) []string {
	args := []string{
		"-accel", "tcg,thread=multi,tb-size=512",
		"-cpu", "max",
		"-machine", "microvm",
		"-smp", strconv.Itoa(s.SMP),
		"-m", strconv.Itoa(s.Mem),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-no-reboot",
		"-serial", "file:" + s.Console,
		"-kernel", s.Kernel,
		"-initrd", s.Initrd,
		"-append", kernelCmdline(s.TSCKHz),
		"-fsdev", "local,id=usr,path=/usr,security_model=none,readonly=on",
		"-device", "virtio-9p-device,fsdev=usr,mount_tag=usr",
		"-fsdev", "local,id=io,path=" + s.IODir + ",security_model=none",
		"-device", "virtio-9p-device,fsdev=io,mount_tag=io",
	}
	if s.WorkDir != "" {
		args = append(args,
			"-fsdev", "local,id=wd,path="+s.WorkDir+",security_model=none",
			"-device", "virtio-9p-device,fsdev=wd,mount_tag=wd")
	}
	return args
}

// guestBinDir is where the runner copies the binary before it runs it: on
// the guest's root tmpfs (half its memory; /run is systemd's smaller tmpfs),
// not the io dir.
const guestBinDir = "/var/lib/vmtest-bin"

// runScript is the per-run script the runner executes: it copies the test
// binary from the io dir into guestBinDir and runs it there, in workDir (the
// io dir if empty), with env added to the runner's environment.
//
// Why a copy: the io dir is 9p with cache=none (what the guest writes must
// be on the host at once), so a program run from it is paged in over 9p, a
// fault being a round trip that waits behind the guest's other 9p traffic
// (every exec of containerd's shims and runc reads /usr over 9p as well);
// from the guest's memory it is paged in at once.
func runScript(binary, workDir string, args, env []string) string {
	if workDir == "" {
		workDir = guestIODir
	}
	bin := shellQuote(guestBinDir + "/" + binary)
	var b strings.Builder
	b.WriteString("#!/bin/sh\nmkdir -p " + guestBinDir + " && cp " + shellQuote(guestIODir+"/"+binary) + " " + bin + " || exit 125\n")
	b.WriteString("cd " + shellQuote(workDir) + " || exit 125\nexport HOME=/root TMPDIR=/tmp\n")
	for _, kv := range env {
		fmt.Fprintf(&b, "export %s\n", shellQuote(kv))
	}
	b.WriteString("exec " + bin)
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validEnv reports whether kv is NAME=value with a shell variable name.
func validEnv(kv string) bool {
	name, _, ok := strings.Cut(kv, "=")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}

// tscKHzFromCPUInfo returns the TSC rate in kHz from /proc/cpuinfo: with a
// constant, non-stop TSC ("constant_tsc", "nonstop_tsc") and no cpufreq
// driver, "cpu MHz" is the TSC rate the kernel calibrated. It returns 0 when
// cpuinfo has no such line.
func tscKHzFromCPUInfo(cpuinfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || mhz <= 0 {
			return 0
		}
		return int64(math.Round(mhz * 1000))
	}
	return 0
}

// tailLines returns the last n lines of b.
func tailLines(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(slices.Clip(lines), []byte("\n"))
}
