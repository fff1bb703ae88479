// Package units is slicelet's systemd adapter: the only package that talks to systemd over
// D-Bus (go-systemd, godbus). Everything it exports speaks slicelet's words — slices, services,
// scopes, timers, properties — so other packages never see a D-Bus type and can be tested with a
// fake.
package units

// Property is one systemd unit property, named as on D-Bus (e.g. "MemoryMax", "CPUWeight",
// "Description"), with a plain Go value. Values are bool, string, int32, uint32, int64, uint64,
// []string, or one of the structured types this package defines; the adapter converts them to
// D-Bus variants.
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
