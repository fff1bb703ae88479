package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/logging"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed (bad configuration, runtime error)
	exitUsage   = 2 // the command line itself is wrong
)

// globalOptions are the flags every command accepts, before or after its name.
type globalOptions struct {
	configPath string // "" means config.DefaultPath, which may be missing
	logLevel   string // "" means [log] level
	logFormat  string // "" means [log] format
}

// register adds the global flags to fs, keeping values already parsed.
func (g *globalOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&g.configPath, "config", g.configPath, "configuration `file` (default "+config.DefaultPath+"; drop-ins from config.d/ next to it)")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log `level`: debug, info, warn or error (overrides [log] level)")
	fs.StringVar(&g.logFormat, "log-format", g.logFormat, "log `format`: auto, text, json or journal (overrides [log] format)")
}

// check rejects invalid flag values before anything runs.
func (g *globalOptions) check() error {
	if g.logLevel != "" {
		if _, err := logging.ParseLevel(g.logLevel); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
	}
	if g.logFormat != "" {
		if err := logging.ValidFormat(g.logFormat); err != nil {
			return fmt.Errorf("--log-format: %w", err)
		}
	}
	return nil
}

// newLogger builds the process logger from the configuration, flags winning.
func (g *globalOptions) newLogger(cfg *config.Config) (*slog.Logger, error) {
	o := logging.Options{Level: cfg.Log.Level, Format: cfg.Log.Format, Stderr: os.Stderr, Identifier: "slicelet"}
	if g.logLevel != "" {
		o.Level = g.logLevel
	}
	if g.logFormat != "" {
		o.Format = g.logFormat
	}
	return logging.New(o)
}

const usage = `usage:
  slicelet [flags] [run]                 run the node agent
  slicelet config check [--config F]     validate the configuration (exit 1 on problems)
  slicelet config print [--config F]     print the effective configuration as TOML

flags:
`

// cli runs the command line and returns the exit code.
func cli(args []string, stdout, stderr io.Writer) int {
	var g globalOptions
	fs := flag.NewFlagSet("slicelet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := fs.Args()
	cmd := "run"
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	switch cmd {
	case "run":
		return runCmd(&g, rest, stdout, stderr)
	case "config":
		return configCmd(&g, rest, stdout, stderr)
	case "help":
		fs.Usage()
		return exitOK
	}
	fmt.Fprintf(stderr, "slicelet: unknown command %q\n", cmd)
	fs.Usage()
	return exitUsage
}

// subFlags parses a subcommand's flags (the global ones again) and rejects
// positional arguments.
func subFlags(g *globalOptions, name string, args []string, stderr io.Writer) (ok bool, code int) {
	fs := flag.NewFlagSet("slicelet "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "slicelet %s: unexpected argument %q\n", name, fs.Arg(0))
		return false, exitUsage
	}
	if err := g.check(); err != nil {
		fmt.Fprintf(stderr, "slicelet %s: %v\n", name, err)
		return false, exitUsage
	}
	return true, exitOK
}
