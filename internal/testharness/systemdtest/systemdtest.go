// Package systemdtest runs a package's tests against a real systemd.
//
// A package whose tests need systemd uses
//
//	func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }
//
// and calls [Require] at the top of each such test. Main boots a throwaway instance
// (internal/testharness/sandbox), re-runs the very same test binary inside it with the same flags, streams its
// output, stops the instance and returns the inner exit code. Off a capable machine the tests skip
// loudly; with CI=true they fail instead.
package systemdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
	"github.com/slicelet/slicelet/internal/testharness/vmtest"
)

// InsideEnv is set in the environment of a test binary that runs inside a sandbox ("sandbox") or
// the cgroup v2 VM ("vm").
const InsideEnv = "SLICELET_SYSTEMDTEST"

// VMEnv set to 1 also runs the tests in the cgroup v2 VM after the sandbox run.
const VMEnv = "SLICELET_VM"

// Env describes where a test that passed [Require] is running.
type Env struct {
	// Where is "sandbox" or "vm".
	Where string
	// CgroupRoot is where the instance's cgroup hierarchies are mounted.
	CgroupRoot string
}

// skipReason is why tests that need systemd cannot run in this process; set by Main.
var skipReason = "systemdtest.Main is not this package's TestMain, so no systemd was booted"

// Inside reports whether this test binary runs inside a sandbox or VM booted by Main.
func Inside() bool {
	w := os.Getenv(InsideEnv)
	return w == "sandbox" || w == "vm"
}

// CI reports whether CI=true (or 1): missing prerequisites are failures there, never skips.
func CI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Require returns the environment when the test runs inside a real systemd. Outside, it skips
// the test with the reason, or fails it when CI=true.
func Require(t testing.TB) Env {
	t.Helper()
	if Inside() {
		return Env{Where: os.Getenv(InsideEnv), CgroupRoot: "/sys/fs/cgroup"}
	}
	if CI() {
		t.Fatalf("systemdtest: this test needs real systemd and CI=true: %s", skipReason)
	}
	t.Skipf("SKIP (needs real systemd): %s", skipReason)
	return Env{}
}

// SandboxOnly skips t, saying why, when it runs in the cgroup v2 VM: for tests whose subject
// does not depend on the cgroup layout and that are too slow under the VM's software emulation
// (each such test states what of it the VM still covers). In the sandbox it does nothing.
func SandboxOnly(t testing.TB, env Env, why string) {
	t.Helper()
	if env.Where == "vm" {
		t.Skipf("sandbox only (runs in the hybrid sandbox of this same run): %s", why)
	}
}

// FilesEnv names, inside a sandbox, the directory holding the files given in Options.Files.
const FilesEnv = "SLICELET_SYSTEMDTEST_FILES"

// Options configure MainWith.
type Options struct {
	// Files are host files (absolute paths) the tests need inside the sandbox, such as a binary
	// make build wrote: the sandbox sees neither the host's /tmp nor the module outside the
	// package directory. They are copied into one directory, named by FilesEnv inside. A file
	// that does not exist is left out; the test that needs it says so. The cgroup v2 VM gets
	// none: such tests run in the sandbox only (SandboxOnly).
	Files []string
	// Dirs are host directories (absolute paths) the tests read, such as test data outside the
	// package directory: each is copied whole to <FilesEnv>/<its base name>, in the sandbox and
	// in the cgroup v2 VM alike. Keep them small: the VM gets a copy on every run.
	Dirs []string
}

// dirFiles lists the regular files under each of dirs as paths relative to the directory's
// parent (<base>/<rel>), mapped to their host paths.
func dirFiles(dirs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(filepath.Dir(d), path)
			if err != nil {
				return err
			}
			out[rel] = path
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("test data directory %s: %w", d, err)
		}
	}
	return out, nil
}

// Main is the body of TestMain for packages whose tests need systemd. Inside an instance it runs
// the tests; outside it boots a sandbox, re-runs the binary there and returns its exit code.
func Main(m *testing.M) int { return MainWith(m, Options{}) }

// MainWith is Main with options.
func MainWith(m *testing.M, o Options) int {
	if Inside() || listOnly(os.Args[1:]) {
		return m.Run()
	}
	deadline := runDeadline(os.Args[1:], time.Now())
	if err := sandbox.Prerequisites(); err != nil {
		skipReason = err.Error()
		if CI() {
			fmt.Fprintf(os.Stderr, "FAIL: systemdtest: CI=true and the systemd sandbox cannot run here: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "SKIP: systemdtest: no systemd sandbox, tests that need systemd will skip: %v\n", err)
		return m.Run()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := runInSandbox(ctx, o, os.Stdout, os.Stderr)
	if code == 0 && os.Getenv(VMEnv) == "1" {
		code = runInVM(ctx, o, deadline, os.Stdout, os.Stderr)
	}
	return code
}

// listOnly reports whether the binary was asked only to list its tests (go test -list), which
// needs no systemd.
func listOnly(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(strings.TrimLeft(a, "-"), "test.list") {
			return true
		}
	}
	return false
}

// runInVM runs this test binary inside the cgroup v2 VM (internal/testharness/vmtest): a throwaway qemu
// guest with a pure cgroup v2 kernel and the host's systemd as PID 1. The same tests that ran in
// the hybrid sandbox run again there; only their expected cgroup files differ by mode. With
// CI=true a VM that cannot be prepared or booted is a failure, never a skip.
func runInVM(ctx context.Context, o Options, deadline time.Time, stdout, stderr io.Writer) int {
	if err := vmtest.Prepare(ctx); err != nil {
		if errors.Is(err, vmtest.ErrPrerequisite) && !CI() {
			fmt.Fprintf(stderr, "SKIP: systemdtest: no cgroup v2 VM here: %v\n", err)
			return 0
		}
		fmt.Fprintf(stderr, "FAIL: systemdtest: cgroup v2 VM: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: test binary: %v\n", err)
		return 1
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: working directory: %v\n", err)
		return 1
	}
	// The guest gets only the environment listed here.
	env := []string{InsideEnv + "=vm"}
	dirs, err := dirFiles(o.Dirs)
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
		return 1
	}
	extra := map[string]string{}
	for rel, host := range dirs {
		extra[filepath.Join("files", rel)] = host
	}
	if len(extra) > 0 {
		env = append(env, FilesEnv+"=/mnt/io/files")
	}
	if CI() {
		env = append(env, "CI=true")
	}
	budget := vmBudget(deadline, time.Now())
	fmt.Fprintf(stderr, "systemdtest: running the tests again in a cgroup v2 VM (guard %s)\n", budget.Round(time.Second))
	res, err := vmtest.Run(ctx, vmtest.Options{
		Binary:     exe,
		Args:       vmtest.GuestTestArgs(os.Args[1:]),
		Env:        env,
		Dir:        cwd,
		Timeout:    budget,
		ExtraFiles: extra,
	})
	_, _ = stdout.Write(res.Output)
	fmt.Fprintf(stderr, "systemdtest: cgroup v2 VM run took %s\n", res.Duration.Round(time.Millisecond))
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: cgroup v2 VM: %v\n", err)
		return 1
	}
	return res.ExitCode
}

// Timing of the VM run. The VM's guard used to be a fixed 5 minutes; under software emulation
// the guest slows down with the host's load many times over, and healthy runs of the slower
// packages were killed on a loaded machine. The guard is now what is left of the test binary's
// own -test.timeout (go test kills the binary one minute after it), so it only fires where go
// test would have failed the package anyway, and early enough to report the console's tail.
const (
	// noTimeoutBudget is the VM's guard when the binary runs without -test.timeout.
	noTimeoutBudget = 30 * time.Minute
	// vmReportMargin is kept back from the deadline for the VM's output to come back.
	vmReportMargin = 30 * time.Second
	// minVMBudget is the least the VM gets, even past the deadline (go test's kill comes later).
	minVMBudget = 2 * time.Minute
)

// runDeadline is when the test binary started at start with args runs out of its -test.timeout;
// the zero time when it has none.
func runDeadline(args []string, start time.Time) time.Time {
	d := testTimeout(args)
	if d <= 0 {
		return time.Time{}
	}
	return start.Add(d)
}

// testTimeout is the value of -test.timeout in args (0 when absent, zero or malformed).
func testTimeout(args []string) time.Duration {
	var d time.Duration
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "test.timeout" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		if v, err := time.ParseDuration(value); err == nil {
			d = v
		}
	}
	return d
}

// vmBudget is the VM's guard at now for a binary whose time ends at deadline.
func vmBudget(deadline, now time.Time) time.Duration {
	if deadline.IsZero() {
		return noTimeoutBudget
	}
	return max(deadline.Sub(now)-vmReportMargin, minVMBudget)
}

// runInSandbox boots an instance, runs this test binary inside and always stops the instance.
func runInSandbox(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: test binary: %v\n", err)
		return 1
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: working dir: %v\n", err)
		return 1
	}
	inst, err := sandbox.Start(ctx, sandbox.Options{
		Name:       instanceName(exe),
		ExtraBinds: hostPaths(os.Args[1:], cwd),
	})
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "systemdtest: sandbox %s booted in %s\n", inst.Name(), inst.BootDuration().Round(1e6))
	code := runInside(ctx, inst, exe, cwd, o, stdout, stderr)
	if err := inst.Stop(); err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: stopping sandbox %s: %v\n", inst.Name(), err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// runInside copies the test binary into the instance's state dir (the binary lives under the
// host /tmp, which the instance cannot see) and runs it there with the same arguments.
func runInside(ctx context.Context, inst *sandbox.Instance, exe, cwd string, o Options, stdout, stderr io.Writer) int {
	inner := filepath.Join(inst.StateDir(), filepath.Base(exe))
	if err := copyFile(exe, inner); err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
		return 1
	}
	filesDir := filepath.Join(inst.StateDir(), "files")
	if err := os.MkdirAll(filesDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
		return 1
	}
	for _, f := range o.Files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := copyFile(f, filepath.Join(filesDir, filepath.Base(f))); err != nil {
			fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
			return 1
		}
	}
	dirs, err := dirFiles(o.Dirs)
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
		return 1
	}
	for rel, host := range dirs {
		dst := filepath.Join(filesDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
			return 1
		}
		if err := copyFile(host, dst); err != nil {
			fmt.Fprintf(stderr, "FAIL: systemdtest: %v\n", err)
			return 1
		}
	}
	cmd := inst.CommandIn(ctx, cwd, inner, os.Args[1:]...)
	cmd.Env = append(innerEnv(os.Environ()), FilesEnv+"="+filesDir)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(stderr, "FAIL: systemdtest: test binary inside %s: %v\n", inst.Name(), err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: systemdtest: test binary inside %s: %v\n", inst.Name(), err)
		return 1
	}
	return 0
}

// innerEnv is the caller's environment with InsideEnv set, minus a TMPDIR that points into a
// directory the instance replaces with its own tmpfs.
func innerEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == InsideEnv {
			continue
		}
		if k == "TMPDIR" && !visibleInside(v) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, InsideEnv+"=sandbox")
}

// visibleInside reports whether a host path is the same inside an instance (not under a private
// tmpfs).
func visibleInside(p string) bool {
	for _, prefix := range []string{"/tmp", "/var/tmp", "/run"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return false
		}
	}
	return true
}

// pathFlags are test flags whose value is a file the test binary writes; go test points several
// of them into its own work directory under the host /tmp.
var pathFlags = map[string]bool{
	"test.testlogfile": true, "test.coverprofile": true, "test.cpuprofile": true,
	"test.memprofile": true, "test.blockprofile": true, "test.mutexprofile": true, "test.trace": true,
}

// dirFlags are test flags whose value is a directory the test binary writes into.
var dirFlags = map[string]bool{"test.gocoverdir": true, "test.outputdir": true, "test.fuzzcachedir": true}

// hostPaths returns the host directories the test binary writes to, to bind read-write into the
// instance: the directories named by output flags, and the working directory (the package dir,
// where golden files live; it is read-only inside otherwise). Relative file flags resolve against
// -test.outputdir, as the testing package does.
func hostPaths(args []string, cwd string) []string {
	var out []string
	add := func(p string) {
		if p == "" || p == "/" {
			return
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, filepath.Clean(p))
		}
	}
	outputDir := cwd
	vals := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !pathFlags[k] && !dirFlags[k] {
			continue
		}
		if !ok && i+1 < len(args) {
			i++
			v = args[i]
		}
		vals[k] = v
		if k == "test.outputdir" && v != "" {
			outputDir = v
		}
	}
	add(cwd)
	for k, v := range vals {
		if v == "" {
			continue
		}
		if dirFlags[k] {
			// The fuzzing cache may not exist yet: created here, it can be bound (the binary
			// would create it inside, where the host's cache is read-only).
			if k == "test.fuzzcachedir" {
				_ = os.MkdirAll(v, 0o755)
			}
			add(v)
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(outputDir, v)
		}
		add(filepath.Dir(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var unsafeNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// instanceName is "<package>-<random>" (e.g. "units-3fa9c2d1"): readable in `hack/sandbox list`
// and unique when go test runs several packages' binaries at once.
func instanceName(exe string) string {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(exe)), ".test")
	base = strings.Trim(unsafeNameChars.ReplaceAllString(base, "-"), "-")
	if len(base) > 24 {
		base = base[:24]
	}
	if base == "" {
		base = "test"
	}
	return base + "-" + randomSuffix()
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s into the sandbox: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("copy %s into the sandbox: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}
