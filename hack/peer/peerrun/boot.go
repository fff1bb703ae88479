package peerrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
	"github.com/slicelet/slicelet/internal/testharness/vmtest"
)

// kernelSettings are the settings the kubelet's container manager checks and would otherwise
// try to write (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables), with the values
// it wants: bound read-only over /proc/sys inside the sandbox, the machine's untouched.
var kernelSettings = map[string]string{
	"/proc/sys/vm/overcommit_memory": "1",
	"/proc/sys/kernel/panic":         "10",
	"/proc/sys/kernel/panic_on_oops": "1",
}

// SandboxOptions configure [BootSandbox].
type SandboxOptions struct {
	// Name is the instance's name (lower-case letters, digits, '-').
	Name string
	// WorkDir is a host directory bound read-write at the same path inside: the node's
	// directory and whatever the caller reads back. Created when missing.
	WorkDir string
	// Binds are more host paths bound read-write at the same path.
	Binds []string
	// Log receives the sandbox's progress lines; discarded when nil.
	Log io.Writer
	// NetSysctls leaves the sandbox's /proc/sys/net writable (sandbox.Options.NetSysctls).
	NetSysctls bool
}

// Sandbox is a booted cgroup v1 (hybrid) sandbox ready for both agents.
type Sandbox struct {
	inst *sandbox.Instance
}

// BootSandbox boots the sandbox: an overlay root, /dev/kmsg -> /dev/console, the kernel
// settings bound read-only and o.WorkDir and o.Binds bound read-write.
func BootSandbox(ctx context.Context, o SandboxOptions) (*Sandbox, error) {
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("peerrun: work dir: %w", err)
	}
	opts := sandbox.Options{
		Name: o.Name, Log: o.Log, OverlayRoot: true, NetSysctls: o.NetSysctls,
		Symlinks: []sandbox.Symlink{{Path: "/dev/kmsg", Target: "/dev/console"}},
	}
	settings := filepath.Join(o.WorkDir, "kernel-settings")
	if err := os.MkdirAll(settings, 0o755); err != nil {
		return nil, fmt.Errorf("peerrun: %w", err)
	}
	for path, value := range kernelSettings {
		f := filepath.Join(settings, strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", "."))
		if err := os.WriteFile(f, []byte(value+"\n"), 0o444); err != nil {
			return nil, fmt.Errorf("peerrun: %w", err)
		}
		opts.FileBinds = append(opts.FileBinds, sandbox.FileBind{Source: f, Target: path})
	}
	for _, b := range append([]string{o.WorkDir}, o.Binds...) {
		opts.Binds = append(opts.Binds, sandbox.Bind{Source: b})
	}
	inst, err := sandbox.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("peerrun: %w", err)
	}
	return &Sandbox{inst: inst}, nil
}

// Command runs name inside the sandbox, in dir, with [InsideEnv]=sandbox added to the
// caller's environment.
func (s *Sandbox) Command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := s.inst.CommandIn(ctx, dir, name, args...)
	cmd.Env = append(os.Environ(), InsideEnv+"=sandbox")
	return cmd
}

// Name is the instance's name.
func (s *Sandbox) Name() string { return s.inst.Name() }

// Instance is the booted instance: its init's PID (for its namespaces) and a runner of
// commands inside it (controlplane.Runner).
func (s *Sandbox) Instance() *sandbox.Instance { return s.inst }

// Stop powers the sandbox off and removes its state.
func (s *Sandbox) Stop() error { return s.inst.Stop() }

// VMOptions configure [RunVM].
type VMOptions struct {
	// Binary runs in the guest with Args, [InsideEnv]=vm and Env added.
	Binary string
	Args   []string
	Env    []string
	// Files are host files copied into the guest's /mnt/io (key: name there).
	Files map[string]string
	// Dir is a host directory shared read-write with the guest at the same path and made
	// Binary's working directory: where it leaves what the caller reads back.
	Dir string
	// MemMiB is the guest's memory (containerd's shims take about 13 MiB per running pod).
	MemMiB int
	// CPUs is the guest's CPU count (zero: vmtest's default). Emulated CPUs beyond the host's
	// cores give a larger allocatable (fewer batches of pods) but, on a busy host, stalled the
	// guest: each is a host thread, and the guest's kernel waits on CPUs (IPIs, locks) whose
	// thread the host has not scheduled (docs/peer.md).
	CPUs int
	// Timeout bounds the whole run.
	Timeout time.Duration
}

// RunVM runs o.Binary in a throwaway cgroup v2 VM (internal/testharness/vmtest) and returns its
// result; the guest's /usr is the host's, so containerd, runc and systemd-run are there.
func RunVM(ctx context.Context, o VMOptions) (vmtest.Result, error) {
	if err := vmtest.Prepare(ctx); err != nil {
		return vmtest.Result{}, fmt.Errorf("peerrun: cgroup v2 VM: %w", err)
	}
	env := append([]string{InsideEnv + "=vm"}, o.Env...)
	return vmtest.Run(ctx, vmtest.Options{
		Binary: o.Binary, Args: o.Args, Env: env, ExtraFiles: o.Files, Dir: o.Dir,
		Mem: o.MemMiB, SMP: o.CPUs, Timeout: o.Timeout,
	})
}

// RunTest boots the sandbox of o, runs the tests of this test binary that match the pattern
// run inside it (the binary copied into o.WorkDir, -test.v, with env added to [Sandbox.Command]'s
// environment, its output to out) and stops the sandbox.
func RunTest(ctx context.Context, o SandboxOptions, run string, env []string, out io.Writer) (err error) {
	sb, err := BootSandbox(ctx, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sb.Stop()) }()
	inner, err := CopySelf(o.WorkDir, filepath.Base(os.Args[0]))
	if err != nil {
		return err
	}
	cmd := sb.Command(ctx, "/", inner, "-test.run", run, "-test.v")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("peerrun: inside the sandbox: %w", err)
	}
	return nil
}

// CopySelf copies the running executable to dir/name (mode 0755) and returns that path: the
// commands that boot a sandbox run their inner half from the work directory the sandbox binds
// (the executable's own path may not be visible inside it).
func CopySelf(dir, name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("peerrun: executable: %w", err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return "", fmt.Errorf("peerrun: executable: %w", err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return "", fmt.Errorf("peerrun: executable: %w", err)
	}
	return dst, nil
}
