package agent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// evictionOptions are what newEvictionManager needs besides the config.
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
	// Metrics receives evictions and signal observations; nil for none.
	Metrics *metrics.Metrics
	// Health receives the loop's liveness, the signals' freshness and the pressure conditions.
	Health *health.Tracker
	// Clock runs the loop's timers; clock.RealClock when nil.
	Clock clock.WithTicker
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
	// Sampled gives the pods' usage from the stats sampler's samples, so that an idle cycle
	// reads no pod cgroup (the sampler's read is the interval's one); nil reads every pod at
	// every cycle.
	Sampled eviction.SampledUsage
}

// newEvictionManager builds the eviction manager from the configuration, with its PSI and
// memory-threshold notifiers; Run starts it. It reports its node conditions, liveness and
// signal freshness to the health tracker, where admission, the API node, STATUS= and the
// watchdog read them.
func newEvictionManager(o evictionOptions) (*eviction.Manager, error) {
	cfg := o.Config
	ecfg, err := cfg.EvictionConfig()
	if err != nil {
		return nil, err
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
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return path(ctx)
		}
	}
	var notifiers []eviction.Notifier
	if !o.PollingOnly {
		notifiers = eviction.PressureNotifiers(src, ecfg.Thresholds, log)
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
		Storage:            storage,
		ContainerMemory:    o.ContainerMemory,
		Sampled:            o.Sampled,
		Config:             ecfg,
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
		Health:             o.Health,
		Clock:              o.Clock,
	})
	if err != nil {
		return nil, err
	}
	log.Info("eviction manager configured", "thresholds", len(ecfg.Thresholds), "monitoring_interval", cfg.Eviction.MonitoringInterval,
		"notifiers", len(notifiers), "health_bound", m.HealthBound())
	return m, nil
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
