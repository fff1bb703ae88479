package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// requireSandbox skips a test that boots instances where they cannot run, or fails it with CI=true.
func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Prerequisites(); err != nil {
		if systemdtest.CI() {
			t.Fatalf("CI=true and the sandbox cannot run here: %v", err)
		}
		t.Skipf("SKIP (needs root, systemd and util-linux): %v", err)
	}
}

// uniqueName is an instance name no other test run uses.
func uniqueName(t *testing.T, prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	// Whatever happens to the test, the instance goes (hack/sandbox start detaches it).
	t.Cleanup(func() {
		if inst, err := sandbox.Attach("", name); err == nil {
			if err := inst.Stop(); err != nil {
				t.Errorf("stop %s: %v", name, err)
			}
		}
	})
	return name
}

// runCLI runs the command line and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustRun runs the command line and fails the test unless it exits 0; it returns stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("sandbox %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestCLIPlainAndHiddenPath: start, exec and stop NAME as they always worked, and exec of a
// host path that the instance hides names the -bind that shows it.
func TestCLIPlainAndHiddenPath(t *testing.T) {
	requireSandbox(t)
	name := uniqueName(t, "cli-plain")
	dir, err := os.MkdirTemp("/tmp", "slicelet cli checkout ")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tool := filepath.Join(dir, "bin", "tool")
	if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho tool ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	if out := mustRun(t, "start", name); !strings.HasPrefix(out, name+" ") {
		t.Errorf("start printed %q, want the name and init pid", out)
	}
	if out := mustRun(t, "exec", name, "--", "systemctl", "is-system-running"); strings.TrimSpace(out) != "running" {
		t.Errorf("is-system-running = %q", out)
	}
	code, out, errOut := runCLI(t, "exec", name, "--", "sh", "-c", "exit 7")
	if code != 7 {
		t.Errorf("exit code passed through as %d, want 7 (%s%s)", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "exec", name, "--", tool)
	if code != 127 || strings.Contains(out, "tool ran") {
		t.Errorf("exec of a hidden command: exit %d, stdout %q; want 127 without running it", code, out)
	}
	for _, want := range []string{tool + ": not found inside " + name, "its own /tmp", `-bind "` + dir + `"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("exec of a hidden command says %q, want it to contain %q", errOut, want)
		}
	}
	// A hidden path among the arguments: a warning, and the command runs.
	code, _, errOut = runCLI(t, "exec", name, "--", "test", "-e", tool)
	if code != 1 || !strings.Contains(errOut, "warning: "+tool+": not found inside") {
		t.Errorf("exec with a hidden argument: exit %d, stderr %q; want 1 and a warning", code, errOut)
	}
	// A path that exists inside is never reported.
	if _, _, errOut = runCLI(t, "exec", name, "--", "/bin/true", "/tmp"); errOut != "" {
		t.Errorf("exec /bin/true /tmp: stderr %q, want nothing", errOut)
	}

	if out := mustRun(t, "stop", name); strings.TrimSpace(out) != "stopped "+name {
		t.Errorf("stop printed %q", out)
	}
	if code, _, _ := runCLI(t, "exec", name, "--", "true"); code == 0 {
		t.Error("exec into a stopped instance succeeded")
	}
}

// TestCLIStartFlags: every start flag, as the kubelet beside slicelet uses them: an overlay root,
// the checkout bound read-write, a read-only bind at another path, files over kernel settings and
// /dev/kmsg linked to the console. Flags after the name work too.
func TestCLIStartFlags(t *testing.T) {
	requireSandbox(t)
	name := uniqueName(t, "cli-flags")
	co, ro := t.TempDir(), t.TempDir()
	for f, v := range map[string]string{filepath.Join(co, "one"): "1\n", filepath.Join(co, "ten"): "10\n", filepath.Join(ro, "f"): "ro\n"} {
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(co) // -bind-file takes paths relative to the working directory
	mustRun(t, "start", "-overlay-root", "-bind", co,
		"-bind-file", "one:/proc/sys/vm/overcommit_memory", "-bind-file", "ten:/proc/sys/kernel/panic",
		"-bind-file", "one:/proc/sys/kernel/panic_on_oops", "-symlink", "/dev/kmsg:/dev/console",
		name, "-bind", ro+":/opt/ro:ro")

	script := strings.Join([]string{
		"set -e",
		"findmnt -n -o FSTYPE /",
		"cat /proc/sys/vm/overcommit_memory /proc/sys/kernel/panic /proc/sys/kernel/panic_on_oops",
		"readlink /dev/kmsg",
		"cat /opt/ro/f",
		"! touch /opt/ro/g 2>/dev/null",
		"! sh -c 'echo 0 > /proc/sys/kernel/panic' 2>/dev/null",
		"echo inside > " + co + "/w",
		"mkdir -p /var/lib/kubelet && echo ok > /var/lib/kubelet/probe && cat /var/lib/kubelet/probe",
	}, "\n")
	out := mustRun(t, "exec", name, "--", "sh", "-c", script)
	want := "overlay\n1\n10\n1\n/dev/console\nro\nok\n"
	if out != want {
		t.Errorf("inside:\n%s\nwant:\n%s", out, want)
	}
	if b, err := os.ReadFile(filepath.Join(co, "w")); err != nil || string(b) != "inside\n" {
		t.Errorf("file written into the bound checkout: host has %q, %v", b, err)
	}
	if exists("/var/lib/kubelet/probe") {
		t.Error("/var/lib/kubelet/probe written inside the overlay root reached the host")
	}
	mustRun(t, "stop", name)
}

func TestCLIRefusesBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"start", "-bind", "/a:/b:/c", "x"}, 2, "want SRC[:DST][:ro]"},
		{[]string{"start", "-bind-file", "/a", "x"}, 2, "want SRC:DST"},
		{[]string{"start", "-symlink", "/dev/kmsg", "x"}, 2, "want PATH:TARGET"},
		{[]string{"start", "a", "b"}, 1, `one name, got "a" and ["b"]`},
		{[]string{"start"}, 2, "usage:"},
		{[]string{"frobnicate"}, 2, "usage:"},
		{[]string{"list", "extra"}, 2, "usage:"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}
