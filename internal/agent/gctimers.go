package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/units"
)

// GC kinds: what a timer, the API and slicectl gc collect.
const (
	gcImages     = "images"
	gcContainers = "containers"
)

// gcTimerAccuracy is the timers' AccuracySec: systemd's default of one minute would let a
// one-minute container GC period drift to two.
const gcTimerAccuracy = time.Second

// timerUnits is what the GC timers need from systemd (*units.Manager).
type timerUnits interface {
	StartTimer(ctx context.Context, timerName string, timerProps []units.Property, serviceName string, serviceProps []units.Property) error
	Stop(ctx context.Context, name string) error
	UnitByPID(ctx context.Context, pid int) (string, error)
}

// gcTimer is one transient timer and the oneshot service it fires.
type gcTimer struct {
	Kind    string
	Timer   string
	Service string
	Period  time.Duration
	// TimerProps and ServiceProps are the units' properties.
	TimerProps, ServiceProps []units.Property
}

// gcTimerPlan returns the GC timers for cfg: slicelet-gc-containers.timer and
// slicelet-gc-images.timer, each firing a oneshot service that runs
// `slicectl gc KIND --socket SOCKET` every period (the first run one period after start, as the
// kubelet's GC loops). owner is the daemon's own unit: when it is a service, timers and
// services are PartOf it, so `systemctl stop slicelet` (or a restart) takes them along. A period
// of 0 has no timer (the collection still runs on demand and for eviction), and neither does
// image GC for a runtime without images (images false: the built-in systemd runtime). Pure.
func gcTimerPlan(cfg *config.Config, slicectl, owner string, images bool) ([]gcTimer, error) {
	if !filepath.IsAbs(slicectl) {
		return nil, fmt.Errorf("gc timers: slicectl path %q is not absolute", slicectl)
	}
	var out []gcTimer
	for _, k := range []struct {
		kind   string
		period time.Duration
		what   string
	}{
		{gcContainers, cfg.GC.Containers.Period, "dead containers"},
		{gcImages, cfg.GC.Images.Period, "unused images"},
	} {
		if k.period <= 0 || (k.kind == gcImages && !images) {
			continue
		}
		base := "slicelet-gc-" + k.kind
		t := gcTimer{Kind: k.kind, Timer: base + units.SuffixTimer, Service: base + units.SuffixService, Period: k.period}
		t.TimerProps = []units.Property{
			{Name: "Description", Value: fmt.Sprintf("slicelet: collect %s every %s", k.what, k.period)},
			{Name: "TimersMonotonic", Value: []units.TimerMonotonic{{Base: "OnActiveSec", Elapse: k.period}, {Base: "OnUnitActiveSec", Elapse: k.period}}},
			{Name: "AccuracyUSec", Value: gcTimerAccuracy},
		}
		t.ServiceProps = []units.Property{
			{Name: "Description", Value: fmt.Sprintf("slicelet: collect %s", k.what)},
			{Name: "Type", Value: "oneshot"},
			{Name: "ExecStart", Value: units.Exec{Path: slicectl, Args: []string{slicectl, "gc", k.kind, "--socket", cfg.API.Socket}}},
			// The timer sets the pace; systemd's start rate limit (5 starts in 10 s) would
			// otherwise refuse runs of a short period after a few failures.
			{Name: "StartLimitIntervalUSec", Value: time.Duration(0)},
		}
		// PartOf without After=: slicelet creates the timers before it reports READY=1, so an
		// ordering after its own, still activating, unit would deadlock the start jobs.
		if strings.HasSuffix(owner, units.SuffixService) {
			for _, props := range []*[]units.Property{&t.TimerProps, &t.ServiceProps} {
				*props = append(*props, units.Property{Name: "PartOf", Value: []string{owner}})
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// slicectlPath is the slicectl next to the running slicelet (both are installed together), or
// the one on PATH.
func slicectlPath() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "slicectl")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("slicectl")
	if err != nil {
		return "", fmt.Errorf("slicectl: not next to slicelet and not on PATH: %w", err)
	}
	return p, nil
}

// startGCTimers (re)creates the GC timers: existing ones are stopped first, so a changed
// period or runtime takes effect. It returns a function that stops them (the daemon calls it on shutdown,
// so no timer keeps firing at a socket nobody serves).
func startGCTimers(ctx context.Context, sd timerUnits, cfg *config.Config, images bool, log *slog.Logger) (stop func(context.Context), err error) {
	slicectl, err := slicectlPath()
	if err != nil {
		return nil, fmt.Errorf("gc timers: %w", err)
	}
	owner, err := sd.UnitByPID(ctx, os.Getpid())
	if err != nil {
		log.Debug("own unit unknown; gc timers are not tied to it", "error", err)
	}
	plan, err := gcTimerPlan(cfg, slicectl, owner, images)
	if err != nil {
		return nil, err
	}
	var started []gcTimer
	stop = func(ctx context.Context) {
		for _, t := range started {
			for _, u := range []string{t.Timer, t.Service} {
				if err := sd.Stop(ctx, u); err != nil {
					log.Warn("gc timer stop failed", "unit", u, "error", err)
				}
			}
		}
	}
	var errs []error
	// Every GC timer a previous run may have left (a killed slicelet, another runtime or
	// period) goes first; then the planned ones start afresh.
	for _, kind := range []string{gcContainers, gcImages} {
		for _, suffix := range []string{units.SuffixTimer, units.SuffixService} {
			if err := sd.Stop(ctx, "slicelet-gc-"+kind+suffix); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, t := range plan {
		if err := sd.StartTimer(ctx, t.Timer, t.TimerProps, t.Service, t.ServiceProps); err != nil {
			errs = append(errs, err)
			continue
		}
		started = append(started, t)
		log.Info("gc timer started", "unit", t.Timer, "period", t.Period, "owner", owner)
	}
	if err := errors.Join(errs...); err != nil {
		return stop, fmt.Errorf("gc timers: %w", err)
	}
	return stop, nil
}
