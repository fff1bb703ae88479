package vmtest

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// requireVM skips a test that boots a VM when this machine cannot, loudly;
// with CI=true it fails instead, as the project's rules demand.
func requireVM(t *testing.T) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if testing.Short() && !ci {
		t.Skip("SKIP (-short): booting a VM takes ≈10 s")
	}
	if err := Prerequisites(); err != nil {
		if ci {
			t.Fatalf("CI=true and the VM cannot run: %v", err)
		}
		t.Skipf("SKIP: VM tests need what is missing here: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := Prepare(ctx); err != nil {
		if ci || !errors.Is(err, ErrPrerequisite) {
			t.Fatalf("vm prepare: %v", err)
		}
		t.Skipf("SKIP: VM tests need what is missing here: %v", err)
	}
}

var guestBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// guestBinary builds the test binary of testdata/guest once per test run.
// It is built with cgo on when a C compiler is there, which makes it
// dynamically linked (godbus and go-systemd pull in os/user and net): the
// guest's /usr is the host's, so the host's libc must work there.
func guestBinary(t *testing.T) string {
	t.Helper()
	guestBin.once.Do(func() {
		guestBin.dir, guestBin.err = os.MkdirTemp("", "vmtest-guest-")
		if guestBin.err != nil {
			return
		}
		guestBin.path = filepath.Join(guestBin.dir, "guest.test")
		cmd := exec.Command("go", "test", "-c", "-o", guestBin.path, "./testdata/guest")
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			guestBin.err = errors.New("go test -c ./testdata/guest: " + err.Error() + ": " + string(out))
		}
	})
	if guestBin.err != nil {
		t.Fatal(guestBin.err)
	}
	return guestBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestBin.dir != "" {
		os.RemoveAll(guestBin.dir)
	}
	os.Exit(code)
}

func runGuest(t *testing.T, opts Options) (Result, error) {
	t.Helper()
	res, err := Run(t.Context(), opts)
	t.Logf("vm run: exit code %d, %s", res.ExitCode, res.Duration.Round(time.Millisecond))
	t.Logf("guest output:\n%s", res.Output)
	if testing.Verbose() {
		t.Logf("guest console:\n%s", res.Console)
	}
	return res, err
}

func TestVMBoots(t *testing.T) {
	requireVM(t)
	bin := guestBinary(t)
	if f, err := elf.Open(bin); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Log("guest binary is dynamically linked (cgo)")
			}
		}
		f.Close()
	}
	wd := workDir(t)
	res, err := runGuest(t, Options{
		Binary: bin,
		// As go test passes them: the host-only log file must not reach
		// the guest, or the binary fails before any test.
		Args: GuestTestArgs([]string{"-test.testlogfile=/tmp/go-build0/b001/testlog.txt",
			"-test.paniconexit0", "-test.timeout=5m0s", "-test.v=true",
			"-test.run=^(TestGuestCgroupV2|TestGuestWorkDir)$"}),
		Env: []string{"SLICELET_SYSTEMDTEST=vm", "VMTEST_GUEST_WORKDIR=" + guestDir(wd)},
		Dir: wd,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("guest exit code %d, want 0", res.ExitCode)
	}
	// A skip would exit 0 too: the tests must really have run.
	for _, name := range []string{"TestGuestCgroupV2", "TestGuestWorkDir"} {
		if !bytes.Contains(res.Output, []byte("--- PASS: "+name)) {
			t.Errorf("guest output lacks --- PASS: %s", name)
		}
	}
	got, err := os.ReadFile(filepath.Join(wd, "from-guest.txt"))
	if err != nil {
		t.Fatalf("file the guest wrote into Dir: %v", err)
	}
	if want := "guest read: input from the host\n"; string(got) != want {
		t.Errorf("from-guest.txt = %q, want %q", got, want)
	}
}

func TestVMFailingBinary(t *testing.T) {
	requireVM(t)
	res, err := runGuest(t, Options{
		Binary: guestBinary(t),
		Args:   []string{"-test.run=^TestGuestFails$"},
		Env:    []string{"SLICELET_SYSTEMDTEST=vm", "VMTEST_GUEST_FAIL=it's on"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 {
		t.Errorf("guest exit code %d, want 1", res.ExitCode)
	}
	if !bytes.Contains(res.Output, []byte("guest failing on purpose")) {
		t.Errorf("guest output lacks the failure message")
	}
}

func TestVMHungGuestTimeout(t *testing.T) {
	requireVM(t)
	// The guard fires whatever the guest has reached; the test checks the timeout's report.
	const timeout = 15 * time.Second
	res, err := runGuest(t, Options{
		Binary:  guestBinary(t),
		Args:    []string{"-test.v", "-test.run=^TestGuestHangs$"},
		Env:     []string{"SLICELET_SYSTEMDTEST=vm", "VMTEST_GUEST_HANG=1"},
		Timeout: timeout,
	})
	if !errors.Is(err, errTimeout) {
		t.Fatalf("Run error = %v, want a timeout", err)
	}
	t.Logf("Run error: %v", err)
	if res.ExitCode != -1 {
		t.Errorf("exit code %d, want -1", res.ExitCode)
	}
	// The console's tail is in the error: its last line, whatever the boot reached in the
	// timeout (on a loaded machine the emulated guest may still be in the kernel or the
	// initramfs; on an idle one it reaches the hung binary).
	last := "(empty)"
	if lines := bytes.Split(bytes.TrimSpace(tailLines(res.Console, consoleTailLines)), []byte("\n")); len(lines[len(lines)-1]) > 0 {
		last = string(lines[len(lines)-1])
	}
	if !strings.Contains(err.Error(), last) {
		t.Errorf("error lacks the console's last line %q", last)
	}
	if !bytes.Contains(res.Output, []byte("guest hanging on purpose")) {
		t.Logf("the guest did not get to the hung binary within %s (heavy load?)", timeout)
	}
}

func TestVMHungBinaryGuard(t *testing.T) {
	requireVM(t)
	orig := guardFor
	t.Cleanup(func() { guardFor = orig })
	guardFor = func(time.Duration) time.Duration { return 3 * time.Second }
	res, err := runGuest(t, Options{
		Binary: guestBinary(t),
		Args:   []string{"-test.v", "-test.run=^TestGuestHangs$"},
		Env:    []string{"SLICELET_SYSTEMDTEST=vm", "VMTEST_GUEST_HANG=1"},
		// The guard above ends the run seconds after the binary starts; the VM's own timeout is
		// only the last resort and must outlast a boot slowed by a loaded host.
		Timeout: 10 * time.Minute,
	})
	if !errors.Is(err, errTimeout) {
		t.Fatalf("Run error = %v, want a timeout", err)
	}
	t.Logf("Run error: %v", err)
	if res.ExitCode != 124 {
		t.Errorf("exit code %d, want 124 (timeout(1) after its signal)", res.ExitCode)
	}
	// The Go runtime's answer to SIGQUIT: the stacks of the hung test.
	for _, want := range []string{"SIGQUIT", "TestGuestHangs"} {
		if !bytes.Contains(res.Output, []byte(want)) {
			t.Errorf("guest output lacks %q", want)
		}
	}
	if want := guardMessage; !bytes.Contains(res.Console, []byte(want)) {
		t.Errorf("console lacks %q", want)
	}
}

// workDir makes a directory for Options.Dir with testdata/input.txt in it.
// It lives in the cache's runs directory, not under /tmp, which Dir may not
// be under (the guest empties its /tmp at boot).
func workDir(t *testing.T) string {
	t.Helper()
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.MkdirTemp(filepath.Join(cache, runsDirName), "workdir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(wd) })
	if err := os.Mkdir(filepath.Join(wd, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "testdata", "input.txt"), []byte("input from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return wd
}
