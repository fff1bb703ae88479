package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// systemdObserver feeds every systemd operation of units.Manager into
// slicelet_systemd_operation_duration_seconds. The unit name is dropped: one series per unit
// would grow without bound.
func systemdObserver(ops *metrics.SystemdOperations) units.ObserveFunc {
	return func(op, _ string, d time.Duration, err error) {
		ops.Observe(op, units.ResultOf(err), d)
	}
}

// listenMetrics binds the metrics address ([metrics] address), so a bad or busy address fails
// the start like the API socket does. It returns the function that serves until its context
// ends; with metrics off (empty address) that function returns at once.
func listenMetrics(m *metrics.Metrics, address string, log *slog.Logger) (serve func(context.Context), err error) {
	log = log.With("component", "metrics")
	srv, err := m.Listen(address, log)
	if err != nil {
		return nil, err
	}
	if srv == nil {
		log.Info("metrics off ([metrics] address is empty)")
		return func(context.Context) {}, nil
	}
	log.Info("serving metrics", "address", address, "listen", srv.Addr().String())
	return func(ctx context.Context) {
		if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
			log.Error("metrics server stopped", "error", err)
		}
	}, nil
}

// kubeletRuntime is the pod runtime as the controller drives it, timed into the kubelet's
// families: each SyncPod into kubelet_pod_worker_duration_seconds (create for a pod's first
// sync, sync after), each KillPod too (kill), each Relist into the PLEG relist families, and
// a pod's first Running status into kubelet_pod_start_duration_seconds (from its first sync:
// the node seeing it) and kubelet_started_pods_total. What it remembers of a pod goes with
// Forget.
type kubeletRuntime struct {
	pods.Runtime
	k     *metrics.KubeletFamilies
	clock clock.PassiveClock

	mu   sync.Mutex
	seen map[types.UID]podSeen
}

// podSeen is when the runtime first synced a pod and whether it has run.
type podSeen struct {
	at      time.Time
	running bool
}

func newKubeletRuntime(rt pods.Runtime, k *metrics.KubeletFamilies, clk clock.PassiveClock) pods.Runtime {
	if k == nil {
		return rt
	}
	return &kubeletRuntime{Runtime: rt, k: k, clock: clk, seen: map[types.UID]podSeen{}}
}

// SyncPod implements pods.Runtime.
func (r *kubeletRuntime) SyncPod(ctx context.Context, pod *v1.Pod, slice slices.PodSlice) (v1.PodStatus, error) {
	start := r.clock.Now()
	r.mu.Lock()
	s, ok := r.seen[pod.UID]
	if !ok {
		s = podSeen{at: start}
		r.seen[pod.UID] = s
	}
	r.mu.Unlock()
	status, err := r.Runtime.SyncPod(ctx, pod, slice)
	end := r.clock.Now()
	op := metrics.PodWorkerSync
	if !ok {
		op = metrics.PodWorkerCreate
	}
	r.k.PodWorker(op, end.Sub(start))
	if err == nil && status.Phase == v1.PodRunning && !s.running {
		r.mu.Lock()
		if cur, ok := r.seen[pod.UID]; ok && !cur.running {
			cur.running = true
			r.seen[pod.UID] = cur
			r.k.PodStarted(end.Sub(cur.at))
		}
		r.mu.Unlock()
	}
	return status, err
}

// KillPod implements pods.Runtime.
func (r *kubeletRuntime) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) (v1.PodStatus, error) {
	start := r.clock.Now()
	status, err := r.Runtime.KillPod(ctx, pod, grace)
	r.k.PodWorker(metrics.PodWorkerKill, r.clock.Since(start))
	return status, err
}

// Relist implements pods.Runtime.
func (r *kubeletRuntime) Relist(ctx context.Context, ps []*v1.Pod) (pods.Relisted, error) {
	start := r.clock.Now()
	res, err := r.Runtime.Relist(ctx, ps)
	r.k.Relisted(start, r.clock.Since(start))
	return res, err
}

// Forget implements pods.Runtime.
func (r *kubeletRuntime) Forget(ctx context.Context, uid string) error {
	r.mu.Lock()
	delete(r.seen, types.UID(uid))
	r.mu.Unlock()
	return r.Runtime.Forget(ctx, uid)
}
