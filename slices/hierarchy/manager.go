package hierarchy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"reflect"
	stdslices "slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// Systemd is what the Manager needs from systemd. *units.Manager implements it against PID 1,
// unitstest.Fake in memory.
type Systemd interface {
	Mode() units.Mode
	StartSlice(ctx context.Context, name string, props []units.Property) error
	SetProperties(ctx context.Context, name string, props []units.Property) error
	Stop(ctx context.Context, name string) error
	List(ctx context.Context, patterns ...string) ([]units.UnitStatus, error)
	Properties(ctx context.Context, name string) (units.UnitInfo, error)
}

// Intervals of the kubelet's container manager (pkg/kubelet/cm/qos_container_manager_linux.go,
// periodicQOSCgroupUpdateInterval).
const (
	// DefaultReconcileInterval is periodicQOSCgroupUpdateInterval: the QoS slices are recomputed
	// from the active pods this often even when nothing changed.
	DefaultReconcileInterval = time.Minute
	// DefaultEnforceRetryInterval is how often node allocatable enforcement on kubepods.slice is
	// retried until it sticks (usage may exceed a new limit until evictions bring it down).
	DefaultEnforceRetryInterval = time.Minute
	// destroyKillRounds is how often Destroy kills what is left of a pod cgroup, as the
	// kubelet's tryKillingCgroupProcesses does; each round waits up to destroyKillWait for the
	// processes to exit (SIGKILL is asynchronous).
	destroyKillRounds = 5
	destroyKillWait   = time.Second
	// qosSettleDelay is how long a requested QoS reconcile waits for more pod changes to join it.
	// Pod slices are created at ≈2 ms each, so a burst of 100 settles in a few writes.
	qosSettleDelay = 100 * time.Millisecond
)

// Config configures a Manager.
type Config struct {
	// Capacity is the node's capacity (ReadCapacity).
	Capacity slices.Capacity
	// Node holds reservations, enforcement and QoS options.
	Node slices.NodeConfig
	// Pod are the options of the pod resource math.
	Pod slices.Options
	// SystemReservedCgroup and KubeReservedCgroup name the existing cgroups that
	// system-reserved / kube-reserved enforcement limits, as a cgroupfs path ("/system.slice")
	// or a slice unit name ("system.slice"). They must exist; slicelet never creates them.
	SystemReservedCgroup string
	KubeReservedCgroup   string
	// ReconcileInterval and EnforceRetryInterval default to one minute.
	ReconcileInterval    time.Duration
	EnforceRetryInterval time.Duration
	// Clock runs Run's tickers and timers; clock.RealClock when nil.
	Clock clock.WithTicker
	// Health receives node allocatable enforcement and QoS reconcile failures; nil for none.
	Health *health.Tracker
	// Observe, when set, receives the duration of each operation on a slice, as the kubelet's
	// cgroup manager times its own (pkg/kubelet/cm/cgroup_manager_linux.go): OperationCreate
	// (a slice started), OperationUpdate (resources set on a live one: a pod's, a QoS slice's,
	// kubepods.slice's), OperationDestroy (a pod's slice torn down), failed or not.
	Observe func(operation string, d time.Duration)
}

// The operations Config.Observe receives: the kubelet's operation_type values of
// kubelet_cgroup_manager_duration_seconds.
const (
	OperationCreate  = "create"
	OperationUpdate  = "update"
	OperationDestroy = "destroy"
)

// observe reports an operation begun at start to the configured observer.
func (m *Manager) observe(operation string, start time.Time) {
	if m.cfg.Observe != nil {
		m.cfg.Observe(operation, m.clock.Since(start))
	}
}

// podEntry is a pod's slice as the Manager knows it, with the pod it was made for.
type podEntry struct {
	slices.PodSlice
	pod         *v1.Pod
	terminating bool
}

// Manager owns the kubepods hierarchy: kubepods.slice limited to node allocatable, the
// Burstable and BestEffort QoS slices, and one slice per pod. It is the actuation half of this
// package: every value it writes comes from the pure functions (KubepodsConfig, QOSConfigs,
// PodResources, SliceProperties, CgroupfsFiles).
//
// Methods are safe for concurrent use.
type Manager struct {
	sd     Systemd
	cg     Cgroupfs
	cfg    Config
	log    *slog.Logger
	clock  clock.WithTicker
	health *health.Tracker

	mode units.Mode
	// hugetlb is whether the hugetlb controller is usable; pageSizes are the host's sizes.
	hugetlb   bool
	pageSizes []int64

	mu   sync.Mutex
	pods map[string]*podEntry
	// written remembers the last properties sent per QoS-level slice, so an unchanged
	// reconcile writes nothing.
	written map[string][]units.Property
	// enforced is whether kubepods.slice verifiably holds its node allocatable limits.
	enforced bool

	kick chan struct{}
}

// New returns a Manager. It does nothing until Start.
func New(sd Systemd, cg Cgroupfs, cfg Config, log *slog.Logger) *Manager {
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.EnforceRetryInterval <= 0 {
		cfg.EnforceRetryInterval = DefaultEnforceRetryInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		sd:      sd,
		cg:      cg,
		cfg:     cfg,
		log:     log,
		clock:   cfg.Clock,
		health:  cfg.Health,
		mode:    sd.Mode(),
		pods:    map[string]*podEntry{},
		written: map[string][]units.Property{},
		kick:    make(chan struct{}, 1),
	}
	m.health.Register(EnforcementWarnable, QoSReconcileWarnable)
	m.hugetlb = cg.HasController("hugetlb")
	if m.hugetlb {
		m.pageSizes = cfg.Capacity.PageSizes()
	}
	return m
}

// Mode returns the cgroup layout the Manager writes for.
func (m *Manager) Mode() units.Mode { return m.mode }

// qosOptions returns the QoS reconcile options with the node-derived fields filled in.
func (m *Manager) qosOptions() slices.QOSOptions {
	opts := m.cfg.Node.QOS
	if opts.NodeAllocatableMemory == 0 {
		limits := slices.KubepodsLimits(m.cfg.Capacity, m.cfg.Node.SystemReserved, m.cfg.Node.KubeReserved)
		opts.NodeAllocatableMemory = limits.Memory().Value()
	}
	opts.HugePageSizes = nil
	if m.hugetlb {
		opts.HugePageSizes = m.pageSizes
	}
	return opts
}

// kubepodsConfig is kubepods.slice's node-level configuration.
func (m *Manager) kubepodsConfig() slices.ResourceConfig {
	n := m.cfg.Node
	return slices.KubepodsConfig(m.cfg.Capacity, n.SystemReserved, n.KubeReserved, n.Enforcement, m.mode.V2() && !n.QOS.EnforceMemoryQoS)
}

// Start validates the reservations and builds the node level: kubepods.slice with its node
// allocatable limits, the Burstable and BestEffort slices, and the system-reserved /
// kube-reserved limits on their existing cgroups. Slices that already exist (a restart) are
// adopted and updated, never duplicated. A reservation above capacity, or an enforced reserved
// cgroup that does not exist, is an error and nothing is created.
func (m *Manager) Start(ctx context.Context) error {
	n := m.cfg.Node
	if err := slices.ValidateReservation(m.cfg.Capacity, slices.SumResources(n.SystemReserved, n.KubeReserved, n.HardEviction)); err != nil {
		return err
	}
	reserved, err := m.reservedTargets(ctx)
	if err != nil {
		return err
	}

	kubepods := m.kubepodsConfig()
	if err := m.startSlice(ctx, slices.KubepodsSlice, slices.QOSSliceDescription(v1.PodQOSGuaranteed), slices.RootSlice, kubepods); err != nil {
		return err
	}
	m.reportEnforced(m.checkEnforced(kubepods))

	qos := slices.QOSConfigs(nil, m.qosOptions())
	for _, s := range []struct {
		qos v1.PodQOSClass
		rc  slices.ResourceConfig
	}{{v1.PodQOSBurstable, qos.Burstable}, {v1.PodQOSBestEffort, qos.BestEffort}} {
		if err := m.startSlice(ctx, slices.QOSSliceName(s.qos), slices.QOSSliceDescription(s.qos), slices.KubepodsSlice, s.rc); err != nil {
			return err
		}
	}

	for _, r := range reserved {
		if err := m.apply(ctx, r.unit, r.cgroupPath, *r.rc); err != nil {
			return fmt.Errorf("%s enforcement on %s: %w", r.key, r.unit, err)
		}
		m.log.Info("reserved cgroup enforced", "enforce", r.key, "unit", r.unit, "resources", r.rc.String())
	}
	return m.UpdateQoS(ctx)
}

// reservedTarget is one enforce_node_allocatable key applied to an existing cgroup.
type reservedTarget struct {
	key        string
	unit       string
	cgroupPath string
	rc         *slices.ResourceConfig
}

// reservedTargets resolves and checks the system-reserved / kube-reserved cgroups to enforce.
func (m *Manager) reservedTargets(ctx context.Context) ([]reservedTarget, error) {
	n := m.cfg.Node
	memQoS := n.QOS.EnforceMemoryQoS
	var out []reservedTarget
	var errs []error
	add := func(key, cgroup, field string, reserved v1.ResourceList, compressible bool) {
		if cgroup == "" {
			errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: %s is not set", key, field))
			return
		}
		unit, cgPath := reservedUnit(cgroup)
		info, err := m.sd.Properties(ctx, unit)
		if err != nil {
			errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: %s %q: %w", key, field, cgroup, err))
			return
		}
		if info.LoadState != "loaded" || info.ActiveState != "active" {
			errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: %s %q: unit %s must exist and be active (load state %q, active state %q); slicelet does not create it",
				key, field, cgroup, unit, info.LoadState, info.ActiveState))
			return
		}
		if info.ControlGroup != "" {
			cgPath = info.ControlGroup
		}
		rc := slices.ReservedCgroupConfig(reserved, compressible, memQoS)
		if rc == nil {
			rc = &slices.ResourceConfig{}
		}
		out = append(out, reservedTarget{key: key, unit: unit, cgroupPath: cgPath, rc: rc})
	}
	e := n.Enforcement
	switch {
	case e.SystemReserved:
		add(slices.EnforceSystemReserved, m.cfg.SystemReservedCgroup, "system_reserved_cgroup", n.SystemReserved, false)
	case e.SystemReservedCompressible:
		add(slices.EnforceSystemReservedCompressible, m.cfg.SystemReservedCgroup, "system_reserved_cgroup", n.SystemReserved, true)
	}
	switch {
	case e.KubeReserved:
		add(slices.EnforceKubeReserved, m.cfg.KubeReservedCgroup, "kube_reserved_cgroup", n.KubeReserved, false)
	case e.KubeReservedCompressible:
		add(slices.EnforceKubeReservedCompressible, m.cfg.KubeReservedCgroup, "kube_reserved_cgroup", n.KubeReserved, true)
	}
	return out, errors.Join(errs...)
}

// reservedUnit maps a configured reserved cgroup ("/system.slice", "system.slice",
// "/system.slice/foo.slice") to its unit name and cgroup path.
func reservedUnit(cgroup string) (unit, cgroupPath string) {
	if strings.HasPrefix(cgroup, "/") {
		return path.Base(cgroup), path.Clean(cgroup)
	}
	return cgroup, ""
}

// startSlice creates (or adopts) a slice with its base and resource properties and writes the
// cgroupfs-only knobs.
func (m *Manager) startSlice(ctx context.Context, unit, description, parent string, rc slices.ResourceConfig) error {
	defer m.observe(OperationCreate, m.clock.Now())
	props := append(slices.BaseSliceProperties(description, parent, m.mode), slices.SliceProperties(rc, m.mode)...)
	if err := m.sd.StartSlice(ctx, unit, props); err != nil {
		return fmt.Errorf("slice %s: %w", unit, err)
	}
	if err := m.writeFiles(unit, slices.SliceCgroupPath(unit), rc); err != nil {
		return err
	}
	m.mu.Lock()
	m.written[unit] = slices.SliceProperties(rc, m.mode)
	m.mu.Unlock()
	m.log.Info("slice ready", "slice", unit, "resources", rc.String())
	return nil
}

// apply sets rc on a live unit and writes its cgroupfs-only knobs.
func (m *Manager) apply(ctx context.Context, unit, cgroupPath string, rc slices.ResourceConfig) error {
	defer m.observe(OperationUpdate, m.clock.Now())
	props := slices.SliceProperties(rc, m.mode)
	if len(props) > 0 {
		if err := m.sd.SetProperties(ctx, unit, props); err != nil {
			return err
		}
	}
	return m.writeFiles(unit, cgroupPath, rc)
}

// writeFiles writes what systemd has no property for (hugetlb limits, other unified keys).
func (m *Manager) writeFiles(unit, cgroupPath string, rc slices.ResourceConfig) error {
	files := slices.CgroupfsFiles(rc, m.mode, m.pageSizes)
	var errs []error
	for _, file := range stdslices.Sorted(maps.Keys(files)) {
		controller, _, _ := strings.Cut(file, ".")
		if controller == "hugetlb" && !m.hugetlb {
			continue
		}
		if err := m.cg.Write(cgroupPath, controller, file, files[file]); err != nil {
			errs = append(errs, fmt.Errorf("slice %s: %w", unit, err))
			continue
		}
		// The reservation twin limits hugepages reserved but not yet faulted (kernel ≥ 5.7).
		if controller == "hugetlb" {
			rsvd := slices.HugetlbRsvdFile(file)
			if _, err := m.cg.Read(cgroupPath, controller, rsvd); err == nil {
				if err := m.cg.Write(cgroupPath, controller, rsvd, files[file]); err != nil {
					errs = append(errs, fmt.Errorf("slice %s: %w", unit, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkEnforced verifies that kubepods.slice's memory limit really holds: systemd accepts a
// MemoryLimit/MemoryMax below current usage and only logs the kernel's refusal, so the limit is
// read back from cgroupfs.
func (m *Manager) checkEnforced(rc slices.ResourceConfig) error {
	if rc.Memory == nil || *rc.Memory <= 0 {
		return nil
	}
	file := "memory.limit_in_bytes"
	if m.mode.V2() {
		file = "memory.max"
	}
	got, err := ReadInt(m.cg, slices.SliceCgroupPath(slices.KubepodsSlice), "memory", file)
	if err != nil {
		return err
	}
	// v1 rounds limits down to the page size.
	want := *rc.Memory
	if got != want && got != want&^4095 {
		return fmt.Errorf("memory limit is %d, want %d (usage may exceed it)", got, want)
	}
	return nil
}

// reportEnforced records the outcome of enforcing node allocatable on kubepods.slice: Run
// retries until it holds, and the health tracker shows it (and logs each change).
func (m *Manager) reportEnforced(err error) {
	m.mu.Lock()
	m.enforced = err == nil
	m.mu.Unlock()
	if err != nil {
		m.health.SetUnhealthy(EnforcementWarnable, fmt.Sprintf("%s: %v (retrying every %s)", slices.KubepodsSlice, err, m.cfg.EnforceRetryInterval))
		return
	}
	m.health.SetHealthy(EnforcementWarnable)
}

// Enforced reports whether kubepods.slice verifiably holds its node allocatable limits.
func (m *Manager) Enforced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.enforced
}

// enforce re-applies kubepods.slice's node allocatable configuration and verifies it.
func (m *Manager) enforce(ctx context.Context) error {
	rc := m.kubepodsConfig()
	if err := m.apply(ctx, slices.KubepodsSlice, slices.SliceCgroupPath(slices.KubepodsSlice), rc); err != nil {
		return err
	}
	return m.checkEnforced(rc)
}

// Run keeps the hierarchy reconciled until ctx ends: a QoS reconcile whenever pods come or go
// (coalesced: requests that arrive while one runs are served by one more run) and every
// ReconcileInterval, and node allocatable enforcement retried every EnforceRetryInterval until
// it holds. Errors are logged when their state changes, not every time.
func (m *Manager) Run(ctx context.Context) {
	reconcile := m.clock.NewTicker(m.cfg.ReconcileInterval)
	defer reconcile.Stop()
	retry := m.clock.NewTicker(m.cfg.EnforceRetryInterval)
	defer retry.Stop()
	// pending is the settle timer of a requested QoS reconcile: requests arriving while it runs
	// join it, so a burst of pods costs one write per QoS slice.
	var pending <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
			if pending == nil {
				pending = m.clock.After(qosSettleDelay)
			}
		case <-pending:
			pending = nil
			m.health.Set(QoSReconcileWarnable, m.updateQoS(ctx, false))
		case <-reconcile.C():
			// The periodic reconcile rewrites everything, repairing drift made behind our back.
			m.health.Set(QoSReconcileWarnable, m.updateQoS(ctx, true))
		case <-retry.C():
			if m.Enforced() {
				continue
			}
			err := m.enforce(ctx)
			m.reportEnforced(err)
		}
	}
}

// requestQoSUpdate asks Run for a QoS reconcile without waiting; requests coalesce.
func (m *Manager) requestQoSUpdate() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// activePods returns the pods that count for the QoS reconcile (not being torn down).
func (m *Manager) activePods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pods []*v1.Pod
	for _, uid := range stdslices.Sorted(maps.Keys(m.pods)) {
		if ps := m.pods[uid]; !ps.terminating {
			pods = append(pods, ps.pod)
		}
	}
	return pods
}

// UpdateQoS is one QoS reconcile (the kubelet's UpdateCgroups): it computes the QoS slices'
// configuration from the active pods and writes all of it. With a QoS memory reserve that a
// slice's usage already exceeds, the limit is capped at the usage and written again (the
// kubelet's retrySetMemoryReserve).
func (m *Manager) UpdateQoS(ctx context.Context) error { return m.updateQoS(ctx, true) }

// updateQoS is UpdateQoS; without force, slices whose properties did not change since the last
// write are skipped, so a burst of pod changes costs one write per slice, not one per pod.
func (m *Manager) updateQoS(ctx context.Context, force bool) error {
	cfgs := slices.QOSConfigs(m.activePods(), m.qosOptions())
	err := m.writeQoS(ctx, cfgs, force)
	if err != nil && m.cfg.Node.QOS.QOSReservedMemoryPercent != nil {
		usage := map[v1.PodQOSClass]int64{}
		for qos, unit := range qosUnits {
			if info, perr := m.sd.Properties(ctx, unit); perr == nil && info.HasMemoryCurrent {
				usage[qos] = int64(info.MemoryCurrent)
			}
		}
		cfgs.CapMemoryToUsage(usage)
		err = m.writeQoS(ctx, cfgs, true)
	}
	return err
}

var qosUnits = map[v1.PodQOSClass]string{
	v1.PodQOSGuaranteed: slices.KubepodsSlice,
	v1.PodQOSBurstable:  slices.QOSSliceName(v1.PodQOSBurstable),
	v1.PodQOSBestEffort: slices.QOSSliceName(v1.PodQOSBestEffort),
}

func (m *Manager) writeQoS(ctx context.Context, cfgs slices.QOSCgroupConfigs, force bool) error {
	var errs []error
	for _, s := range []struct {
		unit string
		rc   slices.ResourceConfig
	}{
		{slices.KubepodsSlice, cfgs.Kubepods},
		{qosUnits[v1.PodQOSBurstable], cfgs.Burstable},
		{qosUnits[v1.PodQOSBestEffort], cfgs.BestEffort},
	} {
		props := slices.SliceProperties(s.rc, m.mode)
		m.mu.Lock()
		same := !force && s.unit != slices.KubepodsSlice && reflect.DeepEqual(m.written[s.unit], props)
		m.mu.Unlock()
		if same {
			continue
		}
		if err := m.apply(ctx, s.unit, slices.SliceCgroupPath(s.unit), s.rc); err != nil {
			errs = append(errs, fmt.Errorf("qos slice %s: %w", s.unit, err))
			continue
		}
		if s.unit != slices.KubepodsSlice {
			m.mu.Lock()
			m.written[s.unit] = props
			m.mu.Unlock()
			m.log.Debug("qos slice updated", "slice", s.unit, "resources", s.rc.String())
		}
	}
	return errors.Join(errs...)
}

// EnsurePod creates the pod's slice with its resources, or updates it in place when it exists
// (known, or left by an earlier run: adopted, never duplicated). The pod must carry its UID.
// It asks for a QoS reconcile, which runs asynchronously and coalesces with others.
func (m *Manager) EnsurePod(ctx context.Context, pod *v1.Pod) (slices.PodSlice, error) {
	uid := string(pod.UID)
	qos := slices.QOSClass(pod)
	unit, err := slices.PodSliceName(qos, uid)
	if err != nil {
		return slices.PodSlice{}, err
	}
	cgPath, err := slices.PodCgroupPath(qos, uid)
	if err != nil {
		return slices.PodSlice{}, err
	}
	rc := slices.PodResources(pod, m.cfg.Pod)
	props := slices.SliceProperties(rc, m.mode)

	m.mu.Lock()
	prev := m.pods[uid]
	m.mu.Unlock()
	if prev != nil && prev.QOS != qos {
		return slices.PodSlice{}, fmt.Errorf("pod %s/%s (uid %s): QoS class is immutable: was %s, now %s", pod.Namespace, pod.Name, uid, prev.QOS, qos)
	}

	// The QoS slices depend on the set of active pods and their resources: a steady pod's
	// resync (the same properties) changes neither, so it asks for no QoS reconcile (the
	// periodic one still repairs drift).
	changed := prev == nil || prev.terminating
	switch {
	case prev == nil:
		parent := slices.QOSSliceName(qos)
		if err := m.startSlice(ctx, unit, slices.PodSliceDescription(pod), parent, rc); err != nil {
			return slices.PodSlice{}, err
		}
		m.log.Info("pod slice created", "pod_uid", uid, "pod", pod.Namespace+"/"+pod.Name, "slice", unit, "qos", string(qos))
	case !reflect.DeepEqual(prev.Properties, props) || !reflect.DeepEqual(prev.Resources.HugePageLimit, rc.HugePageLimit):
		if err := m.apply(ctx, unit, cgPath, rc); err != nil {
			return slices.PodSlice{}, fmt.Errorf("pod slice %s: %w", unit, err)
		}
		m.log.Info("pod slice updated", "pod_uid", uid, "slice", unit, "resources", rc.String())
		changed = true
	}

	ps := &podEntry{PodSlice: slices.PodSlice{UID: uid, Namespace: pod.Namespace, Name: pod.Name, QOS: qos, Unit: unit,
		CgroupPath: cgPath, Resources: rc, Properties: props}, pod: pod}
	m.mu.Lock()
	m.pods[uid] = ps
	m.mu.Unlock()
	if changed {
		m.requestQoSUpdate()
	}
	return ps.PodSlice, nil
}

// Pods returns the pod slices the Manager knows, by UID order.
func (m *Manager) Pods() []slices.PodSlice {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]slices.PodSlice, 0, len(m.pods))
	for _, uid := range stdslices.Sorted(maps.Keys(m.pods)) {
		out = append(out, m.pods[uid].PodSlice)
	}
	return out
}

// DestroyPod tears a pod's slice down the way the kubelet destroys a pod cgroup: CPU reduced to
// the minimum first so leftovers stop competing, the slice stopped (systemd stops every unit in
// it), then whatever processes are left in its cgroup killed, up to five rounds, and the cgroup
// directories removed. A pod the Manager does not know is looked up by UID among the existing
// slices. Destroying a pod whose slice is already gone is success.
func (m *Manager) DestroyPod(ctx context.Context, uid string) error {
	m.mu.Lock()
	ps := m.pods[uid]
	if ps != nil {
		ps.terminating = true
	}
	m.mu.Unlock()

	var unit, cgPath string
	if ps != nil {
		unit, cgPath = ps.Unit, ps.CgroupPath
	} else {
		found, err := m.findPodSlice(ctx, uid)
		if err != nil {
			return err
		}
		if found == "" {
			return nil
		}
		unit, cgPath = found, slices.SliceCgroupPath(found)
	}
	err := m.destroySlice(ctx, unit, cgPath)
	if err == nil {
		m.mu.Lock()
		delete(m.pods, uid)
		m.mu.Unlock()
		m.log.Info("pod slice destroyed", "pod_uid", uid, "slice", unit)
	}
	m.requestQoSUpdate()
	return err
}

// findPodSlice returns the existing slice unit of a UID, or "".
func (m *Manager) findPodSlice(ctx context.Context, uid string) (string, error) {
	list, err := m.sd.List(ctx, slices.PodSlicePatterns...)
	if err != nil {
		return "", fmt.Errorf("pod slices: %w", err)
	}
	for _, u := range list {
		if _, got, ok := slices.ParsePodSliceName(u.Name); ok && got == uid {
			return u.Name, nil
		}
	}
	return "", nil
}

func (m *Manager) destroySlice(ctx context.Context, unit, cgPath string) error {
	defer m.observe(OperationDestroy, m.clock.Now())
	// CPU to the minimum first, so leftovers stop competing while the stop runs (the kubelet's
	// ReduceCPULimits). Written to cgroupfs, not through SetUnitProperties: the slice is about to
	// go, and a D-Bus round trip here made teardown ≈1.8× the cost of a bare StopUnit
	// (docs/benchmarks.md).
	file, value := "cpu.shares", strconv.FormatUint(slices.MinShares, 10)
	if m.mode.V2() {
		file, value = "cpu.weight", strconv.FormatUint(slices.CPUSharesToWeight(slices.MinShares), 10)
	}
	if err := m.cg.Write(cgPath, "cpu", file, value); err != nil {
		m.log.Debug("reducing cpu of a pod slice being destroyed failed", "slice", unit, "error", err)
	}
	if err := m.sd.Stop(ctx, unit); err != nil {
		return fmt.Errorf("pod slice %s: %w", unit, err)
	}
	// Usually systemd's stop took everything with it; only a cgroup that is still there needs
	// the kill rounds.
	if len(m.cg.Dirs(cgPath)) == 0 {
		return nil
	}
	if err := m.killLeftovers(cgPath); err != nil {
		return fmt.Errorf("pod slice %s: %w", unit, err)
	}
	if err := m.cg.Remove(cgPath); err != nil {
		return fmt.Errorf("pod slice %s: %w", unit, err)
	}
	if left := m.cg.Dirs(cgPath); len(left) > 0 {
		return fmt.Errorf("pod slice %s: cgroup still present: %s", unit, strings.Join(left, ", "))
	}
	return nil
}

// killLeftovers SIGKILLs what is left in the cgroup, up to destroyKillRounds rounds of
// Cgroupfs.Kill (each waits up to destroyKillWait for the processes to exit), as the kubelet's
// tryKillingCgroupProcesses does.
func (m *Manager) killLeftovers(cgPath string) error {
	// Never sweep anything but a pod slice: an empty or wrong path would name the root cgroup,
	// and its processes are the whole machine.
	if _, _, ok := slices.ParsePodSliceName(path.Base(cgPath)); !ok || !strings.HasPrefix(cgPath, "/"+slices.KubepodsSlice+"/") {
		return fmt.Errorf("cgroup %q: not a pod slice, refusing to kill its processes", cgPath)
	}
	var left []int
	var lastErr error
	for round := range destroyKillRounds {
		res, err := m.cg.Kill(cgPath, destroyKillWait)
		if res.Signalled > 0 {
			m.log.Info("killed processes left in a pod cgroup", "cgroup", cgPath, "pids", res.Signalled, "round", round+1)
		}
		left, lastErr = res.Left, err
		if err == nil && len(left) == 0 {
			return nil
		}
	}
	if lastErr != nil {
		return fmt.Errorf("processes still in cgroup after %d kill rounds: %v: %w", destroyKillRounds, left, lastErr)
	}
	return fmt.Errorf("processes still in cgroup after %d kill rounds: %v", destroyKillRounds, left)
}

// Orphans returns the pod slices that exist in systemd but belong to no pod the Manager knows,
// with the UID parsed from the unit name.
func (m *Manager) Orphans(ctx context.Context) ([]slices.Orphan, error) {
	list, err := m.sd.List(ctx, slices.PodSlicePatterns...)
	if err != nil {
		return nil, fmt.Errorf("pod slices: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []slices.Orphan
	for _, u := range list {
		qos, uid, ok := slices.ParsePodSliceName(u.Name)
		if !ok {
			continue
		}
		if ps, known := m.pods[uid]; known && ps.Unit == u.Name {
			continue
		}
		out = append(out, slices.Orphan{Unit: u.Name, UID: uid, QOS: qos})
	}
	return out, nil
}

// CleanupOrphans destroys every orphan pod slice, reporting each, and returns what it
// destroyed. Call it only once every pod source has reported, or live pods look orphaned.
func (m *Manager) CleanupOrphans(ctx context.Context) ([]slices.Orphan, error) {
	orphans, err := m.Orphans(ctx)
	if err != nil {
		return nil, err
	}
	var done []slices.Orphan
	var errs []error
	for _, o := range orphans {
		m.log.Warn("orphan pod slice found, destroying it", "slice", o.Unit, "pod_uid", o.UID, "qos", string(o.QOS))
		if err := m.destroySlice(ctx, o.Unit, slices.SliceCgroupPath(o.Unit)); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, o)
	}
	if len(done) > 0 {
		m.requestQoSUpdate()
	}
	return done, errors.Join(errs...)
}
