package sandbox

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Bind makes a host file or directory visible inside an instance.
type Bind struct {
	// Source is the host path: absolute and clean, not /, not under /proc, /sys or /dev.
	Source string `json:"source"`
	// Target is the path inside; empty means Source. It must not be under /proc, /sys or /dev
	// (see [FileBind] for files there), and must not cover a directory the instance makes private
	// (/tmp, /run, /var/tmp, /var/lib/systemd, /var/log/journal): the instance's own systemd
	// writes there, and it would write to the host. A missing target is created when it lies on a
	// writable file system inside (the private tmpfs mounts, or anywhere with
	// [Options.OverlayRoot]).
	Target string `json:"target"`
	// ReadOnly makes the bind and every mount below it read-only inside; otherwise the instance
	// writes to the host path.
	ReadOnly bool `json:"read_only,omitempty"`
}

// FileBind puts a host regular file, read-only, over a path inside: anywhere but the private
// cgroupfs, including the instance's own /proc and /dev. A program that checks a kernel setting
// then finds the file's value (e.g. "1" over /proc/sys/vm/overcommit_memory), while the
// machine's setting stays as it is: /proc/sys is read-only inside. A missing target is created
// as for [Bind].
type FileBind struct {
	// Source is the host file: absolute and clean, not under /proc, /sys or /dev.
	Source string `json:"source"`
	// Target is the path inside.
	Target string `json:"target"`
}

// Symlink is a symbolic link created inside at Path, pointing to Target, e.g. /dev/kmsg to
// /dev/console for a program that reads the kernel log: the instance has no /dev/kmsg of its
// own, and the machine's must stay out. Path must lie on a writable file system inside (the
// private /dev, /run, /tmp, /var/tmp, a read-write bind, or anywhere with [Options.OverlayRoot]),
// and nothing may exist there yet.
type Symlink struct {
	// Path is the link: absolute and clean, not under /proc or /sys.
	Path string `json:"path"`
	// Target is the link's content, as for ln -s; it is not checked.
	Target string `json:"target"`
}

// mountPlan is what [planMounts] returns: every bind, file and link of [Options], checked and in
// the order the init stage attaches them.
type mountPlan struct {
	binds []Bind
	files []FileBind
	links []Symlink
}

// planMounts checks the binds, files and links of o (stat reads the host) and puts each list in
// order: by target, so that a parent is attached before what lies below it. Duplicates are
// dropped, and so is a same-path bind below a same-path bind of a parent in the same mode; two
// different things for one target are refused.
func planMounts(o Options, stat func(string) (fs.FileInfo, error)) (mountPlan, error) {
	var plan mountPlan
	binds := make([]Bind, 0, len(o.ExtraBinds)+len(o.Binds))
	for _, p := range o.ExtraBinds {
		binds = append(binds, Bind{Source: p})
	}
	binds = append(binds, o.Binds...)
	for n := range binds {
		if binds[n].Target == "" {
			binds[n].Target = binds[n].Source
		}
		if err := checkBind(binds[n], stat); err != nil {
			return mountPlan{}, err
		}
	}
	slices.SortFunc(binds, func(a, b Bind) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.Source, b.Source), compareBool(a.ReadOnly, b.ReadOnly))
	})
	binds = slices.Compact(binds)
	for _, b := range binds {
		if n := len(plan.binds); n > 0 && plan.binds[n-1].Target == b.Target {
			return mountPlan{}, fmt.Errorf("sandbox bind target %q: given twice, as %s and %s", b.Target, describeBind(plan.binds[n-1]), describeBind(b))
		}
		if !coveredByNearest(plan.binds, b) {
			plan.binds = append(plan.binds, b)
		}
	}

	files, err := checkedSorted(o.FileBinds, "sandbox file bind", func(f FileBind) string { return f.Target },
		func(f FileBind) error { return checkFileBind(f, stat) })
	if err != nil {
		return mountPlan{}, err
	}
	links, err := checkedSorted(o.Symlinks, "sandbox symlink", func(l Symlink) string { return l.Path }, checkSymlink)
	if err != nil {
		return mountPlan{}, err
	}
	plan.files, plan.links = files, links
	return plan, nil
}

// checkedSorted checks every element of xs and returns them sorted by key, refusing a key given
// twice (what names the kind of element in the error).
func checkedSorted[T any](xs []T, what string, key func(T) string, check func(T) error) ([]T, error) {
	var out []T
	for _, x := range xs {
		if err := check(x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	for n := 1; n < len(out); n++ {
		if key(out[n]) == key(out[n-1]) {
			return nil, fmt.Errorf("%s %q: given twice", what, key(out[n]))
		}
	}
	return out, nil
}

// coveredByNearest reports whether b is redundant after the binds kept so far (sorted by
// target): the nearest of them that b lies below binds a host path at the same path in the same
// mode, as b does, so binding it recursively already brought b along. A nearer bind of another
// kind in between (say a read-only one) keeps b.
func coveredByNearest(kept []Bind, b Bind) bool {
	for _, e := range slices.Backward(kept) {
		if !under(b.Target, e.Target) {
			continue
		}
		return e.ReadOnly == b.ReadOnly && e.Source == e.Target && b.Source == b.Target
	}
	return false
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

// describeBind is b in the -bind syntax of hack/sandbox, for error messages.
func describeBind(b Bind) string {
	s := b.Source + ":" + b.Target
	if b.ReadOnly {
		s += ":ro"
	}
	return s
}

// checkPath checks that p is a clean absolute path other than /.
func checkPath(what, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("%s %q: want a clean absolute path other than /", what, p)
	}
	return nil
}

// checkSource checks a host path to bind into an instance: nothing of the machine's kernel file
// systems may be reached from inside, and the path must exist.
func checkSource(what, p string, stat func(string) (fs.FileInfo, error)) (fs.FileInfo, error) {
	if err := checkPath(what, p); err != nil {
		return nil, err
	}
	for _, k := range kernelFileSystems {
		if under(p, k) {
			return nil, fmt.Errorf("%s %q: under the machine's %s, which stays out of the instance", what, p, k)
		}
	}
	fi, err := stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return fi, nil
}

func checkBind(b Bind, stat func(string) (fs.FileInfo, error)) error {
	what := "sandbox bind"
	if b.Source == b.Target && !b.ReadOnly {
		what = "sandbox extra bind" // the form ExtraBinds and -bind PATH give
	}
	if err := checkPath(what+" target", b.Target); err != nil {
		return err
	}
	for _, k := range kernelFileSystems {
		if under(b.Target, k) {
			return fmt.Errorf("%s %q: under %s, which the instance replaces (a file can go there with a file bind)", what, b.Target, k)
		}
	}
	for _, p := range privateInside() {
		if under(p, b.Target) {
			return fmt.Errorf("%s %q: would cover %s, which is private inside the instance (bind a directory below it)", what, b.Target, p)
		}
	}
	_, err := checkSource(what, b.Source, stat)
	return err
}

func checkFileBind(f FileBind, stat func(string) (fs.FileInfo, error)) error {
	const what = "sandbox file bind"
	if err := checkPath(what+" target", f.Target); err != nil {
		return err
	}
	if under(f.Target, cgroupRoot) {
		return fmt.Errorf("%s %q: under %s, the instance's own cgroupfs", what, f.Target, cgroupRoot)
	}
	fi, err := checkSource(what, f.Source, stat)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %q: %s, want a regular file", what, f.Source, fileKind(fi.Mode()))
	}
	return nil
}

func checkSymlink(l Symlink) error {
	const what = "sandbox symlink"
	if err := checkPath(what, l.Path); err != nil {
		return err
	}
	for _, k := range []string{"/proc", "/sys"} {
		if under(l.Path, k) {
			return fmt.Errorf("%s %q: under %s, a kernel file system", what, l.Path, k)
		}
	}
	if l.Target == "" || strings.ContainsRune(l.Target, 0) {
		return fmt.Errorf("%s %q: want a target", what, l.Path)
	}
	return nil
}

// fileKind names a file mode's type for an error message.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file"
	}
}
