package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/agent"
)

// runCmd is `slicelet run`, the agent itself: it loads the configuration (refusing to start on
// any problem), builds the logger and runs until SIGTERM or SIGINT. Pods keep running when it
// stops.
func runCmd(g *globalOptions, _, stderr io.Writer) int {
	cfg, err := config.Load(g.configPath)
	if err != nil {
		printProblems(stderr, "slicelet run: nothing started", err)
		return exitFailure
	}
	log, err := g.newLogger(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "slicelet run: logger: %v\n", err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("slicelet starting", "config_files", cfg.Files())
	if err := agent.Run(ctx, agent.Options{Config: cfg, Logger: log}); err != nil {
		log.Error("slicelet failed", "error", err)
		fmt.Fprintf(stderr, "slicelet run: %v\n", err)
		return exitFailure
	}
	return exitOK
}
