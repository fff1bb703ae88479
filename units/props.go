package units

import (
	"fmt"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// D-Bus wire shapes of the structured property types. godbus encodes a Go struct as a D-Bus
// struct field by field, so these fix the signatures (sasb), (ssbt), (ss), (st), (bas) and
// (bs).
type (
	execWire struct {
		Path          string
		Args          []string
		IgnoreFailure bool
	}
	bindWire struct {
		Source        string
		Destination   string
		IgnoreMissing bool
		Flags         uint64
	}
	calendarWire struct {
		Base string
		Spec string
	}
	monotonicWire struct {
		Base   string
		Elapse uint64
	}
	filterWire struct {
		Allow bool
		Names []string
	}
	profileWire struct {
		IgnoreMissing bool
		Name          string
	}
)

// msRec is MS_REC from <sys/mount.h>, the only mount flag systemd accepts in BindPaths' options.
const msRec = 16384

// toVariant converts one Property to the go-systemd form. The supported Go types are listed on
// Property; time.Duration is sent as uint64 microseconds (the D-Bus type of every *USec and
// timer property). Anything else, a negative duration, or an Exec without a path is an error
// naming the property and wrapping ErrInvalidProperty.
func toVariant(p Property) (sddbus.Property, error) {
	if p.Name == "" {
		return sddbus.Property{}, fmt.Errorf("property with empty name (value %v): %w", p.Value, ErrInvalidProperty)
	}
	bad := func(format string, a ...any) (sddbus.Property, error) {
		return sddbus.Property{}, fmt.Errorf("property %s: %s: %w", p.Name, fmt.Sprintf(format, a...), ErrInvalidProperty)
	}
	var v any
	switch x := p.Value.(type) {
	case bool, string, int32, uint32, int64, uint64, []string, []uint32, []byte, [][]byte:
		// [][]byte is D-Bus aay, e.g. LogExtraFields=.
		v = x
	case time.Duration:
		if x < 0 {
			return bad("negative duration %s", x)
		}
		v = uint64(x / time.Microsecond)
	case Exec:
		w, err := execToWire(x)
		if err != nil {
			return bad("%v", err)
		}
		v = []execWire{w}
	case []Exec:
		ws := make([]execWire, 0, len(x))
		for _, e := range x {
			w, err := execToWire(e)
			if err != nil {
				return bad("%v", err)
			}
			ws = append(ws, w)
		}
		v = ws
	case BindPath:
		v = []bindWire{bindToWire(x)}
	case []BindPath:
		ws := make([]bindWire, len(x))
		for i, b := range x {
			ws[i] = bindToWire(b)
		}
		v = ws
	case TimerCalendar:
		v = []calendarWire{calendarWire(x)}
	case []TimerCalendar:
		ws := make([]calendarWire, len(x))
		for i, c := range x {
			ws[i] = calendarWire(c)
		}
		v = ws
	case TimerMonotonic:
		if x.Elapse < 0 {
			return bad("negative elapse %s", x.Elapse)
		}
		v = []monotonicWire{{Base: x.Base, Elapse: uint64(x.Elapse / time.Microsecond)}}
	case []TimerMonotonic:
		ws := make([]monotonicWire, len(x))
		for i, m := range x {
			if m.Elapse < 0 {
				return bad("negative elapse %s", m.Elapse)
			}
			ws[i] = monotonicWire{Base: m.Base, Elapse: uint64(m.Elapse / time.Microsecond)}
		}
		v = ws
	case SyscallFilter:
		if len(x.Names) == 0 {
			return bad("empty system call filter")
		}
		v = filterWire(x)
	case Profile:
		if x.Name == "" {
			return bad("empty profile name")
		}
		v = profileWire(x)
	case nil:
		return bad("no value")
	default:
		return bad("unsupported value type %T (use bool, string, int32, uint32, int64, uint64, []string, []uint32, time.Duration, Exec, BindPath, TimerCalendar, TimerMonotonic, SyscallFilter, Profile)", p.Value)
	}
	// Names of units inside property values are as untrusted as unit names themselves.
	if p.Name == "Slice" {
		s, _ := v.(string)
		if err := validateKind(s, SuffixSlice); err != nil {
			return bad("%v", err)
		}
	}
	return sddbus.Property{Name: p.Name, Value: godbus.MakeVariant(v)}, nil
}

func execToWire(e Exec) (execWire, error) {
	if e.Path == "" {
		return execWire{}, fmt.Errorf("exec with empty path (args %q)", e.Args)
	}
	args := e.Args
	if len(args) == 0 {
		args = []string{e.Path}
	}
	return execWire{Path: e.Path, Args: args, IgnoreFailure: e.IgnoreFailure}, nil
}

func bindToWire(b BindPath) bindWire {
	dst := b.Destination
	if dst == "" {
		dst = b.Source
	}
	var flags uint64
	if b.Recursive {
		flags = msRec
	}
	return bindWire{Source: b.Source, Destination: dst, IgnoreMissing: b.IgnoreMissing, Flags: flags}
}

// toVariants converts props in order; the first bad property is the error.
func toVariants(props []Property) ([]sddbus.Property, error) {
	out := make([]sddbus.Property, 0, len(props))
	for _, p := range props {
		v, err := toVariant(p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// plainValue turns a value decoded by godbus into plain Go values: object paths and signatures
// become strings, variants are unwrapped, and slices of those are converted element by element.
func plainValue(v any) any {
	switch x := v.(type) {
	case godbus.Variant:
		return plainValue(x.Value())
	case godbus.ObjectPath:
		return string(x)
	case godbus.Signature:
		return x.String()
	case []godbus.ObjectPath:
		out := make([]string, len(x))
		for i, p := range x {
			out[i] = string(p)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	case [][]any:
		out := make([][]any, len(x))
		for i, e := range x {
			inner := make([]any, len(e))
			for j, f := range e {
				inner[j] = plainValue(f)
			}
			out[i] = inner
		}
		return out
	case map[string]godbus.Variant:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plainValue(e.Value())
		}
		return out
	}
	return v
}

// descriptionOf returns the Description the unit will have: the Description property if given,
// else the unit name (systemd reports the name when Description= is unset).
func descriptionOf(name string, props []Property) string {
	for _, p := range props {
		if p.Name == "Description" {
			if s, ok := p.Value.(string); ok {
				return s
			}
		}
	}
	return name
}

// liveProps are the properties systemd 252 lets SetUnitProperties change on a unit that is
// already loaded: Description/Markers (bus_unit_set_live_property) and the cgroup context
// (bus_cgroup_set_property). Everything else (ExecStart, PIDs, Slice, dependencies, timer
// specs, ...) is accepted only while StartTransientUnit creates the unit, and
// SetUnitProperties would reject the whole call with "Cannot set property X, or unknown
// property".
var liveProps = map[string]bool{
	"Description": true, "Markers": true,
	"CPUAccounting": true, "CPUWeight": true, "StartupCPUWeight": true, "CPUShares": true,
	"StartupCPUShares": true, "CPUQuotaPerSecUSec": true, "CPUQuotaPeriodUSec": true,
	"AllowedCPUs": true, "StartupAllowedCPUs": true, "AllowedMemoryNodes": true,
	"StartupAllowedMemoryNodes": true,
	"IOAccounting":              true, "IOWeight": true, "StartupIOWeight": true, "IODeviceWeight": true,
	"IOReadBandwidthMax": true, "IOWriteBandwidthMax": true, "IOReadIOPSMax": true,
	"IOWriteIOPSMax": true, "IODeviceLatencyTargetUSec": true,
	"BlockIOAccounting": true, "BlockIOWeight": true, "StartupBlockIOWeight": true,
	"BlockIODeviceWeight": true, "BlockIOReadBandwidth": true, "BlockIOWriteBandwidth": true,
	"MemoryAccounting": true, "MemoryMin": true, "MemoryLow": true, "MemoryHigh": true,
	"MemoryMax": true, "MemorySwapMax": true, "MemoryLimit": true, "DefaultMemoryMin": true,
	"DefaultMemoryLow": true, "MemoryMinScale": true, "MemoryLowScale": true,
	"MemoryHighScale": true, "MemoryMaxScale": true, "MemorySwapMaxScale": true,
	"TasksAccounting": true, "TasksMax": true, "TasksMaxScale": true,
	"DevicePolicy": true, "DeviceAllow": true, "IPAccounting": true,
	"DisableControllers": true, "ManagedOOMSwap": true,
	"ManagedOOMMemoryPressure": true, "ManagedOOMMemoryPressureLimit": true,
	"ManagedOOMPreference": true,
}

// splitLive returns the props SetUnitProperties can apply to a live unit, and the names of the
// others.
func splitLive(props []Property) (live []Property, skipped []string) {
	for _, p := range props {
		if liveProps[p.Name] {
			live = append(live, p)
		} else {
			skipped = append(skipped, p.Name)
		}
	}
	return live, skipped
}
