// Package agent wires the slicelet daemon together: it reads the node's capacity, connects to
// systemd, builds and reconciles the kubepods hierarchy, and talks to the service manager
// (READY=1, STATUS=, WATCHDOG=1). cmd/slicelet only parses flags and calls Run.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/source"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// Options are the inputs of Run. The roots default to the real ones and exist so tests can
// point the agent at fixture trees.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// ProcRoot, SysRoot and CgroupRoot default to /proc, /sys and /sys/fs/cgroup.
	ProcRoot   string
	SysRoot    string
	CgroupRoot string

	// evictionBeforeCycle, if set, runs at the start of every eviction cycle. It is a test seam
	// (unexported, so only this package's tests can set it): the watchdog integration test
	// blocks in it to stall the loop and have systemd restart slicelet.
	evictionBeforeCycle func()
}

func (o *Options) defaults() {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run runs the daemon until ctx ends. It returns an error, and creates nothing, when the node
// cannot be managed as configured (reservation above capacity, a reserved cgroup that does not
// exist, no systemd). Stopping leaves every pod running: pods belong to systemd.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	cfg, log := o.Config, o.Logger
	if !cfg.Cgroups.PerQOS {
		return errors.New("cgroups.per_qos = false: slicelet always builds the QoS slices (kubepods-burstable.slice, kubepods-besteffort.slice); set it to true")
	}
	if cfg.Cgroups.Root != "" && cfg.Cgroups.Root != "/" {
		return fmt.Errorf("cgroups.root %q: slicelet creates kubepods.slice at the root of systemd's slice tree; only \"/\" is supported", cfg.Cgroups.Root)
	}
	setMemoryLimit(cfg.Node.MaxPods, log)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	capacity, err := slices.ReadCapacity(o.ProcRoot, o.SysRoot, cfg.StateDir)
	if err != nil {
		return fmt.Errorf("node capacity: %w", err)
	}

	// Refuse an impossible reservation before touching systemd (the kubelet's
	// validateNodeAllocatable), so a bad configuration creates nothing.
	pre, err := slices.ManagerConfigFrom(cfg, capacity, units.ModeUnknown)
	if err != nil {
		return err
	}
	if err := slices.ValidateReservation(capacity, slices.SumResources(pre.Node.SystemReserved, pre.Node.KubeReserved, pre.Node.HardEviction)); err != nil {
		return err
	}

	met := newMetrics()
	sd, err := units.Connect(ctx, units.Options{JobTimeout: cfg.Systemd.JobTimeout, Logger: log, CgroupRoot: o.CgroupRoot, Observe: systemdObserver(met)})
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer sd.Close()
	log.Info("connected to systemd", "cgroup_mode", sd.Mode().String())

	mcfg, err := slices.ManagerConfigFrom(cfg, capacity, sd.Mode())
	if err != nil {
		return err
	}
	mcfg.ProcRoot = o.ProcRoot
	mgr := slices.NewManager(sd, slices.NewCgroupFS(o.CgroupRoot), mcfg, log)
	start := time.Now()
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	alloc := slices.NodeAllocatable(capacity, mcfg.Node.SystemReserved, mcfg.Node.KubeReserved, mcfg.Node.HardEviction)
	limits := slices.KubepodsLimits(capacity, mcfg.Node.SystemReserved, mcfg.Node.KubeReserved)
	log.Info("kubepods hierarchy ready",
		"duration", time.Since(start),
		"capacity_cpu_millis", capacity.CPU, "capacity_memory_bytes", capacity.Memory,
		"allocatable_cpu_millis", alloc.Cpu().MilliValue(), "allocatable_memory_bytes", alloc.Memory().Value(),
		"kubepods_cpu_millis", limits.Cpu().MilliValue(), "kubepods_memory_bytes", limits.Memory().Value())

	hostname, _ := os.Hostname()
	prt, err := newRuntime(ctx, cfg, sd, capacity, mcfg, logRecorder{log.With("component", "events")}, log)
	if err != nil {
		return err
	}
	defer prt.close()
	rt := prt.worker
	security, err := admission.ParsePodSecurityLevels(cfg.Pods.Security.BySource())
	if err != nil {
		return err
	}
	if security[pods.SourceAPI].AllowsRoot() {
		log.Info("members of the api socket's group can run pods as root on this node: membership is root-equivalent",
			"api_group", cfg.API.Group, "pod_security", security[pods.SourceAPI].String())
	}
	// The eviction manager starts after the controller it evicts through; admission reads its
	// node conditions once it exists, and the controller tells it when pods change.
	var evm atomic.Pointer[eviction.Manager]
	admitter := admission.Admitter{PodSecurity: security, Node: func() admission.NodeState {
		n := admission.NodeState{Allocatable: admission.WithMaxPods(alloc, cfg.Node.MaxPods), PriorityClasses: cfg.Eviction.PriorityClasses}
		if m := evm.Load(); m != nil {
			n.Conditions = m.Conditions()
		}
		return n
	}}
	ctrl := pods.NewController(pods.ControllerOptions{
		Slices: mgr, Runtime: rt, Admitter: admitter, Logger: log,
		WantSources: []string{pods.SourceFile, pods.SourceAPI},
		OnReject:    met.AdmissionRejected,
		// Pods coming and going re-arm the pressure thresholds at once (not at the next 10 s).
		OnChange: func() {
			if m := evm.Load(); m != nil {
				m.PodsChanged()
			}
		},
	})
	store, err := source.OpenAPIStore(cfg.StateDir, source.APIStoreOptions{Log: log.With("source", pods.SourceAPI)})
	if err != nil {
		return fmt.Errorf("api pod store: %w", err)
	}
	dir, err := source.NewManifestDir(source.ManifestDirOptions{Dir: cfg.Pods.ManifestDir, StateDir: cfg.StateDir, Log: log.With("source", pods.SourceFile)})
	if err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	}
	col, err := newGCCollector(cfg, prt, ctrl.GCPodState, log)
	if err != nil {
		return err
	}
	gcs := newGCService(col, met, log)
	hasImages := prt.images != nil
	back := &backend{ctrl: ctrl, store: store, rt: rt, mgr: mgr, mcfg: mcfg, mode: sd.Mode(), maxPods: cfg.Node.MaxPods, hostname: hostname, gc: gcs,
		podSecurity: security}
	srv, err := api.NewServer(back,
		api.Options{Socket: cfg.API.Socket, Group: cfg.API.Group, Logger: log.With("component", "api")})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	serveMetrics, err := startMetrics(met, cfg, ctrl, log)
	if err != nil {
		return err
	}

	status := func() string {
		byQOS, byPhase := ctrl.Counts()
		enforced := ""
		if !mgr.Enforced() {
			enforced = "; node allocatable not yet enforced (retrying)"
		}
		problems := ""
		if n := len(ctrl.Problems()); n > 0 {
			problems = fmt.Sprintf("; %d manifest problems (journalctl -u slicelet)", n)
		}
		pressure := ""
		if m := evm.Load(); m != nil {
			pressure = "; " + m.Summary()
		}
		return fmt.Sprintf("STATUS=%d pods running (Guaranteed %d, Burstable %d, BestEffort %d), %d pending, %d failed; allocatable %dm cpu / %s memory%s%s%s",
			byPhase[v1.PodRunning], byQOS[v1.PodQOSGuaranteed], byQOS[v1.PodQOSBurstable], byQOS[v1.PodQOSBestEffort],
			byPhase[v1.PodPending], byPhase[v1.PodFailed], alloc.Cpu().MilliValue(), alloc.Memory().String(), enforced, problems, pressure)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { mgr.Run(runCtx) })
	wg.Go(func() { ctrl.Run(runCtx) })
	wg.Go(func() { serveMetrics(runCtx) })
	if hasImages {
		wg.Go(func() { detectLoop(runCtx, imageDetectPeriod, col.Detect, log.With("component", "gc")) })
	}
	// Per-container usage, read from the pods' cgroups: the eviction message names the
	// containers over their requests; the sampler serves `slicectl top`.
	statsReader := podstats.NewReader(o.CgroupRoot, o.ProcRoot, sd.Mode(), prt.namer)
	sampler, err := podstats.NewSampler(podstats.SamplerOptions{Reader: statsReader, Pods: ctrl,
		Interval: cfg.Eviction.MonitoringInterval, Logger: log.With("component", "podstats")})
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	back.stats = sampler
	wg.Go(func() { sampler.Run(runCtx) })
	m, err := startEviction(runCtx, &wg, evictionOptions{Config: cfg, CgroupRoot: o.CgroupRoot, ProcRoot: o.ProcRoot, Mode: sd.Mode(), Controller: ctrl, Logger: log, Metrics: met, BeforeCycle: o.evictionBeforeCycle, Reclaim: gcs.Reclaim,
		Storage: prt.storage, ImageFsPath: prt.imageFsPath, ContainerMemory: statsReader.ContainerMemory})
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	evm.Store(m)
	back.conditions = m.NodeConditions
	back.lastDecision = m.LastDecisionAt
	wg.Go(func() {
		if err := dir.Run(runCtx, ctrl.Update); err != nil && runCtx.Err() == nil {
			log.Error("manifest directory source stopped", "error", err)
		}
	})
	wg.Go(func() {
		if err := store.Run(runCtx, ctrl.Update); err != nil && runCtx.Err() == nil {
			log.Error("api pod source stopped", "error", err)
		}
	})
	// The API and READY wait until the controller adopted the pods that kept running while
	// slicelet was down, so that no client sees a running pod Pending because slicelet
	// restarted; bounded, so that a source that never reports does not hold the daemon back.
	adopt := time.NewTimer(adoptTimeout)
	select {
	case <-ctrl.Adopted():
		log.Info("pods adopted", "duration", time.Since(start))
	case <-adopt.C:
		log.Warn("pods not adopted in time; serving anyway", "timeout", adoptTimeout)
	case <-ctx.Done():
	}
	adopt.Stop()
	wg.Go(func() {
		if err := srv.Serve(runCtx); err != nil && runCtx.Err() == nil {
			log.Error("api server stopped", "error", err)
		}
	})
	stopTimers, err := startGCTimers(runCtx, sd, cfg, hasImages, log)
	if err != nil {
		// GC still runs for eviction and on `slicectl gc`; only the schedule is missing.
		log.Error("gc timers not started; collections run only on demand and under disk pressure", "error", err)
	}
	if _, err := units.Notify(units.NotifyReady + "\n" + status()); err != nil {
		log.Warn("sd_notify failed", "error", err)
	}
	log.Info("slicelet ready", "api_socket", srv.Socket(), "manifest_dir", cfg.Pods.ManifestDir, "runtime", rt.Name())
	wg.Go(func() { statusLoop(runCtx, status, log) })
	if err := startWatchdog(runCtx, &wg, m.Healthy, systemdAlive(sd, 5*time.Second), log); err != nil {
		log.Warn("watchdog", "error", err)
	}
	<-ctx.Done()
	_, _ = units.Notify(units.NotifyStopping)
	if stopTimers != nil {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		stopTimers(stopCtx)
		stopCancel()
	}
	cancel()
	wg.Wait()
	log.Info("stopped; pods keep running under systemd")
	return nil
}

// adoptTimeout bounds the wait for the pods' adoption before the API is served and READY sent.
const adoptTimeout = 30 * time.Second

// statusLoop refreshes STATUS= every few seconds so `systemctl status slicelet` stays current.
func statusLoop(ctx context.Context, status func() string, log *slog.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s := status(); s != last {
				last = s
				if _, err := units.Notify(s); err != nil {
					log.Debug("sd_notify status failed", "error", err)
				}
			}
		}
	}
}

// setMemoryLimit gives the Go runtime a soft memory limit that grows with max_pods, unless the
// operator set GOMEMLIMIT: 12 MiB plus 14 KiB per pod. Most of slicelet's memory above its live
// heap is garbage from decoding D-Bus traffic; without a limit the collector lets it grow to
// twice the heap (1000 idle pods: 43.8 MiB RSS; with this limit ≈35 MiB, docs/benchmarks.md).
func setMemoryLimit(maxPods int32, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(12<<20) + int64(maxPods)*(14<<10)
	debug.SetMemoryLimit(limit)
	log.Debug("go memory limit set", "bytes", limit, "max_pods", maxPods)
}
