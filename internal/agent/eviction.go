package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// evictionOptions are what startEviction needs besides the config.
type evictionOptions struct {
	Config     *config.Config
	CgroupRoot string
	ProcRoot   string
	Mode       units.Mode
	Controller *pods.Controller
	// Reclaim is node-level reclaim (container GC of dead instances for the systemd runtime);
	// nil skips it.
	Reclaim eviction.Reclaimer
	Logger  *slog.Logger
	// PollingOnly disables the pressure notifiers (benchmarks, debugging).
	PollingOnly bool
	// Metrics receives evictions, node conditions and signal observations; nil for none.
	Metrics *metrics.Metrics
	// BeforeCycle, if set, runs at the start of every cycle (a test seam: Options.evictionBeforeCycle).
	BeforeCycle func()
	// Storage tells where pods keep local storage: their ephemeral storage is measured there
	// for the local-storage limits and the nodefs ranking.
	Storage eviction.FSStorageOptions
	// ImageFsPath, when set, is where the runtime keeps its images: imagefs.* is observed
	// there (CRI).
	ImageFsPath func(ctx context.Context) (string, error)
	// ContainerMemory reads each container's working set for the eviction message; nil for
	// none.
	ContainerMemory func(ctx context.Context, p eviction.ActivePod) ([]eviction.ContainerUsage, error)
}

// startEviction builds the eviction manager from the configuration and runs it (with its PSI
// and memory-threshold notifiers) in wg until ctx ends. Its Conditions feed admission, its
// NodeConditions the API node, its Summary STATUS= and its Healthy the watchdog.
func startEviction(ctx context.Context, wg *sync.WaitGroup, o evictionOptions) (*eviction.Manager, error) {
	cfg := o.Config
	thresholds, err := cfg.EvictionThresholds()
	if err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	log := o.Logger.With("component", "eviction")
	src := eviction.Sources{
		CgroupRoot:     o.CgroupRoot,
		ProcRoot:       o.ProcRoot,
		Mode:           o.Mode,
		KubepodsCgroup: slices.SliceCgroupPath(slices.KubepodsSlice),
		NodeFsPath:     cfg.StateDir,
	}
	if path := o.ImageFsPath; path != nil {
		// The CRI runtime's image store may be its own filesystem: imagefs.* is observed there.
		src.ImageFsPathOf = func() (string, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return path(ctx)
		}
	}
	var notifiers []eviction.Notifier
	if !o.PollingOnly {
		notifiers = eviction.PressureNotifiers(src, thresholds, log)
	}
	var storage eviction.PodStorage
	if o.Storage.Dirs != nil {
		fs, err := eviction.NewFSStorage(o.Storage)
		if err != nil {
			return nil, fmt.Errorf("pod storage: %w", err)
		}
		storage = fs
	}
	m, err := eviction.NewManager(eviction.ManagerOptions{
		Storage:         storage,
		ContainerMemory: o.ContainerMemory,
		Config: eviction.Config{
			Thresholds:                    thresholds,
			PressureTransitionPeriod:      cfg.Eviction.PressureTransitionPeriod,
			MaxPodGracePeriod:             cfg.Eviction.MaxPodGracePeriod,
			PriorityClasses:               cfg.Eviction.PriorityClasses,
			LocalStorageCapacityIsolation: true,
		},
		Sources:            src,
		Pods:               o.Controller,
		BeforeCycle:        o.BeforeCycle,
		Evictor:            o.Controller,
		Reclaim:            o.Reclaim,
		Notifiers:          notifiers,
		MonitoringInterval: cfg.Eviction.MonitoringInterval,
		Logger:             log,
		Observe:            observed(src, o.Metrics),
		Metrics:            evictionMetrics(o.Metrics),
	})
	if err != nil {
		return nil, err
	}
	log.Info("eviction manager started", "thresholds", len(thresholds), "monitoring_interval", cfg.Eviction.MonitoringInterval,
		"notifiers", len(notifiers), "health_bound", m.HealthBound())
	wg.Go(func() { m.Run(ctx) })
	return m, nil
}

// systemdAlive returns a liveness probe of the systemd connection: one cheap D-Bus call
// (listing kubepods.slice) that must answer within timeout.
func systemdAlive(sd *units.Manager, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := sd.List(ctx, slices.KubepodsSlice)
		return err
	}
}

// watchdogLoop sends WATCHDOG=1 every interval/2 while healthy(now) is true and alive
// succeeds: a hung eviction loop or a dead systemd connection stops the pings, and systemd
// restarts slicelet after WatchdogSec (pods keep running: they belong to systemd). It logs
// when the pings stop and when they resume, and returns when ctx ends.
func watchdogLoop(ctx context.Context, interval time.Duration, healthy func(time.Time) bool, alive func(context.Context) error,
	notify func(string) (bool, error), log *slog.Logger) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	withholding := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reason := ""
		if !healthy(time.Now()) {
			reason = "eviction loop has not completed a cycle within its bound"
		} else if err := alive(ctx); err != nil {
			reason = "systemd connection: " + err.Error()
		}
		if reason != "" {
			if !withholding {
				log.Error("withholding watchdog pings; systemd will restart slicelet", "reason", reason)
				withholding = true
			}
			continue
		}
		if withholding {
			log.Info("watchdog pings resumed")
			withholding = false
		}
		if _, err := notify(units.NotifyWatchdog); err != nil {
			log.Debug("sd_notify watchdog failed", "error", err)
		}
	}
}

// startWatchdog runs watchdogLoop in wg when systemd expects pings (WatchdogSec= set).
func startWatchdog(ctx context.Context, wg *sync.WaitGroup, healthy func(time.Time) bool, alive func(context.Context) error, log *slog.Logger) error {
	interval, err := units.WatchdogInterval()
	if err != nil || interval <= 0 {
		return err
	}
	log.Info("watchdog enabled", "interval", interval)
	wg.Go(func() { watchdogLoop(ctx, interval, healthy, alive, units.Notify, log) })
	return nil
}

// observed is src.Observe that also publishes every observation (available amount and time) as a
// metric, so a scrape shows the signals and how fresh they are.
func observed(src eviction.Sources, m *metrics.Metrics) func(time.Time) (eviction.Observations, []eviction.Unavailable) {
	return func(now time.Time) (eviction.Observations, []eviction.Unavailable) {
		obs, unavailable := src.Observe(now)
		for sig, ob := range obs {
			m.SetSignalObservation(string(sig), ob.Available.Value(), ob.Time)
		}
		return obs, unavailable
	}
}

// evictionMetrics is m as the manager's Metrics, or nil (a nil *metrics.Metrics in an interface
// would not be nil).
func evictionMetrics(m *metrics.Metrics) eviction.Metrics {
	if m == nil {
		return nil
	}
	return m
}
