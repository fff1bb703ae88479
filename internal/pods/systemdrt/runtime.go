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
