package gc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ContainerPolicy is the kubelet's container GCPolicy.
type ContainerPolicy struct {
	// MinAge is the minimum time since creation before a dead container may be removed.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead containers to keep per (pod, container name);
	// negative means no limit.
	MaxPerPodContainer int
	// MaxContainers is how many dead containers to keep on the node; negative means no limit.
	MaxContainers int
}

// Validate reports the policy's problems: NewContainerGC rejects a negative MinAge; negative
// counts are valid (no limit).
func (p ContainerPolicy) Validate() error {
	if p.MinAge < 0 {
		return fmt.Errorf("minimum age %v must not be negative", p.MinAge)
	}
	return nil
}

// Why containers and sandboxes are removed.
const (
	// ReasonPodDeleted: the pod is deleted, so all its dead containers (or inactive sandboxes) go.
	ReasonPodDeleted Reason = "pod-deleted"
	// ReasonPodTerminated: evictNonDeletedPods and the pod is terminated.
	ReasonPodTerminated Reason = "pod-terminated"
	// ReasonMaxPerPodContainer: beyond MaxPerPodContainer for its (pod, container name).
	ReasonMaxPerPodContainer Reason = "max-per-pod-container"
	// ReasonMaxContainers: beyond MaxContainers on the node (even share, then oldest first).
	ReasonMaxContainers Reason = "max-containers"
	// ReasonSuperseded: an inactive sandbox that is not its pod's newest.
	ReasonSuperseded Reason = "superseded"
)

// ContainerRemoval is one container a plan removes.
type ContainerRemoval struct {
	// ID is the container.
	ID string `json:"id"`
	// PodUID is the pod of its evict unit.
	PodUID string `json:"podUID"`
	// Name is the container name of its evict unit.
	Name string `json:"name"`
	// Reason is why it goes.
	Reason Reason `json:"reason"`
	// StopFirst is set for a container in unknown state: it may still run, so the executor
	// stops it first and, as the kubelet, skips the removal if the stop fails.
	StopFirst bool `json:"stopFirst"`
}

// ContainerPlan is the outcome of planning container GC.
type ContainerPlan struct {
	// Remove lists the containers to remove, in order: deleted/terminated pods' first, then per
	// unit, then node-wide; each group oldest first.
	Remove []ContainerRemoval
	// Err is nil or wraps ErrInvalidInput (then Remove is empty).
	Err error
}

// containerGCInfo is one evictable container.
type containerGCInfo struct {
	id, podUID, name string
	created          time.Time
	unknown          bool
}

type evictUnit struct{ podUID, name string }

// PlanContainerGC plans the kubelet's evictContainers (pkg/kubelet/kuberuntime/kuberuntime_gc.go):
//
//   - evictable: not running and created at or before now−MinAge (age from creation, not exit),
//     grouped by (pod UID, container name);
//   - if allSourcesReady: every evictable container of a deleted pod (deletedPods), or with
//     evictNonDeletedPods of a terminated pod (terminatedPods), is removed;
//   - MaxPerPodContainer ≥ 0: the newest MaxPerPodContainer of each unit stay;
//   - MaxContainers ≥ 0 and more remain: each unit keeps max(1, MaxContainers/units), then the
//     oldest overall go until MaxContainers remain.
//
// "Oldest" is by creation time; ties are broken by ID so that a plan is deterministic (the
// kubelet's sort is not stable). The function does no I/O.
func PlanContainerGC(containers []Container, deletedPods map[string]bool, policy ContainerPolicy, now time.Time, allSourcesReady, evictNonDeletedPods bool, terminatedPods map[string]bool) ContainerPlan {
	var p ContainerPlan
	if err := policy.Validate(); err != nil {
		p.Err = fmt.Errorf("%w: container gc policy: %w", ErrInvalidInput, err)
		return p
	}
	if err := checkContainers(containers); err != nil {
		p.Err = err
		return p
	}
	newestGCTime := now.Add(-policy.MinAge)
	units := map[evictUnit][]containerGCInfo{}
	evictable := 0
	for i := range containers {
		c := &containers[i]
		if c.State == StateRunning || newestGCTime.Before(c.CreatedAt) {
			continue
		}
		k := evictUnit{c.PodUID, c.Name}
		units[k] = append(units[k], containerGCInfo{id: c.ID, podUID: c.PodUID, name: c.Name, created: c.CreatedAt, unknown: c.State == StateUnknown})
		evictable++
	}
	p.Remove = make([]ContainerRemoval, 0, evictable) // at most every evictable one
	// The kubelet walks a map; a sorted walk makes the plan reproducible.
	keys := make([]evictUnit, 0, len(units))
	for k := range units {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b evictUnit) int {
		return cmp.Or(cmp.Compare(a.podUID, b.podUID), cmp.Compare(a.name, b.name))
	})

	if allSourcesReady {
		live := keys[:0]
		for _, k := range keys {
			switch {
			case deletedPods[k.podUID]:
				p.removeOldestN(units[k], len(units[k]), ReasonPodDeleted)
				delete(units, k)
			case evictNonDeletedPods && terminatedPods[k.podUID]:
				p.removeOldestN(units[k], len(units[k]), ReasonPodTerminated)
				delete(units, k)
			default:
				live = append(live, k)
			}
		}
		keys = live
	}

	if policy.MaxPerPodContainer >= 0 {
		for _, k := range keys {
			units[k] = p.removeOldestN(units[k], len(units[k])-policy.MaxPerPodContainer, ReasonMaxPerPodContainer)
		}
	}

	if policy.MaxContainers >= 0 {
		total := 0
		for _, k := range keys {
			total += len(units[k])
		}
		if total > policy.MaxContainers {
			// Leave an equal number per unit (at least one); units emptied above still count,
			// as in the kubelet's map.
			perUnit := max(1, policy.MaxContainers/len(keys))
			total = 0
			for _, k := range keys {
				units[k] = p.removeOldestN(units[k], len(units[k])-perUnit, ReasonMaxContainers)
				total += len(units[k])
			}
			if total > policy.MaxContainers {
				flat := make([]containerGCInfo, 0, total)
				for _, k := range keys {
					flat = append(flat, units[k]...)
				}
				p.removeOldestN(flat, total-policy.MaxContainers, ReasonMaxContainers)
			}
		}
	}
	return p
}

// removeOldestN plans the removal of the n oldest of list and returns the rest, newest first.
func (p *ContainerPlan) removeOldestN(list []containerGCInfo, n int, r Reason) []containerGCInfo {
	if n <= 0 {
		return list
	}
	slices.SortFunc(list, func(a, b containerGCInfo) int { // newest first
		return cmp.Or(b.created.Compare(a.created), cmp.Compare(a.id, b.id))
	})
	keep := max(len(list)-n, 0)
	for i := len(list) - 1; i >= keep; i-- {
		c := list[i]
		p.Remove = append(p.Remove, ContainerRemoval{ID: c.id, PodUID: c.podUID, Name: c.name, Reason: r, StopFirst: c.unknown})
	}
	return list[:keep]
}

func checkContainers(containers []Container) error {
	seen := make(map[string]bool, len(containers))
	for i := range containers {
		c := &containers[i]
		switch {
		case c.ID == "":
			return invalid("container %d: empty ID", i)
		case seen[c.ID]:
			return invalid("container %q: listed twice", c.ID)
		case c.PodUID == "":
			return invalid("container %q: empty pod UID", c.ID)
		}
		switch c.State {
		case StateRunning, StateExited, StateCreated, StateUnknown:
		default:
			return invalid("container %q: state %q: must be running, exited, created or unknown", c.ID, c.State)
		}
		seen[c.ID] = true
	}
	return nil
}

// Sandbox is one pod sandbox (CRI runtime).
type Sandbox struct {
	// ID is the runtime's sandbox ID.
	ID string
	// PodUID is the pod's UID.
	PodUID string
	// Ready is CRI SANDBOX_READY.
	Ready bool
	// CreatedAt is when the sandbox was created.
	CreatedAt time.Time
}

// SandboxRemoval is one sandbox a plan removes (StopPodSandbox, then RemovePodSandbox; the
// executor skips the removal if the stop fails).
type SandboxRemoval struct {
	// ID is the sandbox.
	ID string `json:"id"`
	// PodUID is its pod.
	PodUID string `json:"podUID"`
	// Reason is ReasonPodDeleted, ReasonPodTerminated or ReasonSuperseded.
	Reason Reason `json:"reason"`
}

// SandboxPlan is the outcome of planning sandbox GC.
type SandboxPlan struct {
	// Remove lists the sandboxes to remove, by pod UID, oldest first within a pod.
	Remove []SandboxRemoval
	// Err is nil or wraps ErrInvalidInput.
	Err error
}

// PlanSandboxGC plans the kubelet's evictSandboxes (pkg/kubelet/kuberuntime/kuberuntime_gc.go):
// a sandbox is active if it is ready or
// any container (any state) references it. For a deleted pod — or, with evictNonDeletedPods, a
// terminated one — every inactive sandbox goes; otherwise the newest sandbox stays (even when
// inactive) and the other inactive ones go. The container GC policy does not apply. deletedPods
// must already reflect "all sources ready": the kubelet's ShouldPodContentBeRemoved does.
func PlanSandboxGC(sandboxes []Sandbox, containers []Container, deletedPods map[string]bool, evictNonDeletedPods bool, terminatedPods map[string]bool) SandboxPlan {
	var p SandboxPlan
	referenced := make(map[string]bool, len(containers))
	for _, c := range containers {
		if c.SandboxID != "" {
			referenced[c.SandboxID] = true
		}
	}
	byPod := map[string][]*Sandbox{}
	seen := make(map[string]bool, len(sandboxes))
	for i := range sandboxes {
		s := &sandboxes[i]
		switch {
		case s.ID == "":
			p.Err = invalid("sandbox %d: empty ID", i)
			return p
		case seen[s.ID]:
			p.Err = invalid("sandbox %q: listed twice", s.ID)
			return p
		}
		seen[s.ID] = true
		byPod[s.PodUID] = append(byPod[s.PodUID], s)
	}
	pods := make([]string, 0, len(byPod))
	for uid := range byPod {
		pods = append(pods, uid)
	}
	slices.Sort(pods)
	for _, uid := range pods {
		list := byPod[uid]
		slices.SortFunc(list, func(a, b *Sandbox) int { // newest first
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		keep, r := 1, ReasonSuperseded
		switch {
		case deletedPods[uid]:
			keep, r = 0, ReasonPodDeleted
		case evictNonDeletedPods && terminatedPods[uid]:
			keep, r = 0, ReasonPodTerminated
		}
		for i := len(list) - 1; i >= keep; i-- {
			if s := list[i]; !s.Ready && !referenced[s.ID] {
				p.Remove = append(p.Remove, SandboxRemoval{ID: s.ID, PodUID: uid, Reason: r})
			}
		}
	}
	return p
}

// PodUIDFromLogDir returns the pod UID of a /var/log/pods entry: the last "_"-separated field
// of "<namespace>_<name>_<uid>", or the whole name when it has no "_" (the legacy layout).
func PodUIDFromLogDir(name string) string {
	return name[strings.LastIndexByte(name, '_')+1:]
}

// PlanLogDirGC plans the kubelet's evictPodLogsDirectories: the entries of the pod logs
// directory whose pod is deleted, in input order — only when all sources are ready, since a pod
// not yet reported by a source would look deleted.
func PlanLogDirGC(entries []string, deleted map[string]bool, allSourcesReady bool) []string {
	if !allSourcesReady {
		return nil
	}
	var out []string
	for _, e := range entries {
		if deleted[PodUIDFromLogDir(e)] {
			out = append(out, e)
		}
	}
	return out
}
