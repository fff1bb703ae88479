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
	Stuck bool
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
	var pods []v1.Pod
	switch a.Kind {
	case Kubelet:
		list, err := kubeletPods(ctx)
		if err != nil {
			return nil, err
		}
		pods = list
	case Slicelet:
		list, err := api.NewClient(filepath.Join(a.Dir, "api.sock")).ListPods(ctx)
		if err != nil {
			return nil, fmt.Errorf("peerrun: slicelet pods: %w", err)
		}
		pods = list
	}
	out := make(map[PodKey]PodStatus, len(pods))
	for _, p := range pods {
		k := a.key(p.Namespace, p.Name)
		out[k] = PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, Stuck: stuck(p.Status)}
	}
	return out, nil
}

// kubeletPods reads the kubelet's /pods. The server's certificate is the self-signed one the
// kubelet made at start in its cert dir, on loopback: not verified.
func kubeletPods(ctx context.Context) ([]v1.Pod, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the kubelet's own self-signed certificate on 127.0.0.1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
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
