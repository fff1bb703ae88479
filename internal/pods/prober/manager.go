package prober

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Kind is a probe's kind.
type Kind int

// Kinds of probes.
const (
	Liveness Kind = iota
	Readiness
	Startup
)

// String is the kind as the kubelet's events and metrics name it.
func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	}
	return "Startup"
}

// Probe is the container's probe of that kind; nil when it has none.
func (k Kind) Probe(c *v1.Container) *v1.Probe {
	switch k {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

// initial is a kind's result before its first verdict (pkg/kubelet/prober/worker.go
// newWorker): a container is live until proven otherwise, not ready, not started.
func (k Kind) initial() Result {
	switch k {
	case Liveness:
		return Success
	case Readiness:
		return Failure
	}
	return Unknown
}

// The API's probe defaults (SetDefaults_Probe), for probes not defaulted before.
const (
	defaultPeriod           = 10
	defaultTimeout          = 1
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// Period is the probe's periodSeconds, 10 s when unset.
func Period(p *v1.Probe) time.Duration { return seconds(p.PeriodSeconds, defaultPeriod) }

// Timeout is the probe's timeoutSeconds, 1 s when unset.
func Timeout(p *v1.Probe) time.Duration { return seconds(p.TimeoutSeconds, defaultTimeout) }

func seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func threshold(v, def int32) int {
	if v <= 0 {
		return int(def)
	}
	return int(v)
}

// Instance is one running container run to probe.
type Instance struct {
	// Pod and Container are the spec the run was started from.
	Pod       *v1.Pod
	Container *v1.Container
	// ID is the run's container ID.
	ID string
	// StartedAt is when its process started (initialDelaySeconds counts from it).
	StartedAt time.Time
	// PodIP is the host of network probes that give none.
	PodIP string
	// Exec runs exec probes in the run's context.
	Exec Execer
}

// Reporter receives what the probes find.
type Reporter interface {
	// Probed is called after each probe that ran, with how long it took (result Unknown with
	// err when it could not run): for events and metrics.
	Probed(in *Instance, kind Kind, result Result, output string, took time.Duration, err error)
	// Changed is called when a verdict of a run of the pod changed (started, ready, or a
	// liveness or startup failure): the pod needs a sync.
	Changed(podUID string)
}

// Status is what the probes decided about a run.
type Status struct {
	// Started: the startup probe succeeded, or there is none (the kubelet's container
	// status started).
	Started bool
	// Ready: started, and the readiness probe's verdict is success, or there is none.
	Ready bool
	// Failed is set when the liveness or startup probe failed: the run must be killed (and
	// restarted per the restart policy); FailedKind says which.
	Failed     bool
	FailedKind Kind
}

// Manager runs the probe loops of the running container runs it is given (the kubelet's
// prober manager and its workers), one goroutine per probe, on an injected clock. Its methods
// are safe for concurrent use.
type Manager struct {
	clock clock.Clock
	rep   Reporter
	// start is when the manager was made: a run started more than restartGrace before it was
	// running before this agent (a restart of slicelet, or the kubelet's run adopted).
	start time.Time

	mu   sync.Mutex
	runs map[string]*probed // by container ID
	wg   sync.WaitGroup
}

// probed is one run with its probe loops.
type probed struct {
	in      Instance
	cancel  context.CancelFunc
	has     [3]bool
	results [3]Result
	// adopted: the run started before this agent (Manager.start less restartGrace).
	adopted bool
}

// restartGrace is how long before the agent's start a run must have started to count as one
// that was running before it (pkg/kubelet/prober kubeletRestartGracePeriod: 10 s).
const restartGrace = 10 * time.Second

// NewManager returns a Manager reporting to rep; the real clock when c is nil.
func NewManager(c clock.Clock, rep Reporter) *Manager {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Manager{clock: c, rep: rep, start: c.Now(), runs: map[string]*probed{}}
}

// Ensure starts the probe loops of a running run unless they run already. A run without
// probes is recorded too (Status: started and ready).
func (m *Manager) Ensure(in Instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[in.ID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &probed{in: in, cancel: cancel}
	p.adopted = !in.StartedAt.IsZero() && in.StartedAt.Before(m.start.Add(-restartGrace))
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		p.results[k] = k.initial()
		if k == Readiness && p.adopted {
			p.results[k] = Unknown // no verdict yet: status keeps the pod's readiness
		}
		if spec := k.Probe(in.Container); spec != nil {
			p.has[k] = true
			m.wg.Go(func() { m.loop(ctx, p, k, spec) })
		}
	}
	m.runs[in.ID] = p
}

// Keep stops the loops of the pod's runs that are not in keep (container IDs) and forgets them.
func (m *Manager) Keep(podUID string, keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, p := range m.runs {
		if string(p.in.Pod.UID) == podUID && !keep[id] {
			p.cancel()
			delete(m.runs, id)
		}
	}
}

// Close stops every loop and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	for id, p := range m.runs {
		p.cancel()
		delete(m.runs, id)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// Status is what the probes decided about the run; ok is false for a run the manager does not
// probe.
func (m *Manager) Status(id string) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.runs[id]
	if !ok {
		return Status{}, false
	}
	return p.status(), true
}

// status is the kubelet's UpdatePodStatus for one run. Call with m.mu held.
//
// A run that was running before this agent started and whose readiness probe has not given
// its first verdict is ready as its pod was (pkg/kubelet/prober/prober_manager.go,
// setReadyStateOnKubeletRestart: the Ready condition of the pod's last status), so that
// restarting the agent, or moving the node from the kubelet to slicelet, turns no ready pod
// NotReady; a new run is not ready until its first success.
func (p *probed) status() Status {
	var s Status
	s.Started = !p.has[Startup] || p.results[Startup] == Success
	ready := !p.has[Readiness] || p.results[Readiness] == Success
	if p.adopted && p.has[Readiness] && p.results[Readiness] == Unknown {
		ready = podReady(p.in.Pod)
	}
	s.Ready = s.Started && ready
	switch {
	case p.has[Liveness] && p.results[Liveness] == Failure:
		s.Failed, s.FailedKind = true, Liveness
	case p.has[Startup] && p.results[Startup] == Failure:
		s.Failed, s.FailedKind = true, Startup
	}
	return s
}

// podReady reports whether the pod's status has the Ready condition true.
func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// set records a verdict and reports a change.
func (m *Manager) set(p *probed, k Kind, r Result) {
	m.mu.Lock()
	changed := p.results[k] != r
	p.results[k] = r
	m.mu.Unlock()
	if changed {
		m.rep.Changed(string(p.in.Pod.UID))
	}
}

// gate reports whether the probe of kind k may run now (pkg/kubelet/prober/worker.go doProbe):
// not before initialDelaySeconds after the start, the startup probe only until it succeeded,
// the others only after; done is set once the startup probe succeeded (its loop ends).
func (m *Manager) gate(p *probed, k Kind, spec *v1.Probe) (run, done bool) {
	if int32(m.clock.Since(p.in.StartedAt).Seconds()) < spec.InitialDelaySeconds {
		return false, false
	}
	m.mu.Lock()
	started := !p.has[Startup] || p.results[Startup] == Success
	m.mu.Unlock()
	if k == Startup {
		return !started, started
	}
	return started, false
}

// loop probes every period until ctx ends, applying the thresholds: a verdict changes after
// successThreshold successes or failureThreshold failures in a row. A liveness or startup
// failure puts the loop on hold: the run is to be killed, and a new run gets new loops.
func (m *Manager) loop(ctx context.Context, p *probed, k Kind, spec *v1.Probe) {
	// A ticker's schedule (the kubelet's), on timers: the probes run at fixed times from
	// the loop's start however long each takes; missed times are skipped.
	period := Period(spec)
	next := m.clock.Now()
	timer := m.clock.NewTimer(period)
	timer.Stop()
	defer timer.Stop()
	succ := threshold(spec.SuccessThreshold, defaultSuccessThreshold)
	fail := threshold(spec.FailureThreshold, defaultFailureThreshold)
	last, streak, hold := Unknown, 0, false
	t := Target{Container: p.in.Container, PodIP: p.in.PodIP, Exec: p.in.Exec, Timeout: Timeout(spec)}
	for {
		run, done := m.gate(p, k, spec)
		if done {
			return
		}
		if run && !hold {
			start := m.clock.Now()
			res, out, err := Run(ctx, &spec.ProbeHandler, t)
			if ctx.Err() != nil {
				return
			}
			m.rep.Probed(&p.in, k, res, out, m.clock.Since(start), err)
			if err == nil {
				if res == Warning {
					res = Success
				}
				if res == last {
					streak++
				} else {
					last, streak = res, 1
				}
				if (res == Failure && streak >= fail) || (res == Success && streak >= succ) {
					m.set(p, k, res)
					if res == Failure && k != Readiness {
						hold, streak = true, 0
					}
				}
			}
		}
		now := m.clock.Now()
		for !next.After(now) {
			next = next.Add(period)
		}
		timer.Reset(next.Sub(now))
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
	}
}
