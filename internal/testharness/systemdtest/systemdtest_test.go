package systemdtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestRequireRunsInsideSystemd(t *testing.T) {
	env := Require(t)
	if env.Where != "sandbox" && env.Where != "vm" {
		t.Errorf("Where = %q", env.Where)
	}
	comm, err := os.ReadFile("/proc/1/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "systemd" {
		t.Errorf("PID 1 is %q (%v), want systemd", comm, err)
	}
	out, err := exec.Command("systemctl", "is-system-running").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "running" {
		t.Errorf("is-system-running = %q (%v), want running", got, err)
	}
	if err := exec.Command("systemd-run", "--wait", "--quiet", "true").Run(); err != nil {
		t.Errorf("systemd-run --wait true: %v", err)
	}
	// In the sandbox the test process sits at the root of the instance's cgroups, not outside
	// the namespace; in the VM it runs in the runner service of the guest's own systemd.
	cg, err := os.ReadFile(filepath.Join("/proc/self/cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		want := ":/"
		if env.Where == "vm" {
			want = ":/system.slice/vmtest-runner.service"
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("own cgroup line %q, want it to end in %q", line, want)
		}
	}
	// t.TempDir works: the private /tmp is writable.
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), []byte("x"), 0o644); err != nil {
		t.Error(err)
	}
}

// runAsNobody runs this test binary again, outside any instance, as an unprivileged user: the
// sandbox prerequisites are then missing.
func runAsNobody(t *testing.T, ci string) (string, int) {
	t.Helper()
	Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		exe, "-test.run=^TestRequireRunsInsideSystemd$", "-test.v")
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != InsideEnv && k != "CI" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "CI="+ci)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run as nobody: %v\n%s", err, out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestMissingPrerequisitesFailUnderCI(t *testing.T) {
	out, code := runAsNobody(t, "true")
	if code != 1 || !strings.Contains(out, "FAIL: systemdtest: CI=true") || !strings.Contains(out, "want root") {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 with a FAIL line naming the missing root", code, out)
	}
}

func TestMissingPrerequisitesSkipOutsideCI(t *testing.T) {
	out, code := runAsNobody(t, "")
	if code != 0 || !strings.Contains(out, "SKIP: systemdtest") || !strings.Contains(out, "--- SKIP: TestRequireRunsInsideSystemd") {
		t.Errorf("exit %d, output:\n%s\nwant exit 0, a loud SKIP line and the test skipped", code, out)
	}
}

func TestHostPaths(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "b001")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		cwd  string
		want []string
	}{
		{"cwd only", []string{"-test.v"}, dir, []string{dir}},
		{"go test's log file", []string{"-test.testlogfile=" + filepath.Join(sub, "testlog.txt")}, "/", []string{sub}},
		{"separate value", []string{"-test.gocoverdir", sub}, "/", []string{sub}},
		{"relative profile against outputdir", []string{"-test.outputdir=" + sub, "-test.cpuprofile=cpu.out"}, "/", []string{sub}},
		{"missing dirs skipped", []string{"-test.coverprofile=/nonexistent/c.out"}, "/", nil},
		{"unrelated flags ignored", []string{"-test.run=X", "-test.count=1"}, "/", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := hostPaths(tc.args, tc.cwd)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInnerEnv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"adds the marker", []string{"A=1"}, []string{"A=1", InsideEnv + "=sandbox"}},
		{"drops a TMPDIR hidden inside", []string{"TMPDIR=/tmp/x"}, []string{InsideEnv + "=sandbox"}},
		{"keeps a visible TMPDIR", []string{"TMPDIR=/var/lib/x"}, []string{"TMPDIR=/var/lib/x", InsideEnv + "=sandbox"}},
		{"replaces a stale marker", []string{InsideEnv + "=vm"}, []string{InsideEnv + "=sandbox"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := innerEnv(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInstanceName(t *testing.T) {
	tests := []struct {
		name, exe, prefix string
	}{
		{"package binary", "/tmp/go-build1/b001/units.test", "units-"},
		{"odd characters", "/x/My_Pkg.test", "my-pkg-"},
		{"long", "/x/" + strings.Repeat("a", 40) + ".test", strings.Repeat("a", 24) + "-"},
		{"nothing usable", "/x/__.test", "test-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := instanceName(tc.exe)
			if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+8 {
				t.Errorf("got %q, want %q + 8 hex digits", got, tc.prefix)
			}
		})
	}
}

func TestListOnly(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"go test -list", []string{"-test.list=.", "-test.v"}, true},
		{"separate value", []string{"-test.list", "Foo"}, true},
		{"a run", []string{"-test.run=List", "-test.v"}, false},
		{"no flags", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := listOnly(tc.args); got != tc.want {
				t.Errorf("listOnly(%q) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestVMBudget(t *testing.T) {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		args    []string
		elapsed time.Duration
		want    time.Duration
	}{
		{"what is left of go test's timeout, less the report margin", []string{"-test.v", "-test.timeout=20m0s"}, 4 * time.Minute, 16*time.Minute - vmReportMargin},
		{"the value as the next argument", []string{"-test.timeout", "10m"}, 0, 10*time.Minute - vmReportMargin},
		{"no timeout flag", []string{"-test.run=X"}, time.Hour, noTimeoutBudget},
		{"timeout zero means none", []string{"-test.timeout=0s"}, 0, noTimeoutBudget},
		{"past the deadline still gets the minimum", []string{"-test.timeout=5m"}, 6 * time.Minute, minVMBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := vmBudget(runDeadline(tc.args, start), start.Add(tc.elapsed))
			if got != tc.want {
				t.Errorf("vmBudget = %s, want %s", got, tc.want)
			}
		})
	}
}
