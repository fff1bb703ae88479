package lifecycle

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The active deadline's pod reason and message, and the reason of its event
// (pkg/kubelet/active_deadline.go).
const (
	// ReasonDeadlineExceeded is the Failed pod's reason once spec.activeDeadlineSeconds ran out.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// MessageDeadlineExceeded is its message.
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ActiveDeadline is when pod's spec.activeDeadlineSeconds runs out: that many seconds after the
// pod's start time (status.startTime), as the kubelet's activeDeadlineHandler counts it
// (pkg/kubelet/active_deadline.go, pastActiveDeadline). ok is false for a pod without a
// deadline or not started yet. The deadline is read from the pod as it is now: the API
// server lets it be set or shortened on a running pod.
func ActiveDeadline(pod *v1.Pod, start *metav1.Time) (deadline time.Time, ok bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second), true
}

// PastActiveDeadline reports whether pod, started at start, is past its active deadline at now
// (the kubelet's comparison: elapsed >= allowed).
func PastActiveDeadline(pod *v1.Pod, start *metav1.Time, now time.Time) bool {
	d, ok := ActiveDeadline(pod, start)
	return ok && !now.Before(d)
}
