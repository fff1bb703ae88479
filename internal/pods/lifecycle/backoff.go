package lifecycle

import "time"

// The kubelet's container restart back-off (pkg/kubelet: backOffPeriod, MaxContainerBackOff;
// k8s.io/client-go/util/flowcontrol.Backoff).
const (
	// DefaultBackoffInitial is the first restart delay (the kubelet's backOffPeriod).
	DefaultBackoffInitial = 10 * time.Second
	// DefaultBackoffMax is the longest restart delay (the kubelet's MaxContainerBackOff).
	DefaultBackoffMax = 300 * time.Second
)

// Backoff is the restart back-off of a container: the first restart is immediate, then each
// restart waits Initial, 2·Initial, … up to Max after the previous instance ended. An entry
// that was last advanced more than ResetAfter ago is forgotten (flowcontrol's 2·Max), so a
// container that ran for that long restarts at once again.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	ResetAfter time.Duration
}

// DefaultBackoff returns the kubelet's values: 10 s doubling to 300 s, reset after 10 min.
func DefaultBackoff() Backoff {
	return Backoff{Initial: DefaultBackoffInitial, Max: DefaultBackoffMax, ResetAfter: 2 * DefaultBackoffMax}
}

// WithDefaults returns b with its zero fields filled: Initial and Max from DefaultBackoff (Max
// at least Initial), ResetAfter 2·Max.
func (b Backoff) WithDefaults() Backoff {
	d := DefaultBackoff()
	if b.Initial <= 0 {
		b.Initial = d.Initial
	}
	if b.Max <= 0 {
		b.Max = max(d.Max, b.Initial)
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = 2 * b.Max
	}
	return b
}

// Until reports whether restarting a container whose last instance finished at finished must
// wait at now, and until when (flowcontrol.Backoff.IsInBackOffSince).
func (b Backoff) Until(delay time.Duration, updated, finished, now time.Time) (time.Time, bool) {
	if delay <= 0 || updated.IsZero() {
		return time.Time{}, false
	}
	if now.Sub(updated) > b.ResetAfter {
		return time.Time{}, false
	}
	if now.Sub(finished) < delay {
		return finished.Add(delay), true
	}
	return time.Time{}, false
}

// Next returns the entry after a restart of the instance that finished at finished
// (flowcontrol.Backoff.Next): Initial for a new or expired entry, else double, at most Max.
func (b Backoff) Next(delay time.Duration, updated, finished time.Time) (time.Duration, time.Time) {
	if delay <= 0 || updated.IsZero() || finished.Sub(updated) > b.ResetAfter {
		return b.Initial, finished
	}
	return min(2*delay, b.Max), finished
}

// Adopted returns the entry of a container whose run attempt (its restart count, the CRI
// attempt) started at started without an entry of this agent's: run by another agent (the
// kubelet, before the node changed agent) or with its record lost. It is the entry the kubelet
// would hold had it run them all: no entry for a first run (a restart at once), then each
// restart advanced it before starting the next run, so run n ≥ 1 was started under
// Initial·2^(n-1), at most Max, advanced when it started. A crash loop taken over keeps its
// back-off instead of starting over at once and at Initial; a run that lasted longer than
// ResetAfter finds the entry expired, as the kubelet's would be.
func (b Backoff) Adopted(attempt uint32, started time.Time) (time.Duration, time.Time) {
	if attempt == 0 || started.IsZero() {
		return 0, time.Time{}
	}
	delay := b.Initial
	for i := uint32(1); i < attempt && delay < b.Max; i++ {
		delay *= 2
	}
	return min(delay, b.Max), started
}
