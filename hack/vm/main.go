// Command vm prepares and runs the throwaway cgroup v2 VM of
// internal/testharness/vmtest by hand:
//
//	go run ./hack/vm prepare           # build the cached kernel and initramfs
//	go run ./hack/vm run [-timeout 2m] [-env K=V]... BINARY [ARGS...]
//	go run ./hack/vm bench [-n 5] BINARY [ARGS...]   # per-run wall time, p50/max
//
// run prints the binary's output, then the console on failure, and exits
// with the binary's exit code.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/vmtest"
)

type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, ",") }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	code := 0
	switch os.Args[1] {
	case "prepare":
		start := time.Now()
		if err = vmtest.Prepare(ctx); err == nil {
			dir, _ := vmtest.CacheDir()
			fmt.Printf("vm cache ready in %s: %s\n", dir, time.Since(start).Round(time.Millisecond))
		}
	case "run":
		code, err = run(ctx, os.Args[2:])
	case "bench":
		err = bench(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vm:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: vm prepare | vm run [-timeout D] [-env K=V]... BINARY [ARGS...] | vm bench [-n N] BINARY [ARGS...]")
	os.Exit(2)
}

func run(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	timeout := fs.Duration("timeout", vmtest.DefaultTimeout, "whole-run timeout")
	var env envFlag
	fs.Var(&env, "env", "NAME=value for the binary (repeatable)")
	_ = fs.Parse(args)
	if fs.NArg() < 1 {
		usage()
	}
	res, err := vmtest.Run(ctx, vmtest.Options{Binary: fs.Arg(0), Args: fs.Args()[1:], Env: env, Timeout: *timeout})
	os.Stdout.Write(res.Output)
	fmt.Fprintf(os.Stderr, "vm: exit code %d in %s\n", res.ExitCode, res.Duration.Round(time.Millisecond))
	if err != nil || res.ExitCode != 0 {
		fmt.Fprintf(os.Stderr, "vm: console:\n%s\n", res.Console)
	}
	return res.ExitCode, err
}

func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	n := fs.Int("n", 5, "runs")
	_ = fs.Parse(args)
	if fs.NArg() < 1 {
		usage()
	}
	if err := vmtest.Prepare(ctx); err != nil {
		return err
	}
	var times []time.Duration
	for i := range *n {
		start := time.Now()
		res, err := vmtest.Run(ctx, vmtest.Options{Binary: fs.Arg(0), Args: fs.Args()[1:], Env: []string{"SLICELET_SYSTEMDTEST=vm"}})
		wall := time.Since(start)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("run %d: exit code %d:\n%s", i+1, res.ExitCode, res.Output)
		}
		times = append(times, wall)
		fmt.Printf("run %d: %s wall (qemu %s)\n", i+1, wall.Round(time.Millisecond), res.Duration.Round(time.Millisecond))
	}
	slices.Sort(times)
	fmt.Printf("%d runs: p50 %s, min %s, max %s\n", len(times),
		times[len(times)/2].Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	return nil
}
