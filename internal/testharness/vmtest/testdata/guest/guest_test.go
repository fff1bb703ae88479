// Package guest holds the tests that internal/testharness/vmtest's own tests run inside
// the VM: they check the guest is what the project's systemd tests need (a
// pure cgroup v2 hierarchy with controllers, systemd reachable over D-Bus,
// limits applied and enforced) and give a failing and a hanging binary.
// Outside the VM every test skips.
package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/units"
	"golang.org/x/sys/unix"
)

const (
	envGuest = "SLICELET_SYSTEMDTEST" // "vm" inside the VM
	envHog   = "VMTEST_GUEST_HOG"     // set: this process is the memory hog
	envFail  = "VMTEST_GUEST_FAIL"    // set: TestGuestFails fails
	envHang  = "VMTEST_GUEST_HANG"    // set: TestGuestHangs hangs
	envWD    = "VMTEST_GUEST_WORKDIR" // the host directory TestGuestWorkDir expects as its working directory
)

func TestMain(m *testing.M) {
	if os.Getenv(envHog) != "" {
		hog()
		return
	}
	os.Exit(m.Run())
}

// hog touches 256 MiB, far above the 32 MiB limit of its unit, so that the
// kernel's memory controller has to OOM-kill it. Reaching the end means the
// limit was not enforced.
func hog() {
	var keep [][]byte
	for range 256 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Printf("hog survived with %d MiB\n", len(keep))
	os.Exit(0)
}

func inGuest(t *testing.T) {
	t.Helper()
	if os.Getenv(envGuest) != "vm" {
		t.Skipf("%s is not vm: these tests only run inside the vmtest VM", envGuest)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestGuestCgroupV2(t *testing.T) {
	inGuest(t)
	const root = "/sys/fs/cgroup"
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("%s: filesystem magic %#x, want cgroup2 %#x", root, st.Type, unix.CGROUP2_SUPER_MAGIC)
	}
	ctrls := strings.Fields(readTrim(t, filepath.Join(root, "cgroup.controllers")))
	t.Logf("cgroup.controllers: %v", ctrls)
	for _, c := range []string{"cpu", "memory", "pids", "io"} {
		if !slices.Contains(ctrls, c) {
			t.Errorf("cgroup.controllers %v lacks %s", ctrls, c)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The private socket is what units/ uses first; the system bus (through
	// dbus-daemon) is its fallback. Both must work.
	if _, err := os.Stat("/run/systemd/private"); err != nil {
		t.Fatal(err)
	}
	// units.Connect is exactly the path slicelet uses (private socket first).
	sd, err := units.Connect(ctx, units.Options{CgroupRoot: root})
	if err != nil {
		t.Fatalf("systemd private socket: %v", err)
	}
	defer sd.Close()
	if sd.Mode() != units.ModeUnified {
		t.Errorf("units sees cgroup mode %s, want v2", sd.Mode())
	}
	ver, err := exec.CommandContext(ctx, "busctl", "--system", "get-property", "org.freedesktop.systemd1",
		"/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "Version").CombinedOutput()
	if err != nil {
		t.Fatalf("system bus: Version: %v: %s", err, ver)
	}
	t.Logf("systemd %s over the system bus", strings.TrimSpace(string(ver)))

	const slice = "vmtestprobe.slice"
	props := []units.Property{
		{Name: "Description", Value: "vmtest probe"},
		{Name: "MemoryMax", Value: uint64(32 << 20)},
		{Name: "CPUWeight", Value: uint64(50)},
		{Name: "TasksMax", Value: uint64(7)},
		{Name: "IOWeight", Value: uint64(200)},
	}
	if err := sd.StartSlice(ctx, slice, props); err != nil {
		t.Fatalf("start %s: %v", slice, err)
	}
	dir := filepath.Join(root, slice)
	for file, want := range map[string]string{
		"memory.max": "33554432",
		"cpu.weight": "50",
		"pids.max":   "7",
		"io.weight":  "default 200",
	} {
		if got := readTrim(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s/%s = %q, want %q", slice, file, got, want)
		} else {
			t.Logf("%s/%s = %s", slice, file, got)
		}
	}
	// systemd enables controllers in the parents on demand: creating the
	// slice with these properties must have enabled them at the root.
	sub := strings.Fields(readTrim(t, filepath.Join(root, "cgroup.subtree_control")))
	t.Logf("root cgroup.subtree_control: %v", sub)
	for _, c := range []string{"cpu", "memory", "pids", "io"} {
		if !slices.Contains(sub, c) {
			t.Errorf("root cgroup.subtree_control %v lacks %s", sub, c)
		}
	}

	// A memory hog in a 32 MiB service must be OOM-killed.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const hogUnit = "vmtest-hog.service"
	out, err := exec.CommandContext(ctx, "systemd-run", "--wait", "--quiet", "--unit="+hogUnit,
		"--slice="+slice, "-p", "MemoryMax=32M", "-p", "MemorySwapMax=0",
		"--setenv="+envHog+"=1", self).CombinedOutput()
	t.Logf("systemd-run %s: err=%v output=%q", hogUnit, err, out)
	res, err := exec.CommandContext(ctx, "systemctl", "show", "-p", "Result", "--value", hogUnit).Output()
	if err != nil {
		t.Fatalf("systemctl show %s: %v", hogUnit, err)
	}
	if got := strings.TrimSpace(string(res)); got != "oom-kill" {
		t.Errorf("%s Result = %q, want oom-kill", hogUnit, got)
	} else {
		t.Logf("%s Result = %s", hogUnit, got)
	}
}

func TestGuestFails(t *testing.T) {
	inGuest(t)
	if os.Getenv(envFail) == "" {
		t.Skipf("%s not set", envFail)
	}
	t.Fatal("guest failing on purpose")
}

func TestGuestHangs(t *testing.T) {
	inGuest(t)
	if os.Getenv(envHang) == "" {
		t.Skipf("%s not set", envHang)
	}
	t.Log("guest hanging on purpose")
	for {
		// pause(2) blocks in the kernel without tripping Go's deadlock
		// detector, as a real hung test might.
		_ = unix.Pause()
	}
}

// TestGuestWorkDir checks Options.Dir: the host directory is the working
// directory, its files are readable and what the guest writes reaches the
// host.
func TestGuestWorkDir(t *testing.T) {
	inGuest(t)
	want := os.Getenv(envWD)
	if want == "" {
		t.Skipf("%s not set", envWD)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if wd != want {
		t.Fatalf("working directory %s, want %s", wd, want)
	}
	in, err := os.ReadFile("testdata/input.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("from-guest.txt", append([]byte("guest read: "), in...), 0o644); err != nil {
		t.Fatal(err)
	}
}
