package main

import (
	"context"
	"errors"
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

// errUsage marks errors that are the caller's fault (exit 2).
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// run is slicectl with its arguments; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runIO(args, os.Stdin, stdout, stderr)
}

// runIO is run with the standard input given (what -f - reads).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(c)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && isCobraUsage(err) {
		err = usageErr("%s", strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n", " ")))
	}
	return c.exit(err)
}

// exit reports err and maps it to an exit code.
func (c *cli) exit(err error) int {
	var perm *api.SocketPermissionError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
	case errors.Is(err, errUsage):
		fmt.Fprintf(c.stderr, "slicectl: %s\nRun 'slicectl --help' for usage.\n", strings.TrimPrefix(err.Error(), "usage: "))
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
	stdin          io.Reader
	stdout, stderr io.Writer
	global         globalOptions
}

// globalOptions are the flags every command accepts, before or after the verb.
type globalOptions struct {
	namespace  string
	socket     string
	configPath string
	output     string
	// allNamespaces is -A.
	allNamespaces bool
	// verbosity is -v: 6 or more traces the API requests.
	verbosity int
	// configSet is true when --config was given, namespaceSet when -n was.
	configSet, namespaceSet bool
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
	cl := api.NewClient(sock)
	if c.global.verbosity >= 6 {
		cl.Trace = c.stderr
	}
	return cl, nil
}
