package worker

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListingMaxAge is how long a relist's listing serves the syncs that follow it: the
// controller relists every second, so a sync takes the last one while relists succeed.
const ListingMaxAge = 2 * time.Second

// listing is one relist's listing of every sandbox and container, kept for the syncs that
// follow it, as the kubelet's pod workers sync from the status its PLEG relist cached
// (pkg/kubelet/pleg/generic.go, cache.GetNewerThan): an idle node's periodic resyncs list
// nothing themselves. It serves a sync only while nothing was changed through the runtime
// since it began (gen): a sync never misses what slicelet itself did. What changes on its own
// (a container that exits) is in the next relist's listing, within a second, as in the
// kubelet.
type listing struct {
	at     time.Time
	gen    uint64
	sbsOf  map[string][]Sandbox
	ctrsOf map[string][]Container
}

// changes counts the calls that change sandboxes or containers, begun and ended.
type changes struct {
	gen    atomic.Uint64 // bumped when such a call begins and when it ends
	active atomic.Int64  // such calls in progress
}

func (c *changes) begin() { c.active.Add(1); c.gen.Add(1) }
func (c *changes) end()   { c.gen.Add(1); c.active.Add(-1) }

// changingRuntime is a Runtime whose calls that change sandboxes or containers are counted
// into changes. Every other call reads.
type changingRuntime struct {
	Runtime
	c *changes
}

func (r changingRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.RunPodSandbox(ctx, config, handler)
}

func (r changingRuntime) StopPodSandbox(ctx context.Context, id string) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.StopPodSandbox(ctx, id)
}

func (r changingRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.RemovePodSandbox(ctx, id)
}

func (r changingRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func (r changingRuntime) StartContainer(ctx context.Context, id string) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.StartContainer(ctx, id)
}

func (r changingRuntime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.StopContainer(ctx, id, grace)
}

func (r changingRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.UpdateContainerResources(ctx, id, res)
}

func (r changingRuntime) RemoveContainer(ctx context.Context, id string) error {
	r.c.begin()
	defer r.c.end()
	return r.Runtime.RemoveContainer(ctx, id)
}

// relistAll lists every sandbox and container for a relist and keeps the listing for the
// syncs (listing), unless a change through the runtime was in progress or happened meanwhile.
// It returns the listing, and the same by pod UID.
func (w *Worker) relistAll(ctx context.Context) ([]Sandbox, []Container, map[string][]Sandbox, map[string][]Container, error) {
	gen, idle := w.changes.gen.Load(), w.changes.active.Load() == 0
	at := w.clock.Now()
	sbs, ctrs, err := w.list(ctx, "")
	if err != nil {
		w.listing.Store(nil)
		return nil, nil, nil, nil, err
	}
	sbsOf := byPod(sbs, func(sb Sandbox) string { return sb.PodUID })
	ctrsOf := byPod(ctrs, func(c Container) string { return c.PodUID })
	if idle && w.changes.gen.Load() == gen {
		w.listing.Store(&listing{at: at, gen: gen, sbsOf: sbsOf, ctrsOf: ctrsOf})
	} else {
		w.listing.Store(nil)
	}
	return sbs, ctrs, sbsOf, ctrsOf, nil
}

// byPod groups a listing by pod UID, each pod's in listing order: one copy of the listing,
// sorted, whose pieces are the pods' (capped, so that an append to one copies it), where an
// append per item would allocate each pod's slice again as it grows.
func byPod[T any](items []T, uid func(T) string) map[string][]T {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b T) int { return strings.Compare(uid(a), uid(b)) })
	out := make(map[string][]T, len(sorted))
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && uid(sorted[j]) == uid(sorted[i]) {
			j++
		}
		out[uid(sorted[i])] = sorted[i:j:j]
		i = j
	}
	return out
}

// listPod lists the pod's sandboxes and containers for a sync: from the last relist's listing
// while it holds (see listing), from the runtime otherwise.
func (w *Worker) listPod(ctx context.Context, uid string) ([]Sandbox, []Container, error) {
	if l := w.listing.Load(); l != nil && l.gen == w.changes.gen.Load() && w.clock.Since(l.at) <= ListingMaxAge {
		return slices.Clone(l.sbsOf[uid]), slices.Clone(l.ctrsOf[uid]), nil
	}
	return w.list(ctx, uid)
}
