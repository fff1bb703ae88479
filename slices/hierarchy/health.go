package hierarchy

import "github.com/slicelet/slicelet/internal/health"

// The slice manager's warnables (health.Tracker).
var (
	// EnforcementWarnable is node allocatable enforcement on kubepods.slice: unhealthy while
	// its limits do not hold (systemd accepts a memory limit below the current usage, the
	// kernel refuses it; the manager retries until it holds).
	EnforcementWarnable = &health.Warnable{Code: "node-allocatable", Title: "node allocatable enforcement",
		Severity: health.SeverityWarning}
	// QoSReconcileWarnable is the QoS slices' reconcile (Burstable and BestEffort shares and
	// limits, written when pods come and go and every ReconcileInterval).
	QoSReconcileWarnable = &health.Warnable{Code: "qos-reconcile", Title: "QoS slice reconcile",
		Severity: health.SeverityWarning}
)
