package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/api"
)

// Exit codes.
const (
	// exitOK: success.
	exitOK = 0
	// exitFailure: the operation failed (including "not found" and refusals by the daemon other
	// than permission).
	exitFailure = 1
	// exitUsage: bad command, flags or arguments.
	exitUsage = 2
	// exitDaemonDown: slicelet's socket is missing or refuses connections.
	exitDaemonDown = 3
	// exitPermission: the socket or the daemon refused the caller (not root, not in the group).
	exitPermission = 4
	// exitInterrupted: interrupted by SIGINT or SIGTERM (e.g. ending logs -f), as a shell reports it.
	exitInterrupted = 130
)

const usage = `slicectl controls and explains slicelet.

Usage:
  slicectl get pods [NAME ...] [-o wide|json|yaml|name] [-A]
  slicectl get pod NAME [-o wide|json|yaml|name]
  slicectl describe pod NAME
  slicectl apply -f FILE [-f FILE ...] [--dry-run=server]   FILE: YAML (multi-document) or JSON manifest, or a directory
  slicectl delete pod NAME [NAME ...]
  slicectl logs NAME [-c CONTAINER] [-f] [--previous] [--tail N]
  slicectl node [-o json|yaml]
  slicectl top pods [NAME] [--containers] [-A] [--sort-by cpu|memory] [--sum] [--no-headers]
  slicectl top node [--sort-by cpu|memory] [--no-headers]      CPU(cores) and MEMORY(bytes) as kubectl top shows them
  slicectl gc images|containers [--dry-run] [-o json]   collect now (what the GC timers run), or preview
  slicectl explain pod -f POD.yaml [--online] [--config F] [--cgroup-mode v1|v2] [--capacity LIST] [-o json]
  slicectl explain node [--online|--offline] [--config F] [--cgroup-mode v1|v2] [--capacity LIST] [-f POD.yaml ...] [-o json]
  slicectl explain gc images|containers --state FILE [--config F] [-o json]
  slicectl explain eviction [-o json]                          the daemon's last eviction decision
  slicectl explain eviction --observations FILE [--config F] [-o json]   replay a recorded episode offline

Flags for every command that talks to slicelet:
  -n, --namespace NS   namespace of the pods (default "default"); for apply, the namespace of
                       manifests that name none (one naming another is an error)
  --socket PATH        slicelet's API socket (default: [api] socket of --config, else ` + api.DefaultSocket + `)
  --config FILE        slicelet's configuration (default ` + config.DefaultPath + `)

explain pod is offline unless --online: it computes what slicelet would create from the
configuration, the manifests and the node's capacity (read from this machine unless --capacity
is given, e.g. --capacity cpu=4,memory=16Gi,pids=4194304). With --online the running slicelet
explains the manifests with its own configuration, capacity and cgroup mode.
explain node asks the running slicelet (its real configuration, capacity and pods) when no -f,
--config, --capacity or --cgroup-mode is given; if slicelet is not reachable it explains offline
and says so. --offline always explains offline; --online requires the daemon.

Exit codes: 0 success, 1 failure, 2 usage error, 3 slicelet not reachable,
4 permission denied (run as root or as a member of the socket's group), 130 interrupted.
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr}
	var err error
	switch args[0] {
	case "explain":
		err = c.explainCmd(args[1:])
	case "get":
		err = c.getCmd(args[1:])
	case "describe":
		err = c.describeCmd(args[1:])
	case "apply":
		err = c.applyCmd(args[1:])
	case "delete":
		err = c.deleteCmd(args[1:])
	case "logs", "log":
		err = c.logsCmd(args[1:])
	case "node":
		err = c.nodeCmd(args[1:])
	case "gc":
		err = c.gcCmd(args[1:])
	case "top":
		err = c.topCmd(args[1:])
	default:
		err = usageErr("unknown command %q", args[0])
	}
	return c.exit(err)
}

// exit reports err and maps it to an exit code.
func (c *cli) exit(err error) int {
	var perm *api.SocketPermissionError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(c.stdout, usage)
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(c.stderr, "slicectl: %s\nRun 'slicectl help' for usage.\n", strings.TrimPrefix(err.Error(), "usage: "))
		return exitUsage
	case errors.Is(err, errReported):
		return exitFailure
	case c.ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	fmt.Fprintf(c.stderr, "slicectl: %v\n", err)
	switch {
	case errors.Is(err, api.ErrDaemonDown):
		return exitDaemonDown
	case errors.As(err, &perm), isPeerRefused(err):
		return exitPermission
	default:
		return exitFailure
	}
}

// errReported is returned by commands that already printed their errors (e.g. apply of several
// documents) and only need exit 1.
var errReported = errors.New("reported")

// cli is one invocation's context and outputs.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	global         globalOptions
}

// globalOptions are the flags every daemon-facing command accepts.
type globalOptions struct {
	namespace  string
	socket     string
	configPath string
	// configSet is true when --config was given.
	configSet bool
}

// addGlobalFlags registers -n/--namespace, --socket and --config on fs.
func (c *cli) addGlobalFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.global.namespace, "n", "default", "namespace")
	fs.StringVar(&c.global.namespace, "namespace", "default", "namespace")
	fs.StringVar(&c.global.socket, "socket", "", "slicelet's API socket")
	fs.StringVar(&c.global.configPath, "config", config.DefaultPath, "slicelet's configuration file")
}

// parse parses fs (flags may follow positional arguments) and records which globals were set.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" {
			c.global.configSet = true
		}
	})
	if c.global.namespace == "" {
		return nil, usageErr("-n: the namespace must not be empty")
	}
	return pos, nil
}

// socketPath is --socket, else [api] socket of the configuration, else the default. A
// configuration that cannot be read is an error only when --config names it: a user who may not
// read /etc/slicelet/config.toml still reaches the default socket.
func (c *cli) socketPath() (string, error) {
	if c.global.socket != "" {
		return c.global.socket, nil
	}
	path := ""
	if c.global.configSet {
		path = c.global.configPath
	}
	cfg, err := config.Load(path)
	switch {
	case err == nil && cfg.API.Socket != "":
		return cfg.API.Socket, nil
	case err != nil && c.global.configSet:
		return "", err
	}
	return api.DefaultSocket, nil
}

// client returns an API client for the resolved socket.
func (c *cli) client() (*api.Client, error) {
	sock, err := c.socketPath()
	if err != nil {
		return nil, err
	}
	return api.NewClient(sock), nil
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
