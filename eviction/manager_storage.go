package eviction

import (
	"context"
	"slices"
	"time"
)

// storageResult is one pod's last storage measurement.
type storageResult struct {
	usage StorageUsage
	err   error
}

// storageLoop measures every active pod's storage once per monitoring interval, so cycles use
// recent numbers without walking directories themselves. When a measurement shows a pod over
// its own local-storage limits it wakes the loop, so the pod is evicted now rather than at the
// next tick.
func (m *Manager) storageLoop(ctx context.Context) {
	t := m.clock.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if m.measureStorage(ctx) {
			m.log.Debug("eviction loop woken by a local-storage limit violation")
			m.Wake()
		}
	}
}

// measureStorage measures every active pod's storage and reports whether one is over its
// local-storage limits (with local-storage isolation on).
func (m *Manager) measureStorage(ctx context.Context) bool {
	var stats []PodStats
	for _, p := range m.o.Pods.ActivePods() {
		r := m.measurePod(ctx, p)
		if ctx.Err() != nil {
			return false
		}
		if r.err == nil {
			u := &PodUsage{}
			applyStorage(u, r.usage)
			stats = append(stats, PodStats{Pod: p.Pod, Usage: u})
		}
	}
	return m.o.Config.LocalStorageCapacityIsolation && len(LocalStorageEvictions(stats, m.o.Config.PriorityClasses)) > 0
}

// measurePod measures one pod's storage, keeps the result for the cycles, and logs a failure
// when it begins and when it ends, not on every measurement.
func (m *Manager) measurePod(ctx context.Context, p ActivePod) storageResult {
	s, err := m.o.Storage.PodStorage(ctx, p.Pod)
	r := storageResult{usage: s, err: err}
	if ctx.Err() != nil {
		return r
	}
	m.storageMu.Lock()
	defer m.storageMu.Unlock()
	logStorageState(m.log, m.storageState, p.Pod, s, err)
	m.storage[string(p.Pod.UID)] = r
	return r
}

// podUsage is a pod's usage: from its cgroup (or the PodUsage override), plus its local
// storage when a PodStorage is set: the last measurement, or one made now for a pod not
// measured yet. A pod whose storage cannot be measured keeps its memory and process numbers
// and has no storage stats.
func (m *Manager) podUsage(ctx context.Context, p ActivePod) *PodUsage {
	return m.withStorage(ctx, p, m.withContainerMemory(ctx, p, m.o.PodUsage(p)))
}

// podStats is every active pod with its usage (podUsage). With sampled, a pod's cgroup usage
// is its sample from ManagerOptions.Sampled when one is at most SampledMaxAge intervals old at
// now, and is read otherwise.
func (m *Manager) podStats(ctx context.Context, active []ActivePod, now time.Time, sampled bool) []PodStats {
	since := now.Add(-time.Duration(SampledMaxAge * float64(m.interval)))
	stats := make([]PodStats, 0, len(active))
	for _, p := range active {
		var u *PodUsage
		if s, ok := m.sampledUsage(p, since, sampled); ok {
			u = m.withStorage(ctx, p, &s)
		} else {
			u = m.podUsage(ctx, p)
		}
		stats = append(stats, PodStats{Pod: p.Pod, Usage: u})
	}
	return stats
}

// sampledUsage is the pod's usage from its sample taken at or after since, as readPodUsage and
// withContainerMemory would read it; ok is false without such a sample (or with sampled false).
func (m *Manager) sampledUsage(p ActivePod, since time.Time, sampled bool) (PodUsage, bool) {
	if !sampled || p.CgroupPath == "" {
		return PodUsage{}, false
	}
	u, ok := m.o.Sampled.SampledPodUsage(p, since)
	if !ok {
		return PodUsage{}, false
	}
	u.NoStorageStats = m.o.Storage == nil
	return u, true
}

// withStorage is u with the pod's local storage when a PodStorage is set: the last
// measurement, or one made now for a pod not measured yet.
func (m *Manager) withStorage(ctx context.Context, p ActivePod, u *PodUsage) *PodUsage {
	if u == nil || m.o.Storage == nil {
		return u
	}
	m.storageMu.Lock()
	r, ok := m.storage[string(p.Pod.UID)]
	m.storageMu.Unlock()
	if !ok {
		r = m.measurePod(ctx, p)
	}
	v := *u
	v.Containers = slices.Clone(u.Containers)
	if r.err != nil {
		v.NoStorageStats = true
		return &v
	}
	applyStorage(&v, r.usage)
	return &v
}

// forgetStorage drops the measurements and logged state of pods no longer active.
func (m *Manager) forgetStorage(active []ActivePod) {
	m.storageMu.Lock()
	defer m.storageMu.Unlock()
	if len(m.storage) == 0 && len(m.storageState) == 0 {
		return
	}
	keep := make(map[string]bool, len(active))
	for _, p := range active {
		keep[string(p.Pod.UID)] = true
	}
	for uid := range m.storage {
		if !keep[uid] {
			delete(m.storage, uid)
		}
	}
	for uid := range m.storageState {
		if !keep[uid] {
			delete(m.storageState, uid)
		}
	}
}

// withContainerMemory returns u with each container's working set from ContainerMemory (a
// copy; u itself is not changed). A pod whose containers cannot be read keeps u as it is.
func (m *Manager) withContainerMemory(ctx context.Context, p ActivePod, u *PodUsage) *PodUsage {
	if u == nil || m.o.ContainerMemory == nil {
		return u
	}
	mem, err := m.o.ContainerMemory(ctx, p)
	if err != nil {
		m.log.Debug("container memory unavailable", "pod_uid", string(p.Pod.UID), "pod_cgroup", p.CgroupPath, "error", err)
		return u
	}
	v := *u
	v.Containers = slices.Clone(u.Containers)
	for _, c := range mem {
		i := slices.IndexFunc(v.Containers, func(have ContainerUsage) bool { return have.Name == c.Name })
		if i < 0 {
			v.Containers = append(v.Containers, ContainerUsage{Name: c.Name})
			i = len(v.Containers) - 1
		}
		v.Containers[i].Memory = c.Memory
	}
	return &v
}
