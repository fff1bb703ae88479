package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/buildinfo"
	"github.com/slicelet/slicelet/internal/logging"
	"github.com/slicelet/slicelet/internal/manpage"
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

// register adds the global flags to fs.
func (g *globalOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.configPath, "config", "", "configuration file (default "+config.DefaultPath+"; drop-ins from config.d/ next to it)")
	fs.StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn or error (overrides [log] level)")
	fs.StringVar(&g.logFormat, "log-format", "", "log format: auto, text, json or journal (overrides [log] format; auto under systemd sends journal records with POD_UID, POD_NAME and SLICE)")
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

// errUsage marks the errors that are the command line's fault (exit 2).
var errUsage = errors.New("usage")

// exitError carries a command's exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// cli runs the command line and returns the exit code.
func cli(args []string, stdout, stderr io.Writer) int {
	var g globalOptions
	root := newRootCmd(&g, stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage), strings.HasPrefix(err.Error(), "unknown command "):
		fmt.Fprintf(stderr, "slicelet: %s\nRun 'slicelet --help' for usage.\n", strings.TrimPrefix(err.Error(), "usage: "))
		return exitUsage
	}
	fmt.Fprintf(stderr, "slicelet: %v\n", err)
	return exitFailure
}

// usageErr is a usage error (exit 2).
func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// newRootCmd builds slicelet's command tree; the commands write to stdout and stderr and
// return exitError for their exit codes.
func newRootCmd(g *globalOptions, stdout, stderr io.Writer) *cobra.Command {
	code := func(c int) error {
		if c == exitOK {
			return nil
		}
		return exitError{c}
	}
	runE := func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErr("unexpected argument %q", args[0])
		}
		if err := g.check(); err != nil {
			return usageErr("%v", err)
		}
		return code(runCmd(g, stdout, stderr))
	}
	root := &cobra.Command{
		Use:   "slicelet",
		Short: "The kubelet's node resource management as a systemd-native service",
		Long: `slicelet gives a systemd host what the kubelet gives a Kubernetes node, without Kubernetes. It
builds a cgroup hierarchy by QoS class entirely from transient systemd units created over D-Bus:
kubepods.slice (limited to node allocatable), kubepods-burstable.slice and
kubepods-besteffort.slice, one slice per pod and one service per container. Pods are ordinary
Kubernetes Pod manifests, dropped in the manifest directory (/etc/slicelet/pods.d by default) or
sent to the local API with slicectl(1). The resource math (QoS class, CPU shares and weight, CFS
quota, memory, pids, hugepages, memory QoS on cgroup v2) is the kubelet's.

slicelet run (the default command) is the daemon, meant to run as the systemd service
slicelet.service: a Type=notify service that reports readiness and a STATUS= line and pings the
service watchdog. Stopping slicelet does not stop the pods: they belong to systemd, and the next
slicelet re-adopts them. The flags may be given before or after the command.

Exit status: 0 success (for run: stopped by SIGTERM or SIGINT); 1 the command failed (a
configuration problem, a reservation above the node's capacity, no systemd to talk to, a runtime
error); 2 the command line is wrong.

Files: /etc/slicelet/config.toml, the configuration (slicelet.toml(5)); /etc/slicelet/config.d/*.toml,
drop-ins applied in lexical order; /etc/slicelet/pods.d/, static pod manifests; /var/lib/slicelet/,
the state; /run/slicelet/slicelet.sock, the API socket slicectl(1) uses (group slicelet).

See also: slicectl(1), slicelet.toml(5), systemctl(1), journalctl(1), systemd.resource-control(5).`,
		Example: `  slicelet config check
  systemctl enable --now slicelet
  journalctl -u slicelet
  slicelet --config /etc/slicelet/config.toml --log-format text
  slicelet --version`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				_, err := fmt.Fprint(cmd.OutOrStdout(), versionText(buildinfo.Get()))
				return err
			}
			if len(args) > 0 {
				return usageErr("unknown command %q for %q%s", args[0], "slicelet", suggest(cmd, args[0]))
			}
			return runE(cmd, args)
		},
	}
	// --version by hand, not cobra's Version with a version template: a template makes the
	// linker keep every exported method of the binary (text/template calls methods by name),
	// about 8 MB more of slicelet to map.
	root.Flags().BoolP("version", "v", false, "version for slicelet")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr("%s: %v", cmd.CommandPath(), err)
	})
	g.register(root.PersistentFlags())
	root.AddCommand(&cobra.Command{
		Use:   "run",
		Short: "Run the node agent until SIGTERM or SIGINT",
		Long: `Run the node agent: load the configuration (refusing to start on any problem), build the logger
and run until SIGTERM or SIGINT. Pods keep running when it stops.`,
		Example: `  slicelet run --config /etc/slicelet/config.toml --log-format journal`,
		Args:    cobra.ArbitraryArgs,
		RunE:    runE,
	})
	config := &cobra.Command{
		Use:   "config check|print",
		Short: "Validate or print the configuration",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("usage: slicelet config check|print [--config F]")
			}
			return usageErr("config: unknown subcommand %q (want check or print)%s", args[0], suggest(cmd, args[0]))
		},
	}
	config.FParseErrWhitelist.UnknownFlags = true
	for _, sub := range []struct{ name, short, example string }{
		{"check", "Validate the configuration (exit 1 on problems, each with its file, line and key)", "  slicelet config check --config /etc/slicelet/config.toml"},
		{"print", "Print the effective configuration (defaults, file and drop-ins merged) as TOML", "  slicelet config print > effective.toml"},
	} {
		config.AddCommand(&cobra.Command{
			Use:     sub.name,
			Short:   sub.short,
			Example: sub.example,
			Args:    cobra.ArbitraryArgs,
			RunE: func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErr("config %s: unexpected argument %q", sub.name, args[0])
				}
				if err := g.check(); err != nil {
					return usageErr("config %s: %v", sub.name, err)
				}
				return code(configCmd(g, sub.name, stdout, stderr))
			},
		})
	}
	root.AddCommand(config, manpage.Command("8", "System Administration"))
	return root
}

// suggest names the subcommand of cmd closest to arg, "" when none is close.
func suggest(cmd *cobra.Command, arg string) string {
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		return fmt.Sprintf("; did you mean %q?", s[0])
	}
	return ""
}

// versionText is what --version prints: the version, commit, build date and Go version.
func versionText(i buildinfo.Info) string {
	return fmt.Sprintf("slicelet %s\n  git commit: %s\n  build date: %s\n  go version: %s %s\n",
		i.Version, orUnknown(i.GitCommit), orUnknown(i.BuildDate), i.GoVersion, i.Platform)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
