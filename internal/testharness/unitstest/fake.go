// Package unitstest provides Fake, an in-memory units.Systemd for unit tests of packages that
// drive systemd through units. It follows the Manager's documented contracts (unit-exists
// handling, idempotent Stop and ResetFailed, ErrNoSuchUnit) closely enough that code tested
// against it behaves the same against PID 1, records every call, and lets a test inject errors
// and unit state changes.
package unitstest

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/slicelet/slicelet/units"
)

// Call is one recorded method call on a Fake.
type Call struct {
	Method string           // "StartSlice", "Stop", ...
	Unit   string           // unit name (timer name for StartTimer, joined patterns for List)
	Props  []units.Property // properties passed, if any (timer props for StartTimer)
	Aux    []units.Property // StartTimer's service props
	PIDs   []int            // StartScope's pids
	Signal syscall.Signal   // Kill's signal
	Who    units.Who        // Kill's selection
}

// Unit is the simulated state of one unit in a Fake.
type Unit struct {
	Status units.UnitStatus
	// Props is the unit's current properties by name (last value wins).
	Props map[string]any
	// PIDs are the processes of a scope.
	PIDs []int
	// Signals records the signals Kill delivered.
	Signals []syscall.Signal
}

type injected struct {
	method, unit string
	err          error
}

// Fake is an in-memory units.Systemd. The zero value is not usable; use New. It is safe for
// concurrent use.
type Fake struct {
	mu     sync.Mutex
	mode   units.Mode
	units  map[string]*Unit
	calls  []Call
	inject []injected
}

var _ units.Systemd = (*Fake)(nil)

// New returns an empty Fake reporting mode.
func New(mode units.Mode) *Fake {
	return &Fake{mode: mode, units: map[string]*Unit{}}
}

// Mode returns the mode given to New.
func (f *Fake) Mode() units.Mode { return f.mode }

// InjectError makes the next call of method ("StartSlice", "Stop", ...; "" for any) on unit
// ("" for any) fail with err, without other effect. Injections are consumed in order.
func (f *Fake) InjectError(method, unit string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject = append(f.inject, injected{method: method, unit: unit, err: err})
}

// Calls returns a copy of the calls made so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// CallsTo returns the recorded calls of method.
func (f *Fake) CallsTo(method string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Unit returns a copy of the state of unit name and whether it exists.
func (f *Fake) Unit(name string) (Unit, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.units[name]
	if !ok {
		return Unit{}, false
	}
	c := *u
	c.Props = make(map[string]any, len(u.Props))
	for k, v := range u.Props {
		c.Props[k] = v
	}
	c.PIDs = slices.Clone(u.PIDs)
	c.Signals = slices.Clone(u.Signals)
	return c, true
}

// Names returns the names of all existing units, sorted.
func (f *Fake) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.units))
	for n := range f.units {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SetState sets a unit's ActiveState and SubState (e.g. "failed", "failed" to simulate a crash),
// creating a loaded unit if it does not exist.
func (f *Fake) SetState(name, active, sub string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.units[name]
	if u == nil {
		u = &Unit{Status: units.UnitStatus{Name: name, Description: name, LoadState: "loaded"}, Props: map[string]any{}}
		f.units[name] = u
	}
	u.Status.ActiveState, u.Status.SubState = active, sub
}

// record appends c and returns the injected error for it, if any. Call with f.mu held.
func (f *Fake) record(c Call) error {
	f.calls = append(f.calls, c)
	for i, in := range f.inject {
		if (in.method == "" || in.method == c.Method) && (in.unit == "" || in.unit == c.Unit) {
			f.inject = slices.Delete(f.inject, i, i+1)
			return in.err
		}
	}
	return nil
}

func subState(name string) string {
	switch {
	case strings.HasSuffix(name, units.SuffixService), strings.HasSuffix(name, units.SuffixScope):
		return "running"
	case strings.HasSuffix(name, units.SuffixTimer):
		return "waiting"
	}
	return "active"
}

// start implements the unit-exists contract of units.Manager. Call with f.mu held.
func (f *Fake) start(name string, props []units.Property, pids []int, aux map[string][]units.Property) error {
	if err := units.ValidateName(name); err != nil {
		return err
	}
	desc := name
	for _, p := range props {
		if p.Name == "Description" {
			desc, _ = p.Value.(string)
		}
	}
	if u, ok := f.units[name]; ok {
		switch u.Status.ActiveState {
		case "active", "reloading":
			if u.Status.Description != desc {
				return fmt.Errorf("unit %q: start: exists with description %q, not %q: %w", name, u.Status.Description, desc, units.ErrUnitExists)
			}
			// Adopt: like SetProperties with the live props; PIDs are attached.
			for _, p := range props {
				u.Props[p.Name] = p.Value
			}
			u.PIDs = append(u.PIDs, pids...)
			return nil
		case "failed", "inactive":
			delete(f.units, name) // reset-failed, then created anew
		default:
			return fmt.Errorf("unit %q: start: exists and is %s: %w", name, u.Status.ActiveState, units.ErrUnitExists)
		}
	}
	for a := range aux {
		if u, ok := f.units[a]; ok {
			if u.Status.ActiveState != "failed" && u.Status.ActiveState != "inactive" {
				return fmt.Errorf("unit %q: start: %q exists and is %s: %w", name, a, u.Status.ActiveState, units.ErrUnitExists)
			}
			delete(f.units, a)
		}
	}
	u := &Unit{
		Status: units.UnitStatus{Name: name, Description: desc, LoadState: "loaded", ActiveState: "active", SubState: subState(name)},
		Props:  map[string]any{},
		PIDs:   slices.Clone(pids),
	}
	for _, p := range props {
		u.Props[p.Name] = p.Value
	}
	f.units[name] = u
	for a, ap := range aux {
		au := &Unit{
			Status: units.UnitStatus{Name: a, Description: a, LoadState: "loaded", ActiveState: "inactive", SubState: "dead"},
			Props:  map[string]any{},
		}
		for _, p := range ap {
			au.Props[p.Name] = p.Value
			if p.Name == "Description" {
				au.Status.Description, _ = p.Value.(string)
			}
		}
		f.units[a] = au
	}
	return nil
}

// StartSlice simulates units.Manager.StartSlice.
func (f *Fake) StartSlice(_ context.Context, name string, props []units.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "StartSlice", Unit: name, Props: props}); err != nil {
		return err
	}
	if !strings.HasSuffix(name, units.SuffixSlice) {
		return fmt.Errorf("unit name %q: not a slice unit: %w", name, units.ErrInvalidName)
	}
	return f.start(name, props, nil, nil)
}

// StartService simulates units.Manager.StartService; the service is "running" until stopped or
// changed with SetState.
func (f *Fake) StartService(_ context.Context, name string, props []units.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "StartService", Unit: name, Props: props}); err != nil {
		return err
	}
	if !strings.HasSuffix(name, units.SuffixService) {
		return fmt.Errorf("unit name %q: not a service unit: %w", name, units.ErrInvalidName)
	}
	return f.start(name, props, nil, nil)
}

// StartScope simulates units.Manager.StartScope.
func (f *Fake) StartScope(_ context.Context, name string, pids []int, props []units.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "StartScope", Unit: name, Props: props, PIDs: slices.Clone(pids)}); err != nil {
		return err
	}
	if !strings.HasSuffix(name, units.SuffixScope) {
		return fmt.Errorf("unit name %q: not a scope unit: %w", name, units.ErrInvalidName)
	}
	if len(pids) == 0 {
		return fmt.Errorf("unit %q: start: a scope needs at least one pid: %w", name, units.ErrInvalidProperty)
	}
	return f.start(name, props, pids, nil)
}

// StartTimer simulates units.Manager.StartTimer: the timer is "active"/"waiting", the service
// exists "inactive" (it has not fired). Tests simulate a run of the service with SetState.
func (f *Fake) StartTimer(_ context.Context, timerName string, timerProps []units.Property, serviceName string, serviceProps []units.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "StartTimer", Unit: timerName, Props: timerProps, Aux: serviceProps}); err != nil {
		return err
	}
	if !strings.HasSuffix(timerName, units.SuffixTimer) {
		return fmt.Errorf("unit name %q: not a timer unit: %w", timerName, units.ErrInvalidName)
	}
	want := strings.TrimSuffix(timerName, units.SuffixTimer) + units.SuffixService
	if serviceName == "" {
		serviceName = want
	}
	if serviceName != want {
		return fmt.Errorf("unit %q: start: service %q: a transient timer can only trigger %q: %w", timerName, serviceName, want, units.ErrInvalidName)
	}
	return f.start(timerName, timerProps, nil, map[string][]units.Property{serviceName: serviceProps})
}

// SetProperties simulates units.Manager.SetProperties: merges props into the unit.
func (f *Fake) SetProperties(_ context.Context, name string, props []units.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "SetProperties", Unit: name, Props: props}); err != nil {
		return err
	}
	u, ok := f.units[name]
	if !ok {
		return fmt.Errorf("unit %q: set-properties: %w", name, units.ErrNoSuchUnit)
	}
	for _, p := range props {
		u.Props[p.Name] = p.Value
		if p.Name == "Description" {
			u.Status.Description, _ = p.Value.(string)
		}
	}
	return nil
}

// inSlice reports whether unit u (named name) is inside slice, directly or nested.
func (f *Fake) inSlice(name string, u *Unit, slice string) bool {
	for depth := 0; depth < 64; depth++ {
		var parent string
		if s, ok := u.Props["Slice"].(string); ok {
			parent = s
		} else if strings.HasSuffix(name, units.SuffixSlice) {
			parent, _ = units.SliceParent(name)
		}
		if parent == "" {
			return false
		}
		if parent == slice {
			return true
		}
		pu, ok := f.units[parent]
		if !ok {
			// Implicit parent slice: walk the name hierarchy.
			p2, _ := units.SliceParent(parent)
			for p2 != "" {
				if p2 == slice {
					return true
				}
				p2, _ = units.SliceParent(p2)
			}
			return false
		}
		name, u = parent, pu
	}
	return false
}

// Stop simulates units.Manager.Stop: removes the unit and, for a slice, every unit inside it.
// A missing unit is success.
func (f *Fake) Stop(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "Stop", Unit: name}); err != nil {
		return err
	}
	if err := units.ValidateName(name); err != nil {
		return err
	}
	if strings.HasSuffix(name, units.SuffixSlice) {
		for n, u := range f.units {
			if f.inSlice(n, u, name) {
				delete(f.units, n)
			}
		}
	}
	delete(f.units, name)
	return nil
}

// Kill simulates units.Manager.Kill: records the signal on the unit.
func (f *Fake) Kill(_ context.Context, name string, signal syscall.Signal, whom units.Who) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "Kill", Unit: name, Signal: signal, Who: whom}); err != nil {
		return err
	}
	u, ok := f.units[name]
	if !ok {
		return fmt.Errorf("unit %q: kill: %w", name, units.ErrNoSuchUnit)
	}
	u.Signals = append(u.Signals, signal)
	return nil
}

// ResetFailed simulates units.Manager.ResetFailed: a failed unit is garbage-collected. A missing
// unit is success.
func (f *Fake) ResetFailed(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "ResetFailed", Unit: name}); err != nil {
		return err
	}
	if u, ok := f.units[name]; ok && u.Status.ActiveState == "failed" {
		delete(f.units, name)
	}
	return nil
}

// List simulates units.Manager.List with path.Match globs (backslashes literal, as in systemd),
// sorted by name.
func (f *Fake) List(_ context.Context, patterns ...string) ([]units.UnitStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "List", Unit: strings.Join(patterns, ",")}); err != nil {
		return nil, err
	}
	var out []units.UnitStatus
	for n, u := range f.units {
		match := len(patterns) == 0
		for _, p := range patterns {
			// systemd matches with FNM_NOESCAPE: a backslash is literal.
			if ok, _ := path.Match(strings.ReplaceAll(p, `\`, `\\`), n); ok {
				match = true
			}
		}
		if match {
			out = append(out, u.Status)
		}
	}
	slices.SortFunc(out, func(a, b units.UnitStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Properties simulates units.Manager.Properties: states, description and a ControlGroup laid
// out like systemd's.
func (f *Fake) Properties(_ context.Context, name string) (units.UnitInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "Properties", Unit: name}); err != nil {
		return units.UnitInfo{}, err
	}
	u, ok := f.units[name]
	if !ok {
		return units.UnitInfo{}, fmt.Errorf("unit %q: get-properties: %w", name, units.ErrNoSuchUnit)
	}
	info := units.UnitInfo{
		Name: name, Description: u.Status.Description, LoadState: u.Status.LoadState,
		ActiveState: u.Status.ActiveState, SubState: u.Status.SubState,
	}
	if u.Status.ActiveState == "active" && !strings.HasSuffix(name, units.SuffixTimer) {
		info.ControlGroup = controlGroup(name, u)
	}
	return info, nil
}

func controlGroup(name string, u *Unit) string {
	if strings.HasSuffix(name, units.SuffixSlice) {
		p, _ := units.ExpandSlice(name)
		return p
	}
	slice, _ := u.Props["Slice"].(string)
	if slice == "" {
		slice = "system.slice"
	}
	p, _ := units.ExpandSlice(slice)
	return path.Join(p, name)
}

// Property simulates units.Manager.Property: ActiveState, SubState, Description, LoadState and
// Id come from the state, anything else from the stored properties (iface is ignored). A
// property never set is an error.
func (f *Fake) Property(_ context.Context, name, iface, prop string) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(Call{Method: "Property", Unit: name}); err != nil {
		return nil, err
	}
	u, ok := f.units[name]
	if !ok {
		return nil, fmt.Errorf("unit %q: get-properties %s: %w", name, prop, units.ErrNoSuchUnit)
	}
	switch prop {
	case "Id":
		return name, nil
	case "ActiveState":
		return u.Status.ActiveState, nil
	case "SubState":
		return u.Status.SubState, nil
	case "LoadState":
		return u.Status.LoadState, nil
	case "Description":
		return u.Status.Description, nil
	case "ControlGroup":
		return controlGroup(name, u), nil
	}
	v, ok := u.Props[prop]
	if !ok {
		return nil, fmt.Errorf("unit %q: property %s.%s: not set in fake", name, iface, prop)
	}
	return v, nil
}
