package units

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Operation names used in errors and logs.
const (
	opStart       = "start"
	opStop        = "stop"
	opSetProps    = "set-properties"
	opKill        = "kill"
	opResetFailed = "reset-failed"
	opList        = "list"
	opGet         = "get-properties"
	opAttach      = "attach-processes"
	opUnitByPID   = "unit-by-pid"
)

// jobMode for StartTransientUnit and StopUnit: "replace" replaces conflicting queued jobs,
// like systemctl does, rather than failing because a stale job is pending.
const jobMode = "replace"

// auxUnit is a unit created together with the main one in the same StartTransientUnit call.
type auxUnit struct {
	name  string
	props []Property
}

// StartSlice creates the transient slice name with props and waits for its start job.
//
// If a unit of that name already exists (org.freedesktop.systemd1.UnitExists):
//   - failed or inactive: it is reset-failed and creation is retried once;
//   - active with the same Description (the Description property in props, or the name when
//     props has none — slicelet's identity marker), or a slice with the Description the
//     kubelet gives its slices (KubeletSliceDescription): it is adopted, which counts as success,
//     and the props SetProperties can change on a live unit (Description and the cgroup
//     resource settings) are applied to it; creation-only props are left as they are;
//   - otherwise (another Description, or activating/deactivating): an error wrapping
//     ErrUnitExists naming the unit.
//
// Errors: an invalid name wraps ErrInvalidName and a property that cannot be converted wraps
// ErrInvalidProperty (both before anything is sent); a job that fails or outlasts
// Options.JobTimeout is a *JobError (ErrJobFailed / ErrTimeout); systemd rejecting a property
// value is an error naming the unit and carrying systemd's message.
func (m *Manager) StartSlice(ctx context.Context, name string, props []Property) error {
	if err := validateKind(name, SuffixSlice); err != nil {
		return err
	}
	return m.startTransient(ctx, name, props, nil, nil)
}

// StartService creates the transient service name with props (ExecStart as Exec, Slice, ...)
// and waits for its start job: for Type=simple (the default) that is when the process was
// forked, not when it is ready. An existing unit is handled as described on StartSlice.
func (m *Manager) StartService(ctx context.Context, name string, props []Property) error {
	if err := validateKind(name, SuffixService); err != nil {
		return err
	}
	return m.startTransient(ctx, name, props, nil, nil)
}

// StartScope creates the transient scope name, moving the running processes pids into it, and
// waits for its start job. An existing unit is handled as described on StartSlice; when an
// identical active scope is adopted, pids must end up in it: pids already inside are fine,
// others are moved with AttachProcessesToUnit if the scope has Delegate=yes, and are an
// ErrUnitExists error otherwise (systemd cannot move processes into a non-delegated unit).
func (m *Manager) StartScope(ctx context.Context, name string, pids []int, props []Property) error {
	if err := validateKind(name, SuffixScope); err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("unit %q: start: a scope needs at least one pid: %w", name, ErrInvalidProperty)
	}
	upids := make([]uint32, len(pids))
	for i, p := range pids {
		if p <= 0 || p > math.MaxUint32 {
			return fmt.Errorf("unit %q: start: pid %d out of range: %w", name, p, ErrInvalidProperty)
		}
		upids[i] = uint32(p)
	}
	all := append(slices.Clip(props), Property{Name: "PIDs", Value: upids})
	return m.startTransient(ctx, name, all, nil, upids)
}

// StartTimer creates the transient timer timerName and the service it triggers in one
// StartTransientUnit call (the service as an auxiliary unit) and waits for the timer's start
// job. systemd does not allow a transient timer to name its unit (Unit=), so it triggers the
// service with the same name: serviceName must be timerName with ".service" instead of
// ".timer", or "" to use exactly that. Timer props are e.g. TimersMonotonic ([]TimerMonotonic),
// TimersCalendar, AccuracyUSec (time.Duration; the default accuracy is one minute),
// RemainAfterElapse. An existing timer is handled as described on StartSlice; an existing
// failed or inactive service of that name is reset-failed before the retry, an active one is
// ErrUnitExists.
func (m *Manager) StartTimer(ctx context.Context, timerName string, timerProps []Property, serviceName string, serviceProps []Property) error {
	if err := validateKind(timerName, SuffixTimer); err != nil {
		return err
	}
	want := strings.TrimSuffix(timerName, SuffixTimer) + SuffixService
	if serviceName == "" {
		serviceName = want
	}
	if serviceName != want {
		return fmt.Errorf("unit %q: start: service %q: a transient timer can only trigger %q: %w", timerName, serviceName, want, ErrInvalidName)
	}
	return m.startTransient(ctx, timerName, timerProps, []auxUnit{{name: serviceName, props: serviceProps}}, nil)
}

// startTransient implements the start methods and their unit-exists contract.
func (m *Manager) startTransient(ctx context.Context, name string, props []Property, aux []auxUnit, pids []uint32) error {
	vprops, err := toVariants(props)
	if err != nil {
		return fmt.Errorf("unit %q: start: %w", name, err)
	}
	vaux := make([]sddbus.PropertyCollection, len(aux))
	for i, a := range aux {
		if err := ValidateName(a.name); err != nil {
			return err
		}
		v, err := toVariants(a.props)
		if err != nil {
			return fmt.Errorf("unit %q: start: %w", a.name, err)
		}
		vaux[i] = sddbus.PropertyCollection{Name: a.name, Properties: v}
	}
	start := func() error {
		return m.runJob(ctx, name, opStart, func(ctx context.Context, c *conn, ch chan<- string) (int, error) {
			return c.sd.StartTransientUnitAux(ctx, name, jobMode, vprops, vaux, ch)
		})
	}
	err = start()
	if !errors.Is(err, ErrUnitExists) {
		return err
	}

	// The main unit or an aux unit exists. Decide per the contract on StartSlice.
	names := append([]string{name}, auxNames(aux)...)
	loaded, lerr := m.List(ctx, names...) // valid names have no glob characters
	if lerr != nil {
		return fmt.Errorf("%w (checking existing units: %v)", err, lerr)
	}
	var states []existingUnit
	for _, n := range names {
		for _, st := range loaded {
			if st.Name == n && st.LoadState != "not-found" {
				states = append(states, existingUnit{name: n, status: st})
			}
		}
	}
	d := decideExisting(name, descriptionOf(name, props), states)
	switch {
	case d.conflict != "":
		return fmt.Errorf("unit %q: start: %s: %w", name, d.conflict, ErrUnitExists)
	case d.adopt:
		return m.adopt(ctx, name, props, pids)
	}
	reset := d.reset
	for _, u := range reset {
		if err := m.ResetFailed(ctx, u); err != nil {
			return err
		}
	}
	if len(reset) == 0 {
		m.log.Info("existing unit went away, retrying", "unit", name)
	} else {
		m.log.Info("replacing stale unit", "unit", name, "reset", reset)
	}
	if err := start(); err != nil {
		if errors.Is(err, ErrUnitExists) {
			return fmt.Errorf("unit %q: start: still exists after reset-failed of %q: %w", name, reset, ErrUnitExists)
		}
		return err
	}
	return nil
}

// existingUnit is a unit found loaded when creating a transient unit of that name failed.
type existingUnit struct {
	name   string
	status UnitStatus
}

// existsDecision is what to do after StartTransientUnit reported UnitExists.
type existsDecision struct {
	adopt    bool     // the main unit is ours and running: take it over
	reset    []string // reset-failed these, then retry once
	conflict string   // non-empty: not ours or busy; the reason
}

// KubeletSliceDescription is the Description= the kubelet's systemd cgroup driver gives a
// slice it creates (opencontainers/cgroups systemd, Apply: "libcontainer container <name>"):
// a node moving from the kubelet to slicelet has its kubepods, QoS and pod slices, which
// slicelet takes over as its own; "" for a name that is not a slice.
func KubeletSliceDescription(name string) string {
	if !strings.HasSuffix(name, SuffixSlice) {
		return ""
	}
	return "libcontainer container " + name
}

// decideExisting applies the unit-exists contract documented on StartSlice. name is the main
// unit, want the Description it would get, found the loaded units among the main and the aux
// units (in that order; units not loaded are absent). An empty reset with no adopt and no
// conflict means the unit went away meanwhile: retry.
func decideExisting(name, want string, found []existingUnit) existsDecision {
	for _, u := range found {
		if u.name != name {
			continue
		}
		if st := u.status; st.ActiveState == "active" || st.ActiveState == "reloading" {
			if st.Description != want && st.Description != KubeletSliceDescription(name) {
				return existsDecision{conflict: fmt.Sprintf("exists with description %q, not %q", st.Description, want)}
			}
			return existsDecision{adopt: true}
		}
	}
	var d existsDecision
	for _, u := range found {
		switch u.status.ActiveState {
		case "failed", "inactive":
			d.reset = append(d.reset, u.name)
		default:
			return existsDecision{conflict: fmt.Sprintf("%q exists and is %s", u.name, u.status.ActiveState)}
		}
	}
	return d
}

func auxNames(aux []auxUnit) []string {
	names := make([]string, len(aux))
	for i, a := range aux {
		names[i] = a.name
	}
	return names
}

// adopt takes over an identical active unit: applies the live-settable props and makes sure
// pids are in it.
func (m *Manager) adopt(ctx context.Context, name string, props []Property, pids []uint32) error {
	live, skipped := splitLive(props)
	m.log.Info("adopting existing unit", "unit", name, "skipped_properties", skipped)
	if len(live) > 0 {
		if err := m.SetProperties(ctx, name, live); err != nil {
			return err
		}
	}
	return m.adoptPIDs(ctx, name, pids)
}

// adoptPIDs makes sure pids are in the scope name. PIDs already inside are fine (the usual case:
// a retry after the connection dropped when systemd had already created the scope). Others can
// only be moved by systemd into a delegated unit (AttachProcessesToUnit refuses with "Process
// migration not available on non-delegated units"); for a non-delegated scope they are an
// ErrUnitExists error, since writing cgroup.procs behind systemd's back is not ours to do.
func (m *Manager) adoptPIDs(ctx context.Context, name string, pids []uint32) error {
	var missing []uint32
	for _, pid := range pids {
		var owner string
		_, err := m.call(ctx, name, opAttach, func(c *conn) error {
			var err error
			owner, err = c.sd.GetUnitNameByPID(ctx, pid)
			return err
		})
		if err != nil || owner != name {
			missing = append(missing, pid)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	delegated, err := m.Property(ctx, name, "Scope", "Delegate")
	if err != nil {
		return err
	}
	if d, _ := delegated.(bool); !d {
		return fmt.Errorf("unit %q: start: exists and is active, but pids %v are not in it and it is not delegated, so systemd cannot move them: %w", name, missing, ErrUnitExists)
	}
	_, err = m.call(ctx, name, opAttach, func(c *conn) error {
		return c.sd.AttachProcessesToUnit(ctx, name, "", missing)
	})
	return err
}

// UnitByPID returns the name of the unit whose cgroup holds process pid (systemd's
// GetUnitByPID), e.g. "slicelet.service" for the daemon's own PID under systemd. A process
// systemd does not know wraps ErrNoSuchUnit.
func (m *Manager) UnitByPID(ctx context.Context, pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("unit of pid %d: pid out of range", pid)
	}
	var name string
	_, err := m.call(ctx, fmt.Sprintf("pid %d", pid), opUnitByPID, func(c *conn) error {
		var err error
		name, err = c.sd.GetUnitNameByPID(ctx, uint32(pid))
		return err
	})
	return name, err
}

// SetProperties changes properties of the loaded unit name at runtime (runtime=true: nothing is
// written below /etc, the change is lost when the unit goes away). systemd applies them
// immediately and atomically: if any property cannot be changed on a live unit (only
// Description and the cgroup resource settings can), none is. Idempotent. A unit that is not
// loaded is an error wrapping ErrNoSuchUnit. No job is involved.
func (m *Manager) SetProperties(ctx context.Context, name string, props []Property) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	v, err := toVariants(props)
	if err != nil {
		return fmt.Errorf("unit %q: %s: %w", name, opSetProps, err)
	}
	_, err = m.call(ctx, name, opSetProps, func(c *conn) error {
		return c.sd.SetUnitPropertiesContext(ctx, name, true, v...)
	})
	return err
}

// Stop stops the unit name (for a slice: everything in it) and waits for the stop job; after
// it, systemd has removed the unit's cgroups and a transient unit is gone, unless it ended
// "failed": then it stays listed as failed until ResetFailed (or a new Start of that name, which
// resets it). Stopping a unit that is not loaded, or already stopped, is success: Stop is
// idempotent.
func (m *Manager) Stop(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := m.runJob(ctx, name, opStop, func(ctx context.Context, c *conn, ch chan<- string) (int, error) {
		return c.sd.StopUnitContext(ctx, name, jobMode, ch)
	})
	if errors.Is(err, ErrNoSuchUnit) {
		return nil
	}
	return err
}

// Kill sends signal to the processes of unit name selected by whom. It does not wait for them
// to exit. Not idempotent: if the connection drops during the call, the retry can deliver the
// signal twice. A unit that is not loaded wraps ErrNoSuchUnit; no matching process wraps
// ErrNoProcess.
func (m *Manager) Kill(ctx context.Context, name string, signal syscall.Signal, whom Who) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	switch whom {
	case KillAll, KillMain, KillControl:
	default:
		return fmt.Errorf("unit %q: %s: unknown process selection %q", name, opKill, whom)
	}
	if signal <= 0 || signal > 64 {
		return fmt.Errorf("unit %q: %s: signal %d out of range", name, opKill, int(signal))
	}
	_, err := m.call(ctx, name, opKill, func(c *conn) error {
		return c.sd.KillUnitWithTarget(ctx, name, sddbus.Who(whom), int32(signal))
	})
	return err
}

// ResetFailed clears the failed state of unit name, which lets systemd garbage-collect a
// failed transient unit (and a new one of that name be created). Idempotent: a unit that is
// not loaded or not failed is success.
func (m *Manager) ResetFailed(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := m.call(ctx, name, opResetFailed, func(c *conn) error {
		return c.sd.ResetFailedUnitContext(ctx, name)
	})
	if errors.Is(err, ErrNoSuchUnit) {
		return nil
	}
	return err
}

// List returns the units systemd has loaded whose names match any of patterns (shell globs as
// in `systemctl list-units PATTERN`; all loaded units when none), sorted by name. systemd
// matches with fnmatch(3) and FNM_NOESCAPE, so '\' is literal and every unit name, including
// escaped ones like `a\x2db.slice`, is a pattern matching just itself. Units that
// are gone are not listed (unlike ListUnitsByNames, ListUnitsByPatterns does not load units).
func (m *Manager) List(ctx context.Context, patterns ...string) ([]UnitStatus, error) {
	var raw []sddbus.UnitStatus
	label := strings.Join(patterns, ",")
	if label == "" {
		label = "*"
	}
	_, err := m.call(ctx, label, opList, func(c *conn) error {
		var err error
		raw, err = c.sd.ListUnitsByPatternsContext(ctx, nil, patterns)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]UnitStatus, 0, len(raw))
	for _, u := range raw {
		out = append(out, UnitStatus{
			Name: u.Name, Description: u.Description, LoadState: u.LoadState,
			ActiveState: u.ActiveState, SubState: u.SubState,
		})
	}
	slices.SortFunc(out, func(a, b UnitStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// status returns the loaded unit name, found=false when systemd has not loaded it.
func (m *Manager) status(ctx context.Context, name string) (UnitStatus, bool, error) {
	if err := ValidateName(name); err != nil {
		return UnitStatus{}, false, err
	}
	us, err := m.List(ctx, name) // a valid name has no glob characters: it matches itself
	if err != nil {
		return UnitStatus{}, false, err
	}
	for _, u := range us {
		if u.Name == name && u.LoadState != "not-found" {
			return u, true, nil
		}
	}
	return UnitStatus{}, false, nil
}

// unitObject resolves the loaded unit name to its object path (GetUnit: an error wrapping
// ErrNoSuchUnit if it is not loaded; unlike the object path derived from the name, it does not
// load a "not-found" stub).
func (m *Manager) unitObject(ctx context.Context, c *conn, name string) (godbus.ObjectPath, error) {
	var p godbus.ObjectPath
	err := c.sys.Object(systemdDest, systemdPath).CallWithContext(ctx, managerIfc+".GetUnit", 0, name).Store(&p)
	return p, err
}

// getAll reads all properties of interface iface of the unit name.
func (m *Manager) getAll(ctx context.Context, name string, ifaces ...string) ([]map[string]godbus.Variant, error) {
	var out []map[string]godbus.Variant
	_, err := m.call(ctx, name, opGet, func(c *conn) error {
		out = out[:0]
		p, err := m.unitObject(ctx, c, name)
		if err != nil {
			return err
		}
		for _, iface := range ifaces {
			var props map[string]godbus.Variant
			err := c.sys.Object(systemdDest, p).CallWithContext(ctx,
				"org.freedesktop.DBus.Properties.GetAll", 0, iface).Store(&props)
			if err != nil {
				return err
			}
			out = append(out, props)
		}
		return nil
	})
	return out, err
}

// Properties reads the typed UnitInfo of the loaded unit name. A unit that is not loaded is an
// error wrapping ErrNoSuchUnit. Reading does not change the unit.
func (m *Manager) Properties(ctx context.Context, name string) (UnitInfo, error) {
	if err := ValidateName(name); err != nil {
		return UnitInfo{}, err
	}
	typ := unitType(name)
	maps, err := m.getAll(ctx, name, "org.freedesktop.systemd1.Unit", "org.freedesktop.systemd1."+typ)
	if err != nil {
		return UnitInfo{}, err
	}
	return unitInfo(name, maps[0], maps[1]), nil
}

// unitInfo decodes the Unit and type-specific property maps. Missing properties stay zero.
func unitInfo(name string, unit, typed map[string]godbus.Variant) UnitInfo {
	str := func(m map[string]godbus.Variant, k string) string {
		s, _ := m[k].Value().(string)
		return s
	}
	u64 := func(m map[string]godbus.Variant, k string) (uint64, bool) {
		v, ok := m[k].Value().(uint64)
		return v, ok
	}
	ts := func(m map[string]godbus.Variant, k string) time.Time {
		v, ok := u64(m, k)
		if !ok || v == 0 || v == math.MaxUint64 {
			return time.Time{}
		}
		return time.UnixMicro(int64(v))
	}
	info := UnitInfo{
		Name:        name,
		Description: str(unit, "Description"),
		LoadState:   str(unit, "LoadState"),
		ActiveState: str(unit, "ActiveState"),
		SubState:    str(unit, "SubState"),
	}
	if id, ok := unit["InvocationID"].Value().([]byte); ok && len(id) > 0 {
		info.InvocationID = hex.EncodeToString(id)
	}
	info.ControlGroup = str(typed, "ControlGroup")
	// systemd reports "unknown" as UINT64_MAX.
	if v, ok := u64(typed, "MemoryCurrent"); ok && v != math.MaxUint64 {
		info.MemoryCurrent, info.HasMemoryCurrent = v, true
	}
	if v, ok := u64(typed, "TasksCurrent"); ok && v != math.MaxUint64 {
		info.TasksCurrent, info.HasTasksCurrent = v, true
	}
	info.Result = str(typed, "Result")
	info.MainPID, _ = typed["MainPID"].Value().(uint32)
	info.ExecMainCode, _ = typed["ExecMainCode"].Value().(int32)
	info.ExecMainStatus, _ = typed["ExecMainStatus"].Value().(int32)
	info.ExecMainStartTimestamp = ts(typed, "ExecMainStartTimestamp")
	info.ExecMainExitTimestamp = ts(typed, "ExecMainExitTimestamp")
	info.NRestarts, _ = typed["NRestarts"].Value().(uint32)
	info.LastTrigger = ts(typed, "LastTriggerUSec")
	return info
}

// Property reads one property of the loaded unit name and returns it as a plain Go value
// (bool, string, integers, []string, [][]any for arrays of structs, ...; object paths as
// strings). iface is "Unit", "Service", "Slice", "Scope", "Timer", ... or a full interface name
// such as "org.freedesktop.systemd1.Service". A unit that is not loaded wraps ErrNoSuchUnit.
func (m *Manager) Property(ctx context.Context, name, iface, prop string) (any, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if !strings.Contains(iface, ".") {
		iface = "org.freedesktop.systemd1." + iface
	}
	var v godbus.Variant
	_, err := m.call(ctx, name, opGet+" "+prop, func(c *conn) error {
		p, err := m.unitObject(ctx, c, name)
		if err != nil {
			return err
		}
		return c.sys.Object(systemdDest, p).CallWithContext(ctx,
			"org.freedesktop.DBus.Properties.Get", 0, iface, prop).Store(&v)
	})
	if err != nil {
		return nil, err
	}
	return plainValue(v.Value()), nil
}
