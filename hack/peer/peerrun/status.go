package peerrun

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
)

// PodStatus is an agent's own account of a pod: its phase and, for a pod it refused, the
// reason (the kubelet's OutOfcpu, slicelet's refusal).
type PodStatus struct {
	Phase   v1.PodPhase
	Reason  string
	Message string
	// Stuck: a container waits with a reason only a change on the node ends (stuckReasons):
	// the pod will not come up by waiting longer.
	Stuck bool `json:",omitempty"`
	// Settled: the status shows the state the pod keeps (settledStatus); whether the node
	// shows it too is [Agent.Wait]'s to check.
	Settled bool `json:",omitempty"`
	// Running are the containers (init, regular, ephemeral) the status shows running.
	Running []string `json:",omitempty"`
}

// Terminal reports whether the pod ended for good (Succeeded, or Failed: refused or its
// containers failed).
func (s PodStatus) Terminal() bool {
	return s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed
}

// settledStatus reports whether an agent's status of pod shows the state the pod keeps from
// then on, as far as its cgroups go: it is terminal, or stuck; or every container has a
// status and each stands where it stays — a sidecar or regular container running, or ended
// (a restarting one between runs: a crash loop's cgroups come and go whatever the wait), or
// waiting in a back-off; before the pod is initialized, the regular init container that holds
// it backing off. Containers being created (ContainerCreating, PodInitializing, no status
// yet) are not settled, nor is a pod being stopped because it finished (finishing).
func settledStatus(pod *v1.Pod) bool {
	st := pod.Status
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed || stuck(st) {
		return true
	}
	byName := map[string]v1.ContainerStatus{}
	for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses) {
		byName[cs.Name] = cs
	}
	steady := func(name string, mayRun bool) bool {
		cs, ok := byName[name]
		switch {
		case !ok:
			return false
		case cs.State.Running != nil:
			return mayRun
		case cs.State.Terminated != nil:
			return true
		case cs.State.Waiting != nil:
			return slices.Contains(backOffReasons, cs.State.Waiting.Reason)
		}
		return false
	}
	initialized := false
	for _, c := range st.Conditions {
		if c.Type == v1.PodInitialized && c.Status == v1.ConditionTrue {
			initialized = true
		}
	}
	// Init containers in order: sidecars must stand; before initialization, the first regular
	// one that has not ended holds the pod — settled only while it backs off.
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			if !steady(c.Name, true) {
				return false
			}
			continue
		}
		if initialized {
			continue
		}
		if cs, ok := byName[c.Name]; !ok || cs.State.Terminated == nil {
			return ok && cs.State.Waiting != nil && slices.Contains(backOffReasons, cs.State.Waiting.Reason)
		}
	}
	if !initialized {
		return false // between its last init container and the regular ones
	}
	for _, c := range pod.Spec.Containers {
		if !steady(c.Name, true) {
			return false
		}
	}
	return !finishing(pod.Spec.RestartPolicy, pod.Spec.Containers, byName)
}

// finishing reports whether none of the regular containers will run again — all ended, and
// the restart policy is Never, or OnFailure and every one succeeded — in a pod not terminal
// yet: the agent is stopping what still runs (its sidecars, each within its grace period)
// and then its sandbox (the kubelet's computePodActions kills a pod with nothing to keep
// running and nothing to start), reporting the pod Running meanwhile. It settles when it
// is terminal.
func finishing(policy v1.RestartPolicy, containers []v1.Container, byName map[string]v1.ContainerStatus) bool {
	if policy != v1.RestartPolicyNever && policy != v1.RestartPolicyOnFailure {
		return false
	}
	for _, c := range containers {
		t := byName[c.Name].State.Terminated
		if t == nil || policy == v1.RestartPolicyOnFailure && t.ExitCode != 0 {
			return false
		}
	}
	return len(containers) > 0
}

// backOffReasons are the waiting reasons of a container that waits for its next attempt.
var backOffReasons = []string{"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull"}

// running lists the containers st shows running.
func running(st v1.PodStatus) []string {
	var out []string
	for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses) {
		if cs.State.Running != nil {
			out = append(out, cs.Name)
		}
	}
	return out
}

// stuckReasons are the kubelet's waiting reasons of a container that cannot be created until
// something on the node changes: a ConfigMap or Secret it reads is missing, the runtime
// refused its configuration, an image it may not pull is absent or its name is invalid.
var stuckReasons = []string{"CreateContainerConfigError", "CreateContainerError", "ErrImageNeverPull", "InvalidImageName"}

// stuck reports whether a container of st waits with one of stuckReasons.
func stuck(st v1.PodStatus) bool {
	for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && slices.Contains(stuckReasons, w.Reason) {
			return true
		}
	}
	return false
}

// Statuses returns the pods the agent knows with their status: the kubelet's from its
// /pods endpoint on 127.0.0.1:10250 (a standalone kubelet serves its static pods' status
// there), slicelet's from its API socket.
func (a *Agent) Statuses(ctx context.Context) (map[PodKey]PodStatus, error) {
	pods, err := a.Pods(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[PodKey]PodStatus, len(pods))
	for _, p := range pods {
		k := a.key(p.Namespace, p.Name)
		out[k] = PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, Stuck: stuck(p.Status),
			Settled: settledStatus(&p), Running: running(p.Status)}
	}
	return out, nil
}

// Pods returns the pods the agent knows, as it shows them: the kubelet's /pods, slicelet's
// API.
func (a *Agent) Pods(ctx context.Context) ([]v1.Pod, error) {
	if a.Kind == Kubelet {
		return kubeletPods(ctx)
	}
	list, err := api.NewClient(filepath.Join(a.Dir, "api.sock")).ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("peerrun: slicelet pods: %w", err)
	}
	return list, nil
}

// kubeletClient reads the kubelet's /pods, keeping its connection between polls: a TLS
// handshake at every poll is a cost of its own under emulation.
var kubeletClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the kubelet's own self-signed certificate on 127.0.0.1
}

// kubeletPods reads the kubelet's /pods. The server's certificate is the self-signed one the
// kubelet made at start in its cert dir, on loopback: not verified.
func kubeletPods(ctx context.Context) ([]v1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := kubeletClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("peerrun: kubelet pods: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("peerrun: kubelet pods: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peerrun: kubelet pods: %s: %s", resp.Status, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("peerrun: kubelet pods: %w", err)
	}
	return list.Items, nil
}
