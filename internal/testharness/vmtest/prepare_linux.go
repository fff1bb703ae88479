package vmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// kernelRecipe versions how the kernel directory of the cache is made;
// bumping it rebuilds caches made by older code.
const kernelRecipe = "1"

// Cache layout, relative to the cache directory.
const (
	lockName        = "lock"
	kernelDirName   = "kernel"    // vmlinux, modules/, stamp
	vmlinuxName     = "vmlinux"   // in kernelDirName
	modulesDirName  = "modules"   // in kernelDirName: <name>.ko
	stampName       = "stamp"     // in kernelDirName
	initrdName      = "initrd.gz" // the initramfs
	initrdStampName = "initrd.stamp"
	runsDirName     = "runs" // per-run directories, removed after each run
	runLockName     = "lock" // in a run directory, locked while the run goes on
)

// CacheDir returns the directory that holds the kernel and initramfs:
// $SLICELET_VM_CACHE if set, else build/vm in the repository (the nearest
// directory above the working directory that holds a go.mod).
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("vm cache dir: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "build", "vm"), nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("vm cache dir: no go.mod above %s; set %s", wd, EnvCache)
		}
	}
}

// Prerequisites reports what this machine lacks to run a VM, naming each
// missing piece and the apt package that provides it; nil means Run can
// work (preparing the cache may still need apt-get, see Prepare). The error
// wraps ErrPrerequisite.
func Prerequisites() error {
	var miss []string
	if runtime.GOARCH != "amd64" {
		miss = append(miss, "an x86-64 host (this is "+runtime.GOARCH+")")
	}
	// Root: the guest's /usr is the host's, exported by qemu over 9p with
	// its real owners and modes, so qemu must be able to read all of it
	// (some files are root-only), and files the guest's root writes into
	// the io dir must be writable.
	if os.Geteuid() != 0 {
		miss = append(miss, "root")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		miss = append(miss, "qemu-system-x86_64 (apt package qemu-system-x86)")
	}
	if err := checkStaticBusybox(); err != nil {
		miss = append(miss, err.Error()+" (apt package busybox-static)")
	}
	for _, f := range []struct{ path, what string }{
		{"/usr/lib/systemd/systemd", "systemd (apt package systemd)"},
		{"/usr/bin/dbus-daemon", "dbus-daemon (apt package dbus)"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			miss = append(miss, f.what)
		}
	}
	if _, err := usrLinks(); err != nil {
		miss = append(miss, err.Error())
	}
	if len(miss) > 0 {
		return fmt.Errorf("%w: %s", ErrPrerequisite, strings.Join(miss, "; "))
	}
	return nil
}

// checkStaticBusybox fails unless busybox on PATH is statically linked: the
// initramfs has no libc.
func checkStaticBusybox() error {
	p, err := exec.LookPath("busybox")
	if err != nil {
		return errors.New("busybox not found")
	}
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("busybox %s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox %s is dynamically linked, need a static one", p)
		}
	}
	return nil
}

// usrLinks returns the merged-/usr symlinks of the host's root that the
// guest root must recreate.
func usrLinks() ([]string, error) {
	var links []string
	for _, d := range mergedUsrDirs {
		target, err := os.Readlink("/" + d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil || strings.TrimPrefix(target, "/") != "usr/"+d:
			return nil, fmt.Errorf("a merged /usr (/%s is not a symlink to usr/%s)", d, d)
		}
		links = append(links, d)
	}
	return links, nil
}

// prepareMu serialises Prepare within a process; the lock file does so
// across processes (test binaries of several packages run at once).
var prepareMu sync.Mutex

// Prepare builds the cached kernel and initramfs unless they are already
// there and current; it is cheap then (a few stats and a hash). It needs the
// prerequisites of Prerequisites and, to build, apt-get, apt-cache,
// dpkg-deb and xz plus current apt lists (apt-get update). The kernel is the
// Debian package linux-image-amd64 depends on, downloaded with apt-get
// download into the cache and never installed.
func Prepare(ctx context.Context) error {
	if err := Prerequisites(); err != nil {
		return err
	}
	dir, err := CacheDir()
	if err != nil {
		return err
	}
	_, err = prepare(ctx, dir)
	return err
}

// artifacts are the paths of a prepared cache.
type artifacts struct {
	Vmlinux, Initrd, RunsDir string
}

func prepare(ctx context.Context, dir string) (artifacts, error) {
	a := artifacts{
		Vmlinux: filepath.Join(dir, kernelDirName, vmlinuxName),
		Initrd:  filepath.Join(dir, initrdName),
		RunsDir: filepath.Join(dir, runsDirName),
	}
	links, err := usrLinks()
	if err != nil {
		return a, fmt.Errorf("%w: %w", ErrPrerequisite, err)
	}
	prepareMu.Lock()
	defer prepareMu.Unlock()
	if err := os.MkdirAll(a.RunsDir, 0o755); err != nil {
		return a, fmt.Errorf("vm cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return a, fmt.Errorf("vm cache lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := flockContext(ctx, lock); err != nil {
		return a, err
	}

	sweepRuns(a.RunsDir)

	kdir := filepath.Join(dir, kernelDirName)
	kstamp := "recipe " + kernelRecipe + "\n"
	if b, err := os.ReadFile(filepath.Join(kdir, stampName)); err != nil || !bytes.HasPrefix(b, []byte(kstamp)) {
		if err := buildKernel(ctx, dir, kstamp); err != nil {
			return a, err
		}
	}
	key, err := initrdKey(kdir, links)
	if err != nil {
		return a, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, initrdStampName)); err == nil && string(b) == key {
		if _, err := os.Stat(a.Initrd); err == nil {
			return a, nil
		}
	}
	if err := buildInitrd(kdir, a.Initrd, links); err != nil {
		return a, err
	}
	if err := os.WriteFile(filepath.Join(dir, initrdStampName), []byte(key), 0o644); err != nil {
		return a, fmt.Errorf("vm cache: %w", err)
	}
	return a, nil
}

// flockContext takes an exclusive lock on f, giving up when ctx ends.
// Another process may hold it for the whole one-time setup (≈20 s).
func flockContext(ctx context.Context, f *os.File) error {
	done := make(chan error, 1)
	go func() { done <- unix.Flock(int(f.Fd()), unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("vm cache lock %s: %w", f.Name(), err)
		}
		return nil
	case <-ctx.Done():
		// The goroutine's flock ends when the caller closes f.
		return fmt.Errorf("vm cache lock %s: %w", f.Name(), ctx.Err())
	}
}

// initrdKey fingerprints everything the initramfs is made of, so that a
// change to the /init script, the skeleton, the modules or busybox rebuilds
// it.
func initrdKey(kdir string, links []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n%q\n", initScript(initramfsModules, links), initramfsModules)
	for _, f := range etcSkeleton() {
		fmt.Fprintf(h, "%q %o %q %q\n", f.Path, f.Mode, f.Data, f.Symlink)
	}
	stamp, err := os.ReadFile(filepath.Join(kdir, stampName))
	if err != nil {
		return "", fmt.Errorf("vm cache: %w", err)
	}
	h.Write(stamp)
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("%w: busybox: %w", ErrPrerequisite, err)
	}
	st, err := os.Stat(bb)
	if err != nil {
		return "", fmt.Errorf("%w: busybox: %w", ErrPrerequisite, err)
	}
	fmt.Fprintf(h, "%s %d %d\n", bb, st.Size(), st.ModTime().UnixNano())
	return hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

// buildKernel downloads the kernel package and fills the kernel directory
// of the cache: vmlinux, the initramfs modules, and last the stamp.
func buildKernel(ctx context.Context, dir, stamp string) error {
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg-deb", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s, needed to build the vm kernel", ErrPrerequisite, tool)
		}
	}
	pkg, err := kernelPackage(ctx)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	defer os.RemoveAll(work)
	// APT::Sandbox::User=root: apt's download user _apt cannot write into a
	// directory only root may write to.
	dl := exec.CommandContext(ctx, "apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", pkg)
	dl.Dir = work
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("vm kernel: apt-get download %s: %w: %s (apt-get update may be needed)", pkg, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(work, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("vm kernel: apt-get download %s left %d .deb files, want 1", pkg, len(debs))
	}
	kdir := filepath.Join(work, kernelDirName)
	if err := os.MkdirAll(filepath.Join(kdir, modulesDirName), 0o755); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}

	want := slices.Clone(initramfsModules)
	mods := map[string]moduleInfo{}
	var vmlinuz []byte
	var order []string
	// A module may depend on one outside initramfsModules; it is found in
	// another pass over the package (rarely needed: the list is complete
	// for Debian's 6.1 kernels).
	for pass := 0; ; pass++ {
		got, kernel, err := readDeb(ctx, debs[0], want, vmlinuz == nil)
		if err != nil {
			return err
		}
		if kernel != nil {
			vmlinuz = kernel
		}
		for _, name := range want {
			ko, ok := got[name]
			if !ok {
				return fmt.Errorf("vm kernel: module %s not in %s", name, filepath.Base(debs[0]))
			}
			mi, err := readModuleInfo(name+".ko", ko)
			if err != nil {
				return fmt.Errorf("vm kernel: %w", err)
			}
			mods[mi.Name] = mi
			if err := os.WriteFile(filepath.Join(kdir, modulesDirName, mi.Name+".ko"), ko, 0o644); err != nil {
				return fmt.Errorf("vm kernel: %w", err)
			}
		}
		list := make([]moduleInfo, 0, len(mods))
		for _, name := range initramfsModules {
			list = append(list, mods[name])
		}
		for _, m := range mods {
			if !slices.Contains(initramfsModules, m.Name) {
				list = append(list, m)
			}
		}
		want = missingDepends(list)
		if len(want) == 0 {
			if order, err = moduleLoadOrder(list); err != nil {
				return fmt.Errorf("vm kernel: %w", err)
			}
			break
		}
		if pass == 3 {
			return fmt.Errorf("vm kernel: module dependencies not closed after %d passes: %v", pass+1, want)
		}
	}
	if vmlinuz == nil {
		return fmt.Errorf("vm kernel: no boot/vmlinuz-* in %s", filepath.Base(debs[0]))
	}
	vmlinux, err := decompressKernel(ctx, vmlinuz)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(kdir, vmlinuxName), vmlinux, 0o644); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	if err := os.WriteFile(filepath.Join(kdir, modulesDirName, "order"), []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	full := fmt.Sprintf("%spackage %s\n", stamp, filepath.Base(debs[0]))
	if err := os.WriteFile(filepath.Join(kdir, stampName), []byte(full), 0o644); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	final := filepath.Join(dir, kernelDirName)
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	if err := os.Rename(kdir, final); err != nil {
		return fmt.Errorf("vm kernel: %w", err)
	}
	return nil
}

// kernelPackage returns the versioned kernel package the Debian
// meta-package linux-image-amd64 currently depends on.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("vm kernel: apt-cache depends linux-image-amd64: %w: %s (apt-get update may be needed)", err, bytes.TrimSpace(out))
	}
	return parseKernelDepends(out)
}

// readDeb streams the data of a .deb through dpkg-deb and returns the
// modules named in want (by normalised name) and, if wantKernel, the
// boot/vmlinuz-* image.
func readDeb(ctx context.Context, deb string, want []string, wantKernel bool) (map[string][]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("vm kernel: dpkg-deb: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("vm kernel: dpkg-deb: %w", err)
	}
	got := map[string][]byte{}
	var kernel []byte
	tr := tar.NewReader(pipe)
	var rerr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = fmt.Errorf("vm kernel: %s: %w", deb, err)
			break
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case wantKernel && strings.HasPrefix(name, "boot/vmlinuz-"):
			if kernel, err = io.ReadAll(tr); err != nil {
				rerr = fmt.Errorf("vm kernel: %s: %w", name, err)
			}
		case strings.HasPrefix(name, "lib/modules/") && strings.HasSuffix(name, ".ko"):
			mod := normModule(strings.TrimSuffix(baseName(name), ".ko"))
			if slices.Contains(want, mod) {
				if got[mod], err = io.ReadAll(tr); err != nil {
					rerr = fmt.Errorf("vm kernel: %s: %w", name, err)
				}
			}
		}
		if rerr != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, pipe) // let dpkg-deb finish writing
	if err := cmd.Wait(); err != nil && rerr == nil {
		rerr = fmt.Errorf("vm kernel: dpkg-deb --fsys-tarfile %s: %w: %s", deb, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return got, kernel, rerr
}

// decompressKernel turns a bzImage into the ELF vmlinux inside it and checks
// that qemu can boot it through PVH.
func decompressKernel(ctx context.Context, bzimage []byte) ([]byte, error) {
	payload, size, err := bzImagePayload(bzimage)
	if err != nil {
		return nil, fmt.Errorf("vm kernel: %w", err)
	}
	cmd := exec.CommandContext(ctx, "xz", "--decompress", "--stdout")
	cmd.Stdin = bytes.NewReader(payload)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("vm kernel: xz: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	if out.Len() != int(size) {
		return nil, fmt.Errorf("vm kernel: decompressed %d bytes, bzimage says %d", out.Len(), size)
	}
	if err := checkPVH(out.Bytes()); err != nil {
		return nil, fmt.Errorf("vm kernel: %w", err)
	}
	return out.Bytes(), nil
}

// buildInitrd writes the gzipped initramfs: busybox with its applets, the
// modules with their load order baked into /init, and the /etc skeleton
// under /skel.
func buildInitrd(kdir, dst string, links []string) error {
	bbPath, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("%w: busybox: %w", ErrPrerequisite, err)
	}
	bb, err := os.ReadFile(bbPath)
	if err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	list, err := exec.Command(bbPath, "--list").Output()
	if err != nil {
		return fmt.Errorf("vm initramfs: busybox --list: %w", err)
	}
	orderData, err := os.ReadFile(filepath.Join(kdir, modulesDirName, "order"))
	if err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	order := strings.Fields(string(orderData))

	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	c := newCPIOWriter(zw)
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "newroot", "lib", "lib/modules", "skel"} {
		c.Dir(d, 0o755)
	}
	// The kernel opens /dev/console for init before /init mounts devtmpfs.
	c.CharDev("dev/console", 0o600, 5, 1)
	c.CharDev("dev/null", 0o666, 1, 3)
	c.File("bin/busybox", 0o755, bb)
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" && !strings.Contains(applet, "/") {
			c.Symlink("bin/"+applet, "busybox")
		}
	}
	for _, m := range order {
		ko, err := os.ReadFile(filepath.Join(kdir, modulesDirName, m+".ko"))
		if err != nil {
			return fmt.Errorf("vm initramfs: %w", err)
		}
		c.File("lib/modules/"+m+".ko", 0o644, ko)
	}
	c.File("init", 0o755, []byte(initScript(order, links)))
	dirs := map[string]bool{"skel": true}
	mkdirs := func(p string) {
		var parts []string
		for d := filepath.Dir(p); !dirs[d]; d = filepath.Dir(d) {
			parts = append(parts, d)
			dirs[d] = true
		}
		for _, d := range slices.Backward(parts) {
			c.Dir(d, 0o755)
		}
	}
	for _, f := range etcSkeleton() {
		p := "skel/etc/" + f.Path
		mkdirs(p)
		if f.Symlink != "" {
			c.Symlink(p, f.Symlink)
		} else {
			c.File(p, f.Mode, []byte(f.Data))
		}
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	return nil
}

// sweepRuns removes the run directories that a killed test process left
// behind (each holds a copy of a test binary). A run holds the lock file in
// its directory until it ends; a directory whose lock can be taken belongs
// to no live run. One without a lock file yet may be a run just starting,
// unless it is old.
func sweepRuns(runsDir string) {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(runsDir, e.Name())
		f, err := os.Open(filepath.Join(dir, runLockName))
		if errors.Is(err, os.ErrNotExist) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				_ = os.RemoveAll(dir)
			}
			continue
		}
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		f.Close()
	}
}
