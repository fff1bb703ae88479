package runtimetest

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// shProbe is an exec probe running a shell command every second.
func shProbe(cmd string, failures int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", cmd}}},
		PeriodSeconds: 1, TimeoutSeconds: 5, FailureThreshold: failures}
}

// withData gives the pod an emptyDir mounted at /srv in every container, for files that
// containers, probes and hooks share.
func withData(pod *v1.Pod) *v1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "data", MountPath: "/srv"})
	}
	return pod
}

// readinessProbe: a container whose readiness probe fails stays unready while it runs (the
// pod Running, Ready and ContainersReady False); the one whose probe succeeds becomes ready.
func (s *suite) readinessProbe(t *testing.T) {
	ready, unready := s.h.Container("ready", loop("up", true)), s.h.Container("unready", loop("up", true))
	ready.ReadinessProbe, unready.ReadinessProbe = shProbe("exit 0", 1), shProbe("exit 1", 1)
	pod := newPod("readiness", v1.RestartPolicyAlways, ready, unready)
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "container ready is ready", func(st v1.PodStatus) bool { return status(st, "ready").Ready })
	if u := status(st, "unready"); u.Ready || u.State.Running == nil || u.RestartCount != 0 {
		t.Errorf("container with a failing readiness probe: %s, ready %v; want running and unready", Describe(st), u.Ready)
	}
	if st.Phase != v1.PodRunning || condition(st, v1.PodReady) != v1.ConditionFalse || condition(st, v1.ContainersReady) != v1.ConditionFalse {
		t.Errorf("pod: phase %s, Ready %s, ContainersReady %s; want Running, False, False", st.Phase, condition(st, v1.PodReady), condition(st, v1.ContainersReady))
	}
}

// livenessProbe: a container whose liveness probe fails is killed and restarted, again and
// again; the last termination is kept.
func (s *suite) livenessProbe(t *testing.T) {
	c := s.h.Container("sick", loop("up", true))
	c.LivenessProbe = shProbe("exit 1", 1)
	pod := newPod("liveness", v1.RestartPolicyAlways, c)
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "restarted twice by its liveness probe", func(st v1.PodStatus) bool { return status(st, "sick").RestartCount >= 2 })
	if cs := status(st, "sick"); cs.LastTerminationState.Terminated == nil || st.Phase != v1.PodRunning {
		t.Errorf("after liveness restarts: phase %s, %s", st.Phase, Describe(st))
	}
}

// startupProbe: until the startup probe succeeds (the container creates /srv/started after a
// second) the container is neither started nor ready, and its failing liveness probe does not
// run; then it is started and ready.
func (s *suite) startupProbe(t *testing.T) {
	c := s.h.Container("slow", "sleep 1; touch /srv/started; "+loop("up", true))
	c.StartupProbe = shProbe("test -f /srv/started", 60)
	c.ReadinessProbe = shProbe("exit 0", 1)
	pod := withData(newPod("startup", v1.RestartPolicyAlways, c))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "container running", func(st v1.PodStatus) bool { return status(st, "slow").State.Running != nil })
	if cs := status(st, "slow"); *cs.Started || cs.Ready {
		t.Errorf("before the startup probe succeeded: started %v, ready %v", *cs.Started, cs.Ready)
	}
	st = s.until(t, s.rt, pod, "started and ready", func(st v1.PodStatus) bool { cs := status(st, "slow"); return *cs.Started && cs.Ready })
	if cs := status(st, "slow"); cs.RestartCount != 0 {
		t.Errorf("restarted before it started: %s", Describe(st))
	}
}

// preStopHook: the preStop hook runs before the stop signal: the container, which exits 0
// on SIGTERM only if the hook's file exists, ends with 0. Killed at the end of the grace period
// instead, it would end with 137 (SIGKILL); how long KillPod took is not checked, since on a
// loaded machine the hook's exec and the stop take what the machine gives them.
func (s *suite) preStopHook(t *testing.T) {
	c := s.h.Container("drain", "trap 'test -f /srv/prestop && exit 0; exit 3' TERM; echo up; while true; do sleep 0.1; done")
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "touch /srv/prestop"}}}}
	pod := withData(newPod("prestop", v1.RestartPolicyAlways, c))
	grace := int64(10)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "running", allRunning)
	// Running says the process started, not that the shell has set its trap yet.
	s.logsUntil(t, pod, "drain", pods.LogOptions{}, "up")
	st, err := s.rt.KillPod(t.Context(), pod, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cs := status(st, "drain"); cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		t.Errorf("after KillPod: %s; want exit 0 (the hook ran before SIGTERM, and SIGTERM ended the container)", Describe(st))
	}
}

// postStartHook: a postStart hook that fails kills the container, which restarts; one that
// succeeds has run by the time the container is reported running.
func (s *suite) postStartHook(t *testing.T) {
	bad, good := s.h.Container("bad", loop("up", true)), s.h.Container("good", loop("up", true))
	bad.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "exit 1"}}}}
	good.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "touch /srv/poststart"}}}}
	pod := withData(newPod("poststart", v1.RestartPolicyAlways, bad, good))
	s.cleanup(t, pod)
	st := s.until(t, s.rt, pod, "bad restarted", func(st v1.PodStatus) bool { return status(st, "bad").RestartCount >= 1 })
	if cs := status(st, "good"); cs.RestartCount != 0 {
		t.Errorf("good: %s", Describe(st))
	}
	res, err := s.rt.ExecSync(t.Context(), pod, "good", []string{"/bin/sh", "-c", "test -f /srv/poststart"}, 10*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the postStart hook's file: exit %d, %v", res.ExitCode, err)
	}
}
