package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// The daemon's own warnables (the components declare theirs: eviction, slices).
var (
	// systemdWarnable is the D-Bus connection to PID 1, probed by the monitor. A dead
	// connection is what a restart repairs: the watchdog stops pinging while it is unhealthy.
	systemdWarnable = &health.Warnable{Code: "systemd", Title: "systemd connection",
		Severity: health.SeverityCritical, Watchdog: true}
	// runtimeWarnable is the container runtime answering (the kubelet's "container runtime is
	// down" Ready reason). A restart of slicelet does not bring containerd back: no watchdog.
	runtimeWarnable = &health.Warnable{Code: "runtime", Title: "container runtime",
		Severity: health.SeverityCritical}
	// networkWarnable is the runtime's pod network (runtime.network "cni"): until the
	// cluster's CNI agent has written its configuration the runtime reports it not ready, and
	// the node is not Ready (the kubelet's "container runtime network not ready" reason), so
	// that the scheduler places no pod needing it there (the node lifecycle's not-ready taint).
	networkWarnable = &health.Warnable{Code: "network", Title: "pod network",
		Severity: health.SeverityCritical}
	// gcImagesWarnable and gcContainersWarnable are repeated garbage collection failures: one
	// failure is often transient (a runtime restarting); three in a row (3 min of container GC,
	// 15 min of image GC at the defaults) raise a node condition (the kubelet only records
	// ImageGCFailed and ContainerGCFailed events).
	gcImagesWarnable = &health.Warnable{Code: "gc-images", Title: "image garbage collection",
		Severity: health.SeverityWarning, FailuresToUnhealthy: gcFailureThreshold,
		Condition: &health.Condition{Type: string(conditionImageGCFailing), TrueReason: "GCFailing", FalseReason: "GCSucceeding"}}
	gcContainersWarnable = &health.Warnable{Code: "gc-containers", Title: "container garbage collection",
		Severity: health.SeverityWarning, FailuresToUnhealthy: gcFailureThreshold,
		Condition: &health.Condition{Type: string(conditionContainerGCFailing), TrueReason: "GCFailing", FalseReason: "GCSucceeding"}}
	// gcTimersWarnable is the transient GC timer units: without them collections run only on
	// demand and under disk pressure.
	gcTimersWarnable = &health.Warnable{Code: "gc-timers", Title: "garbage collection timers",
		Severity: health.SeverityWarning}
	// imageDetectionWarnable is the periodic refresh of the image records (last-used times).
	imageDetectionWarnable = &health.Warnable{Code: "image-detection", Title: "image detection",
		Severity: health.SeverityWarning}
	// manifestsWarnable is the manifest directory source: manifests it cannot use, or the
	// source stopping.
	manifestsWarnable = &health.Warnable{Code: "manifests", Title: "manifest files",
		Severity: health.SeverityWarning}
	// apiStoreWarnable is the API pod store: stored pods it cannot load (set aside, their pods
	// kept running until an apply or delete), or the source stopping. Its node condition (and
	// so slicelet_node_condition) shows it.
	apiStoreWarnable = &health.Warnable{Code: "api-store", Title: "API pod store",
		Severity:  health.SeverityWarning,
		Condition: &health.Condition{Type: string(conditionAPIPodStoreProblem), TrueReason: "StoredPodsNotLoaded", FalseReason: "StoredPodsLoaded"}}
	// apiServerWarnable is the local API socket serving (slicectl, the GC timers).
	apiServerWarnable = &health.Warnable{Code: "api-server", Title: "local API",
		Severity: health.SeverityWarning}
	// configWarnable is configuration this node cannot honour (accepted, without effect).
	configWarnable = &health.Warnable{Code: "config", Title: "configuration",
		Severity: health.SeverityWarning}
)

// Node conditions of repeated GC failures, and of the API pod store's problems (a stored pod
// that does not load: its pod runs unmanaged until it is applied or deleted again).
const (
	conditionImageGCFailing     v1.NodeConditionType = "ImageGCFailing"
	conditionContainerGCFailing v1.NodeConditionType = "ContainerGCFailing"
	conditionAPIPodStoreProblem v1.NodeConditionType = "APIPodStoreProblem"
)

// probeInterval is how often the monitor probes systemd and the runtime without a watchdog.
const probeInterval = 10 * time.Second

// probeTimeout bounds one probe: a D-Bus or CRI call that must answer in time.
const probeTimeout = 5 * time.Second

// probe checks something that cannot report its own failure (a connection).
type probe struct {
	w     *health.Warnable
	check func(context.Context) error
}

// monitor probes the systemd connection and the container runtime, reports them to the
// health tracker, and — when systemd expects watchdog pings (WatchdogSec=) — sends WATCHDOG=1
// after each round while the tracker says every watchdog warnable is healthy (the eviction
// loop's lease and the systemd connection): a hung loop or a dead connection stops the pings,
// and systemd restarts slicelet after WatchdogSec (pods keep running: they belong to systemd).
type monitor struct {
	health   *health.Tracker
	probes   []probe
	interval time.Duration
	watchdog bool
	notify   func(string) (bool, error)
	clock    clock.WithTicker
	log      *slog.Logger

	withholding bool
}

// newMonitor probes every probeInterval, or every half watchdog interval when that is shorter.
func newMonitor(d *daemon, watchdog time.Duration, notify func(string) (bool, error)) *monitor {
	m := &monitor{health: d.health, interval: probeInterval, notify: notify, clock: d.clock, log: d.log}
	if watchdog > 0 {
		m.watchdog = true
		m.interval = min(m.interval, watchdog/2)
		d.log.Info("watchdog enabled", "interval", watchdog)
	}
	m.probes = []probe{
		{systemdWarnable, func(ctx context.Context) error {
			// One cheap D-Bus call.
			_, err := d.sd.List(ctx, slices.KubepodsSlice)
			return err
		}},
		{runtimeWarnable, func(ctx context.Context) error {
			_, err := d.rt.PodUIDs(ctx)
			return err
		}},
	}
	if d.prt != nil && d.prt.network != nil {
		m.probes = append(m.probes, probe{networkWarnable, d.prt.network})
	}
	return m
}

// run probes at once, then probes and pings every interval until ctx ends.
func (m *monitor) run(ctx context.Context) {
	m.probe(ctx)
	every(ctx, m.clock, m.interval, func() {
		m.probe(ctx)
		m.ping()
	})
}

// every runs f every period, the first time one period from now, until ctx ends.
func every(ctx context.Context, clk clock.WithTicker, period time.Duration, f func()) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f()
		}
	}
}

// probe runs every probe once. A good answer is valid for three intervals, so a monitor that
// stops probing shows as stale rather than healthy.
func (m *monitor) probe(ctx context.Context) {
	for _, p := range m.probes {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := p.check(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.health.SetUnhealthy(p.w, err.Error())
			continue
		}
		m.health.Renew(p.w, 3*m.interval)
	}
}

// ping sends WATCHDOG=1 when the watchdog is on and every watchdog warnable is healthy; it
// logs when the pings stop and when they resume.
func (m *monitor) ping() {
	if !m.watchdog {
		return
	}
	if bad := m.health.State().NotLive(); len(bad) > 0 {
		if !m.withholding {
			m.log.Error("withholding watchdog pings; systemd will restart slicelet", "reason", health.Describe(bad))
			m.withholding = true
		}
		return
	}
	if m.withholding {
		m.log.Info("watchdog pings resumed")
		m.withholding = false
	}
	if _, err := m.notify(units.NotifyWatchdog); err != nil {
		m.log.Debug("sd_notify watchdog failed", "error", err)
	}
}

// statusLine is the STATUS= line: pods by phase (the QoS classes of the active ones: pending
// and running, never a failed or succeeded pod), node allocatable, pressure and evictions, and
// every unhealthy warnable other than the pressure conditions the eviction summary shows.
func statusLine(c api.PodCounts, alloc v1.ResourceList, evictionSummary string, st health.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "STATUS=%d pods running, %d pending, %d succeeded, %d failed",
		c.Phases[v1.PodRunning], c.Phases[v1.PodPending], c.Phases[v1.PodSucceeded], c.Phases[v1.PodFailed])
	if n := c.Phases[v1.PodUnknown]; n > 0 {
		fmt.Fprintf(&b, ", %d unknown", n)
	}
	fmt.Fprintf(&b, " (active: Guaranteed %d, Burstable %d, BestEffort %d)",
		c.QOS[v1.PodQOSGuaranteed], c.QOS[v1.PodQOSBurstable], c.QOS[v1.PodQOSBestEffort])
	fmt.Fprintf(&b, "; allocatable %dm cpu / %s memory; %s", alloc.Cpu().MilliValue(), alloc.Memory().String(), evictionSummary)
	var problems []health.WarnableState
	for _, ws := range st.Unhealthy() {
		if !isPressure(ws.Warnable) {
			problems = append(problems, ws)
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(&b, "; unhealthy: %s", health.Describe(problems))
	}
	return b.String()
}

// isPressure reports whether w is one of the eviction manager's pressure conditions.
func isPressure(w *health.Warnable) bool {
	for _, p := range eviction.PressureWarnables {
		if p == w {
			return true
		}
	}
	return false
}

// nodeConditions are the node's conditions, all read from the health tracker: one per
// warnable that has a Condition (absent while it is unknown), with Ready after the pressure
// conditions and before slicelet's own ones, Ready false while a
// critical warnable is not healthy, as the kubelet's Ready is false while the container
// runtime is down (pkg/kubelet/nodestatus/setters.go, ReadyCondition).
func nodeConditions(st health.State) []v1.NodeCondition {
	var out []v1.NodeCondition
	var warnings []health.WarnableState
	for _, ws := range st.Warnables {
		c := ws.Warnable.Condition
		if c == nil {
			if ws.Status == health.StatusUnhealthy && ws.Severity == health.SeverityWarning {
				warnings = append(warnings, ws)
			}
			continue
		}
		if ws.Status == health.StatusUnknown {
			continue
		}
		nc := v1.NodeCondition{Type: v1.NodeConditionType(c.Type), Status: v1.ConditionFalse, Reason: c.FalseReason, Message: c.FalseMessage,
			LastHeartbeatTime: metav1.NewTime(ws.LastReport), LastTransitionTime: metav1.NewTime(ws.Since)}
		if ws.Status == health.StatusUnhealthy {
			nc.Status, nc.Reason, nc.Message = v1.ConditionTrue, c.TrueReason, c.TrueMessage
		}
		if nc.Message == "" {
			nc.Message = conditionMessage(ws)
		}
		out = append(out, nc)
	}
	// The kubelet's conditions first, Ready after its pressure conditions (its order:
	// pkg/kubelet/kubelet_node_status.go, defaultNodeStatusFuncs), then slicelet's own, as
	// conditions another component (a node problem detector) adds come after the kubelet's.
	var kubelets, own []v1.NodeCondition
	for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		for _, c := range out {
			if c.Type == t {
				kubelets = append(kubelets, c)
			}
		}
	}
	for _, c := range out {
		if eviction.PressureWarnables[c.Type] == nil {
			own = append(own, c)
		}
	}
	return append(append(kubelets, readyCondition(st, warnings)), own...)
}

// conditionMessage says what a condition without a fixed message is about: the failures in
// a row and the last error, or that all is well.
func conditionMessage(ws health.WarnableState) string {
	switch {
	case ws.Failures == 0:
		return ws.Title + " is working"
	case ws.Status == health.StatusUnhealthy:
		return fmt.Sprintf("%d failures in a row; last error: %s", ws.Failures, ws.Message)
	default:
		return fmt.Sprintf("%d failures in a row (condition at %d); last error: %s", ws.Failures, ws.FailuresToUnhealthy, ws.Message)
	}
}

// settling reports whether a critical warnable has not reported yet: the node's readiness is
// not known (cluster.NodeInputs.Settling).
func settling(st health.State) bool {
	for _, ws := range st.NotReady() {
		if ws.Status == health.StatusUnknown {
			return true
		}
	}
	return false
}

// readyCondition is Ready: false while a critical warnable is not healthy (naming them),
// true otherwise, with the warnings that have no condition of their own in its message.
func readyCondition(st health.State, warnings []health.WarnableState) v1.NodeCondition {
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "SliceletReady",
		Message: "slicelet is running", LastHeartbeatTime: metav1.NewTime(st.At)}
	var since time.Time
	notReady := st.NotReady()
	for _, ws := range st.Warnables {
		if ws.Severity == health.SeverityCritical && ws.Since.After(since) {
			since = ws.Since
		}
	}
	ready.LastTransitionTime = metav1.NewTime(since)
	if len(notReady) > 0 {
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "SliceletNotReady", health.Describe(notReady)
		return ready
	}
	if len(warnings) > 0 {
		ready.Message += "; " + health.Describe(warnings)
	}
	return ready
}

// problemsError is a source's problems as one error (nil for none): how many, and the first
// few with their origin.
func problemsError(problems []pods.Problem) error {
	if len(problems) == 0 {
		return nil
	}
	const shown = 3
	var parts []string
	for _, p := range problems[:min(len(problems), shown)] {
		parts = append(parts, p.Origin+": "+p.Error)
	}
	if len(problems) > shown {
		parts = append(parts, fmt.Sprintf("and %d more (journalctl -u slicelet)", len(problems)-shown))
	}
	return fmt.Errorf("%d manifest problems: %s", len(problems), strings.Join(parts, "; "))
}

// configProblems are settings this node accepts but cannot honour.
func configProblems(cfg *config.Config, mode units.Mode) []error {
	var out []error
	if !mode.V2() && cfg.Cgroups.MemoryReservationPolicy == config.MemoryReservationTieredReservation {
		out = append(out, errors.New("[cgroups] memory_reservation_policy = \"TieredReservation\" has no effect on cgroup v1: memory QoS needs cgroup v2"))
	}
	if cfg.Cgroups.MemoryThrottlingFactor > 0 {
		out = append(out, errors.New("[cgroups] memory_throttling_factor has no effect: slicelet writes no memory.high"))
	}
	return out
}
