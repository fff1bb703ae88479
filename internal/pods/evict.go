package pods

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	stdslices "slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// This file is what the eviction manager (eviction.Manager) needs from the controller: the
// active pods with their cgroups, and eviction.

// Eviction annotations and condition set on an evicted pod.
const (
	// ReasonEvicted is an evicted pod's status reason (the kubelet's).
	ReasonEvicted = eviction.Reason
	// ReasonDeadlineExceeded is the status reason of a pod failed at its active deadline
	// (lifecycle.ReasonDeadlineExceeded).
	ReasonDeadlineExceeded = lifecycle.ReasonDeadlineExceeded
	// ReasonTerminationByKubelet is the reason of the DisruptionTarget condition the kubelet
	// adds to a pod it evicts for node pressure.
	ReasonTerminationByKubelet = "TerminationByKubelet"
	// AnnotationEvictionPrefix prefixes the eviction's annotations (offending containers,
	// starved resource) when they are copied onto the pod, which has no events here.
	AnnotationEvictionPrefix = "eviction.slicelet.io/"
)

// ActivePods returns the pods the eviction manager may rank: admitted, not being deleted, not
// terminal (Succeeded or Failed, which includes evicted pods), each with its pod cgroup ("" while
// it has no slice yet). Sorted by UID for a stable order.
func (c *Controller) ActivePods() []eviction.ActivePod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]eviction.ActivePod, 0, len(c.pods))
	now := c.clock.Now()
	for _, uid := range stdslices.Sorted(maps.Keys(c.pods)) {
		ps := c.pods[uid]
		if !ps.admitted || ps.deleting || ps.status.Phase == v1.PodSucceeded || ps.status.Phase == v1.PodFailed {
			continue
		}
		// Shared, not copied: the eviction manager and the stats sampler, which call this for
		// every pod every cycle, only read the pods (ActivePod.Pod).
		out = append(out, eviction.ActivePod{Pod: ps.sharedView(now), CgroupPath: ps.slice.CgroupPath})
	}
	return out
}

// EvictPod evicts a pod for node pressure: it stops the pod's containers gracefully within
// grace, destroys its slice and drops its runtime records, and marks it phase Failed, reason
// "Evicted", with message, the annotations (prefixed AnnotationEvictionPrefix) and a
// DisruptionTarget condition. The pod is never restarted: it stays listed as Failed/Evicted.
//
// It is un-admitted first, so the controller stops syncing it and it no longer counts against
// allocatable. An API pod stays until it is deleted through the API. A manifest-directory pod
// stays Failed until its manifest changes (its content-derived UID changes, so the new version
// is a new pod that goes through admission) or is removed; the kubelet's static pods are never
// evicted, slicelet's are (docs/eviction.md).
func (c *Controller) EvictPod(ctx context.Context, pod *v1.Pod, grace time.Duration, message string, annotations map[string]string) error {
	uid := string(pod.UID)
	c.mu.Lock()
	ps, ok := c.pods[uid]
	if !ok || !ps.admitted || ps.deleting {
		c.mu.Unlock()
		return fmt.Errorf("pod %s (%s): %w", key(pod), uid, ErrNotEvictable)
	}
	desired := ps.desired.Pod
	ps.admitted = false
	ps.reason, ps.message = ReasonEvicted, message
	ps.status = evictedStatus(ps.status, message, c.clock.Now())
	c.statusLocked()
	ps.desired.Pod = withEvictionAnnotations(desired, annotations)
	now := c.clock.Now()
	c.mu.Unlock()

	// The decision is on disk before the pod is stopped: after a restart, the pod stays
	// evicted. Pressure relief does not wait for a disk that fails (disk pressure is one reason
	// to evict): the pod is stopped anyway and the failure reported.
	if c.evictions != nil {
		rec := EvictionRecord{UID: uid, Namespace: pod.Namespace, Name: pod.Name, Message: message, Annotations: annotations, Time: now}
		if err := c.evictions.Save(rec); err != nil {
			c.log.Error("eviction not recorded: the pod may run again after slicelet restarts", "pod", key(pod), "pod_uid", uid, "error", err)
		} else {
			c.mu.Lock()
			c.evicted[uid] = rec
			c.mu.Unlock()
		}
	}

	err := c.stopFailed(ctx, ps, desired, grace, func(s v1.PodStatus) v1.PodStatus {
		if s.Reason == ReasonEvicted {
			return s
		}
		return evictedStatus(s, message, c.clock.Now())
	})
	if err != nil {
		c.log.Warn("evicted pod not fully stopped", "pod", key(pod), "pod_uid", uid, "error", err)
		return fmt.Errorf("pod %s: evict: %w", key(pod), err)
	}
	c.log.Info("pod stopped for eviction", "pod", key(pod), "pod_uid", uid, "reason", ReasonEvicted, "message", message)
	// The event is about the pod with its eviction annotations: cluster mode sends them as the
	// annotations of the kubelet's Evicted event (recorder.AnnotatedEventf).
	c.event(withEvictionAnnotations(desired, annotations), v1.EventTypeWarning, ReasonEvicted, "%s", message)
	return nil
}

// stopFailed stops an un-admitted pod for good: its containers within grace, its slice, its
// runtime records; then, unless the pod was replaced meanwhile, its status is final(status):
// a sync that was already running when the pod was un-admitted may have written its own
// status, and the failure's wins.
func (c *Controller) stopFailed(ctx context.Context, ps *podState, pod *v1.Pod, grace time.Duration, final func(v1.PodStatus) v1.PodStatus) error {
	uid := string(pod.UID)
	var errs []error
	if _, err := c.rt.KillPod(ctx, pod, grace); err != nil {
		errs = append(errs, fmt.Errorf("stop containers: %w", err))
	}
	if err := c.slices.DestroyPod(ctx, uid); err != nil {
		errs = append(errs, fmt.Errorf("destroy slice: %w", err))
	}
	if err := c.rt.Forget(ctx, uid); err != nil {
		errs = append(errs, fmt.Errorf("forget: %w", err))
	}
	c.mu.Lock()
	if cur, ok := c.pods[uid]; ok && cur == ps {
		ps.slice = slices.PodSlice{}
		ps.status = final(ps.status)
		c.changedLocked()
		// Stopped: cluster mode may now report the terminal status.
		c.statusLocked()
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

// failPod fails a running pod on the node's own decision (its active deadline ran out): it is
// un-admitted, marked phase Failed with reason and message and stopped for good, with a Normal
// event of the same reason (pkg/kubelet/active_deadline.go, ShouldEvict; the kubelet's status
// manager then writes the phase once the containers stopped). Unlike an eviction nothing is
// recorded on disk and no DisruptionTarget condition is added.
func (c *Controller) failPod(ctx context.Context, ps *podState, pod *v1.Pod, grace time.Duration, reason, message string) {
	uid := string(pod.UID)
	final := func(s v1.PodStatus) v1.PodStatus {
		if s.Reason == reason {
			return s
		}
		return failedStatus(s, reason, message, c.clock.Now())
	}
	c.mu.Lock()
	if !ps.admitted || ps.deleting {
		c.mu.Unlock()
		return
	}
	ps.admitted = false
	ps.reason, ps.message = reason, message
	ps.status = final(ps.status)
	c.changedLocked()
	c.mu.Unlock()
	c.log.Info("pod failed", "pod", key(pod), "pod_uid", uid, "reason", reason, "message", message)
	c.event(pod, v1.EventTypeNormal, reason, "%s", message)
	if err := c.stopFailed(ctx, ps, pod, grace, final); err != nil {
		c.log.Warn("failed pod not fully stopped", "pod", key(pod), "pod_uid", uid, "error", err)
	}
}

// ErrNotEvictable is returned by EvictPod for a pod that is unknown, not admitted (rejected or
// already evicted) or being deleted.
var ErrNotEvictable = errors.New("pod not evictable")

// PodCleanedUp reports whether a pod's slice is gone from the slice manager: true for an
// evicted pod once EvictPod destroyed it, and for a pod the controller no longer knows.
func (c *Controller) PodCleanedUp(uid string) bool {
	for _, s := range c.slices.Pods() {
		if s.UID == uid {
			return false
		}
	}
	return true
}

// evictedStatus is status turned Failed/Evicted with the DisruptionTarget condition the
// kubelet adds; running containers are shown terminated.
func evictedStatus(status v1.PodStatus, message string, now time.Time) v1.PodStatus {
	s := failedStatus(status, ReasonEvicted, message, now)
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: ReasonTerminationByKubelet,
		Message: message, LastTransitionTime: metav1.NewTime(now)})
	sortConditions(s.Conditions)
	return s
}

// failedStatus is status turned Failed with reason and message, Ready and ContainersReady
// False (reason PodFailed, pkg/kubelet/status/generate.go), PodReadyToStartContainers False
// (the sandbox stopped with the containers); running containers are shown terminated, not
// started.
func failedStatus(status v1.PodStatus, reason, message string, now time.Time) v1.PodStatus {
	s := *status.DeepCopy()
	s.Phase = v1.PodFailed
	s.Reason = reason
	s.Message = message
	t := metav1.NewTime(now)
	s.Conditions = stdslices.DeleteFunc(s.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.DisruptionTarget || c.Type == v1.PodReady || c.Type == v1.ContainersReady || c.Type == v1.PodReadyToStartContainers
	})
	s.Conditions = append(s.Conditions,
		// The kubelet's GeneratePodReadyToStartContainersCondition for a stopped sandbox
		// (pkg/kubelet/kuberuntime/util/util.go PodSandboxChanged: PodSandboxNotReadyMsgSandboxNotReady).
		v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "pod sandbox is not ready", LastTransitionTime: t},
		v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t},
		v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t})
	sortConditions(s.Conditions)
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			if list[i].State.Running != nil {
				// As the runtime reports a killed container to the kubelet: SIGKILL's exit
				// code, reason Error, the container's ID, no message of its own (the pod's
				// message says why).
				list[i].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode: 137, Reason: "Error", ContainerID: list[i].ContainerID, StartedAt: list[i].State.Running.StartedAt, FinishedAt: t}}
				list[i].Ready = false
				list[i].Started = ptr.To(false)
			}
		}
	}
	return s
}

// conditionRank is the place of a pod condition in the order a kubelet node's pods show them:
// DisruptionTarget (added by the eviction before the status is generated), then as
// pkg/kubelet/kubelet_pods.go generateAPIPodStatus appends them; any other type after those.
var conditionRank = map[v1.PodConditionType]int{
	v1.DisruptionTarget: 1, v1.PodReadyToStartContainers: 2, v1.PodInitialized: 3, v1.PodReady: 4, v1.ContainersReady: 5, v1.PodScheduled: 6,
}

// sortConditions orders conditions as conditionRank says, keeping the order of other types.
func sortConditions(conditions []v1.PodCondition) {
	rank := func(t v1.PodConditionType) int {
		if r, ok := conditionRank[t]; ok {
			return r
		}
		return len(conditionRank) + 1
	}
	stdslices.SortStableFunc(conditions, func(a, b v1.PodCondition) int { return cmp.Compare(rank(a.Type), rank(b.Type)) })
}

// withEvictionAnnotations returns a copy of pod carrying the eviction's annotations.
func withEvictionAnnotations(pod *v1.Pod, annotations map[string]string) *v1.Pod {
	if len(annotations) == 0 {
		return pod
	}
	cp := pod.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		cp.Annotations[AnnotationEvictionPrefix+k] = v
	}
	return cp
}
