package vmtest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/vmtest"
)

// A TestMain that re-runs its own test binary in the VM, the way
// internal/testharness/systemdtest.Main does: inside the guest, SLICELET_SYSTEMDTEST=vm
// and the tests run for real.
func ExampleRun() {
	if os.Getenv("SLICELET_SYSTEMDTEST") == "vm" {
		return // in the guest: m.Run() here
	}
	ctx := context.Background()
	if err := vmtest.Prepare(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err) // with CI=true: exit 1; else skip loudly
		os.Exit(1)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := []string{"SLICELET_SYSTEMDTEST=vm"}
	if ci := os.Getenv("CI"); ci != "" {
		env = append(env, "CI="+ci)
	}
	res, err := vmtest.Run(ctx, vmtest.Options{
		Binary:  exe,
		Args:    vmtest.GuestTestArgs(os.Args[1:]),
		Env:     env,
		Timeout: 3 * time.Minute,
	})
	os.Stdout.Write(res.Output)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(res.ExitCode)
}
