package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/prober"
)

// Event reasons of lifecycle hooks (pkg/kubelet/events/event.go).
const (
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
)

// minimumGracePeriod is the shortest stop window a container gets, after its preStop hook
// took its share (kuberuntime's minimumGracePeriodInSeconds).
const minimumGracePeriod = 2 * time.Second

// postStartTimeout bounds a postStart hook. The kubelet gives none; the pod's sync waits for
// the hook, so one that never ends would hold the pod for good.
const postStartTimeout = 2 * time.Minute

// runHook runs a lifecycle handler of container c in its run id (pkg/kubelet/lifecycle
// handlers.go Run), at most timeout: exec in the run's context (an exit code other than 0
// fails), an HTTP GET (any response succeeds), or a sleep. It returns the kubelet's message
// when it failed.
func (w *Worker) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, id, sandboxID string, h *v1.LifecycleHandler, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		res, err := w.rt.ExecSync(ctx, id, h.Exec.Command, timeout)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podName(pod), err, string(append(res.Stdout, res.Stderr...))), err
		}
	case h.HTTPGet != nil:
		err := w.httpHook(ctx, pod, c, sandboxID, h.HTTPGet, timeout)
		if err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podName(pod), err), err
		}
	case h.Sleep != nil:
		t := w.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c.Name, podName(pod), err), err
		}
	default:
		err := errors.New("invalid handler")
		return fmt.Sprintf("Lifecycle hook for Container %q in Pod %q failed - error: %v", c.Name, podName(pod), err), err
	}
	return "", nil
}

// httpHook sends an httpGet hook's request; any answer will do (the kubelet's runHTTPHandler).
func (w *Worker) httpHook(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxID string, a *v1.HTTPGetAction, timeout time.Duration) error {
	req, err := prober.NewRequest(ctx, a, c, w.podIP(ctx, pod, sandboxID))
	if err != nil {
		return err
	}
	client := prober.HTTPClient(timeout)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	return resp.Body.Close()
}

// postStart runs the container's postStart hook right after its start (kuberuntime
// startContainer): a hook that fails is reported (FailedPostStartHook) and the container is
// killed, to restart per the restart policy. It reports whether the container may go on.
func (w *Worker) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id, sandboxID string) bool {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return true
	}
	msg, err := w.runHook(ctx, pod, c, id, sandboxID, c.Lifecycle.PostStart, postStartTimeout)
	if err == nil {
		return true
	}
	w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailedPostStartHook, "%s", msg)
	w.log.Warn("postStart hook failed, killing the container", "pod_uid", string(pod.UID), "container", c.Name, "container_id", id, "error", err)
	st := ContainerStatus{Container: Container{ID: id, SandboxID: sandboxID, Name: c.Name, State: StateRunning}}
	if err := w.killContainer(ctx, pod, st, lifecycle.GracePeriod(pod), "FailedPostStartHook"); err != nil {
		w.log.Warn("container could not be killed", "pod_uid", string(pod.UID), "container", c.Name, "container_id", id, "error", err)
	}
	return false
}

// preStop runs the preStop hook of a running container before its stop signal, within grace
// (kuberuntime executePreStopHook): a failure is reported (FailedPreStopHook); a hook that
// outlasts grace is abandoned. It returns what is left of grace for the stop, at least
// minimumGracePeriod.
func (w *Worker) preStop(ctx context.Context, pod *v1.Pod, st ContainerStatus, grace time.Duration) time.Duration {
	c, _ := lifecycle.ContainerByName(pod, st.Name)
	if c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 && st.State == StateRunning {
		start := w.clock.Now()
		msg, err := w.runHook(ctx, pod, c, st.ID, st.SandboxID, c.Lifecycle.PreStop, grace)
		took := w.clock.Since(start)
		switch {
		case err != nil && took >= grace:
			// The kubelet stops waiting for it and reports nothing but a log line.
			w.log.Info("preStop hook not completed in grace period", "pod_uid", string(pod.UID), "container", c.Name, "container_id", st.ID, "grace", grace)
		case err != nil:
			w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailedPreStopHook, "%s", msg)
			w.log.Warn("preStop hook failed", "pod_uid", string(pod.UID), "container", c.Name, "container_id", st.ID, "error", err)
		}
		grace -= took
	}
	return max(grace, minimumGracePeriod)
}

// validateHooks checks the container's lifecycle hooks: one handler each (the API's
// validation); tcpSocket is accepted by the API but never run by the kubelet, so it is refused.
func validateHooks(p *field.Path, c *v1.Container) field.ErrorList {
	if c.Lifecycle == nil {
		return nil
	}
	var errs field.ErrorList
	for _, hook := range []struct {
		name string
		h    *v1.LifecycleHandler
	}{{"postStart", c.Lifecycle.PostStart}, {"preStop", c.Lifecycle.PreStop}} {
		if hook.h == nil {
			continue
		}
		hp := p.Child("lifecycle", hook.name)
		errs = append(errs, validateHandler(hp, hook.h.Exec != nil, hook.h.HTTPGet != nil, hook.h.TCPSocket != nil, false, hook.h.Sleep != nil)...)
		if hook.h.TCPSocket != nil {
			errs = append(errs, field.Forbidden(hp.Child("tcpSocket"), "tcpSocket hooks are not run by the kubelet; use exec, httpGet or sleep"))
		}
		if s := hook.h.Sleep; s != nil && s.Seconds < 0 {
			errs = append(errs, field.Invalid(hp.Child("sleep", "seconds"), s.Seconds, "must be greater than or equal to 0"))
		}
		if e := hook.h.Exec; e != nil && len(e.Command) == 0 {
			errs = append(errs, field.Required(hp.Child("exec", "command"), ""))
		}
	}
	return errs
}
