package sandbox

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// bootTarget is the unit the sandboxed systemd boots into instead of default.target.
const bootTarget = "slicelet-sandbox.target"

// keptUnits are the only host units the sandbox boots: the journal and the system bus. Everything
// else that the standard targets pull in is masked.
var keptUnits = []string{
	"systemd-journald.socket",
	"systemd-journald-dev-log.socket",
	"systemd-journald.service",
	"dbus.socket",
	"dbus.service",
}

// maskedTargets are the targets whose .wants/ and .requires/ directories are emptied by masking
// every unit in them. Masking the leaves is what works: .wants/ directories merge across every
// unit path, so a private empty .wants/ directory earlier on the path would not hide them.
var maskedTargets = []string{
	"sysinit", "basic", "sockets", "timers", "paths", "local-fs", "local-fs-pre", "swap",
	"slices", "remote-fs", "network", "network-online", "getty", "multi-user", "graphical",
	"default", "emergency", "rescue", "cryptsetup",
}

// maskedPatterns name units that would act on the shared kernel or the machine's files (tmpfiles
// empties /tmp, udev triggers devices, sysctl and modules-load change the kernel) or that have no
// business in a test instance, whether or not a target pulls them in.
var maskedPatterns = []string{
	"systemd-tmpfiles-*", "udev*", "systemd-udev*", "systemd-udevd.service",
	"systemd-udevd-control.socket", "systemd-udevd-kernel.socket", "systemd-udev-trigger.service",
	"systemd-udev-settle.service", "systemd-hwdb-update.service", "systemd-sysctl.service",
	"systemd-modules-load.service", "systemd-remount-fs.service", "systemd-timesyncd.service",
	"systemd-timedated.service", "systemd-hostnamed.service", "systemd-localed.service",
	"systemd-logind.service", "systemd-networkd*", "systemd-resolved.service",
	"systemd-random-seed.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.*",
	"systemd-pstore.service", "systemd-firstboot.service", "systemd-update-utmp*",
	"local-fs.target", "swap.target", "sys-kernel-*.mount", "sys-fs-fuse-connections.mount",
	"dev-*.mount", "kmod-static-nodes.service",
}

// DefaultUnitDirs are the host unit directories whose contents decide the mask list, in systemd's
// search order (/run/systemd/system is a fresh tmpfs inside the sandbox, so it is left out).
var DefaultUnitDirs = []string{"/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// MaskList returns the sorted, de-duplicated units to mask so that the sandboxed systemd boots only
// the journal and the system bus. fsys is the host root (os.DirFS("/") in production) and unitDirs
// are absolute directories inside it; missing directories are skipped.
func MaskList(fsys fs.FS, unitDirs []string) ([]string, error) {
	set := map[string]bool{}
	for _, dir := range unitDirs {
		rel := strings.TrimPrefix(path.Clean(dir), "/")
		for _, t := range maskedTargets {
			for _, suffix := range []string{".wants", ".requires"} {
				entries, err := fs.ReadDir(fsys, path.Join(rel, t+".target"+suffix))
				if err != nil {
					continue // most targets have no such directory
				}
				for _, e := range entries {
					set[e.Name()] = true
				}
			}
		}
		entries, err := fs.ReadDir(fsys, rel)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			for _, p := range maskedPatterns {
				if ok, _ := path.Match(p, e.Name()); ok {
					set[e.Name()] = true
				}
			}
		}
	}
	// Named units are masked even where this machine does not ship them, so that a unit that
	// appears later (a package installed inside) cannot start either.
	for _, p := range maskedPatterns {
		if !strings.ContainsAny(p, "*?[") {
			set[p] = true
		}
	}
	for _, keep := range keptUnits {
		delete(set, keep)
	}
	delete(set, bootTarget)
	out := make([]string, 0, len(set))
	for name := range set {
		if !validUnitFileName(name) {
			return nil, fmt.Errorf("unit name %q: not a plain unit file name", name)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// validUnitFileName reports whether name can be written as a file in the private unit directory.
func validUnitFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") &&
		strings.Contains(name, ".")
}

// unitFile is one file written into the private unit directory.
type unitFile struct {
	// Path is relative to the unit directory.
	Path string
	// Content is the file body; empty for a mask.
	Content string
	// Mask makes Path a symlink to /dev/null instead of a file.
	Mask bool
}

// unitFiles returns everything the private unit directory holds: the boot target, the drop-ins that
// let the system bus start without the default dependencies, and one mask per masked unit.
func unitFiles(masks []string) []unitFile {
	kept := strings.Join(keptUnits, " ")
	files := []unitFile{{
		Path: bootTarget,
		Content: "[Unit]\n" +
			"Description=slicelet sandbox boot target\n" +
			"DefaultDependencies=no\n" +
			"AllowIsolate=yes\n" +
			"Wants=" + kept + "\n" +
			"After=" + kept + "\n",
	}}
	// dbus.socket/service normally order after sysinit.target and basic.target; in the sandbox those
	// targets are empty, but dropping the default dependencies keeps the boot short and independent.
	for _, u := range []string{"dbus.socket", "dbus.service"} {
		files = append(files, unitFile{
			Path:    u + ".d/slicelet-sandbox.conf",
			Content: "[Unit]\nDefaultDependencies=no\n",
		})
	}
	for _, m := range masks {
		files = append(files, unitFile{Path: m, Mask: true})
	}
	return files
}

// systemConf is the system.conf.d drop-in: no core dumps from test processes and a short stop
// timeout so that a wedged unit cannot stretch a teardown.
const systemConf = "[Manager]\nDefaultLimitCORE=0\nDefaultTimeoutStopSec=10s\n"
