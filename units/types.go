// Package units is slicelet's systemd adapter: the only package that talks to systemd over
// D-Bus (go-systemd, godbus). Everything it exports speaks slicelet's words — slices, services,
// scopes, timers, properties — so other packages never see a D-Bus type and can be tested with a
// fake.
package units

import "time"

// Property is one systemd unit property, named as on D-Bus (e.g. "MemoryMax", "CPUWeight",
// "Description"), with a plain Go value. Values are bool, string, int32, uint32, int64, uint64,
// []string, []uint32, []byte, time.Duration (sent as uint64 microseconds, for every *USec and
// timer property), or one of the structured types this package defines (Exec, BindPath,
// TimerCalendar, TimerMonotonic, or slices of them; SyscallFilter, Profile); the adapter converts them to D-Bus
// variants. The D-Bus type must be the one systemd expects for the name (e.g. uint64 for
// MemoryMax, CPUShares and TasksMax): plain int is rejected rather than guessed. The resource property names
// depend on the host's cgroup layout (Mode); slices.SliceProperties chooses them.
type Property struct {
	Name  string
	Value any
}

// Mode is the cgroup layout of the host, which decides which property names systemd applies.
type Mode int

const (
	// ModeUnknown means the layout could not be determined.
	ModeUnknown Mode = iota
	// ModeLegacy is cgroup v1 only (no unified hierarchy at all).
	ModeLegacy
	// ModeHybrid is cgroup v1 controllers plus a controller-less cgroup2 at
	// /sys/fs/cgroup/unified. Resource properties use the v1 names (CPUShares, MemoryLimit).
	ModeHybrid
	// ModeUnified is pure cgroup v2. Resource properties use the v2 names (CPUWeight, MemoryMax,
	// MemoryMin, MemoryLow).
	ModeUnified
)

// String returns the mode as operators write it: "v1", "hybrid", "v2" or "unknown".
func (m Mode) String() string {
	switch m {
	case ModeLegacy:
		return "v1"
	case ModeHybrid:
		return "hybrid"
	case ModeUnified:
		return "v2"
	default:
		return "unknown"
	}
}

// V2 reports whether resource properties must use the cgroup v2 names.
func (m Mode) V2() bool { return m == ModeUnified }

// UnitStatus is one line of List: a unit systemd has loaded, with its states as systemctl
// shows them.
type UnitStatus struct {
	Name        string // unit name, e.g. "kubepods-burstable.slice"
	Description string // Description=, slicelet's identity marker for units it created
	LoadState   string // "loaded", "not-found", "masked", ...
	ActiveState string // "active", "inactive", "failed", "activating", "deactivating", ...
	SubState    string // type-specific, e.g. "running", "exited", "dead", "waiting"
}

// UnitInfo is the typed view of the properties slicelet reads from a unit. Fields that do not
// apply to the unit's type are zero (e.g. ExecMainStatus for a slice).
type UnitInfo struct {
	Name         string
	Description  string
	LoadState    string
	ActiveState  string
	SubState     string
	InvocationID string // 32 lower-case hex digits, "" if the unit never ran
	// ControlGroup is the unit's cgroup path below the hierarchy root, e.g.
	// "/kubepods.slice/kubepods-burstable.slice"; "" when the unit has no cgroup (yet).
	ControlGroup string
	// MemoryCurrent is the memory in bytes the cgroup uses; valid only if HasMemoryCurrent
	// (systemd reports "unknown" when memory accounting is off or the unit is inactive).
	MemoryCurrent    uint64
	HasMemoryCurrent bool
	// TasksCurrent is the number of tasks in the cgroup; valid only if HasTasksCurrent.
	TasksCurrent    uint64
	HasTasksCurrent bool
	// Result is the last run's result for services, scopes and timers: "success",
	// "exit-code", "signal", "timeout", "oom-kill", "resources", ...
	Result string
	// MainPID is the service's main process, 0 if none.
	MainPID uint32
	// ExecMainCode is how the main process ended, as siginfo's si_code: 1 exited (ExecMainStatus
	// is the exit status), 2 killed or 3 dumped (ExecMainStatus is the signal); 0 if it has not
	// ended.
	ExecMainCode   int32
	ExecMainStatus int32
	// ExecMainStartTimestamp and ExecMainExitTimestamp are the zero time when they did not happen.
	ExecMainStartTimestamp time.Time
	ExecMainExitTimestamp  time.Time
	// NRestarts counts automatic restarts of a service (Restart=).
	NRestarts uint32
	// LastTrigger is when a timer last fired; the zero time if never.
	LastTrigger time.Time
}

// Who selects the processes Kill signals (systemd's KillUnit "whom").
type Who string

const (
	// KillAll signals every process in the unit's cgroup.
	KillAll Who = "all"
	// KillMain signals the main process of a service only.
	KillMain Who = "main"
	// KillControl signals the control process (ExecStop=, ExecReload=, ...) only.
	KillControl Who = "control"
)

// Exec is one command of ExecStart= (and the other Exec*= properties), D-Bus type (sasb).
type Exec struct {
	// Path is the absolute path of the binary.
	Path string
	// Args is the full argv including argv[0]; when empty, []string{Path} is used.
	Args []string
	// IgnoreFailure is the "-" prefix of ExecStart=: a non-zero exit is not a failure.
	// (go-systemd's PropExecStart names this flag "uncleanIsFailure", but systemd reads it as
	// ignore-failure, so PropExecStart(cmd, true) silently ignores failures.)
	IgnoreFailure bool
}

// BindPath is one entry of BindPaths= or BindReadOnlyPaths=, D-Bus type (ssbt).
type BindPath struct {
	Source      string
	Destination string // empty means the same as Source
	// IgnoreMissing is the "-" prefix: a missing Source is not an error.
	IgnoreMissing bool
	// Recursive binds submounts too (the "rbind" option; default in unit files).
	Recursive bool
}

// SyscallFilter is SystemCallFilter=, D-Bus type (bas): with Allow the Names are the only
// system calls allowed (an allow list), without it they are denied. Names may be system call
// names or systemd's @groups.
type SyscallFilter struct {
	Allow bool
	Names []string
}

// Profile is a named profile property with an "ignore if missing" flag, D-Bus type (bs):
// AppArmorProfile= and SmackProcessLabel=. IgnoreMissing is the "-" prefix.
type Profile struct {
	IgnoreMissing bool
	Name          string
}

// TimerCalendar is one entry of the transient timer property TimersCalendar, D-Bus type (ss):
// Base is "OnCalendar" and Spec a calendar expression such as "*:0/5".
type TimerCalendar struct {
	Base string
	Spec string
}

// TimerMonotonic is one entry of the transient timer property TimersMonotonic, D-Bus type (st):
// Base is "OnActiveSec", "OnBootSec", "OnStartupSec", "OnUnitActiveSec" or "OnUnitInactiveSec"
// and Elapse is sent in microseconds. systemd 252 still accepts the single properties
// OnActiveSec=… (uint64 µs) but logs them as obsolete; prefer TimersMonotonic.
type TimerMonotonic struct {
	Base   string
	Elapse time.Duration
}
