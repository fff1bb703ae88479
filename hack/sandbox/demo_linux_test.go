package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// TestDemoFromACheckoutUnderTmp runs make demo as a new user would, from a copy of this checkout
// under /tmp, in a directory whose name has a space and a colon: the throwaway systemd has its
// own /tmp, so everything the demo runs from the checkout (bin/slicelet config check, slicelet
// started from bin/ as a service, slicectl, the manifests) must be bound in. The whole demo runs;
// it takes seconds.
func TestDemoFromACheckoutUnderTmp(t *testing.T) {
	requireSandbox(t)
	if comm, _ := os.ReadFile("/proc/1/comm"); strings.TrimSpace(string(comm)) == "systemd" {
		t.Skip("SKIP: PID 1 is systemd, and make demo would use this machine's own systemd")
	}
	for _, tool := range []string{"make", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if systemdtest.CI() {
				t.Fatalf("CI=true and %s is missing: %v", tool, err)
			}
			t.Skipf("SKIP: %s is missing: %v", tool, err)
		}
	}
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	co, err := os.MkdirTemp("/tmp", "slicelet demo:checkout ")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(co) })
	copyCheckout(t, src, co)
	name := uniqueName(t, "demo-test")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "demo")
	cmd.Dir = co
	cmd.Env = append(os.Environ(), "SLICELET_DEMO_NAME="+name)
	// Its own process group, so that a timeout takes the demo's children along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("make demo from %q: %s", co, time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("make demo from %q: %v\n%s", co, err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"config OK: " + co + "/build/demo/config.toml",
		"Main PID:", // systemctl status of slicelet started from the checkout's bin/
		co + "/bin/slicelet run --config " + co + "/build/demo/config.toml",
		"file:" + co + "/examples/pods/guaranteed.yaml",
		"pod/web created",
		"stopped " + name,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("make demo output lacks %q:\n%s", want, text)
		}
	}
	st, err := sandbox.List("")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == name {
			t.Errorf("instance %s left after make demo: %+v", name, s)
		}
	}
	if _, err := os.Stat(filepath.Join(co, "examples", "pods", "guaranteed.yaml")); err != nil {
		t.Errorf("the checkout under /tmp after make demo: %v", err)
	}
}

// copyCheckout copies what git tracks, or would track, of the checkout at src to dst (the
// working tree as it is, without bin/, build/ or anything else ignored), keeping file modes.
func copyCheckout(t *testing.T, src, dst string) {
	t.Helper()
	cmd := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	list, err := cmd.Output()
	if err != nil {
		if systemdtest.CI() {
			t.Fatalf("CI=true and the checkout's files cannot be listed: git ls-files: %v\n%s", err, stderr.String())
		}
		t.Skipf("SKIP: not a git checkout (git ls-files: %v: %s)", err, strings.TrimSpace(stderr.String()))
	}
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(src, rel))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := copyEntry(filepath.Join(src, rel), filepath.Join(dst, rel), fi); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no files listed in %s", src)
	}
}

func copyEntry(from, to string, fi os.FileInfo) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	case fi.Mode().IsRegular():
		in, err := os.Open(from)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	default:
		return fmt.Errorf("copy %s: %s is not a file", from, fi.Mode().Type())
	}
}
