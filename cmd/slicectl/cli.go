package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes: 0 success, 1 the operation failed, 2 usage error (bad flags or arguments).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `slicectl controls and explains slicelet.

Usage:
  slicectl explain pod -f POD.yaml [--config F] [--cgroup-mode v1|v2] [--capacity LIST] [-o json]
  slicectl explain node [--config F] [--cgroup-mode v1|v2] [--capacity LIST] [-f POD.yaml ...] [-o json]

explain works offline: it computes what slicelet would create from the configuration, the
manifests and the node's capacity (read from this machine unless --capacity is given, e.g.
--capacity cpu=4,memory=16Gi,pids=4194304).
`

// errUsage marks errors that are the caller's fault (exit 2).
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// run is slicectl with its arguments; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var err error
	switch args[0] {
	case "explain":
		err = explainCmd(args[1:], stdout)
	default:
		err = usageErr("unknown command %q", args[0])
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "slicectl: %s\n\n%s", strings.TrimPrefix(err.Error(), "usage: "), usage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "slicectl: %v\n", err)
		return exitFailure
	}
}

// stringList is a repeatable string flag (-f a -f b).
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments (kubectl style).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
