package eviction

import (
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/health"
)

// The eviction manager's warnables (health.Tracker).
var (
	// LoopWarnable is the eviction loop's liveness: every cycle renews a lease of HealthBound.
	// A loop that hangs (a read that never returns) is what a restart repairs, so the watchdog
	// stops pinging systemd while it is unhealthy.
	LoopWarnable = &health.Warnable{Code: "eviction-loop", Title: "eviction loop",
		Severity: health.SeverityCritical, Watchdog: true}
	// SignalsWarnable is the freshness of the eviction signals: unhealthy while a signal
	// cannot be read (a memory.stat that fails, a broken procfs), or when no cycle observed
	// them within HealthBound.
	SignalsWarnable = &health.Warnable{Code: "eviction-signals", Title: "eviction signals",
		Severity: health.SeverityWarning}
)

// PressureWarnables are the kubelet's node pressure conditions as warnables: unhealthy while
// the condition is true, with the kubelet's reasons (pkg/kubelet/nodestatus/setters.go,
// MemoryPressureCondition, DiskPressureCondition, PIDPressureCondition).
var PressureWarnables = map[v1.NodeConditionType]*health.Warnable{
	v1.NodeMemoryPressure: {Code: "memory-pressure", Title: "memory pressure", Severity: health.SeverityWarning,
		Condition: &health.Condition{Type: string(v1.NodeMemoryPressure),
			TrueReason: "KubeletHasInsufficientMemory", FalseReason: "KubeletHasSufficientMemory",
			TrueMessage: "slicelet has insufficient memory available", FalseMessage: "slicelet has sufficient memory available"}},
	v1.NodeDiskPressure: {Code: "disk-pressure", Title: "disk pressure", Severity: health.SeverityWarning,
		Condition: &health.Condition{Type: string(v1.NodeDiskPressure),
			TrueReason: "KubeletHasDiskPressure", FalseReason: "KubeletHasNoDiskPressure",
			TrueMessage: "slicelet has disk pressure", FalseMessage: "slicelet has no disk pressure"}},
	v1.NodePIDPressure: {Code: "pid-pressure", Title: "PID pressure", Severity: health.SeverityWarning,
		Condition: &health.Condition{Type: string(v1.NodePIDPressure),
			TrueReason: "KubeletHasInsufficientPID", FalseReason: "KubeletHasSufficientPID",
			TrueMessage: "slicelet has insufficient PID available", FalseMessage: "slicelet has sufficient PID available"}},
}

// PressureConditions returns the pressure conditions true in a health state, in the order
// MemoryPressure, DiskPressure, PIDPressure: what admission refuses pods on.
func PressureConditions(st health.State) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, c := range conditionOrder {
		if ws, ok := st.Get(PressureWarnables[c]); ok && ws.Status == health.StatusUnhealthy {
			out = append(out, c)
		}
	}
	return out
}
