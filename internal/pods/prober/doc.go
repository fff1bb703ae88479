// Package prober runs the kubelet's container probes and lifecycle hook actions
// (pkg/kubelet/prober, pkg/probe, pkg/kubelet/lifecycle): the exec, httpGet, tcpSocket and grpc
// handlers (Run), and the probe loops of one container run with the kubelet's semantics
// (Manager: initialDelaySeconds, periodSeconds, timeoutSeconds, success and failure thresholds,
// the startup probe gating the others). It decides and reports; what a result means for the
// container (a restart, the Ready condition) is the pod worker's.
package prober
