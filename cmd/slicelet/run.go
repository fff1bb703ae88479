package main

import (
	"fmt"
	"io"

	"github.com/slicelet/slicelet/config"
)

// runCmd is `slicelet run`, the agent itself. It loads the configuration
// (refusing to start on any problem) and builds the logger; the agent proper
// is wired in by the lead. Until then this build says so plainly instead of
// pretending to run.
func runCmd(g *globalOptions, args []string, _, stderr io.Writer) int {
	if ok, code := subFlags(g, "run", args, stderr); !ok {
		return code
	}
	cfg, err := config.Load(g.configPath)
	if err != nil {
		printProblems(stderr, "slicelet run: nothing started", err)
		return exitFailure
	}
	if _, err := g.newLogger(cfg); err != nil {
		fmt.Fprintf(stderr, "slicelet run: logger: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stderr, "slicelet run: not available in this build yet (only `slicelet config check|print`)")
	return exitFailure
}
