//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"time"
)

// errNotLinux is returned everywhere: namespaces, cgroups and systemd are Linux-only.
var errNotLinux = errors.New("sandbox: only supported on linux")

// Instance is one running sandbox (never on this platform).
type Instance struct{}

// Prerequisites always fails off Linux.
func Prerequisites() error { return errNotLinux }

// Start always fails off Linux.
func Start(context.Context, Options) (*Instance, error) { return nil, errNotLinux }

// Attach always fails off Linux.
func Attach(string, string) (*Instance, error) { return nil, errNotLinux }

// List always fails off Linux.
func List(string) ([]Status, error) { return nil, errNotLinux }

// Sweep always fails off Linux.
func Sweep(string, io.Writer) error { return errNotLinux }

// Name returns "".
func (i *Instance) Name() string { return "" }

// InitPID returns 0.
func (i *Instance) InitPID() int { return 0 }

// StateDir returns "".
func (i *Instance) StateDir() string { return "" }

// BootDuration returns 0.
func (i *Instance) BootDuration() time.Duration { return 0 }

// CgroupDirs returns nil.
func (i *Instance) CgroupDirs() []string { return nil }

// Command returns a command that fails to run.
func (i *Instance) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "false")
}

// CommandIn returns a command that fails to run.
func (i *Instance) CommandIn(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "false")
}

// HiddenPath returns false.
func (i *Instance) HiddenPath(string) (string, bool) { return "", false }

// Stop returns nil.
func (i *Instance) Stop() error { return nil }
