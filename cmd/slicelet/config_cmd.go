package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/slicelet/slicelet/config"
)

// configCmd is `slicelet config check|print`.
func configCmd(g *globalOptions, sub string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(g.configPath)
	if err != nil {
		printProblems(stderr, "config", err)
		return exitFailure
	}
	switch sub {
	case "check":
		files := cfg.Files()
		if len(files) == 0 {
			fmt.Fprintf(stdout, "config OK: defaults (%s not found)\n", config.DefaultPath)
		} else {
			fmt.Fprintf(stdout, "config OK: %s\n", strings.Join(files, ", "))
		}
	case "print":
		if err := config.Encode(stdout, cfg); err != nil {
			fmt.Fprintf(stderr, "config: %v\n", err)
			return exitFailure
		}
	}
	return exitOK
}

// printProblems prints a Load error: every problem on its own line, then a count.
func printProblems(w io.Writer, prefix string, err error) {
	var ps config.Problems
	if !errors.As(err, &ps) {
		fmt.Fprintf(w, "%s: %v\n", prefix, err)
		return
	}
	for _, p := range ps {
		fmt.Fprintln(w, p.String())
	}
	noun := "problems"
	if len(ps) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(w, "%s: %d %s\n", prefix, len(ps), noun)
}
