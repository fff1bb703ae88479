// Package agent wires the slicelet daemon together: it reads the node's capacity, connects to
// systemd, builds every component complete with its dependencies (slice manager, runtime, pod
// controller, eviction manager, garbage collection, pod sources, local API, metrics, health
// tracker), runs them, and talks to the service manager (READY=1, STATUS=, WATCHDOG=1). It is
// the one place besides cmd that reads the configuration: components take their own options.
// cmd/slicelet only parses flags and calls Run.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/buildinfo"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/devices"
	"github.com/slicelet/slicelet/internal/pods/events"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/source"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/internal/procfs"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// Options are the inputs of Run. The roots default to the real ones and exist so tests can
// point the agent at fixture trees.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// ProcRoot, SysRoot, CgroupRoot and EtcRoot default to /proc, /sys, /sys/fs/cgroup and
	// /etc.
	ProcRoot   string
	SysRoot    string
	CgroupRoot string
	EtcRoot    string

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
	if o.EtcRoot == "" {
		o.EtcRoot = "/etc"
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
	d, err := newDaemon(ctx, o)
	if err != nil {
		return err
	}
	defer d.close()
	return d.run(ctx)
}

// daemon is every part of a running slicelet, each built complete by newDaemon.
type daemon struct {
	cfg   *config.Config
	log   *slog.Logger
	clock clock.WithTicker

	// The base: the node, the health tracker, systemd and the kubepods hierarchy.
	health   *health.Tracker
	sd       *units.Manager
	mode     units.Mode
	capa     slices.Capacity
	mcfg     hierarchy.Config
	alloc    v1.ResourceList
	mgr      *hierarchy.Manager
	hostname string
	// nodeName is the node's name: cluster mode's node_name, else the host name lower-cased
	// (the kubelet's nodeutil.GetHostname).
	nodeName string
	nodeIPs  []string
	// The metrics the parts below feed before the registry that serves them is built:
	// systemd's operations, the probes' results, the kubelet's own families.
	sdOps   *metrics.SystemdOperations
	probes  *metrics.ProbeResults
	kubelet *metrics.KubeletFamilies
	// conn is cluster mode's connection (its clients, objects and event forwarder); nil in
	// stand-alone mode (the default).
	conn *clusterConn

	// The pod stack: the pods' events, the runtime and its worker, admission, the controller
	// and the pods' usage.
	events *events.Store
	prt    *podRuntime  // the runtime and the parts of it other components need
	rt     pods.Runtime // prt's pod worker
	images bool         // the runtime has images: image GC and its timer
	// devices is the device manager (device plugins, the PodResources API); nil when the
	// plugin directory cannot hold its socket.
	devices  *devices.Manager
	csi      *csiPlugin
	security map[string]admission.PodSecurity
	ctrl     *pods.Controller
	stats    *podstats.Sampler
	// volumes measures the pods' volumes (the summary's volume stats, kubelet_volume_stats_*).
	volumes *podstats.VolumeStats
	// statsReader reads the pods' cgroups (the sampler's, and the eviction manager's
	// offending containers).
	statsReader *podstats.Reader

	// The observers: metrics, garbage collection and the eviction manager.
	metrics *metrics.Metrics
	gc      *gcService
	detect  func(context.Context) error // image records refresh; nil without images
	evm     *eviction.Manager

	// cluster is cluster mode; nil in stand-alone mode.
	cluster clusterMode

	// The front ends: the pod sources and the local API. objects are the ConfigMaps and
	// Secrets of both sources; objStore keeps the API's.
	objects  *pods.Objects
	objStore *source.ObjectStore
	store    *source.APIStore
	dir      *source.ManifestDir
	api      *api.Server
	changes  api.Broadcast // the controller's changes of the pods, for the API's watches

	// procRoot is /proc, or the test's.
	procRoot string
}

// newDaemon builds every component from the configuration, in phases: the base (the node's
// capacity, the health tracker, systemd, the kubepods hierarchy), the pod stack (the runtime,
// its worker, the controller), the observers (metrics, garbage collection, eviction), cluster
// mode, and the front ends (the pod sources, the local API); then it registers the
// controller's hooks, which reach parts of every phase. Each part is built complete from
// parts of the phases before it. An impossible configuration is refused before systemd is
// touched.
func newDaemon(ctx context.Context, o Options) (*daemon, error) {
	d, err := newBase(ctx, o)
	if err != nil {
		return nil, err
	}
	phases := []func(*daemon, context.Context, Options) error{
		(*daemon).buildPodStack,
		(*daemon).buildObservers,
		(*daemon).buildCluster,
		(*daemon).buildFrontEnds,
	}
	for _, phase := range phases {
		if err := phase(d, ctx, o); err != nil {
			d.close()
			return nil, err
		}
	}
	d.registerHooks()
	return d, nil
}

// newBase checks the configuration against the node, then connects to systemd and builds the
// kubepods hierarchy's manager, the health tracker and cluster mode's connection.
func newBase(ctx context.Context, o Options) (d *daemon, err error) {
	cfg, log := o.Config, o.Logger
	if !cfg.Cgroups.PerQOS {
		return nil, errors.New("cgroups.per_qos = false: slicelet always builds the QoS slices (kubepods-burstable.slice, kubepods-besteffort.slice); set it to true")
	}
	if cfg.Cgroups.Root != "" && cfg.Cgroups.Root != "/" {
		return nil, fmt.Errorf("cgroups.root %q: slicelet creates kubepods.slice at the root of systemd's slice tree; only \"/\" is supported", cfg.Cgroups.Root)
	}
	setMemoryLimit(cfg.Node.MaxPods, cfg.Cluster.Enabled, log)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	capacity, err := slices.ReadCapacity(o.ProcRoot, o.SysRoot, cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("node capacity: %w", err)
	}
	// Refuse an impossible reservation before touching systemd (the kubelet's
	// validateNodeAllocatable), so a bad configuration creates nothing.
	pre, err := cfg.SlicesConfig(capacity, false)
	if err != nil {
		return nil, err
	}
	if err := slices.ValidateReservation(capacity, slices.SumResources(pre.Node.SystemReserved, pre.Node.KubeReserved, pre.Node.HardEviction)); err != nil {
		return nil, err
	}
	// The kubelet's own families (kubelet_*, rest_client_*, storage_operation_*) on /metrics,
	// fed by the slice manager's operations, the worker's runtime calls and volume setups, the
	// controller's syncs, the eviction manager and cluster mode's client.
	kubelet := metrics.NewKubeletFamilies()
	kubelet.SetVersion(kubeletVersion(buildinfo.Version), buildinfo.Version)
	// Cluster mode's clients read the kubeconfig (a bad one refuses the start) and contact
	// nobody yet.
	hostname, _ := os.Hostname()
	nodeName := strings.ToLower(hostname)
	if cfg.Cluster.Enabled && cfg.Cluster.NodeName != "" {
		nodeName = cfg.Cluster.NodeName
	}
	conn, err := newClusterConn(ctx, cfg, nodeName, kubelet, log)
	if err != nil {
		return nil, err
	}

	d = &daemon{cfg: cfg, log: log, clock: clock.RealClock{}, capa: capacity, procRoot: o.ProcRoot,
		sdOps: metrics.NewSystemdOperations(), probes: metrics.NewProbeResults(), kubelet: kubelet, conn: conn}
	d.health = health.New(health.Options{Logger: log.With("component", "health")})
	d.health.Register(systemdWarnable, runtimeWarnable, configWarnable)
	d.sd, err = units.Connect(ctx, units.Options{JobTimeout: cfg.Systemd.JobTimeout, Logger: log, CgroupRoot: o.CgroupRoot, Observe: systemdObserver(d.sdOps)})
	if err != nil {
		return nil, fmt.Errorf("systemd: %w", err)
	}
	d.mode = d.sd.Mode()
	log.Info("connected to systemd", "cgroup_mode", d.mode.String())
	d.health.Set(configWarnable, errors.Join(configProblems(cfg, d.mode)...))

	if d.mcfg, err = cfg.SlicesConfig(capacity, d.mode.V2()); err != nil {
		d.close()
		return nil, err
	}
	d.mcfg.Clock, d.mcfg.Health, d.mcfg.Observe = d.clock, d.health, d.kubelet.CgroupManagerOperation
	d.mgr = hierarchy.New(d.sd, hierarchy.NewCgroupFS(o.CgroupRoot), d.mcfg, log)
	d.alloc = slices.NodeAllocatable(capacity, d.mcfg.Node.SystemReserved, d.mcfg.Node.KubeReserved, d.mcfg.Node.HardEviction)
	d.hostname, d.nodeName = hostname, nodeName
	d.nodeIPs = nodeIPs(log)
	// Static pods are validated as the kubelet validates them on this node: under the name of
	// their mirror pod, "<name>-<node>".
	manifest.SetNodeName(d.nodeName)
	// Static pods get the UIDs the kubelet gives them on this node (or slicelet's earlier ones).
	if err := manifest.SetUIDScheme(manifest.UIDScheme(cfg.Pods.StaticPodUID)); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// buildPodStack builds the pods' event store, the runtime with its pod worker, admission, the
// pod controller and the pods' usage sampler.
func (d *daemon) buildPodStack(ctx context.Context, o Options) (err error) {
	cfg, log := d.cfg, d.log
	// The pods' events: kept (bounded, and across restarts) for slicectl describe and events,
	// logged at debug and, in cluster mode, sent to the API server for its pods. A broken
	// events file costs the old events, not the start.
	d.events = events.NewStore(d.clock, d.hostname)
	if err := d.events.Load(filepath.Join(cfg.StateDir, eventsFile)); err != nil {
		log.Warn("previous events not loaded", "error", err)
	}
	recorder := teeRecorder{d.events, logRecorder{log.With("component", "events")}}
	if r := d.conn.recorder(); r != nil {
		recorder = append(recorder, r)
	}
	d.objects = pods.NewObjects()
	extra := worker.Options{ProbeMetrics: d.probes, RuntimeMetrics: d.kubelet, VolumeMetrics: d.kubelet, Objects: d.objects, Cluster: d.conn.objects(),
		NodeName: d.hostname, NodeIPs: d.nodeIPs, Allocatable: d.alloc}
	d.devices = newDevices(cfg, nil, log)
	if d.devices != nil {
		extra.Devices = deviceRunOptions{d.devices}
	}
	if d.csi = newCSI(d, log); d.csi != nil {
		extra.CSI = d.csi.m
	}
	extra.NodeLabels = func() map[string]string {
		if n := d.clusterNode(); n != nil {
			return n.Labels
		}
		return nil
	}
	if d.prt, err = newRuntime(ctx, cfg, d.sd, d.capa, d.mcfg, recorder, extra, log); err != nil {
		return err
	}
	d.rt = d.prt.worker
	d.images = d.prt.images != nil
	if d.prt.network != nil {
		d.health.Register(networkWarnable)
	}
	if d.security, err = admission.ParsePodSecurityLevels(cfg.Pods.Security.BySource()); err != nil {
		return err
	}
	if d.security[pods.SourceAPI].AllowsRoot() {
		log.Info("members of the api socket's group can run pods as root on this node: membership is root-equivalent",
			"api_group", cfg.API.Group, "pod_security", d.security[pods.SourceAPI].String())
	}
	// Admission reads the node's pressure conditions from the health tracker, where the
	// eviction manager reports them, and in cluster mode the Node.
	admitter := admission.Admitter{PodSecurity: d.security, Node: func() admission.NodeState {
		return admission.NodeState{
			Allocatable:              admission.WithMaxPods(withDevices(d.alloc, d.devices, true), cfg.Node.MaxPods),
			PriorityClasses:          cfg.Eviction.PriorityClasses,
			Conditions:               eviction.PressureConditions(d.health.State()),
			Node:                     d.clusterNode(),
			SupplementalGroupsPolicy: d.prt.strictGroups,
		}
	}}
	var allocator pods.Allocator
	if d.devices != nil {
		// A pod holding devices already (admitted again after a restart) fits as long as what
		// the pods hold is allocatable, before the plugins registered again.
		admitter.ForPod = d.devices.AdmissionAllocatable
		allocator = deviceAllocator{d.devices}
	}
	nodeName := d.nodeName
	cgroupVersion := 1
	if d.mode.V2() {
		cgroupVersion = 2
	}
	d.kubelet.SetNode(nodeName, cgroupVersion)
	// Its hooks reach the observers, cluster mode and the API: registerHooks gives them.
	d.ctrl = pods.NewController(pods.ControllerOptions{
		Slices: d.mgr, Runtime: newKubeletRuntime(d.rt, d.kubelet, d.clock), Admitter: admitter, Allocator: allocator, Logger: log, Clock: d.clock,
		WantSources: wantSources(cfg),
		Evictions:   pods.NewEvictionRecords(filepath.Join(cfg.StateDir, pods.EvictionsDir)),
		Recorder:    recorder,
	})
	// Per-container usage, read from the pods' cgroups once per interval by the sampler, the
	// one reader: its samples serve `slicectl top`, the stats summary, cAdvisor's families on
	// /metrics/cadvisor and the eviction manager's cycles (which read the pods again only to
	// act on them: the eviction message names the containers over their requests).
	d.statsReader = podstats.NewReader(o.CgroupRoot, o.ProcRoot, d.mode, d.prt.namer)
	d.stats, err = podstats.NewSampler(podstats.SamplerOptions{Reader: d.statsReader, Pods: d.ctrl,
		Interval: cfg.Eviction.MonitoringInterval, Logger: log.With("component", "podstats")})
	if err != nil {
		return err
	}
	d.volumes, err = newVolumeStats(d, log)
	return err
}

// buildObservers builds the metrics registry, garbage collection and the eviction manager,
// each reading the pod stack.
func (d *daemon) buildObservers(_ context.Context, o Options) error {
	cfg, log := d.cfg, d.log
	machine, version := podstats.NewMachineInfo(podstats.MachineOptions{ProcRoot: o.ProcRoot, SysRoot: o.SysRoot, EtcRoot: o.EtcRoot,
		Cores: int(d.capa.CPU / 1000), MemoryBytes: d.capa.Memory})
	d.kubelet.SetVolumes(func() (desired, actual map[string]int) {
		return podVolumes(d.ctrl.Pods()), d.prt.worker.MountedVolumes()
	})
	d.kubelet.SetVolumeStats(func() []metrics.ClaimVolumeStats { return claimVolumeStats(d.volumes) })
	started, err := procfs.ProcessStart(o.ProcRoot, os.Getpid())
	if err != nil {
		log.Warn("process start time not read: /metrics/slis goes without process_start_time_seconds", "error", err)
	}
	d.metrics = metrics.New(metrics.Options{Version: buildinfo.Version, Systemd: d.sdOps, Probes: d.probes, Pods: d.ctrl, Health: d.health, Started: started,
		Kubelet: d.kubelet, Cadvisor: &podstats.Cadvisor{Sampler: d.stats, Pods: d.ctrl.Pods, SysRoot: o.SysRoot, Machine: machine, Version: version},
		CadvisorPressure: eviction.PSIAvailable(o.CgroupRoot)})
	col, err := newGCCollector(cfg, d.prt, d.ctrl.GCPodState, d.clock, log)
	if err != nil {
		return err
	}
	if d.images {
		d.detect = col.Detect
	}
	d.gc = newGCService(col, d.metrics, d.health)
	d.evm, err = newEvictionManager(evictionOptions{Config: cfg, CgroupRoot: o.CgroupRoot, ProcRoot: o.ProcRoot, Mode: d.mode,
		Controller: d.ctrl, Logger: log, Metrics: d.metrics, Health: d.health, Clock: d.clock,
		BeforeCycle: o.evictionBeforeCycle, Reclaim: d.gc.Reclaim,
		Storage: d.prt.storage, ImageFsPath: d.prt.imageFsPath,
		ContainerMemory: d.statsReader.ContainerMemory, Sampled: d.stats})
	return err
}

// buildCluster builds cluster mode over its connection, with the kubelet API (nothing in
// stand-alone mode).
func (d *daemon) buildCluster(context.Context, Options) (err error) {
	d.cluster, err = newCluster(d)
	return err
}

// buildFrontEnds opens the pod sources (the API's store of pods and objects, the manifest
// directory) and builds the local API over the parts built before.
func (d *daemon) buildFrontEnds(context.Context, Options) (err error) {
	cfg, log := d.cfg, d.log
	d.health.Register(manifestsWarnable, apiStoreWarnable, apiServerWarnable, gcTimersWarnable)
	if d.store, err = source.OpenAPIStore(cfg.StateDir, source.APIStoreOptions{Log: log.With("source", pods.SourceAPI)}); err != nil {
		return fmt.Errorf("api pod store: %w", err)
	}
	if d.objStore, err = source.OpenObjectStore(cfg.StateDir, d.objects, log.With("source", pods.SourceAPI)); err != nil {
		return fmt.Errorf("api object store: %w", err)
	}
	if d.dir, err = source.NewManifestDir(source.ManifestDirOptions{Dir: cfg.Pods.ManifestDir, StateDir: cfg.StateDir, Log: log.With("source", pods.SourceFile), Objects: d.objects,
		NodeName: d.staticPodNode()}); err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	}
	back := &backend{ctrl: d.ctrl, store: d.store, objStore: d.objStore, objects: d.objects, rt: d.rt, mcfg: d.mcfg, mode: d.mode, maxPods: cfg.Node.MaxPods,
		hostname: d.hostname, gc: d.gc, evm: d.evm, devices: d.devices, health: d.health, podSecurity: d.security, stats: d.stats, events: d.events, changes: &d.changes}
	d.api, err = api.NewServer(back, api.Options{Socket: cfg.API.Socket, Group: cfg.API.Group,
		Logger: log.With("component", "api"), Health: d.health})
	return err
}

// registerHooks gives the controller its hooks once every part they reach exists: a rejection
// counts in the metrics; pods coming and going re-arm the eviction manager's pressure
// thresholds at once (not at the next 10 s) and wake the API's pod watches; both, and a pod's
// changed status, make cluster mode send the statuses to the API server now.
func (d *daemon) registerHooks() {
	kick := func() {} // stand-alone mode: no statuses to send
	if d.cluster != nil {
		kick = d.cluster.Kick
	}
	d.ctrl.SetHooks(pods.Hooks{
		OnReject: d.metrics.AdmissionRejected,
		OnChange: func() {
			d.evm.PodsChanged()
			d.changes.Notify()
			kick()
		},
		OnStatus: kick,
	})
}

// close releases what newDaemon acquired: the runtime's connection and systemd's, and
// cluster mode's certificate managers.
func (d *daemon) close() {
	d.conn.close()
	if d.prt != nil {
		if d.prt.worker != nil {
			d.prt.worker.Close()
		}
		_ = d.prt.close()
	}
	if d.sd != nil {
		d.sd.Close()
	}
}

// run builds the kubepods hierarchy, starts every loop, reports READY=1, and runs until ctx
// ends; pods keep running under systemd afterwards.
func (d *daemon) run(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	start := d.clock.Now()
	if err := d.mgr.Start(ctx); err != nil {
		return err
	}
	limits := slices.KubepodsLimits(d.capa, d.mcfg.Node.SystemReserved, d.mcfg.Node.KubeReserved)
	log.Info("kubepods hierarchy ready",
		"duration", d.clock.Since(start),
		"capacity_cpu_millis", d.capa.CPU, "capacity_memory_bytes", d.capa.Memory,
		"allocatable_cpu_millis", d.alloc.Cpu().MilliValue(), "allocatable_memory_bytes", d.alloc.Memory().Value(),
		"kubepods_cpu_millis", limits.Cpu().MilliValue(), "kubepods_memory_bytes", limits.Memory().Value())
	if err := d.api.Listen(); err != nil {
		return err
	}
	serveMetrics, err := listenMetrics(d.metrics, cfg.Metrics.Address, log)
	if err != nil {
		return err
	}
	interval, err := units.WatchdogInterval()
	if err != nil {
		log.Warn("watchdog", "error", err)
	}
	mon := newMonitor(d, interval, units.Notify)

	// The devices' checkpoint is read before the controller admits the pods that kept
	// running, which keep their devices.
	stopDevices := startDevices(d.devices, cfg, d.ctrl, log)
	defer stopDevices()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.csi.start(runCtx, log)
	var wg sync.WaitGroup
	wg.Go(func() { d.mgr.Run(runCtx) })
	wg.Go(func() { d.ctrl.Run(runCtx) })
	wg.Go(func() { serveMetrics(runCtx) })
	if d.detect != nil {
		wg.Go(func() { detectLoop(runCtx, d.clock, imageDetectPeriod, d.detect, d.health) })
	}
	wg.Go(func() { d.stats.Run(runCtx) })
	wg.Go(func() { d.volumes.Run(runCtx) })
	wg.Go(func() {
		d.events.Run(runCtx, filepath.Join(d.cfg.StateDir, eventsFile), eventsSaveInterval, d.log.With("component", "events"))
	})
	wg.Go(func() { d.evm.Run(runCtx) })
	wg.Go(func() { d.runSource(runCtx, "manifest directory source", manifestsWarnable, d.dir.Run) })
	wg.Go(func() { d.runSource(runCtx, "api pod source", apiStoreWarnable, d.store.Run) })
	if d.cluster != nil {
		wg.Go(func() { d.cluster.Run(runCtx) })
	}
	// The API and READY wait until the controller adopted the pods that kept running while
	// slicelet was down, so that no client sees a running pod Pending because slicelet
	// restarted; bounded, so that a source that never reports does not hold the daemon back.
	adopt := d.clock.NewTimer(adoptTimeout)
	select {
	case <-d.ctrl.Adopted():
		log.Info("pods adopted", "duration", d.clock.Since(start))
	case <-adopt.C():
		log.Warn("pods not adopted in time; serving anyway", "timeout", adoptTimeout)
	case <-ctx.Done():
	}
	adopt.Stop()
	wg.Go(func() {
		d.health.SetHealthy(apiServerWarnable)
		if err := d.api.Serve(runCtx); err != nil && runCtx.Err() == nil {
			d.health.SetUnhealthy(apiServerWarnable, "stopped: "+err.Error())
		}
	})
	stopTimers, err := startGCTimers(runCtx, d.sd, cfg, d.images, log)
	// GC still runs for eviction and on `slicectl gc` without its timers; only the schedule
	// is missing.
	d.health.Set(gcTimersWarnable, err)
	if _, err := units.Notify(units.NotifyReady + "\n" + d.status()); err != nil {
		log.Warn("sd_notify failed", "error", err)
	}
	log.Info("slicelet ready", "api_socket", d.api.Socket(), "manifest_dir", cfg.Pods.ManifestDir, "runtime", d.rt.Name())
	wg.Go(func() { statusLoop(runCtx, d.clock, d.status, log) })
	wg.Go(func() { mon.run(runCtx) })
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

// wantSources are the pod sources that must each report before orphans are cleaned: the
// manifest directory and the local API, and the cluster's pods in cluster mode (while the API
// server cannot be reached, no running pod is taken for an orphan).
func wantSources(cfg *config.Config) []string {
	if cfg.Cluster.Enabled {
		return []string{pods.SourceFile, pods.SourceAPI, pods.SourceCluster}
	}
	return []string{pods.SourceFile, pods.SourceAPI}
}

// adoptTimeout bounds the wait for the pods' adoption before the API is served and READY sent.
const adoptTimeout = 30 * time.Second

// The pods' events are saved in the state directory's eventsFile every eventsSaveInterval when
// they changed, and when slicelet stops.
const (
	eventsFile         = "events.json"
	eventsSaveInterval = 30 * time.Second
)

// runSource runs a pod source until ctx ends: its snapshots go to the controller and their
// problems (manifests that do not decode, stored pods that do not load) to the health
// tracker as w; a source that stops is w failing.
func (d *daemon) runSource(ctx context.Context, what string, w *health.Warnable, run func(context.Context, func(pods.Snapshot)) error) {
	err := run(ctx, func(s pods.Snapshot) {
		d.ctrl.Update(s)
		// Both sources' problems: a name clash found now is the other source's too.
		all := d.ctrl.Problems()
		for src, sw := range map[string]*health.Warnable{pods.SourceFile: manifestsWarnable, pods.SourceAPI: apiStoreWarnable} {
			var mine []pods.Problem
			for _, p := range all {
				if p.Source == src {
					mine = append(mine, p)
				}
			}
			d.health.Set(sw, problemsError(mine))
		}
	})
	if err != nil && ctx.Err() == nil {
		d.health.SetUnhealthy(w, what+" stopped: "+err.Error())
	}
}

// statusLoop refreshes STATUS= every few seconds so `systemctl status slicelet` stays current.
func statusLoop(ctx context.Context, clk clock.WithTicker, status func() string, log *slog.Logger) {
	last := ""
	every(ctx, clk, 5*time.Second, func() {
		if s := status(); s != last {
			last = s
			if _, err := units.Notify(s); err != nil {
				log.Debug("sd_notify status failed", "error", err)
			}
		}
	})
}

// status is the STATUS= line: pods by phase, node allocatable, pressure and evictions, and
// what the health tracker finds wrong.
func (d *daemon) status() string {
	return statusLine(api.CountPods(d.ctrl.ViewPods(), int64(d.cfg.Node.MaxPods)), d.alloc, d.evm.Summary(), d.health.State())
}

// setMemoryLimit tunes the Go collector for a daemon whose live heap is small and whose
// garbage (decoded D-Bus traffic, pod copies) comes fast, unless the operator set GOGC or
// GOMEMLIMIT: the heap may grow 50 % over the live heap between collections (GOGC=50) and the
// runtime's memory has a soft limit (memoryLimit) above what the daemon needs while it starts
// max_pods pods: a limit below that need makes the collector run back to back, and pods start
// several times slower. docs/benchmarks.md ("Pods re-run") has the measurements that chose it.
func setMemoryLimit(maxPods int32, cluster bool, log *slog.Logger) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := memoryLimit(maxPods, cluster)
	debug.SetMemoryLimit(limit)
	log.Debug("go memory limit set", "bytes", limit, "max_pods", maxPods, "cluster", cluster)
}

// clusterMemoryHeadroom is what cluster mode keeps live beyond stand-alone mode: client-go's
// pod and Service informers (the API's pods, managed fields included), the API server's
// HTTP/2 connection and the kubelet API's TLS server. Without it the collector, run by the
// stand-alone limit, takes much of an idle node's CPU (docs/cluster.md, Benchmarks).
const clusterMemoryHeadroom = 8 << 20

// memoryLimit is the Go runtime's soft memory limit: 20 MiB plus 20 KiB per pod of max_pods,
// plus clusterMemoryHeadroom in cluster mode.
func memoryLimit(maxPods int32, cluster bool) int64 {
	limit := int64(20<<20) + int64(maxPods)*(20<<10)
	if cluster {
		limit += clusterMemoryHeadroom
	}
	return limit
}

// podVolumes counts the volumes of the pods that have not finished by plugin
// (lifecycle.VolumePlugin): the kubelet's desired state of the world.
func podVolumes(ps []v1.Pod) map[string]int {
	out := map[string]int{}
	for i := range ps {
		if ps[i].Status.Phase == v1.PodSucceeded || ps[i].Status.Phase == v1.PodFailed {
			continue
		}
		for j := range ps[i].Spec.Volumes {
			if plugin := lifecycle.VolumePlugin(&ps[i].Spec.Volumes[j]); plugin != "" {
				out[plugin]++
			}
		}
	}
	return out
}

// staticPodNode is the node the manifest directory names its pods after in cluster mode,
// "<name>-<node>" as the kubelet names static pods and so their mirror pods; "" stand-alone,
// where a manifest's pod keeps its name.
func (d *daemon) staticPodNode() string {
	if d.cfg.Cluster.Enabled {
		return d.nodeName
	}
	return ""
}
