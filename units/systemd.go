package units

import (
	"context"
	"syscall"
)

// Systemd is what the rest of slicelet needs from systemd. *Manager implements it against PID 1;
// unitstest.Fake implements it in memory for unit tests. Consumers should declare the smaller
// subset they use; this interface exists so that one fake serves them all. The contracts are
// documented on the Manager methods of the same name.
type Systemd interface {
	// Mode is the cgroup layout, which decides the resource property names (v1: CPUShares,
	// MemoryLimit; v2: CPUWeight, MemoryMax; slices.SliceProperties picks them).
	Mode() Mode
	// StartSlice creates and starts a transient slice and waits for the job.
	StartSlice(ctx context.Context, name string, props []Property) error
	// StartService creates and starts a transient service and waits for the job.
	StartService(ctx context.Context, name string, props []Property) error
	// StartScope creates a transient scope adopting pids and waits for the job.
	StartScope(ctx context.Context, name string, pids []int, props []Property) error
	// StartTimer creates a transient timer and its service in one call and waits for the job.
	StartTimer(ctx context.Context, timerName string, timerProps []Property, serviceName string, serviceProps []Property) error
	// SetProperties changes properties of a live unit (runtime only).
	SetProperties(ctx context.Context, name string, props []Property) error
	// Stop stops a unit and waits for the job; a unit that does not exist is success.
	Stop(ctx context.Context, name string) error
	// Kill signals the unit's processes selected by whom.
	Kill(ctx context.Context, name string, signal syscall.Signal, whom Who) error
	// ResetFailed clears a unit's failed state; a unit that does not exist is success.
	ResetFailed(ctx context.Context, name string) error
	// List returns the loaded units matching any of the glob patterns (all when none).
	List(ctx context.Context, patterns ...string) ([]UnitStatus, error)
	// Properties reads the typed view of a unit.
	Properties(ctx context.Context, name string) (UnitInfo, error)
	// Property reads one property of a unit as a plain Go value.
	Property(ctx context.Context, name, iface, prop string) (any, error)
}
