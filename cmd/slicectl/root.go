package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manpage"
)

// rootLong is the help of slicectl itself.
const rootLong = `slicectl controls and explains slicelet, in kubectl's words: get, describe, apply, delete and
logs for pods, node status, top, garbage collection and explain (online through slicelet's local
API, or offline from the configuration and this machine).

The global flags (--socket, -n/--namespace, -A, -o, --config, -v) are accepted before or after
the command, as --flag=value, --flag value or, for short flags, -oyaml.

Exit codes: 0 success, 1 failure, 2 usage error, 3 slicelet not reachable,
4 permission denied (run as root or as a member of the socket's group), 130 interrupted.

See also: slicelet(8), slicelet.toml(5), kubectl(1).`

// newRootCmd builds slicectl's command tree over c; every command's RunE works on c.
func newRootCmd(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:           "slicectl",
		Short:         "Control and explain slicelet, the kubelet's node resource management on systemd",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			_ = cmd.Help()
			return errUsageShown
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c.global.configSet = cmd.Flags().Changed("config")
			c.global.namespaceSet = cmd.Flags().Changed("namespace")
			if c.global.namespace == "" {
				return usageErr("-n: the namespace must not be empty")
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr("%s: %v%s", cmd.CommandPath(), err, flagSuggestion(cmd, err))
	})
	pf := root.PersistentFlags()
	pf.StringVar(&c.global.socket, "socket", "", "slicelet's API socket (default: [api] socket of --config, else "+api.DefaultSocket+")")
	pf.StringVarP(&c.global.namespace, "namespace", "n", "default", "namespace of the pods; for apply, the namespace of manifests that name none")
	pf.BoolVarP(&c.global.allNamespaces, "all-namespaces", "A", false, "pods of every namespace")
	pf.StringVarP(&c.global.output, "output", "o", "", "output format (see each command)")
	pf.StringVar(&c.global.configPath, "config", config.DefaultPath, "slicelet's configuration file")
	pf.IntVarP(&c.global.verbosity, "v", "v", 0, "log level: 6 or more traces every API request on stderr")
	root.AddCommand(
		newGetCmd(c), newDescribeCmd(c), newApplyCmd(c), newDeleteCmd(c), newLogsCmd(c),
		newNodeCmd(c), newTopCmd(c), newGCCmd(c), newExplainCmd(c), newVersionCmd(c), newEventsCmd(c),
		manpage.Command("1", "User Commands"),
	)
	addCompletions(c, root)
	return root
}

// errUsageShown is a usage error whose help was already printed (exit 2, no message).
var errUsageShown = fmt.Errorf("%w: help shown", errUsage)

// unknownCommand is the error for an unknown verb or subject, with cobra's suggestions.
func unknownCommand(cmd *cobra.Command, arg string) error {
	return usageErr("unknown command %q for %q%s", arg, cmd.CommandPath(), suggestCommand(cmd, arg))
}

// suggestCommand names cmd's subcommand closest to arg (cobra's rule: at most two edits, or a
// prefix), "" when none is close.
func suggestCommand(cmd *cobra.Command, arg string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		return fmt.Sprintf("; did you mean %q?", s[0])
	}
	return ""
}

// flagSuggestion names the closest known flag for pflag's "unknown flag: --X" and
// "unknown shorthand flag" errors, "" for other errors.
func flagSuggestion(cmd *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	best, bestDist := "", 3
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if d := levenshtein(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean --%s?", best)
}

// levenshtein is the edit distance of a and b.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// subjectCmd makes cmd a command whose work is done by its subcommands: no argument is the
// usage error what; an unknown subject is unknown (a format with the subject's %q) plus a
// suggestion. Unknown flags are left for the subject's error, which says more.
func subjectCmd(cmd *cobra.Command, what, unknown string) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageErr("%s", what)
		}
		return usageErr("%s%s", fmt.Sprintf(unknown, args[0]), suggestCommand(cmd, args[0]))
	}
	return cmd
}

// checkOutput refuses an -o the command does not have; allowed lists the formats ("" is the
// default and always allowed).
func (c *cli) checkOutput(cmdName string, allowed ...string) error {
	o := c.global.output
	if o == "" {
		return nil
	}
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	if len(allowed) == 0 {
		return usageErr("%s: -o %q: this command has no output formats", cmdName, o)
	}
	if len(allowed) == 1 {
		return usageErr("%s: -o %q: only %s is supported", cmdName, o, allowed[0])
	}
	return usageErr("%s: -o %q: must be %s or %s", cmdName, o, strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])
}

// isCobraUsage is true for the errors cobra itself returns for a bad command line.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ") || strings.HasPrefix(msg, "accepts ") ||
		strings.HasPrefix(msg, "requires ") || strings.HasPrefix(msg, "invalid argument ")
}
