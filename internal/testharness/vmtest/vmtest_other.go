//go:build !linux

package vmtest

import (
	"context"
	"fmt"
	"runtime"
)

// Prerequisites reports that VMs need Linux.
func Prerequisites() error {
	return fmt.Errorf("%w: linux (this is %s)", ErrPrerequisite, runtime.GOOS)
}

// Prepare fails: VMs need Linux.
func Prepare(context.Context) error { return Prerequisites() }

// Run fails: VMs need Linux.
func Run(context.Context, Options) (Result, error) { return Result{ExitCode: -1}, Prerequisites() }

// CacheDir fails: VMs need Linux.
func CacheDir() (string, error) { return "", Prerequisites() }
