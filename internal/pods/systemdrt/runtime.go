package systemdrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	stdslices "slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// Systemd is what the runtime needs from systemd; *units.Manager implements it, and
// unitstest.Fake in memory.
type Systemd interface {
	Mode() units.Mode
	StartService(ctx context.Context, name string, props []units.Property) error
	Stop(ctx context.Context, name string) error
	Kill(ctx context.Context, name string, signal syscall.Signal, whom units.Who) error
	ResetFailed(ctx context.Context, name string) error
	List(ctx context.Context, patterns ...string) ([]units.UnitStatus, error)
	Properties(ctx context.Context, name string) (units.UnitInfo, error)
	SetProperties(ctx context.Context, name string, props []units.Property) error
}

// Defaults of Options.
const (
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultKillWait bounds the wait for a unit to end after SIGKILL.
	DefaultKillWait = 10 * time.Second
)

// Options configure a Runtime.
type Options struct {
	// Systemd runs the units. Required.
	Systemd Systemd
	// StateDir holds the pods' records (StateDir/pods/<uid>/state.json). Required.
	StateDir string
	// Logger gets state changes; discarded when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.WithTicker
	// ProcRoot is where procfs is mounted ("/proc" when empty); systemd's capabilities and
	// oom_score_adj are read from ProcRoot/1.
	ProcRoot string
	// Journalctl is the journalctl binary; "journalctl" (looked up in PATH) when empty.
	Journalctl string
	// Executable checks that a command path can be run; a regular file with an execute bit
	// when nil.
	Executable func(path string) error
	// MountPoint checks that a volume mount's path exists on the host: systemd bind-mounts over
	// it and does not create a missing one (the service fails with 226/NAMESPACE). os.Stat when
	// nil.
	MountPoint func(path string) error
	// PollInterval is how often a stop looks whether a signalled unit has ended.
	PollInterval time.Duration
	// KillWait bounds the wait for a unit to end after SIGKILL.
	KillWait time.Duration
	// SeccompProfileRoot is where Localhost seccomp profiles live (worker.Options'), for
	// validation; profiles are not checked when empty.
	SeccompProfileRoot string
	// AppArmor reports whether the host enforces AppArmor; by default whether
	// /sys/module/apparmor/parameters/enabled says Y.
	AppArmor func() bool
	// KnownUser and KnownGroup report whether the host's user database has a uid or gid
	// (os/user lookups when nil): runs with unknown ids start through Setpriv.
	KnownUser, KnownGroup func(id int64) bool
	// Setpriv is util-linux's setpriv; "/usr/bin/setpriv" when empty.
	Setpriv string
	// HostResolvConf is the resolver configuration host commands read; a sandbox whose
	// DnsConfig says the same gets no resolv.conf of its own. "/etc/resolv.conf" when empty.
	HostResolvConf string
}

// secEnv is the host side of securityProperties.
func (r *Runtime) secEnv() secEnv {
	return secEnv{Read: readProfile, KnownUser: r.opts.KnownUser, KnownGroup: r.opts.KnownGroup, Setpriv: r.opts.Setpriv}
}

// Runtime is the built-in systemd runtime, a worker.Runtime. Its methods are safe for
// concurrent use.
type Runtime struct {
	opts    Options
	sd      Systemd
	log     *slog.Logger
	clock   clock.WithTicker
	oom     oomPolicy
	oomOnce sync.Once

	mu        sync.Mutex
	pods      map[string]*podEntry
	loadedAll bool // every record of the state dir is loaded

	// hub shares one journalctl --follow among the followed logs.
	hub *journalHub

	// listings numbers the unit listings: a run confirmed after a listing began has a
	// confirmed number at least that listing's. A count, not a time: two readings of a coarse
	// clock can be equal.
	listings atomic.Uint64
}

// podEntry is the in-memory side of one pod; mu guards rec and the runs in it, and is never
// held across a wait for a unit.
type podEntry struct {
	mu     sync.Mutex
	loaded bool
	rec    *podRecord // nil: the runtime has nothing of the pod
}

var _ worker.Runtime = (*Runtime)(nil)

// New returns a Runtime. It reads nothing from systemd until the first call; the records of
// pods that ran under an earlier slicelet are read from StateDir when first needed.
func New(opts Options) (*Runtime, error) {
	if opts.Systemd == nil {
		return nil, errors.New("systemd runtime: no systemd connection")
	}
	if opts.StateDir == "" || !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("systemd runtime: state dir %q: must be an absolute path", opts.StateDir)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Journalctl == "" {
		opts.Journalctl = "journalctl"
	}
	if opts.Executable == nil {
		opts.Executable = isExecutable
	}
	if opts.MountPoint == nil {
		opts.MountPoint = statPath
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.KillWait <= 0 {
		opts.KillWait = DefaultKillWait
	}
	opts = withHostDefaults(opts)
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "pods"), 0o750); err != nil {
		return nil, fmt.Errorf("systemd runtime: state dir: %w", err)
	}
	r := &Runtime{opts: opts, sd: opts.Systemd, log: opts.Logger, clock: opts.Clock, pods: map[string]*podEntry{},
		hub: newJournalHub(opts.Journalctl, opts.Clock, opts.Logger)}
	var err error
	r.oom, err = detectOOMPolicy(opts.ProcRoot)
	if err != nil {
		r.log.Warn("cannot tell whether oom_score_adj can be lowered; sending the kubelet's values", "error", err)
	}
	return r, nil
}

// Name is "systemd".
func (r *Runtime) Name() string { return "systemd" }

// Type is "systemd": status container IDs are systemd://<unit>.
func (r *Runtime) Type() string { return "systemd" }

// entry returns the pod's entry, creating it.
func (r *Runtime) entry(uid string) *podEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.pods[uid]
	if e == nil {
		e = &podEntry{}
		r.pods[uid] = e
	}
	return e
}

// locked runs f with the pod's entry locked and its record loaded (nil when the runtime has
// nothing of the pod; f may create it).
func (r *Runtime) locked(uid string, f func(e *podEntry) error) error {
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded {
		rec, err := r.loadRecord(uid)
		if err != nil {
			return err
		}
		if rec != nil {
			r.log.Info("pod state loaded", "pod_uid", uid, "pod", rec.Namespace+"/"+rec.Name)
		}
		e.rec, e.loaded = rec, true
	}
	return f(e)
}

// podUIDs returns every pod the runtime may have something of: those with a record in the
// state dir (read once) and those already in memory.
func (r *Runtime) podUIDs() ([]string, error) {
	r.mu.Lock()
	all := r.loadedAll
	r.mu.Unlock()
	if !all {
		ents, err := os.ReadDir(filepath.Join(r.opts.StateDir, "pods"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("state dir: %w", err)
		}
		for _, d := range ents {
			if d.IsDir() && slices.ValidateUID(d.Name()) == nil {
				r.entry(d.Name())
			}
		}
		r.mu.Lock()
		r.loadedAll = true
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return stdslices.Sorted(maps.Keys(r.pods)), nil
}

// RunPodSandbox records a new sandbox of the pod in its slice (the slice itself is the
// controller's): the pod's containers run as units in config.Linux.CgroupParent.
func (r *Runtime) RunPodSandbox(_ context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if runtimeHandler != "" {
		return "", fmt.Errorf("runtime handler %q: the systemd runtime has none", runtimeHandler)
	}
	md := config.GetMetadata()
	uid := md.GetUid()
	slice := config.GetLinux().GetCgroupParent()
	if slice == "" {
		return "", fmt.Errorf("pod %s/%s: no pod slice", md.GetNamespace(), md.GetName())
	}
	var id string
	err := r.locked(uid, func(e *podEntry) error {
		if e.rec == nil {
			e.rec = newPodRecord(uid)
		}
		rec := e.rec
		attempt := md.GetAttempt()
		for _, sb := range rec.Sandboxes {
			attempt = max(attempt, sb.Attempt+1)
		}
		resolv, err := r.sandboxResolvConf(uid, attempt, config.GetDnsConfig())
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", md.GetNamespace(), md.GetName(), err)
		}
		for _, sb := range rec.Sandboxes {
			sb.Ready = false
		}
		id = sandboxID(uid, attempt)
		rec.Namespace, rec.Name = md.GetNamespace(), md.GetName()
		rec.Sandboxes = append(rec.Sandboxes, &sandbox{
			ID: id, Attempt: attempt, Ready: true, CreatedAt: r.clock.Now(), Slice: slice,
			MemoryLimited: config.GetLinux().GetResources().GetMemoryLimitInBytes() > 0,
			ResolvConf:    resolv,
		})
		return r.saveRecord(rec)
	})
	return id, err
}

// StopPodSandbox makes the sandbox not ready and kills what still runs in it.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	var live []string
	err := r.locked(sandboxPod(id), func(e *podEntry) error {
		sb := (*sandbox)(nil)
		if e.rec != nil {
			sb = e.rec.sandbox(id)
		}
		if sb == nil {
			return nil
		}
		for _, rn := range e.rec.Runs {
			if rn.SandboxID == id && rn.Started && !rn.Done {
				live = append(live, rn.ID)
			}
		}
		if !sb.Ready {
			return nil
		}
		sb.Ready = false
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, unit := range live {
		errs = append(errs, r.StopContainer(ctx, unit, 0))
	}
	return errors.Join(errs...)
}

// RemovePodSandbox removes the sandbox, the units of its containers and their runs; the pod's
// record goes with its last sandbox.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	uid := sandboxPod(id)
	return r.locked(uid, func(e *podEntry) error {
		if e.rec == nil || e.rec.sandbox(id) == nil {
			return nil
		}
		rec := e.rec
		var errs []error
		keep := rec.Runs[:0]
		for _, rn := range rec.Runs {
			if rn.SandboxID != id {
				keep = append(keep, rn)
				continue
			}
			errs = append(errs, r.resetUnit(ctx, rn.ID))
		}
		rec.Runs = keep
		if f := rec.sandbox(id).ResolvConf; f != "" {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
			}
		}
		rec.Sandboxes = stdslices.DeleteFunc(rec.Sandboxes, func(sb *sandbox) bool { return sb.ID == id })
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("pod %s: %w", uid, err)
		}
		if len(rec.Sandboxes) == 0 && len(rec.Runs) == 0 {
			if err := os.Remove(r.statePath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("pod %s state: %w", uid, err)
			}
			e.rec = nil
			r.log.Info("pod state removed", "pod_uid", uid)
			return nil
		}
		return r.saveRecord(rec)
	})
}

// resetUnit stops a unit and resets it if it failed, so systemd forgets it.
func (r *Runtime) resetUnit(ctx context.Context, unit string) error {
	if err := r.sd.Stop(ctx, unit); err != nil {
		return err
	}
	return r.sd.ResetFailed(ctx, unit)
}

// ListPodSandbox lists the sandboxes of the pod, or of every pod for "".
func (r *Runtime) ListPodSandbox(_ context.Context, podUID string) ([]worker.Sandbox, error) {
	uids := []string{podUID}
	if podUID == "" {
		var err error
		if uids, err = r.podUIDs(); err != nil {
			return nil, err
		}
	}
	var out []worker.Sandbox
	var errs []error
	for _, uid := range uids {
		err := r.locked(uid, func(e *podEntry) error {
			if e.rec == nil {
				return nil
			}
			for _, sb := range e.rec.Sandboxes {
				out = append(out, worker.Sandbox{ID: sb.ID, PodUID: uid, Attempt: sb.Attempt, Ready: sb.Ready, CreatedAt: sb.CreatedAt})
			}
			return nil
		})
		errs = append(errs, r.skipUnreadable(podUID, uid, err))
	}
	return out, errors.Join(errs...)
}

// skipUnreadable is err for a listing of one pod; a listing of every pod leaves out a pod
// whose record cannot be read, with a warning, rather than fail for all of them (the pod's own
// syncs report the error).
func (r *Runtime) skipUnreadable(listed, uid string, err error) error {
	if err == nil || listed != "" {
		return err
	}
	r.log.Warn("pod state unreadable, the pod is left out of the listing", "pod_uid", uid, "error", err)
	return nil
}

// CreateContainer records a run of a container in the sandbox; its unit is started by
// StartContainer. The record keeps the run's configuration, so a run created before slicelet
// stopped is started after it restarts. Of a container's earlier runs only the latest stays
// (systemd forgets the unit of an older failed one).
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	uid := sandboxPod(sandboxID)
	name := config.GetMetadata().GetName()
	attempt := config.GetMetadata().GetAttempt()
	unit, err := UnitName(uid, name, int(attempt)+1)
	if err != nil {
		return "", err
	}
	for _, m := range config.GetMounts() {
		if m.GetPropagation() == runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL {
			return "", fmt.Errorf("container %s: mount %s: bidirectional propagation: %s", name, m.GetContainerPath(), noBidirectional)
		}
	}
	var reset []string
	err = r.locked(uid, func(e *podEntry) error {
		sb := (*sandbox)(nil)
		if e.rec != nil {
			sb = e.rec.sandbox(sandboxID)
		}
		if sb == nil || !sb.Ready {
			return fmt.Errorf("container %s: sandbox %s is not ready", name, sandboxID)
		}
		data, err := protojson.Marshal(withResolvConf(config, sb.ResolvConf))
		if err != nil {
			return fmt.Errorf("container %s: configuration: %w", name, err)
		}
		if e.rec.run(unit) != nil {
			return fmt.Errorf("container %s: run %d exists already (%s)", name, attempt+1, unit)
		}
		g := grace(config)
		rn := &run{
			ID: unit, SandboxID: sandboxID, Name: name, Attempt: attempt, CreatedAt: r.clock.Now(), Config: data,
			MemoryLimited: sb.MemoryLimited || config.GetLinux().GetResources().GetMemoryLimitInBytes() > 0,
			StopSignal:    stopSignalName(config.GetStopSignal()), Grace: g,
		}
		keep := e.rec.Runs[:0]
		for _, old := range e.rec.Runs {
			if old.Name == name && old.Attempt+1 < attempt && old.Done {
				reset = append(reset, old.ID)
				continue
			}
			keep = append(keep, old)
		}
		e.rec.Runs = append(keep, rn)
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return "", err
	}
	for _, unit := range reset {
		if err := r.sd.ResetFailed(ctx, unit); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
			r.log.Debug("resetting an old container unit failed", "unit", unit, "error", err)
		}
	}
	return unit, nil
}

// StartContainer starts the run's transient service in the pod slice. A start that systemd
// rejects, or whose command cannot run on this host, leaves the run exited with StartError (so
// restart policy and back-off apply to it) and returns the error; a start whose outcome is
// unknown (the unit exists) is left to ContainerStatus.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var (
		cfg   *runtimeapi.ContainerConfig
		slice string
		rn    *run
	)
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if rn.Started || rn.Done {
			rn = nil
			return nil
		}
		if sb := e.rec.sandbox(rn.SandboxID); sb != nil {
			slice = sb.Slice
		}
		var err error
		cfg, err = rn.config()
		return err
	})
	if err != nil || rn == nil {
		return err
	}
	now := r.clock.Now()
	if cfg == nil {
		err = errors.New("no configuration recorded for this run")
	} else {
		err = r.startUnit(ctx, unit, slice, cfg)
	}
	if err == nil {
		return r.update(ref.UID, unit, func(rn *run) { rn.Started, rn.confirmed = true, r.listings.Load() })
	}
	if errors.Is(err, units.ErrJobFailed) || errors.Is(err, units.ErrTimeout) || errors.Is(err, units.ErrUnitExists) {
		// The unit exists (failed right away, or still starting): ContainerStatus reads what
		// became of it.
		if st, lerr := r.sd.List(ctx, unit); lerr == nil && loaded(st, unit) {
			r.log.Warn("container start did not finish cleanly", "unit", unit, "error", err)
			return r.update(ref.UID, unit, func(rn *run) { rn.Started, rn.confirmed = true, r.listings.Load() })
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("container %s: start %s: %w", rn.Name, unit, err)
	}
	if uerr := r.update(ref.UID, unit, func(rn *run) {
		rn.Done, rn.FinishedAt, rn.StartedAt, rn.ExitCode = true, now, now, 128
		rn.Reason, rn.Message = lifecycle.ReasonStartError, err.Error()
	}); uerr != nil {
		return uerr
	}
	return fmt.Errorf("container %s: start %s: %w", rn.Name, unit, err)
}

// startUnit starts the transient service of a run.
func (r *Runtime) startUnit(ctx context.Context, unit, slice string, cfg *runtimeapi.ContainerConfig) error {
	exe, err := r.resolveCommand(cfg.GetCommand(), cfg.GetEnvs())
	if err != nil {
		return err
	}
	want := int(cfg.GetLinux().GetResources().GetOomScoreAdj())
	adj, raised := r.oom.Apply(want)
	if raised {
		r.oomOnce.Do(func() {
			r.log.Warn("systemd lacks CAP_SYS_RESOURCE: container oom_score_adj values below systemd's own are raised to it",
				"floor", r.oom.Floor, "unit", unit, "wanted", want)
		})
	}
	sec, wrap, err := securityProperties(cfg.GetLinux().GetSecurityContext(), r.secEnv())
	if err != nil {
		return err
	}
	props := unitProperties(unitSpec{Config: cfg, Slice: slice, Exec: exe, OOMScoreAdj: adj, Mode: r.sd.Mode(), Security: sec, Wrap: wrap})
	return r.sd.StartService(ctx, unit, props)
}

// update changes a run under its pod's lock and saves the record.
func (r *Runtime) update(uid, unit string, f func(rn *run)) error {
	return r.locked(uid, func(e *podEntry) error {
		if e.rec == nil || e.rec.run(unit) == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		f(e.rec.run(unit))
		return r.saveRecord(e.rec)
	})
}

// loaded reports whether the list holds the unit name loaded.
func loaded(list []units.UnitStatus, name string) bool {
	for _, u := range list {
		if u.Name == name && u.LoadState != "not-found" {
			return true
		}
	}
	return false
}

// unitEnded reports whether a container unit's main process has ended: failed, inactive, or
// active/exited (RemainAfterExit) awaiting its stop.
func unitEnded(active, sub string) bool {
	switch active {
	case "failed", "inactive":
		return true
	case "active", "reloading", "deactivating":
		return sub == "exited"
	}
	return false
}

// ListContainers lists the runs of the pod's containers, or of every pod's for "", from one
// listing of the container units: a unit without a run in the record (slicelet stopped between
// starting it and recording that, or the state dir was lost) is adopted; a started run whose
// unit is gone ended unobserved (ContainerStatusUnknown). A run whose unit ended is listed
// exited; ContainerStatus records how.
func (r *Runtime) ListContainers(ctx context.Context, podUID string) ([]worker.Container, error) {
	pattern := allUnitsPattern
	if podUID != "" {
		if err := slices.ValidateUID(podUID); err != nil {
			return nil, err
		}
		pattern = podPattern(podUID)
	}
	listedAt := r.listings.Add(1)
	list, err := r.sd.List(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("container units: %w", err)
	}
	byPod := map[string][]units.UnitStatus{}
	for _, u := range list {
		if id, ok := parseUnit(u.Name); ok && u.LoadState != "not-found" && (podUID == "" || id.UID == podUID) {
			byPod[id.UID] = append(byPod[id.UID], u)
		}
	}
	uids := []string{podUID}
	if podUID == "" {
		if uids, err = r.podUIDs(); err != nil {
			return nil, err
		}
		for uid := range byPod {
			if !stdslices.Contains(uids, uid) {
				uids = append(uids, uid)
			}
		}
	}
	var out []worker.Container
	var errs []error
	var ended []string
	for _, uid := range uids {
		err := r.locked(uid, func(e *podEntry) error {
			cs, stop, err := r.listPod(e, uid, byPod[uid], listedAt)
			out = append(out, cs...)
			ended = append(ended, stop...)
			return err
		})
		errs = append(errs, r.skipUnreadable(podUID, uid, err))
	}
	for _, unit := range ended {
		// A run whose end was recorded before its unit was stopped (slicelet stopped in
		// between): what its main process left behind dies now.
		if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			r.log.Debug("killing leftovers of an ended container failed", "unit", unit, "error", err)
		}
		if err := r.sd.Stop(ctx, unit); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// listPod reconciles a pod's record with its loaded units, from listing number listedAt, and lists its
// runs; it returns the units of runs that ended and were recorded but are still active, to be
// stopped. Call with the entry locked.
func (r *Runtime) listPod(e *podEntry, uid string, loadedUnits []units.UnitStatus, listedAt uint64) ([]worker.Container, []string, error) {
	if e.rec == nil && len(loadedUnits) == 0 {
		return nil, nil, nil
	}
	changed := false
	if e.rec == nil {
		e.rec = newPodRecord(uid)
		changed = true
	}
	rec := e.rec
	now := r.clock.Now()
	byName := make(map[string]units.UnitStatus, len(loadedUnits))
	for _, u := range loadedUnits {
		byName[u.Name] = u
		if rec.run(u.Name) != nil {
			continue
		}
		id, _ := parseUnit(u.Name)
		sb := rec.ready()
		if sb == nil {
			sb = &sandbox{ID: sandboxID(uid, uint32(len(rec.Sandboxes))), Attempt: uint32(len(rec.Sandboxes)), Ready: true, CreatedAt: now}
			rec.Sandboxes = append(rec.Sandboxes, sb)
		}
		rec.Runs = append(rec.Runs, &run{ID: u.Name, SandboxID: sb.ID, Name: id.Container, Attempt: uint32(id.N - 1), Started: true})
		changed = true
		r.log.Info("container unit adopted", "pod_uid", uid, "container", id.Container, "unit", u.Name, "state", u.ActiveState+"/"+u.SubState)
	}
	out := make([]worker.Container, 0, len(rec.Runs))
	var stop []string
	for _, rn := range rec.Runs {
		u, ok := byName[rn.ID]
		rn.active, rn.sub, rn.listed = u.ActiveState, u.SubState, true
		state := worker.StateRunning
		switch {
		case rn.Done:
			state = worker.StateExited
			if ok && u.ActiveState == "active" {
				stop = append(stop, rn.ID)
			}
		case !rn.Started:
			state = worker.StateCreated
		case !ok && rn.confirmed >= listedAt:
			// Started after the listing: not in it yet.
		case !ok:
			rn.Done, rn.FinishedAt, rn.ExitCode = true, now, 137
			rn.Reason, rn.Message = lifecycle.ReasonUnknown, "the container's unit was gone before its exit status could be read"
			if rn.StartedAt.IsZero() {
				rn.StartedAt = now
			}
			changed = true
			state = worker.StateExited
			r.log.Warn("container unit vanished", "pod_uid", uid, "container", rn.Name, "unit", rn.ID)
		case unitEnded(u.ActiveState, u.SubState):
			state = worker.StateExited
		}
		out = append(out, worker.Container{
			ID: rn.ID, SandboxID: rn.SandboxID, PodUID: uid, Name: rn.Name, Attempt: rn.Attempt,
			State: state, CreatedAt: createdAt(rn),
		})
	}
	if changed {
		return out, stop, r.saveRecord(rec)
	}
	return out, stop, nil
}

// createdAt is a run's creation time for GC's age: when it was created, or for runs adopted or
// converted from older records when its process started (or ended).
func createdAt(rn *run) time.Time {
	switch {
	case !rn.CreatedAt.IsZero():
		return rn.CreatedAt
	case !rn.StartedAt.IsZero():
		return rn.StartedAt
	}
	return rn.FinishedAt
}

// parseContainerID accepts a unit name or a status container ID ("systemd://<unit>").
func parseContainerID(id string) (string, unitID, error) {
	unit := id
	if len(unit) > len("systemd://") && unit[:len("systemd://")] == "systemd://" {
		unit = unit[len("systemd://"):]
	}
	ref, ok := parseUnit(unit)
	if !ok {
		return "", unitID{}, fmt.Errorf("container %q: not a container unit of the systemd runtime", id)
	}
	return unit, ref, nil
}

// UpdateContainerResources sets a run's cgroup properties on its unit (an in-place resize).
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.LinuxContainerResources) error {
	unit, _, err := parseContainerID(id)
	if err != nil {
		return err
	}
	if err := r.opts.Systemd.SetProperties(ctx, unit, slices.SliceProperties(resourceConfig(resources), r.opts.Systemd.Mode())); err != nil {
		return fmt.Errorf("container %s: update resources: %w", id, err)
	}
	return nil
}

// ContainerStatus inspects a run. The state of its unit at the last listing decides what is
// read from systemd: nothing for a run whose start time is recorded and whose unit still runs
// (a restarted slicelet answers for every running container from its records), the start time
// once its process runs, and for a unit that ended its exit status, which is recorded before the
// unit is stopped (that kills what the main process left behind, as the kernel does for a
// container's PID namespace).
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (worker.ContainerStatus, error) {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return worker.ContainerStatus{}, err
	}
	var (
		st     worker.ContainerStatus
		need   bool // the unit's state must be read
		listed bool
		active string
		sub    string
	)
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := (*run)(nil)
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		st = r.status(ref.UID, rn)
		listed, active, sub = rn.listed, rn.active, rn.sub
		need = rn.Started && !rn.Done && (rn.StartedAt.IsZero() || !listed || unitEnded(active, sub))
		return nil
	})
	if err != nil || !need {
		return st, err
	}
	if !listed {
		list, err := r.sd.List(ctx, unit)
		if err != nil {
			return st, fmt.Errorf("container %s: %w", unit, err)
		}
		active, sub = "", ""
		for _, u := range list {
			if u.Name == unit && u.LoadState != "not-found" {
				active, sub = u.ActiveState, u.SubState
			}
		}
		if active == "" {
			return r.vanished(ref.UID, unit)
		}
	}
	ended := unitEnded(active, sub)
	if !ended && active == "activating" {
		return st, nil // its process is not running yet
	}
	info, err := r.sd.Properties(ctx, unit)
	if errors.Is(err, units.ErrNoSuchUnit) {
		return r.vanished(ref.UID, unit)
	}
	if err != nil {
		return st, fmt.Errorf("container %s: %w", unit, err)
	}
	if !ended && !unitEnded(info.ActiveState, info.SubState) {
		err = r.locked(ref.UID, func(e *podEntry) error {
			rn := e.rec.run(unit)
			if rn == nil || rn.Done {
				return nil
			}
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			rn.StartedAt = info.ExecMainStartTimestamp
			if rn.StartedAt.IsZero() {
				rn.StartedAt = r.clock.Now()
			}
			st = r.status(ref.UID, rn)
			return r.saveRecord(e.rec)
		})
		return st, err
	}
	var stop bool
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if !rn.Done {
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			finish(rn, info, r.sd.Mode(), rn.MemoryLimited, r.clock.Now())
			r.log.Info("container unit ended", "pod_uid", ref.UID, "container", rn.Name, "unit", unit,
				"exit_code", rn.ExitCode, "signal", rn.Signal, "reason", rn.Reason, "result", info.Result)
			if err := r.saveRecord(e.rec); err != nil {
				return err
			}
		}
		st = r.status(ref.UID, rn)
		stop = info.ActiveState != "failed" && info.ActiveState != "inactive"
		return nil
	})
	if err != nil || !stop {
		return st, err
	}
	// What the main process left behind dies with it, as in a container's PID namespace.
	if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		r.log.Debug("killing leftovers of an ended container failed", "unit", unit, "error", err)
	}
	if err := r.sd.Stop(ctx, unit); err != nil {
		return st, fmt.Errorf("container %s: %w", unit, err)
	}
	return st, nil
}

// vanished records that a started run's unit is gone before its exit status was read.
func (r *Runtime) vanished(uid, unit string) (worker.ContainerStatus, error) {
	var st worker.ContainerStatus
	err := r.locked(uid, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if !rn.Done {
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.ExitCode = true, now, 137
			rn.Reason, rn.Message = lifecycle.ReasonUnknown, "the container's unit was gone before its exit status could be read"
			if rn.StartedAt.IsZero() {
				rn.StartedAt = now
			}
			r.log.Warn("container unit vanished", "pod_uid", uid, "container", rn.Name, "unit", unit)
			if err := r.saveRecord(e.rec); err != nil {
				return err
			}
		}
		st = r.status(uid, rn)
		return nil
	})
	return st, err
}

// status is a run as the worker sees it.
func (r *Runtime) status(uid string, rn *run) worker.ContainerStatus {
	state := worker.StateRunning
	switch {
	case rn.Done:
		state = worker.StateExited
	case !rn.Started:
		state = worker.StateCreated
	}
	return worker.ContainerStatus{
		Container: worker.Container{ID: rn.ID, SandboxID: rn.SandboxID, PodUID: uid, Name: rn.Name, Attempt: rn.Attempt, State: state, CreatedAt: createdAt(rn)},
		StartedAt: rn.StartedAt, FinishedAt: rn.FinishedAt,
		ExitCode: rn.ExitCode, Signal: rn.Signal, Reason: rn.Reason, Message: rn.Message, Grace: rn.Grace,
	}
}

// siginfo si_code values of ExecMainCode.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// finish records the final state of a run from its unit's properties.
//
// OOMKilled: systemd reports Result=oom-kill from the cgroup v2 memory.events counter. cgroup
// v1 has no such counter that outlives the unit (systemd 252 only watches memory.events), so on
// v1 a main process killed by SIGKILL (Result=signal: not systemd's stop timeout) that slicelet
// did not stop, in a container or pod with a memory limit, is taken for an OOM kill; the
// Message says it was inferred. A `kill -9` from outside looks the same there.
func finish(rn *run, info units.UnitInfo, mode units.Mode, memLimited bool, now time.Time) {
	rn.Done = true
	if !info.ExecMainStartTimestamp.IsZero() {
		rn.StartedAt = info.ExecMainStartTimestamp
	}
	rn.FinishedAt = info.ExecMainExitTimestamp
	if rn.FinishedAt.IsZero() {
		rn.FinishedAt = now
	}
	if rn.StartedAt.IsZero() {
		rn.StartedAt = rn.FinishedAt
	}
	rn.Signal, rn.Message = 0, ""
	switch info.ExecMainCode {
	case cldExited:
		rn.ExitCode = info.ExecMainStatus
	case cldKilled, cldDumped:
		rn.Signal = info.ExecMainStatus
		rn.ExitCode = 128 + info.ExecMainStatus
	default:
		// The main process never ran (or systemd lost it): the start failed.
		rn.ExitCode, rn.Reason = 128, lifecycle.ReasonStartError
		rn.Message = fmt.Sprintf("systemd result %q before the command ran", info.Result)
		return
	}
	switch {
	case info.Result == "oom-kill":
		rn.Reason = lifecycle.ReasonOOMKilled
	case !mode.V2() && info.Result == "signal" && rn.Signal == int32(syscall.SIGKILL) && !rn.Stopping && memLimited:
		rn.Reason = lifecycle.ReasonOOMKilled
		rn.Message = "killed by SIGKILL under a memory limit; cgroup v1 gives systemd no OOM record, so this is inferred"
	case rn.ExitCode == 0:
		rn.Reason = lifecycle.ReasonCompleted
	default:
		rn.Reason = lifecycle.ReasonError
		if info.ExecMainCode == cldExited {
			rn.Message = systemdExitMessage(info.ExecMainStatus)
		}
	}
}

// systemdExitMessage explains the exit codes systemd itself uses when it could not set up the
// process (systemd.exec(5) "Process Exit Codes"); "" for others.
func systemdExitMessage(code int32) string {
	msg := map[int32]string{
		200: "200/CHDIR: systemd could not change to the working directory",
		203: "203/EXEC: systemd could not execute the command",
		204: "204/MEMORY: systemd ran out of memory setting up the process",
		206: "206/OOM_ADJUST: systemd could not set oom_score_adj",
		209: "209/STDOUT: systemd could not set up standard output or error",
		214: "214/SETSCHEDULER: systemd could not set the scheduling policy",
		216: "216/GROUP: systemd could not set the group (runAsGroup)",
		217: "217/USER: systemd could not set the user (runAsUser)",
		226: "226/NAMESPACE: systemd could not set up the mount namespace (volumes)",
	}[code]
	return msg
}

// StopContainer stops a running run gracefully within grace: its stop signal to every process
// of the unit, SIGKILL after grace, then the final state is recorded and the unit stopped. A
// run that was created but never started is marked ended. The unit's own Stop (KillSignal=,
// TimeoutStopSec=) is not used for the signal because a unit stopped by systemd after a clean
// SIGTERM is garbage-collected at once, with its exit status; signalling it leaves it "exited"
// (RemainAfterExit) until read.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var sig syscall.Signal
	var name string
	live := false
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := (*run)(nil)
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil || rn.Done {
			return nil
		}
		name, sig = rn.Name, signalOf(rn.StopSignal)
		rn.Stopping = true
		if !rn.Started {
			// Created but never started: nothing runs. Mark it so nothing starts it.
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.StartedAt, rn.ExitCode, rn.Reason = true, now, now, 0, lifecycle.ReasonCompleted
			rn.Message = "stopped before it started"
		} else {
			live = true
		}
		return r.saveRecord(e.rec)
	})
	if err != nil || !live {
		return err
	}
	r.log.Info("stopping container", "pod_uid", ref.UID, "container", name, "unit", unit, "signal", sig.String(), "grace", grace)
	if err := r.sd.Kill(ctx, unit, sig, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", name, err)
	}
	ended, err := r.waitEnded(ctx, unit, grace)
	if err != nil {
		return fmt.Errorf("container %s: %w", name, err)
	}
	if !ended {
		r.log.Info("container outlived its grace period, killing it", "pod_uid", ref.UID, "container", name, "unit", unit, "grace", grace)
		if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			return fmt.Errorf("container %s: %w", name, err)
		}
		if _, err := r.waitEnded(ctx, unit, r.opts.KillWait); err != nil {
			return fmt.Errorf("container %s: %w", name, err)
		}
	}
	info, ierr := r.sd.Properties(ctx, unit)
	if ierr != nil && !errors.Is(ierr, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", name, ierr)
	}
	var code, signal int32
	err = r.locked(ref.UID, func(e *podEntry) error {
		rn := e.rec.run(unit)
		if rn == nil {
			return nil
		}
		if ierr != nil {
			now := r.clock.Now()
			rn.Done, rn.FinishedAt, rn.ExitCode, rn.Signal = true, now, 128+int32(sig), int32(sig)
			rn.Reason, rn.Message = lifecycle.ReasonError, "stopped; the unit was gone before its exit status could be read"
		} else {
			if rn.InvocationID == "" {
				rn.InvocationID = info.InvocationID
			}
			finish(rn, info, r.sd.Mode(), false, r.clock.Now())
		}
		code, signal = rn.ExitCode, rn.Signal
		return r.saveRecord(e.rec)
	})
	if err != nil {
		return err
	}
	if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		r.log.Debug("killing leftovers of a stopped container failed", "unit", unit, "error", err)
	}
	if err := r.sd.Stop(ctx, unit); err != nil {
		return fmt.Errorf("container %s: %w", name, err)
	}
	r.log.Info("container stopped", "pod_uid", ref.UID, "container", name, "unit", unit, "exit_code", code, "signal", signal)
	return nil
}

// waitEnded polls the unit until its main process has ended (exited, failed, inactive or
// gone) or d passes; it reports whether it ended.
func (r *Runtime) waitEnded(ctx context.Context, unit string, d time.Duration) (bool, error) {
	deadline := r.clock.NewTimer(d)
	defer deadline.Stop()
	tick := r.clock.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for {
		list, err := r.sd.List(ctx, unit)
		if err != nil {
			return false, err
		}
		ended := true
		for _, u := range list {
			if u.Name == unit && u.LoadState != "not-found" {
				ended = unitEnded(u.ActiveState, u.SubState)
			}
		}
		if ended {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C():
			return false, nil
		case <-tick.C():
		}
	}
}

// ErrInstanceRunning is returned when a running run is to be removed: only the pod's own
// lifecycle ends it.
var ErrInstanceRunning = errors.New("container instance is running")

// RemoveContainer removes a run that is not running: its unit is stopped if still loaded and
// active (exited, awaiting its stop) and reset if failed, and the run leaves the record. The
// journal keeps its output: journald rotates it by its own limits (journald.conf
// SystemMaxUse=, MaxRetentionSec=), so `slicectl logs --previous` keeps working for a run
// container GC removed.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return err
	}
	var rn *run
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn != nil && rn.Started && !rn.Done {
			return fmt.Errorf("container %s: run %d (%s): %w", ref.Container, ref.N, unit, ErrInstanceRunning)
		}
		return nil
	})
	if err != nil {
		return err
	}
	list, err := r.sd.List(ctx, unit)
	if err != nil {
		return fmt.Errorf("container %s: unit %s: %w", ref.Container, unit, err)
	}
	for _, u := range list {
		if u.Name != unit || u.LoadState == "not-found" {
			continue
		}
		if !unitEnded(u.ActiveState, u.SubState) {
			return fmt.Errorf("container %s: unit %s is %s/%s: %w", ref.Container, unit, u.ActiveState, u.SubState, ErrInstanceRunning)
		}
		if u.ActiveState == "active" {
			// RemainAfterExit keeps an ended unit active until stopped; stopping it also
			// kills what its main process left behind.
			if err := r.sd.Stop(ctx, unit); err != nil {
				return fmt.Errorf("container %s: %w", ref.Container, err)
			}
		}
		// systemd keeps a failed unit loaded until it is reset; a stopped one may end failed
		// too (a stop timeout), so the reset follows the stop.
		if err := r.sd.ResetFailed(ctx, unit); err != nil {
			return fmt.Errorf("container %s: %w", ref.Container, err)
		}
	}
	if rn == nil {
		return nil
	}
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec == nil {
			return nil
		}
		e.rec.Runs = stdslices.DeleteFunc(e.rec.Runs, func(x *run) bool { return x.ID == unit })
		return r.saveRecord(e.rec)
	})
	if err == nil {
		r.log.Info("dead container instance removed", "pod_uid", ref.UID, "container", ref.Container, "unit", unit, "instance", ref.N)
	}
	return err
}

// withHostDefaults fills in what opts leaves to this host: its AppArmor, its user database and
// setpriv; Validate and ValidatePod judge the host's facts through them.
func withHostDefaults(opts Options) Options {
	if opts.AppArmor == nil {
		opts.AppArmor = func() bool { return lifecycle.HostAppArmorEnabled("/sys") }
	}
	if opts.KnownUser == nil {
		opts.KnownUser = knownUser
	}
	if opts.KnownGroup == nil {
		opts.KnownGroup = knownGroup
	}
	if opts.Setpriv == "" {
		opts.Setpriv = "/usr/bin/setpriv"
	}
	if opts.HostResolvConf == "" {
		opts.HostResolvConf = resolvConfPath
	}
	return opts
}
