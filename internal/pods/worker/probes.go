package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/prober"
)

// Event reasons of probes (pkg/kubelet/events/event.go).
const (
	EventUnhealthy    = "Unhealthy"
	EventProbeWarning = "ProbeWarning"
)

// ProbeMetrics counts probe results and times them: the kubelet's prober_probe_total, labelled
// probe_type (Liveness, Readiness, Startup), result (successful, failed, unknown), container,
// pod, namespace, pod_uid, and prober_probe_duration_seconds.
type ProbeMetrics interface {
	ProbeResult(probeType, result, container, pod, namespace, podUID string, took time.Duration)
}

// SandboxNetwork is implemented by runtimes whose sandboxes have a network of their own (the CRI
// runtime): the IPs of a sandbox, the pod's IPs (PodSandboxStatus.network).
type SandboxNetwork interface {
	PodSandboxIPs(ctx context.Context, id string) ([]string, error)
}

// loopback is the host of network probes and hooks of pods in the host's network namespace
// when the node's IP is not configured.
const loopback = "127.0.0.1"

// probeReporter turns probe results into events, metrics and syncs.
type probeReporter struct{ w *Worker }

// Probed records the kubelet's prober events (pkg/kubelet/prober/prober.go probe): Unhealthy
// for a failure or an error, ProbeWarning for a warning; and counts the result.
func (r probeReporter) Probed(in *prober.Instance, kind prober.Kind, res prober.Result, out string, took time.Duration, err error) {
	w, pod, c := r.w, in.Pod, in.Container.Name
	switch {
	case err != nil:
		w.containerEvent(pod, c, v1.EventTypeWarning, EventUnhealthy, "%s probe errored and resulted in %s state: %s", kind, prober.Unknown, err)
		w.log.Debug("probe errored", "pod_uid", string(pod.UID), "container", c, "probe", kind.String(), "error", err)
	case res == prober.Failure:
		w.containerEvent(pod, c, v1.EventTypeWarning, EventUnhealthy, "%s probe failed: %s", kind, out)
		w.log.Debug("probe failed", "pod_uid", string(pod.UID), "container", c, "probe", kind.String(), "output", out)
	case res == prober.Warning:
		w.containerEvent(pod, c, v1.EventTypeWarning, EventProbeWarning, "%s probe warning: %s", kind, out)
	}
	if m := w.opts.ProbeMetrics; m != nil {
		m.ProbeResult(kind.String(), res.String(), c, pod.Name, pod.Namespace, string(pod.UID), took)
	}
}

// Changed marks the pod due for a sync: a run became started, ready or unready, or failed its
// liveness or startup probe.
func (r probeReporter) Changed(uid string) {
	w := r.w
	w.mu.Lock()
	if e := w.pods[uid]; e != nil {
		e.probeDue = true
	}
	w.mu.Unlock()
}

// hasProbes reports whether c has a probe.
func hasProbes(c *v1.Container) bool {
	return c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil
}

// probedContainers are the pod's containers that may have probes: sidecars and regular
// containers (the API forbids probes on other init containers).
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; lifecycle.IsSidecar(c) {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// execer runs commands in container run id for probes and hooks; a command that ran out of
// time is prober.ErrTimeout.
func (w *Worker) execer(id string) prober.Execer {
	return func(ctx context.Context, cmd []string, timeout time.Duration) ([]byte, int32, error) {
		res, err := w.rt.ExecSync(ctx, id, cmd, timeout)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("%w: %w", prober.ErrTimeout, err)
		}
		if err != nil {
			return nil, 0, err
		}
		return append(res.Stdout, res.Stderr...), res.ExitCode, nil
	}
}

// podIP is the host of the pod's network probes and hooks: the node's IP (or the loopback) in
// the host's network namespace, else the sandbox's first IP.
func (w *Worker) podIP(ctx context.Context, pod *v1.Pod, sandboxID string) string {
	if w.hostNetwork(pod) {
		if len(w.opts.NodeIPs) > 0 {
			return w.opts.NodeIPs[0]
		}
		return loopback
	}
	if ips := w.sandboxIPs(ctx, pod, sandboxID); len(ips) > 0 {
		return ips[0]
	}
	return loopback
}

// sandboxIPs are the IPs of the pod's sandbox (SandboxNetwork); none for a runtime without pod
// networks, without a sandbox, or when the runtime cannot say (logged).
func (w *Worker) sandboxIPs(ctx context.Context, pod *v1.Pod, sandboxID string) []string {
	sn, ok := w.backend.(SandboxNetwork)
	if !ok || sandboxID == "" {
		return nil
	}
	w.mu.Lock()
	ips, ok := w.ips[sandboxID]
	w.mu.Unlock()
	if ok {
		return slices.Clone(ips)
	}
	ips, err := sn.PodSandboxIPs(ctx, sandboxID)
	if err != nil {
		w.log.Warn("pod sandbox IPs unknown", "pod_uid", string(pod.UID), "sandbox_id", sandboxID, "error", err)
		return ips
	}
	if len(ips) > 0 {
		// A sandbox keeps its network, and so its IPs, for its life: they are asked once,
		// not at every sync (the relist forgets a sandbox no longer listed).
		w.mu.Lock()
		w.ips[sandboxID] = slices.Clone(ips)
		w.mu.Unlock()
	}
	return ips
}

// probeKill is a run whose liveness or startup probe failed.
type probeKill struct {
	st    ContainerStatus
	grace time.Duration
	msg   string
}

// syncProbes has the probes of the pod's running runs run, stops those of runs that no longer
// run, and returns the runs that failed a liveness or startup probe: the kubelet's
// computePodActions kills them with "Container <name> failed <kind> probe[, will be restarted]"
// within the probe's terminationGracePeriodSeconds, else the pod's.
func (w *Worker) syncProbes(ctx context.Context, pod *v1.Pod, o *observed) []probeKill {
	keep := map[string]bool{}
	var kills []probeKill
	ip := ""
	for _, c := range probedContainers(pod) {
		v := o.byName[c.Name]
		if !hasProbes(c) || v == nil || v.current.fromRecord || v.current.state() != lifecycle.StateRunning {
			continue
		}
		id := v.current.ID
		keep[id] = true
		st, ok := w.probes.Status(id)
		if !ok {
			if ip == "" && o.sandbox != nil {
				ip = w.podIP(ctx, pod, o.sandbox.ID)
			}
			w.probes.Ensure(prober.Instance{Pod: pod, Container: c, ID: id, StartedAt: v.current.StartedAt, PodIP: cmpOrString(ip, loopback), Exec: w.execer(id)})
			continue
		}
		if !st.Failed {
			continue
		}
		spec := st.FailedKind.Probe(c)
		grace := lifecycle.GracePeriod(pod)
		if g := spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
			grace = time.Duration(*g) * time.Second
		}
		msg := fmt.Sprintf("Container %s failed %s probe", c.Name, strings.ToLower(st.FailedKind.String()))
		if lifecycle.RestartPolicy(pod) != v1.RestartPolicyNever || lifecycle.IsSidecar(c) {
			msg += ", will be restarted"
		}
		kills = append(kills, probeKill{st: v.current.ContainerStatus, grace: grace, msg: msg})
	}
	w.probes.Keep(string(pod.UID), keep)
	return kills
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// probeVerdicts sets the probes' verdicts on a running container's view: what the prober
// decided, or, for a run it has not seen yet, the kubelet's initial verdicts (not started
// with a startup probe, not ready with a readiness probe).
func (w *Worker) probeVerdicts(c *v1.Container, in *instance, lc *lifecycle.Container) {
	if c == nil || !hasProbes(c) || lc.State != lifecycle.StateRunning {
		return
	}
	if st, ok := w.probes.Status(in.ID); ok {
		lc.NotStarted, lc.NotReady = !st.Started, !st.Ready
		return
	}
	lc.NotStarted = c.StartupProbe != nil
	lc.NotReady = lc.NotStarted || c.ReadinessProbe != nil
}

// hostNetwork reports whether the pod runs in the host's network namespace.
func (w *Worker) hostNetwork(pod *v1.Pod) bool {
	return pod.Spec.HostNetwork || w.opts.HostNetwork
}

// validateProbes checks what the prober needs of a container's probes: one handler each (the
// API's validation), none on a regular init container, a successThreshold of 1 for liveness
// and startup probes.
func validateProbes(p *field.Path, c *v1.Container, plainInit bool) field.ErrorList {
	var errs field.ErrorList
	for _, k := range []prober.Kind{prober.Liveness, prober.Readiness, prober.Startup} {
		probe := k.Probe(c)
		if probe == nil {
			continue
		}
		pp := p.Child(strings.ToLower(k.String()[:1]) + k.String()[1:] + "Probe")
		if plainInit {
			errs = append(errs, field.Forbidden(pp, "may not be set for init containers without restartPolicy=Always"))
			continue
		}
		errs = append(errs, validateHandler(pp, probe.Exec != nil, probe.HTTPGet != nil, probe.TCPSocket != nil, probe.GRPC != nil, false)...)
		if k != prober.Readiness && probe.SuccessThreshold > 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
		}
		if k == prober.Readiness && probe.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
		for _, n := range []struct {
			name string
			v    int32
		}{{"initialDelaySeconds", probe.InitialDelaySeconds}, {"periodSeconds", probe.PeriodSeconds}, {"timeoutSeconds", probe.TimeoutSeconds}, {"successThreshold", probe.SuccessThreshold}, {"failureThreshold", probe.FailureThreshold}} {
			if n.v < 0 {
				errs = append(errs, field.Invalid(pp.Child(n.name), n.v, "must be greater than or equal to 0"))
			}
		}
	}
	return errs
}

// validateHandler checks that a probe or hook handler has exactly one action.
func validateHandler(p *field.Path, exec, http, tcp, grpc, sleep bool) field.ErrorList {
	n := 0
	for _, set := range []bool{exec, http, tcp, grpc, sleep} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return field.ErrorList{field.Required(p, "must specify a handler type")}
	case n > 1:
		return field.ErrorList{field.Forbidden(p, "may not specify more than 1 handler type")}
	}
	return nil
}
