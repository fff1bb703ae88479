package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// consoleTailLines is how much of the console an error quotes.
const consoleTailLines = 40

// Run boots a VM, runs opts.Binary in it and returns its exit code and
// output. It prepares the cache first if needed (see Prepare).
//
// The error is nil when the binary ran to its end, whatever its exit code;
// Result.ExitCode then says how it went. It is non-nil when the VM did not
// deliver an exit code: qemu failed, the guest crashed or hung (killed at
// opts.Timeout), or ctx ended; the error then quotes the last lines of the
// guest console, and Result holds whatever output and console there were.
// Several Runs may go on at once, each VM in its own directory.
func Run(ctx context.Context, opts Options) (Result, error) {
	res := Result{ExitCode: -1}
	opts = withDefaults(opts)
	if err := checkOptions(opts); err != nil {
		return res, err
	}
	if err := Prerequisites(); err != nil {
		return res, err
	}
	dir, err := CacheDir()
	if err != nil {
		return res, err
	}
	art, err := prepare(ctx, dir)
	if err != nil {
		return res, err
	}
	runDir, err := os.MkdirTemp(art.RunsDir, "run-")
	if err != nil {
		return res, fmt.Errorf("vm run dir: %w", err)
	}
	defer os.RemoveAll(runDir)
	// Held for the whole run: sweepRuns removes the directories of runs
	// whose process died without cleaning up (see sweepRuns).
	runLock, err := os.Create(filepath.Join(runDir, runLockName))
	if err != nil {
		return res, fmt.Errorf("vm run dir: %w", err)
	}
	defer runLock.Close()
	if err := unix.Flock(int(runLock.Fd()), unix.LOCK_EX); err != nil {
		return res, fmt.Errorf("vm run dir lock: %w", err)
	}
	ioDir := filepath.Join(runDir, "io")
	if err := fillIODir(ioDir, opts); err != nil {
		return res, err
	}

	consolePath := filepath.Join(runDir, "console.log")
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	spec := qemuSpec{
		Kernel: art.Vmlinux, Initrd: art.Initrd, IODir: ioDir, WorkDir: opts.Dir, Console: consolePath,
		Mem: opts.Mem, SMP: opts.SMP, TSCKHz: tscKHzFromCPUInfo(cpuinfo),
	}
	start := time.Now()
	qemuOut, waitErr, killed := runQEMU(ctx, qemuArgs(spec), opts.Timeout)
	res.Duration = time.Since(start)
	res.Console, _ = os.ReadFile(consolePath)
	res.Output, _ = os.ReadFile(filepath.Join(ioDir, outputName))
	code, codeErr := os.ReadFile(filepath.Join(ioDir, exitCodeName))

	tail := func() string {
		t := tailLines(res.Console, consoleTailLines)
		if len(t) == 0 {
			return "(empty)"
		}
		return "\n" + string(t)
	}
	switch {
	case killed != nil:
		return res, fmt.Errorf("vm run of %s: %w after %s; console tail: %s",
			filepath.Base(opts.Binary), killed, res.Duration.Round(time.Millisecond), tail())
	case codeErr != nil:
		qemu := "qemu exited normally"
		if waitErr != nil {
			qemu = fmt.Sprintf("qemu: %v: %s", waitErr, bytes.TrimSpace(qemuOut))
		}
		return res, fmt.Errorf("vm run of %s: guest stopped without an exit code (crashed, or timed out inside the guest; %s) after %s; console tail: %s",
			filepath.Base(opts.Binary), qemu, res.Duration.Round(time.Millisecond), tail())
	}
	res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(code)))
	if err != nil {
		return res, fmt.Errorf("vm run of %s: exit code file: %w", filepath.Base(opts.Binary), err)
	}
	if _, err := os.Stat(filepath.Join(ioDir, guardFileName)); err == nil {
		return res, fmt.Errorf("vm run of %s: %w: the binary ran out of its %s in the guest and got SIGQUIT (a Go program then writes every goroutine's stack into its output); output tail:\n%s",
			filepath.Base(opts.Binary), errTimeout, guardFor(opts.Timeout), tailLines(res.Output, consoleTailLines))
	}
	return res, nil
}

// errTimeout is wrapped by Run's error when it killed the VM at the
// timeout.
var errTimeout = errors.New("vm timed out")

func withDefaults(o Options) Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Mem <= 0 {
		o.Mem = DefaultMem
	}
	if o.SMP <= 0 {
		o.SMP = DefaultSMP
	}
	return o
}

// reservedIONames are the io dir entries Run and the runner own.
var reservedIONames = []string{runScriptName, runnerDropIn, outputName, exitCodeName, exitCodeName + ".tmp", guardFileName, workDirFile}

func checkOptions(o Options) error {
	if o.Binary == "" {
		return errors.New("vm options: Binary is empty")
	}
	st, err := os.Stat(o.Binary)
	if err != nil {
		return fmt.Errorf("vm options: Binary: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("vm options: Binary %s is not a regular file", o.Binary)
	}
	for _, kv := range o.Env {
		if !validEnv(kv) {
			return fmt.Errorf("vm options: Env entry %q is not NAME=value", kv)
		}
	}
	if o.Dir != "" {
		if err := checkDir(o.Dir); err != nil {
			return err
		}
		if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("vm options: Dir %q is not a directory", o.Dir)
		}
	}
	for name := range o.ExtraFiles {
		if !filepath.IsLocal(name) || filepath.Clean(name) != name {
			return fmt.Errorf("vm options: ExtraFiles name %q is not a clean relative path", name)
		}
		if name == filepath.Base(o.Binary) || slices.Contains(reservedIONames, name) {
			return fmt.Errorf("vm options: ExtraFiles name %q is taken by the runner", name)
		}
	}
	return nil
}

// fillIODir creates the directory shared with the guest as /mnt/io: the
// binary, the extra files, run.sh and the runner's drop-in.
func fillIODir(ioDir string, o Options) error {
	if err := os.Mkdir(ioDir, 0o755); err != nil {
		return fmt.Errorf("vm io dir: %w", err)
	}
	bin := filepath.Base(o.Binary)
	if err := copyFile(o.Binary, filepath.Join(ioDir, bin), 0o755); err != nil {
		return err
	}
	for name, src := range o.ExtraFiles {
		dst := filepath.Join(ioDir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("vm io dir: %w", err)
		}
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("vm options: ExtraFiles[%q]: %w", name, err)
		}
		if err := copyFile(src, dst, st.Mode().Perm()); err != nil {
			return err
		}
	}
	files := map[string]string{
		runScriptName: runScript(bin, guestDirOf(o.Dir), o.Args, o.Env),
		runnerDropIn:  runnerDropInText(o.Timeout, guardFor(o.Timeout)),
	}
	if o.Dir != "" {
		files[workDirFile] = guestDir(o.Dir)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ioDir, name), []byte(data), 0o755); err != nil {
			return fmt.Errorf("vm io dir: %w", err)
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("vm io dir: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("vm io dir: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("vm io dir: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("vm io dir: %w", err)
	}
	return nil
}

// runQEMU runs qemu until it exits, the timeout passes or ctx ends. killed
// is non-nil (wrapping errTimeout or ctx's error) when qemu was killed.
//
// Why a locked thread: Pdeathsig is delivered when the thread that started
// the child exits, not the process; the goroutine keeps its thread until
// qemu is gone, so qemu dies with the test process and never outlives it.
func runQEMU(ctx context.Context, args []string, timeout time.Duration) (out []byte, waitErr, killed error) {
	cmd := exec.Command("qemu-system-x86_64", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("qemu-system-x86_64: %w", err), fmt.Errorf("vm start: %w", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return buf.Bytes(), err, nil
	case <-timer.C:
		killed = fmt.Errorf("%w (%s)", errTimeout, timeout)
	case <-ctx.Done():
		killed = fmt.Errorf("vm run: %w", ctx.Err())
	}
	_ = cmd.Process.Kill()
	waitErr = <-done
	return buf.Bytes(), waitErr, killed
}

// guestDirOf is guestDir, "" staying "".
func guestDirOf(dir string) string {
	if dir == "" {
		return ""
	}
	return guestDir(dir)
}
