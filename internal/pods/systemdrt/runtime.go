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
	"sort"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
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
}

// Clock tells the time. time.Now is used when Options.Clock is nil (and is faked by
// testing/synctest).
type Clock interface{ Now() time.Time }

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
	// StateDir holds the pods' records and emptyDir volumes (StateDir/pods/<uid>). Required.
	StateDir string
	// Logger gets state changes; discarded when nil.
	Logger *slog.Logger
	// Clock; time.Now when nil.
	Clock Clock
	// MemoryCapacity is the node's memory in bytes, for the kubelet's OOM score of Burstable
	// containers.
	MemoryCapacity int64
	// ProcRoot is where procfs is mounted ("/proc" when empty); systemd's capabilities and
	// oom_score_adj are read from ProcRoot/1.
	ProcRoot string
	// Resources are the node's CPU options for container quotas; slices.DefaultOptions() when
	// nil.
	Resources *slices.Options
	// Backoff is the restart back-off; zero fields take the kubelet's values.
	Backoff lifecycle.Backoff
	// Journalctl is the journalctl binary; "journalctl" (looked up in PATH) when empty.
	Journalctl string
	// Executable checks that a command path can be run; a regular file with an execute bit
	// when nil.
	Executable func(path string) error
	// PollInterval is how often KillPod looks whether a signalled unit has ended.
	PollInterval time.Duration
	// KillWait bounds the wait for a unit to end after SIGKILL.
	KillWait time.Duration
}

// Runtime is the built-in systemd runtime. Its methods are safe for concurrent use; calls for
// the same pod are serialized.
type Runtime struct {
	opts    Options
	sd      Systemd
	log     *slog.Logger
	backoff lifecycle.Backoff
	oom     oomPolicy
	oomOnce sync.Once

	mu   sync.Mutex
	pods map[string]*podEntry
}

// podEntry is the in-memory side of one pod.
type podEntry struct {
	mu  sync.Mutex // serializes SyncPod, KillPod, Forget and Logs of the pod
	rec *podRecord // nil until loaded

	// guarded by Runtime.mu:
	nextSync time.Time
	seen     map[string]string // unit → "ActiveState/SubState" at the last sync
}

var _ pods.Runtime = (*Runtime)(nil)

// New returns a Runtime. It reads nothing from systemd until the first call; the state of
// pods that ran under an earlier slicelet is picked up from StateDir and the units by the
// first SyncPod, KillPod or PodUIDs.
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
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Resources == nil {
		d := slices.DefaultOptions()
		opts.Resources = &d
	}
	if opts.Journalctl == "" {
		opts.Journalctl = "journalctl"
	}
	if opts.Executable == nil {
		opts.Executable = isExecutable
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.KillWait <= 0 {
		opts.KillWait = DefaultKillWait
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "pods"), 0o750); err != nil {
		return nil, fmt.Errorf("systemd runtime: state dir: %w", err)
	}
	r := &Runtime{opts: opts, sd: opts.Systemd, log: opts.Logger, backoff: opts.Backoff.WithDefaults(), pods: map[string]*podEntry{}}
	var err error
	r.oom, err = detectOOMPolicy(opts.ProcRoot)
	if err != nil {
		r.log.Warn("cannot tell whether oom_score_adj can be lowered; sending the kubelet's values", "error", err)
	}
	return r, nil
}

// Name is "systemd".
func (r *Runtime) Name() string { return "systemd" }

func (r *Runtime) now() time.Time {
	if r.opts.Clock != nil {
		return r.opts.Clock.Now()
	}
	return time.Now()
}

func (r *Runtime) exec(path string) error { return r.opts.Executable(path) }

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

// record returns the pod's record (loaded from the state dir, or new). Call with e.mu held.
func (r *Runtime) record(e *podEntry, uid string) (*podRecord, error) {
	if e.rec != nil {
		return e.rec, nil
	}
	rec, err := r.loadRecord(uid)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		rec = newPodRecord(uid)
	} else {
		r.log.Info("pod state loaded", "pod_uid", uid, "pod", rec.Namespace+"/"+rec.Name)
	}
	e.rec = rec
	return rec, nil
}

// NextSync returns when SyncPod must run again for the pod at the latest, because a back-off
// ends then; zero when no back-off is pending. Exits of running containers are not foreseen:
// use Relist (or a periodic SyncPod) to notice those.
func (r *Runtime) NextSync(uid string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.pods[uid]; e != nil {
		return e.nextSync
	}
	return time.Time{}
}

// Relist is the runtime's PLEG relist: one List of every container unit, compared with what
// the last SyncPod of each pod saw. It returns, sorted, the UIDs of known pods whose units
// changed state, appeared or vanished, and of pods whose back-off has ended (NextSync ≤ now),
// i.e. the pods that need a SyncPod now.
func (r *Runtime) Relist(ctx context.Context) ([]string, error) {
	list, err := r.sd.List(ctx, allUnitsPattern)
	if err != nil {
		return nil, fmt.Errorf("container units: %w", err)
	}
	now := r.now()
	current := map[string]map[string]string{}
	for _, u := range list {
		id, ok := parseUnit(u.Name)
		if !ok || u.LoadState == "not-found" {
			continue
		}
		if current[id.UID] == nil {
			current[id.UID] = map[string]string{}
		}
		current[id.UID][u.Name] = u.ActiveState + "/" + u.SubState
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for uid, e := range r.pods {
		due := !e.nextSync.IsZero() && !now.Before(e.nextSync)
		if due || !maps.Equal(e.seen, current[uid]) {
			out = append(out, uid)
		}
	}
	sort.Strings(out)
	return out, nil
}

// SyncPod makes the pod's containers match its spec inside slice (see pods.Runtime). It loops
// observe → decide → act until nothing more can start now, so one call starts a pod's sidecars
// and all its regular containers; a regular init container that is still running ends the
// call (the pod is Pending), and the next call continues. Back-offs end at NextSync.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, slice slices.PodSlice) (v1.PodStatus, error) {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return v1.PodStatus{}, err
	}
	if errs := r.validate(pod, false); len(errs) > 0 {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, errs.ToAggregate())
	}
	if slice.Unit == "" {
		return v1.PodStatus{}, fmt.Errorf("pod %s/%s: no pod slice", pod.Namespace, pod.Name)
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := r.record(e, uid)
	if err != nil {
		return v1.PodStatus{}, err
	}
	if rec.StartTime.IsZero() || rec.Name != pod.Name || rec.Namespace != pod.Namespace {
		if rec.StartTime.IsZero() {
			rec.StartTime = r.now()
		}
		rec.Namespace, rec.Name = pod.Namespace, pod.Name
		if err := r.saveRecord(rec); err != nil {
			return v1.PodStatus{}, err
		}
	}

	var p lifecycle.Plan
	for range len(pod.Spec.InitContainers) + 3 {
		if err := r.observe(ctx, pod, rec); err != nil {
			return buildStatus(pod, rec, decide(pod, rec, r.now(), r.backoff, false)), err
		}
		p = decide(pod, rec, r.now(), r.backoff, false)
		if p.Initialized && !rec.Initialized {
			rec.Initialized = true
			if err := r.saveRecord(rec); err != nil {
				return buildStatus(pod, rec, p), err
			}
		}
		if len(p.Start) == 0 && len(p.StopSidecars) == 0 {
			break
		}
		var errs []error
		for _, name := range p.StopSidecars {
			c, _ := lifecycle.ContainerByName(pod, name)
			if err := r.stopContainer(ctx, pod, rec, c, lifecycle.GracePeriod(pod)); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, r.startAll(ctx, pod, slice, rec, p.Start)...)
		if err := errors.Join(errs...); err != nil {
			return buildStatus(pod, rec, p), err
		}
	}
	r.mu.Lock()
	e.nextSync = p.NextSync
	r.mu.Unlock()
	return buildStatus(pod, rec, p), nil
}

// startAll starts the containers of one plan step; several regular containers start
// concurrently (the kubelet starts them one after the other, but nothing orders them).
func (r *Runtime) startAll(ctx context.Context, pod *v1.Pod, slice slices.PodSlice, rec *podRecord, acts []lifecycle.StartAction) []error {
	if len(acts) == 0 {
		return nil
	}
	vols, err := r.prepareVolumes(pod)
	if err != nil {
		return []error{err}
	}
	// Record every instance about to start before systemd hears of any (intent first), so a
	// crash in between is recovered by observe as "never created" or "adopt".
	type job struct {
		act  lifecycle.StartAction
		c    *v1.Container
		name string
		cur  *instance
	}
	jobs := make([]job, 0, len(acts))
	now := r.now()
	for _, a := range acts {
		c, _ := lifecycle.ContainerByName(pod, a.Container)
		name, err := UnitName(string(pod.UID), c.Name, a.N)
		if err != nil {
			return []error{err}
		}
		cr := rec.container(c.Name)
		if cur := cr.Current; cur != nil && cur.Done {
			cr.Backoff, cr.BackoffUpdated = r.backoff.Next(cr.Backoff, cr.BackoffUpdated, cur.FinishedAt)
			cr.Previous = cur
		}
		if cr.Current == nil || cr.Current.Done {
			cr.Current = &instance{N: a.N, Unit: name}
		}
		jobs = append(jobs, job{act: a, c: c, name: name, cur: cr.Current})
	}
	if err := r.saveRecord(rec); err != nil {
		return []error{err}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			errs[i] = r.startInstance(ctx, pod, slice, rec, j.c, j.cur, vols, now)
		})
	}
	wg.Wait()
	if err := r.saveRecord(rec); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// startInstance asks systemd for the unit of cur. A start that systemd rejects is recorded as
// a finished instance (StartError) so that restart policy and back-off apply to it; a start
// whose outcome is unknown (the unit exists) is left to observe.
func (r *Runtime) startInstance(ctx context.Context, pod *v1.Pod, slice slices.PodSlice, rec *podRecord, c *v1.Container, cur *instance, vols map[string]string, now time.Time) error {
	exe, err := r.resolveCommand(c)
	if err == nil {
		err = checkMountSources(c, vols)
	}
	if err == nil {
		adj, raised := r.oom.Apply(slices.ContainerOOMScoreAdj(pod, c, r.opts.MemoryCapacity))
		if raised {
			r.oomOnce.Do(func() {
				r.log.Warn("systemd lacks CAP_SYS_RESOURCE: container oom_score_adj values below systemd's own are raised to it",
					"floor", r.oom.Floor, "container", c.Name, "wanted", slices.ContainerOOMScoreAdj(pod, c, r.opts.MemoryCapacity))
			})
		}
		props := unitProperties(unitSpec{
			Pod: pod, Container: c, N: cur.N, Slice: slice.Unit, Exec: exe, Volumes: vols,
			OOMScoreAdj: adj, Mode: r.sd.Mode(), Resources: *r.opts.Resources,
		})
		err = r.sd.StartService(ctx, cur.Unit, props)
		if err == nil {
			rec.locked(func() { cur.Created, cur.CreatedAt = true, now })
			r.log.Info("container started", "pod_uid", string(pod.UID), "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "unit", cur.Unit, "instance", cur.N)
			return nil
		}
		if errors.Is(err, units.ErrJobFailed) || errors.Is(err, units.ErrTimeout) || errors.Is(err, units.ErrUnitExists) {
			// The unit exists (failed right away, or still starting): observe reads what
			// became of it.
			if st, lerr := r.sd.List(ctx, cur.Unit); lerr == nil && loaded(st, cur.Unit) {
				rec.locked(func() { cur.Created, cur.CreatedAt = true, now })
				r.log.Warn("container start did not finish cleanly", "pod_uid", string(pod.UID), "container", c.Name, "unit", cur.Unit, "error", err)
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("container %s: start %s: %w", c.Name, cur.Unit, err)
		}
	}
	rec.locked(func() {
		cur.Done, cur.FinishedAt, cur.ExitCode, cur.Reason, cur.Message = true, now, 128, lifecycle.ReasonStartError, err.Error()
		cur.StartedAt = now
	})
	r.log.Warn("container could not be started", "pod_uid", string(pod.UID), "container", c.Name, "unit", cur.Unit, "error", err)
	return nil
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

// memoryLimited reports whether the container runs under a memory limit of its own or of its
// pod's slice.
func (r *Runtime) memoryLimited(pod *v1.Pod, c *v1.Container) bool {
	if c != nil && !c.Resources.Limits.Memory().IsZero() {
		return true
	}
	rc := slices.PodResources(pod, *r.opts.Resources)
	return rc.Memory != nil && *rc.Memory > 0
}

// observe brings the record up to date with systemd: it adopts container units newer than the
// record (a crash between StartService and saving, or a lost state dir), records the start time
// of running instances and the final state of ended ones, then stops ended units (which kills
// what their main process left behind) and resets failed instances older than the previous
// one. Running units of containers that are not in the spec are stopped, as the kubelet kills
// them; their dead units are left to Forget.
func (r *Runtime) observe(ctx context.Context, pod *v1.Pod, rec *podRecord) error {
	uid := rec.UID
	list, err := r.sd.List(ctx, podPattern(uid))
	if err != nil {
		return fmt.Errorf("pod %s: container units: %w", uid, err)
	}
	byName := map[string]units.UnitStatus{}
	seen := map[string]string{}
	changed := false
	var unknown []string
	for _, u := range list {
		id, ok := parseUnit(u.Name)
		if !ok || id.UID != uid || u.LoadState == "not-found" {
			continue
		}
		byName[u.Name] = u
		seen[u.Name] = u.ActiveState + "/" + u.SubState
		if c, _ := lifecycle.ContainerByName(pod, id.Container); c == nil {
			// The kubelet kills containers that are not in the pod's spec.
			if u.ActiveState == "active" || u.ActiveState == "activating" {
				unknown = append(unknown, u.Name)
			}
			continue
		}
		cr := rec.container(id.Container)
		if cr.Current == nil || id.N > cr.Current.N {
			if cr.Current != nil && cr.Current.Done {
				cr.Previous = cr.Current
			}
			cr.Current = &instance{N: id.N, Unit: u.Name, Created: true}
			changed = true
			r.log.Info("container unit adopted", "pod_uid", uid, "container", id.Container, "unit", u.Name, "state", seen[u.Name])
		}
	}

	var stop []string
	var reset []string
	now := r.now()
	for name, cr := range rec.Containers {
		cur := cr.Current
		if cur == nil {
			continue
		}
		for _, u := range byName {
			if id, _ := parseUnit(u.Name); id.Container == name && id.N < cur.N-1 && u.ActiveState == "failed" {
				reset = append(reset, u.Name)
			}
		}
		if cur.Done {
			continue
		}
		u, ok := byName[cur.Unit]
		if !ok {
			if cur.Created {
				cur.Done, cur.FinishedAt, cur.ExitCode = true, now, 137
				cur.Reason, cur.Message = lifecycle.ReasonUnknown, "the container's unit was gone before its exit status could be read"
				if cur.StartedAt.IsZero() {
					cur.StartedAt = now
				}
				changed = true
				r.log.Warn("container unit vanished", "pod_uid", uid, "container", name, "unit", cur.Unit)
			}
			continue
		}
		if !cur.Created {
			cur.Created, changed = true, true
		}
		final := false
		switch u.ActiveState {
		case "active", "reloading", "deactivating":
			final = u.SubState == "exited"
		case "failed", "inactive":
			final = true
		}
		if !final && (u.ActiveState == "activating" || !cur.StartedAt.IsZero()) {
			continue
		}
		info, err := r.sd.Properties(ctx, cur.Unit)
		if errors.Is(err, units.ErrNoSuchUnit) {
			continue // gone meanwhile: the next observe records it
		}
		if err != nil {
			return fmt.Errorf("pod %s: container %s: %w", uid, name, err)
		}
		if cur.InvocationID == "" {
			cur.InvocationID = info.InvocationID
		}
		if !final {
			cur.StartedAt = info.ExecMainStartTimestamp
			if cur.StartedAt.IsZero() {
				cur.StartedAt = now
			}
			changed = true
			continue
		}
		c, _ := lifecycle.ContainerByName(pod, name)
		finish(cur, info, r.sd.Mode(), r.memoryLimited(pod, c), now)
		changed = true
		r.log.Info("container ended", "pod_uid", uid, "container", name, "unit", cur.Unit,
			"exit_code", cur.ExitCode, "signal", cur.Signal, "reason", cur.Reason, "result", info.Result)
		if u.ActiveState != "failed" && u.ActiveState != "inactive" {
			stop = append(stop, cur.Unit)
		}
	}
	// Ended units whose end was recorded before (slicelet stopped between recording and
	// stopping) are stopped too.
	live := map[string]bool{}
	for _, cr := range rec.Containers {
		if cur := cr.Current; cur != nil && !cur.Done {
			live[cur.Unit] = true
		}
	}
	for name, u := range byName {
		if u.ActiveState == "active" && u.SubState == "exited" && !live[name] && !stdslices.Contains(stop, name) {
			stop = append(stop, name)
		}
	}
	if changed {
		if err := r.saveRecord(rec); err != nil {
			return err
		}
	}
	var errs []error
	for _, unit := range stop {
		// What the main process left behind dies with it, as in a container's PID namespace.
		if err := r.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			r.log.Debug("killing leftovers of an ended container failed", "unit", unit, "error", err)
		}
		if err := r.sd.Stop(ctx, unit); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
		delete(seen, unit)
	}
	for _, unit := range unknown {
		r.log.Info("stopping a container unit that is not in the pod's spec", "pod_uid", uid, "unit", unit)
		if err := r.sd.Stop(ctx, unit); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
		delete(seen, unit)
	}
	for _, unit := range reset {
		if err := r.sd.ResetFailed(ctx, unit); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
		delete(seen, unit)
	}
	r.mu.Lock()
	if e := r.pods[uid]; e != nil {
		e.seen = seen
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// siginfo si_code values of ExecMainCode.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// finish records the final state of an instance from its unit's properties.
//
// OOMKilled: systemd reports Result=oom-kill from the cgroup v2 memory.events counter. cgroup
// v1 has no such counter that outlives the unit (systemd 252 only watches memory.events), so on
// v1 a main process killed by SIGKILL (Result=signal: not systemd's stop timeout) that slicelet
// did not stop, in a container or pod with a memory limit, is taken for an OOM kill; the
// Message says it was inferred. A `kill -9` from outside looks the same there.
func finish(cur *instance, info units.UnitInfo, mode units.Mode, memLimited bool, now time.Time) {
	cur.Done = true
	if !info.ExecMainStartTimestamp.IsZero() {
		cur.StartedAt = info.ExecMainStartTimestamp
	}
	cur.FinishedAt = info.ExecMainExitTimestamp
	if cur.FinishedAt.IsZero() {
		cur.FinishedAt = now
	}
	if cur.StartedAt.IsZero() {
		cur.StartedAt = cur.FinishedAt
	}
	cur.Signal, cur.Message = 0, ""
	switch info.ExecMainCode {
	case cldExited:
		cur.ExitCode = info.ExecMainStatus
	case cldKilled, cldDumped:
		cur.Signal = info.ExecMainStatus
		cur.ExitCode = 128 + info.ExecMainStatus
	default:
		// The main process never ran (or systemd lost it): the start failed.
		cur.ExitCode, cur.Reason = 128, lifecycle.ReasonStartError
		cur.Message = fmt.Sprintf("systemd result %q before the command ran", info.Result)
		return
	}
	switch {
	case info.Result == "oom-kill":
		cur.Reason = lifecycle.ReasonOOMKilled
	case !mode.V2() && info.Result == "signal" && cur.Signal == int32(syscall.SIGKILL) && !cur.Stopping && memLimited:
		cur.Reason = lifecycle.ReasonOOMKilled
		cur.Message = "killed by SIGKILL under a memory limit; cgroup v1 gives systemd no OOM record, so this is inferred"
	case cur.ExitCode == 0:
		cur.Reason = lifecycle.ReasonCompleted
	default:
		cur.Reason = lifecycle.ReasonError
		if info.ExecMainCode == cldExited {
			cur.Message = systemdExitMessage(info.ExecMainStatus)
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
		214: "214/SETSCHEDULER: systemd could not set the scheduling policy",
		216: "216/GROUP: systemd could not set the group (runAsGroup)",
		217: "217/USER: systemd could not set the user (runAsUser)",
		226: "226/NAMESPACE: systemd could not set up the mount namespace (volumes)",
	}[code]
	return msg
}

// stopContainer stops the running instance of c gracefully within grace: stop signal to every
// process of the unit, SIGKILL after grace, then the final state is recorded and the unit
// stopped. The unit's own Stop (KillSignal=, TimeoutStopSec=) is not used for the signal
// because a unit stopped by systemd after a clean SIGTERM is garbage-collected at once, with
// its exit status; signalling it leaves it "exited" (RemainAfterExit) until read.
func (r *Runtime) stopContainer(ctx context.Context, pod *v1.Pod, rec *podRecord, c *v1.Container, grace time.Duration) error {
	var cur *instance
	created := false
	rec.locked(func() {
		if cr := rec.Containers[c.Name]; cr != nil && cr.Current != nil && !cr.Current.Done {
			cur, created = cr.Current, cr.Current.Created
			cur.Stopping = true
			if !created {
				// Recorded but never started: nothing runs. Mark it so nothing starts it.
				now := r.now()
				cur.Done, cur.FinishedAt, cur.StartedAt, cur.ExitCode, cur.Reason = true, now, now, 0, lifecycle.ReasonCompleted
				cur.Message = "stopped before it started"
			}
		}
	})
	if cur == nil {
		return nil
	}
	if err := r.saveRecord(rec); err != nil || !created {
		return err
	}
	sig := stopSignal(c)
	r.log.Info("stopping container", "pod_uid", rec.UID, "container", c.Name, "unit", cur.Unit, "signal", sig.String(), "grace", grace)
	if err := r.sd.Kill(ctx, cur.Unit, sig, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	ended, err := r.waitEnded(ctx, cur.Unit, grace)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	if !ended {
		r.log.Info("container outlived its grace period, killing it", "pod_uid", rec.UID, "container", c.Name, "unit", cur.Unit, "grace", grace)
		if err := r.sd.Kill(ctx, cur.Unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
		if _, err := r.waitEnded(ctx, cur.Unit, r.opts.KillWait); err != nil {
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
	}
	info, err := r.sd.Properties(ctx, cur.Unit)
	if err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	rec.locked(func() {
		if err != nil {
			now := r.now()
			cur.Done, cur.FinishedAt, cur.ExitCode, cur.Signal = true, now, 128+int32(sig), int32(sig)
			cur.Reason, cur.Message = lifecycle.ReasonError, "stopped; the unit was gone before its exit status could be read"
			return
		}
		if cur.InvocationID == "" {
			cur.InvocationID = info.InvocationID
		}
		finish(cur, info, r.sd.Mode(), false, r.now())
	})
	if err := r.saveRecord(rec); err != nil {
		return err
	}
	if err := r.sd.Kill(ctx, cur.Unit, syscall.SIGKILL, units.KillAll); err != nil && !errors.Is(err, units.ErrNoProcess) && !errors.Is(err, units.ErrNoSuchUnit) {
		r.log.Debug("killing leftovers of a stopped container failed", "unit", cur.Unit, "error", err)
	}
	if err := r.sd.Stop(ctx, cur.Unit); err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	r.log.Info("container stopped", "pod_uid", rec.UID, "container", c.Name, "unit", cur.Unit, "exit_code", cur.ExitCode, "signal", cur.Signal)
	return nil
}

// waitEnded polls the unit until its main process has ended (exited, failed, inactive or
// gone) or d passes; it reports whether it ended.
func (r *Runtime) waitEnded(ctx context.Context, unit string, d time.Duration) (bool, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for {
		list, err := r.sd.List(ctx, unit)
		if err != nil {
			return false, err
		}
		ended := true
		for _, u := range list {
			if u.Name != unit || u.LoadState == "not-found" {
				continue
			}
			switch u.ActiveState {
			case "failed", "inactive":
			default:
				ended = u.SubState == "exited"
			}
		}
		if ended {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}

// KillPod stops every container of the pod within grace (see pods.Runtime): the regular and
// init containers concurrently, then the sidecars, each with its stop signal, SIGKILL when
// grace has passed, and waits until their units are gone. It returns the final status.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error) {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return v1.PodStatus{}, err
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := r.record(e, uid)
	if err != nil {
		return v1.PodStatus{}, err
	}
	if err := r.observe(ctx, pod, rec); err != nil {
		return buildStatus(pod, rec, decide(pod, rec, r.now(), r.backoff, true)), err
	}
	deadline := r.now().Add(grace)
	var first, sidecars []*v1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; lifecycle.IsSidecar(c) {
			sidecars = append(sidecars, c)
		} else {
			first = append(first, c)
		}
	}
	for i := range pod.Spec.Containers {
		first = append(first, &pod.Spec.Containers[i])
	}
	var errs []error
	for _, group := range [][]*v1.Container{first, sidecars} {
		left := max(deadline.Sub(r.now()), 0)
		gerrs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, c := range group {
			wg.Go(func() { gerrs[i] = r.stopContainer(ctx, pod, rec, c, left) })
		}
		wg.Wait()
		errs = append(errs, gerrs...)
	}
	if err := r.observe(ctx, pod, rec); err != nil {
		errs = append(errs, err)
	}
	r.mu.Lock()
	e.nextSync = time.Time{}
	r.mu.Unlock()
	return buildStatus(pod, rec, decide(pod, rec, r.now(), r.backoff, true)), errors.Join(errs...)
}

// Forget drops everything about a pod: its units (stopped, failed ones reset), its record and
// its directory with the emptyDir volumes. hostPath volumes are never touched.
func (r *Runtime) Forget(ctx context.Context, uid string) error {
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	e := r.entry(uid)
	e.mu.Lock()
	defer e.mu.Unlock()
	list, err := r.sd.List(ctx, podPattern(uid))
	if err != nil {
		return fmt.Errorf("pod %s: container units: %w", uid, err)
	}
	var errs []error
	for _, u := range list {
		if id, ok := parseUnit(u.Name); !ok || id.UID != uid {
			continue
		}
		if err := r.sd.Stop(ctx, u.Name); err != nil {
			errs = append(errs, err)
		}
		if err := r.sd.ResetFailed(ctx, u.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := os.RemoveAll(r.podDir(uid)); err != nil {
		return fmt.Errorf("pod %s: state: %w", uid, err)
	}
	e.rec = nil
	r.mu.Lock()
	delete(r.pods, uid)
	r.mu.Unlock()
	r.log.Info("pod forgotten", "pod_uid", uid)
	return nil
}

// PodUIDs lists, sorted, the pods that have container units or a record in the state dir.
func (r *Runtime) PodUIDs(ctx context.Context) ([]string, error) {
	set := map[string]bool{}
	list, err := r.sd.List(ctx, allUnitsPattern)
	if err != nil {
		return nil, fmt.Errorf("container units: %w", err)
	}
	for _, u := range list {
		if id, ok := parseUnit(u.Name); ok && u.LoadState != "not-found" {
			set[id.UID] = true
		}
	}
	recorded, err := r.stateDirUIDs()
	if err != nil {
		return nil, err
	}
	for uid := range recorded {
		set[uid] = true
	}
	out := make([]string, 0, len(set))
	for uid := range set {
		out = append(out, uid)
	}
	sort.Strings(out)
	return out, nil
}

// stateDirUIDs returns the UIDs of the pods that have a directory in the state dir.
func (r *Runtime) stateDirUIDs() (map[string]bool, error) {
	set := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(r.opts.StateDir, "pods"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && slices.ValidateUID(e.Name()) == nil {
			set[e.Name()] = true
		}
	}
	return set, nil
}
