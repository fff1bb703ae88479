package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests boot real instances; they need root and the tools Prerequisites names. With CI=true
// a missing prerequisite fails them.

func requireSandbox(t testing.TB) {
	t.Helper()
	if err := Prerequisites(); err != nil {
		if v := strings.ToLower(os.Getenv("CI")); v == "true" || v == "1" {
			t.Fatalf("CI=true and the sandbox cannot run here: %v", err)
		}
		t.Skipf("SKIP (needs root, systemd and util-linux): %v", err)
	}
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startInstance(t testing.TB, o Options) *Instance {
	t.Helper()
	if o.Log == nil {
		o.Log = logWriter{t}
	}
	inst, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := inst.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return inst
}

// inside runs a command in the instance and returns its trimmed stdout.
func inside(t testing.TB, inst *Instance, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := inst.Command(context.Background(), name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s inside %s: %v\n%s", name, strings.Join(args, " "), inst.Name(), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// hostState is what a sandbox must never change on the host.
type hostState struct {
	// cgroupMounts are the mountinfo lines at and below /sys/fs/cgroup, superblock options included.
	cgroupMounts []string
	// hierarchies are /proc/cgroups' name, hierarchy id and enabled columns: a new v1 hierarchy
	// changes an id.
	hierarchies []string
	// topLevel maps each directory that holds instance cgroups to its entries.
	topLevel map[string][]string
	hostname string
}

func snapshotHost(t testing.TB) hostState {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var s hostState
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == cgroupRoot || strings.HasPrefix(f[4], cgroupRoot+"/")) {
			s.cgroupMounts = append(s.cgroupMounts, line)
		}
	}
	pc, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(pc), "\n") {
		if f := strings.Fields(line); len(f) == 4 {
			s.hierarchies = append(s.hierarchies, f[0]+" "+f[1]+" "+f[3])
		}
	}
	cfg, err := planInstance("probe", "/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	s.topLevel = map[string][]string{}
	for _, h := range cfg.Cgroups {
		dirs := []string{h.Parent}
		if root := filepath.Join(cgroupRoot, h.Rel); root != h.Parent {
			dirs = append(dirs, root)
		}
		for _, d := range dirs {
			entries, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.IsDir() {
					s.topLevel[d] = append(s.topLevel[d], e.Name())
				}
			}
		}
	}
	s.hostname, _ = os.Hostname()
	return s
}

// unitCgroupSuffixes name the cgroups systemd creates; none may appear at the host's roots.
var unitCgroupSuffixes = []string{".scope", ".slice", ".service", ".mount", ".socket", ".swap"}

// checkNoUnitCgroups fails if a systemd-made cgroup appeared at a host root since before. Other
// sandboxes (parallel test binaries) may add their plain instance directories meanwhile.
func checkNoUnitCgroups(t testing.TB, before, now hostState) {
	t.Helper()
	for dir, names := range now.topLevel {
		for _, n := range names {
			if slices.Contains(before.topLevel[dir], n) {
				continue
			}
			for _, suf := range unitCgroupSuffixes {
				if strings.HasSuffix(n, suf) {
					t.Errorf("host cgroup %s/%s appeared: the instance leaked a unit cgroup to the host root", dir, n)
				}
			}
		}
	}
}

func checkHostUnchanged(t testing.TB, before, after hostState) {
	t.Helper()
	if !slices.Equal(before.cgroupMounts, after.cgroupMounts) {
		t.Errorf("host cgroup mounts changed:\nbefore %q\nafter  %q", before.cgroupMounts, after.cgroupMounts)
	}
	if !slices.Equal(before.hierarchies, after.hierarchies) {
		t.Errorf("host cgroup hierarchies changed:\nbefore %q\nafter  %q", before.hierarchies, after.hierarchies)
	}
	if before.hostname != after.hostname {
		t.Errorf("host name changed from %q to %q", before.hostname, after.hostname)
	}
	checkNoUnitCgroups(t, before, after)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestBootRunStop(t *testing.T) {
	requireSandbox(t)
	before := snapshotHost(t)
	marker, err := os.CreateTemp("/tmp", "slicelet-sandbox-marker-*")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	t.Cleanup(func() { os.Remove(marker.Name()) })

	inst := startInstance(t, Options{})
	t.Logf("boot %s", inst.BootDuration())

	if got := inside(t, inst, "systemctl", "is-system-running"); got != "running" {
		t.Errorf("is-system-running = %q, want running", got)
	}
	if got := inside(t, inst, "cat", "/proc/1/comm"); got != "systemd" {
		t.Errorf("PID 1 inside is %q, want systemd", got)
	}
	if got := inside(t, inst, "hostname"); got != inst.Name() {
		t.Errorf("hostname inside = %q, want %q", got, inst.Name())
	}
	inside(t, inst, "systemd-run", "--wait", "--quiet", "true")

	// A transient slice, as slicelet creates them, lands under the instance's own directories.
	inside(t, inst, "busctl", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
		"org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))",
		"slicelet-probe.slice", "fail", "1", "MemoryAccounting", "b", "true", "0")
	// A service in the slice needs it started; --wait returns after both jobs are done.
	inside(t, inst, "systemd-run", "--wait", "--quiet", "--slice=slicelet-probe.slice", "true")
	if got := inside(t, inst, "systemctl", "show", "-p", "Transient", "--value", "slicelet-probe.slice"); got != "yes" {
		t.Errorf("slicelet-probe.slice Transient=%q, want yes", got)
	}
	cg := inside(t, inst, "systemctl", "show", "-p", "ControlGroup", "--value", "slicelet-probe.slice")
	if cg != "/slicelet.slice/slicelet-probe.slice" {
		t.Errorf("slicelet-probe.slice ControlGroup=%q", cg)
	}
	for _, h := range inst.cfg.Cgroups {
		if h.Rel != "systemd" && h.Rel != "memory" && h.Rel != "unified" {
			continue
		}
		if p := filepath.Join(h.Dir, cg); !exists(p) {
			t.Errorf("transient slice cgroup %s missing on the host", p)
		}
		if p := filepath.Join(h.Parent, cg); exists(p) {
			t.Errorf("transient slice cgroup %s created outside the instance", p)
		}
	}
	if exists(filepath.Join(cgroupRoot, "systemd", "init.scope")) && !slices.Contains(before.topLevel[filepath.Join(cgroupRoot, "systemd")], "init.scope") {
		t.Error("init.scope created at the host's name=systemd root")
	}
	during := snapshotHost(t)
	checkNoUnitCgroups(t, before, during)
	if !slices.Equal(before.cgroupMounts, during.cgroupMounts) {
		t.Errorf("host cgroup mounts changed while running:\nbefore %q\nnow    %q", before.cgroupMounts, during.cgroupMounts)
	}

	// Another process's view: List and Attach find it by name.
	list, err := List("")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(s Status) bool { return s.Name == inst.Name() && s.Running }) {
		t.Errorf("List() = %+v, want %s running", list, inst.Name())
	}
	att, err := Attach("", inst.Name())
	if err != nil {
		t.Fatal(err)
	}
	if att.InitPID() != inst.InitPID() {
		t.Errorf("attached init pid %d, want %d", att.InitPID(), inst.InitPID())
	}
	inside(t, att, "true")

	began := time.Now()
	if err := inst.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("stop %s", time.Since(began))
	if err := inst.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if alive(inst.pids.InitPID, inst.pids.InitStart) || alive(inst.pids.LauncherPID, inst.pids.LauncherStart) {
		t.Errorf("init %d or launcher %d still running after stop", inst.pids.InitPID, inst.pids.LauncherPID)
	}
	for _, d := range inst.CgroupDirs() {
		if exists(d) {
			t.Errorf("cgroup %s left after stop", d)
		}
	}
	if exists(inst.StateDir()) {
		t.Errorf("state dir %s left after stop", inst.StateDir())
	}
	if !exists(marker.Name()) {
		t.Errorf("marker %s in the host /tmp is gone", marker.Name())
	}
	checkHostUnchanged(t, before, snapshotHost(t))
}

func TestTwoInstancesAtOnce(t *testing.T) {
	requireSandbox(t)
	before := snapshotHost(t)
	insts := make([]*Instance, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for n := range insts {
		wg.Go(func() { insts[n], errs[n] = Start(context.Background(), Options{Log: logWriter{t}}) })
	}
	wg.Wait()
	for n, inst := range insts {
		if errs[n] != nil {
			t.Fatalf("start %d: %v", n, errs[n])
		}
		t.Cleanup(func() { _ = inst.Stop() })
	}
	if insts[0].Name() == insts[1].Name() || insts[0].InitPID() == insts[1].InitPID() {
		t.Fatalf("instances share a name or init: %s/%d %s/%d", insts[0].Name(), insts[0].InitPID(), insts[1].Name(), insts[1].InitPID())
	}
	for _, inst := range insts {
		inside(t, inst, "systemd-run", "--wait", "--quiet", "true")
		if got := inside(t, inst, "systemctl", "is-system-running"); got != "running" {
			t.Errorf("%s: is-system-running = %q", inst.Name(), got)
		}
	}
	for _, inst := range insts {
		if err := inst.Stop(); err != nil {
			t.Errorf("stop %s: %v", inst.Name(), err)
		}
		for _, d := range inst.CgroupDirs() {
			if exists(d) {
				t.Errorf("cgroup %s left after stop", d)
			}
		}
	}
	checkHostUnchanged(t, before, snapshotHost(t))
}

func TestExtraBindIsWritableInside(t *testing.T) {
	requireSandbox(t)
	// A host path under /tmp: hidden by the private /tmp unless bound.
	dir := t.TempDir()
	inst := startInstance(t, Options{ExtraBinds: []string{dir}})
	inside(t, inst, "sh", "-c", "echo from-inside > "+filepath.Join(dir, "f"))
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil || strings.TrimSpace(string(b)) != "from-inside" {
		t.Errorf("file written inside: %q, %v", b, err)
	}
	// Everything else of the host is read-only inside.
	cmd := inst.Command(context.Background(), "touch", "/var/lib/slicelet-sandbox-should-not-exist")
	if err := cmd.Run(); err == nil {
		os.Remove("/var/lib/slicelet-sandbox-should-not-exist")
		t.Error("writing to the host root from inside succeeded, want read-only")
	}
	// The host /tmp is not the instance's /tmp.
	if out := inside(t, inst, "sh", "-c", "ls -A /tmp | grep -v '^"+filepath.Base(filepath.Dir(dir))+"$' | wc -l"); out != "0" {
		t.Errorf("/tmp inside holds %s foreign entries, want a fresh tmpfs", out)
	}
}

const helperEnv = "SLICELET_SANDBOX_TEST_HELPER"

// TestHelperStartAndHang is not a test: TestKilledCallerTakesInstanceDown runs it in a child
// process that starts an instance, reports it and waits to be killed.
func TestHelperStartAndHang(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process only")
	}
	inst, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("started %s %d %d\n", inst.Name(), inst.InitPID(), inst.pids.InitStart)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // blocks until killed
	os.Exit(1)
}

func TestKilledCallerTakesInstanceDown(t *testing.T) {
	requireSandbox(t)
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestHelperStartAndHang$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %v (%q)", err, line)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "started" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	name := f[1]
	initPID, _ := strconv.Atoi(f[2])
	initStart, _ := strconv.ParseUint(f[3], 10, 64)
	// SIGKILL: no cleanup code runs in the caller; the parent-death signals must do it all.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := signalAndWait(initPID, initStart, 0, 10*time.Second); err != nil {
		_ = signalAndWait(initPID, initStart, syscall.SIGKILL, 5*time.Second)
		t.Fatalf("init of %s survived its caller: %v", name, err)
	}
	stateDir := filepath.Join(DefaultStateRoot, name)
	cfg, err := readConfig(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	// The next start sweeps what the dead instance left: its state and cgroup directories.
	if err := Sweep("", logWriter{t}); err != nil {
		t.Fatal(err)
	}
	if exists(stateDir) {
		t.Errorf("state dir %s left after sweep", stateDir)
	}
	for _, h := range cfg.Cgroups {
		if exists(h.Dir) {
			t.Errorf("cgroup %s left after sweep", h.Dir)
		}
	}
}

// BenchmarkBootStop boots and stops one instance per iteration and reports the median boot and
// stop times.
func BenchmarkBootStop(b *testing.B) {
	requireSandbox(b)
	var boots, stops []time.Duration
	for b.Loop() {
		inst, err := Start(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		boots = append(boots, inst.BootDuration())
		began := time.Now()
		if err := inst.Stop(); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, time.Since(began))
	}
	b.ReportMetric(float64(median(boots).Microseconds())/1000, "boot-p50-ms")
	b.ReportMetric(float64(median(stops).Microseconds())/1000, "stop-p50-ms")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func TestBootTimeoutCleansUp(t *testing.T) {
	requireSandbox(t)
	name := randomName()
	inst, err := Start(context.Background(), Options{Name: name, BootTimeout: time.Nanosecond, Log: logWriter{t}})
	if err == nil {
		_ = inst.Stop()
		t.Fatal("start with a 1ns boot timeout succeeded")
	}
	if !strings.Contains(err.Error(), "not running after") {
		t.Errorf("error %q does not say the boot timed out", err)
	}
	if exists(filepath.Join(DefaultStateRoot, name)) {
		t.Errorf("state dir of %s left after a failed start", name)
	}
	cfg, perr := planInstance(name, "/nonexistent")
	if perr != nil {
		t.Fatal(perr)
	}
	for _, h := range cfg.Cgroups {
		if exists(h.Dir) {
			t.Errorf("cgroup %s left after a failed start", h.Dir)
		}
	}
}

func TestSetupFailureIsReportedAndCleanedUp(t *testing.T) {
	requireSandbox(t)
	// A decoy where a real hierarchy is mounted: the namespace setup fails before systemd runs.
	adjustConfig = func(c *instanceConfig) { c.Decoys = append(c.Decoys, "cpu") }
	t.Cleanup(func() { adjustConfig = nil })
	name := randomName()
	inst, err := Start(context.Background(), Options{Name: name, Log: logWriter{t}})
	if err == nil {
		_ = inst.Stop()
		t.Fatal("start with a broken setup succeeded")
	}
	if !strings.Contains(err.Error(), "systemd exited during boot") || !strings.Contains(err.Error(), "decoy /sys/fs/cgroup/cpu") {
		t.Errorf("error does not explain the setup failure:\n%v", err)
	}
	t.Logf("start error: %v", err)
	if exists(filepath.Join(DefaultStateRoot, name)) {
		t.Errorf("state dir of %s left after a failed start", name)
	}
}

func TestExtraBindFileAndRejectedPaths(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name, path, want string
	}{
		{"relative", "tmp/x", "clean absolute path"},
		{"root", "/", "clean absolute path"},
		{"proc", "/proc/self", "which the instance replaces"},
		{"sys", "/sys/fs/cgroup", "which the instance replaces"},
		{"missing", "/nonexistent/slicelet", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := Start(context.Background(), Options{ExtraBinds: []string{tc.path}})
			if err == nil {
				_ = inst.Stop()
				t.Fatalf("extra bind %q accepted", tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	t.Run("a file under /tmp", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		inst := startInstance(t, Options{ExtraBinds: []string{f}})
		if got := inside(t, inst, "cat", f); got != "host" {
			t.Errorf("bound file reads %q inside, want host", got)
		}
	})
}

// TestBindsFilesAndSymlinks: binds at another path and read-only, files over /proc/sys and
// /dev, and a symlink, as a standalone kubelet needs them (kernel settings it checks, /dev/kmsg),
// with the machine's kernel settings, mounts and /tmp left as they are; in both root modes.
func TestBindsFilesAndSymlinks(t *testing.T) {
	requireSandbox(t)
	sysctls := []string{"/proc/sys/vm/overcommit_memory", "/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops"}
	for _, tc := range rootModes {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotHost(t)
			mountsBefore := hostMountinfoLines(t)
			sysBefore := checksums(t, sysctls)
			// Every source under the host /tmp, which the instance hides.
			rw, ro, files := t.TempDir(), t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(ro, "f"), []byte("ro\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			one, ten := filepath.Join(files, "one"), filepath.Join(files, "ten")
			for f, v := range map[string]string{one: "1\n", ten: "10\n"} {
				if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			hidden := filepath.Join(t.TempDir(), "hidden")
			if err := os.WriteFile(hidden, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			const rwTarget = "/run/slicelet-probe/rw"
			inst := startInstance(t, Options{
				OverlayRoot: tc.overlay,
				Binds:       []Bind{{Source: rw, Target: rwTarget}, {Source: ro, ReadOnly: true}},
				FileBinds: []FileBind{
					{Source: one, Target: sysctls[0]}, {Source: ten, Target: sysctls[1]}, {Source: one, Target: sysctls[2]},
					{Source: ten, Target: "/dev/slicelet-probe"},
				},
				Symlinks: []Symlink{{Path: "/dev/kmsg", Target: "/dev/console"}},
			})

			inside(t, inst, "sh", "-c", "echo from-inside > "+rwTarget+"/w")
			if b, err := os.ReadFile(filepath.Join(rw, "w")); err != nil || string(b) != "from-inside\n" {
				t.Errorf("file written inside at %s: host has %q, %v", rwTarget, b, err)
			}
			if got := inside(t, inst, "cat", filepath.Join(ro, "f")); got != "ro" {
				t.Errorf("read-only bind reads %q inside, want ro", got)
			}
			if err := inst.Command(context.Background(), "touch", filepath.Join(ro, "g")).Run(); err == nil || exists(filepath.Join(ro, "g")) {
				t.Errorf("writing into the read-only bind succeeded (err %v)", err)
			}
			for n, want := range []string{"1", "10", "1"} {
				if got := inside(t, inst, "cat", sysctls[n]); got != want {
					t.Errorf("%s reads %q inside, want %s", sysctls[n], got, want)
				}
				if err := inst.Command(context.Background(), "sh", "-c", "echo 0 > "+sysctls[n]).Run(); err == nil {
					t.Errorf("writing %s inside succeeded, want read-only", sysctls[n])
				}
			}
			if got := inside(t, inst, "cat", "/dev/slicelet-probe"); got != "10" {
				t.Errorf("/dev/slicelet-probe reads %q inside, want 10", got)
			}
			if got := inside(t, inst, "readlink", "/dev/kmsg"); got != "/dev/console" {
				t.Errorf("/dev/kmsg inside links to %q, want /dev/console", got)
			}
			inside(t, inst, "test", "-c", "/dev/kmsg")

			// What exec's hint relies on.
			if dir, ok := inst.HiddenPath(hidden); !ok || dir != "/tmp" {
				t.Errorf("HiddenPath(%s) = %q, %v; want /tmp, true", hidden, dir, ok)
			}
			for _, p := range []string{filepath.Join(ro, "f"), "/etc/hostname", "/tmp", "/tmp/slicelet-no-such-file", "relative/path"} {
				if dir, ok := inst.HiddenPath(p); ok {
					t.Errorf("HiddenPath(%s) = %q, true; want false", p, dir)
				}
			}

			if err := inst.Stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if got := checksums(t, sysctls); !maps.Equal(got, sysBefore) {
				t.Errorf("the machine's kernel settings changed:\nbefore %v\nafter  %v", sysBefore, got)
			}
			if b, err := os.ReadFile(one); err != nil || string(b) != "1\n" {
				t.Errorf("file bind source %s: %q, %v", one, b, err)
			}
			if !exists(hidden) {
				t.Errorf("%s in the host /tmp is gone", hidden)
			}
			if got := hostMountinfoLines(t); !slices.Equal(got, mountsBefore) {
				t.Errorf("host mount table changed:\nbefore %q\nafter  %q", mountsBefore, got)
			}
			checkHostUnchanged(t, before, snapshotHost(t))
		})
	}
}

// TestNetSysctls: with NetSysctls the instance writes its own network namespace's settings
// (as a CNI plugin does: portmap's route_localnet) while the rest of /proc/sys stays read-only
// and the machine's settings unchanged; without it /proc/sys/net is read-only too.
func TestNetSysctls(t *testing.T) {
	requireSandbox(t)
	const setting = "/proc/sys/net/ipv4/conf/lo/route_localnet"
	host, err := os.ReadFile(setting)
	if err != nil {
		t.Fatal(err)
	}
	write := func(inst *Instance, path, value string) error {
		return inst.Command(context.Background(), "sh", "-c", "echo "+value+" > "+path).Run()
	}
	for _, tc := range []struct {
		name     string
		writable bool
	}{{"default", false}, {"NetSysctls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			inst := startInstance(t, Options{Name: fmt.Sprintf("netsysctl-%d-%t", os.Getpid(), tc.writable), NetSysctls: tc.writable})
			err := write(inst, setting, "1")
			if tc.writable != (err == nil) {
				t.Fatalf("writing %s inside: %v, want it to succeed: %t", setting, err, tc.writable)
			}
			if tc.writable {
				if got := inside(t, inst, "cat", setting); got != "1" {
					t.Errorf("%s inside after the write: %q", setting, got)
				}
			}
			if err := write(inst, "/proc/sys/kernel/panic", "10"); err == nil {
				t.Error("/proc/sys/kernel/panic written inside: want read-only")
			}
			if now, err := os.ReadFile(setting); err != nil || string(now) != string(host) {
				t.Errorf("the machine's %s: %q, was %q (%v)", setting, now, host, err)
			}
		})
	}
}
