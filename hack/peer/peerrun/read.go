package peerrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Values are the cgroup values of one level: file name (as on cgroup v1 or v2) to content.
type Values map[string]string

// Container is what one container's cgroup holds.
type Container struct {
	// State is its CRI state (CONTAINER_RUNNING, CONTAINER_EXITED, ...).
	State string
	// Cgroup is its cgroup path below the hierarchy root.
	Cgroup string
	// Values are its cgroup values (absent once it exited: systemd removes the scope).
	Values Values
	// OOMScoreAdj is the oom_score_adj of its processes, distinct values joined by ','.
	OOMScoreAdj string
}

// Pod is what one pod's cgroups hold.
type Pod struct {
	// UID is the pod's UID as the agent made it.
	UID string
	// Ready: its sandbox is ready. A pod whose sandboxes are all stopped (it finished) is
	// listed with its newest sandbox, its pod slice if the agent left one, and no containers.
	Ready bool `json:",omitempty"`
	// QOS is the QoS class its slice names (Guaranteed, Burstable, BestEffort).
	QOS string
	// Cgroup is its pod slice's path below the hierarchy root.
	Cgroup string
	// Values are the pod slice's values.
	Values Values
	// Containers are its regular and init containers by name (the last attempt of each).
	Containers map[string]Container
}

// Snapshot is the node's cgroups as one agent left them.
type Snapshot struct {
	// Node holds the kubepods level ("kubepods") and the QoS levels ("burstable",
	// "besteffort").
	Node map[string]Values
	// Pods are the pods containerd has a sandbox of (ready or not), by their manifest's
	// namespace and name.
	Pods map[PodKey]Pod
	// Statuses are the agent's own statuses of its pods ([Agent.Statuses]), when read.
	Statuses map[PodKey]PodStatus
}

// controllerFiles are the files read at every level, per controller.
var (
	v1Files = map[string][]string{
		"cpu":     {"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"},
		"memory":  {"memory.limit_in_bytes"},
		"pids":    {"pids.max"},
		"hugetlb": {"hugetlb.2MB.limit_in_bytes", "hugetlb.1GB.limit_in_bytes"},
	}
	v2Files = map[string][]string{
		"": {"cpu.weight", "cpu.max", "memory.max", "memory.min", "memory.low", "memory.high", "pids.max", "hugetlb.2MB.max", "hugetlb.1GB.max"},
	}
)

// hierarchy maps controllers to their mount points: one ("") on cgroup v2, one per v1
// hierarchy otherwise (a co-mounted "cpu,cpuacct" serves both names).
type hierarchy struct {
	root  string
	v2    bool
	dirs  map[string]string
	files map[string][]string
}

func newHierarchy(root string, v2 bool) (hierarchy, error) {
	h := hierarchy{root: root, v2: v2, dirs: map[string]string{}}
	if v2 {
		h.dirs[""], h.files = root, v2Files
		return h, nil
	}
	h.files = v1Files
	ents, err := os.ReadDir(root)
	if err != nil {
		return h, fmt.Errorf("peerrun: cgroup hierarchies: %w", err)
	}
	// A directory is a hierarchy when it is mounted (has cgroup.procs): the sandbox leaves
	// empty decoy directories for controllers the machine has not mounted. A hierarchy named
	// after one controller wins over a co-mounted one ("cpu" over "cpu,cpuacct").
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		for _, c := range strings.Split(e.Name(), ",") {
			if h.dirs[c] == "" || c == e.Name() {
				h.dirs[c] = dir
			}
		}
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if h.dirs[c] == "" {
			return h, fmt.Errorf("peerrun: no cgroup v1 hierarchy for %s under %s", c, root)
		}
	}
	return h, nil
}

// walkDir is the hierarchy pod slices are searched in.
func (h hierarchy) walkDir() string {
	if h.v2 {
		return h.dirs[""]
	}
	return h.dirs["cpu"]
}

// procsDir is where a level's cgroup.procs is read.
func (h hierarchy) procsDir() string {
	if h.v2 {
		return h.dirs[""]
	}
	return h.dirs["pids"]
}

// read returns the values of the cgroup at rel; ok is false when it does not exist.
func (h hierarchy) read(rel string) (Values, bool) {
	if _, err := os.Stat(filepath.Join(h.walkDir(), rel)); err != nil {
		return nil, false
	}
	v := Values{}
	for c, files := range h.files {
		if h.dirs[c] == "" {
			continue // not mounted here (hugetlb in the sandbox)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(h.dirs[c], rel, f))
			if err == nil {
				v[f] = strings.TrimSpace(string(data))
			}
		}
	}
	return v, true
}

// oomScoreAdj reads the oom_score_adj of the processes in the cgroup at rel.
func (h hierarchy) oomScoreAdj(rel string) string {
	data, err := os.ReadFile(filepath.Join(h.procsDir(), rel, "cgroup.procs"))
	if err != nil {
		return ""
	}
	var adj []string
	for _, pid := range strings.Fields(string(data)) {
		v, err := os.ReadFile(filepath.Join("/proc", pid, "oom_score_adj"))
		if err == nil {
			adj = append(adj, strings.TrimSpace(string(v)))
		}
	}
	slices.Sort(adj)
	return strings.Join(slices.Compact(adj), ",")
}

// podSlice finds the pod slice of uid below kubepods.slice (directly for Guaranteed, in a QoS
// slice otherwise).
func (h hierarchy) podSlice(uid string) string {
	suffix := "pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	base := filepath.Join(h.walkDir(), "kubepods.slice")
	for _, pattern := range []string{"*" + suffix, "*/*" + suffix} {
		m, _ := filepath.Glob(filepath.Join(base, pattern))
		if len(m) > 0 {
			rel, _ := filepath.Rel(h.walkDir(), m[0])
			return rel
		}
	}
	return ""
}

// qosOfSlice is the QoS class a pod slice's name carries.
func qosOfSlice(rel string) string {
	switch b := filepath.Base(rel); {
	case strings.HasPrefix(b, "kubepods-burstable-pod"):
		return "Burstable"
	case strings.HasPrefix(b, "kubepods-besteffort-pod"):
		return "BestEffort"
	case strings.HasPrefix(b, "kubepods-pod"):
		return "Guaranteed"
	}
	return ""
}

// Read reads the node's kubepods and QoS levels and, for every pod containerd has a sandbox
// of, its pod slice and, when the sandbox is ready, its containers' scopes.
func (a *Agent) Read(ctx context.Context) (Snapshot, error) {
	root := "/sys/fs/cgroup"
	h, err := newHierarchy(root, a.node.CgroupV2)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Node: map[string]Values{}, Pods: map[PodKey]Pod{}}
	for name, rel := range map[string]string{
		"kubepods":   "kubepods.slice",
		"burstable":  "kubepods.slice/kubepods-burstable.slice",
		"besteffort": "kubepods.slice/kubepods-besteffort.slice",
	} {
		if v, ok := h.read(rel); ok {
			s.Node[name] = v
		}
	}
	rs, done, err := a.node.cri()
	if err != nil {
		return s, err
	}
	defer done()
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return s, fmt.Errorf("peerrun: list pod sandboxes: %w", err)
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return s, fmt.Errorf("peerrun: list containers: %w", err)
	}
	current, errs := a.currentSandboxes(sbs.Items)
	for k, sb := range current {
		ready := sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		p := Pod{UID: sb.Metadata.Uid, Ready: ready, Containers: map[string]Container{}}
		p.Cgroup = h.podSlice(p.UID)
		p.QOS = qosOfSlice(p.Cgroup)
		if p.Cgroup != "" {
			p.Values, _ = h.read(p.Cgroup)
		}
		attempts := map[string]uint32{}
		for _, c := range cs.Containers {
			if !ready || c.PodSandboxId != sb.Id {
				continue
			}
			if prev, seen := attempts[c.Metadata.Name]; seen && prev > c.Metadata.Attempt {
				continue
			}
			attempts[c.Metadata.Name] = c.Metadata.Attempt
			ct := Container{State: c.State.String()}
			if p.Cgroup != "" {
				ct.Cgroup = filepath.Join(p.Cgroup, "cri-containerd-"+c.Id+".scope")
				if v, ok := h.read(ct.Cgroup); ok {
					ct.Values = v
					ct.OOMScoreAdj = h.oomScoreAdj(ct.Cgroup)
				}
			}
			p.Containers[c.Metadata.Name] = ct
		}
		s.Pods[k] = p
	}
	return s, errors.Join(errs...)
}

// currentSandboxes picks each pod's current sandbox: its ready one, else its newest. Two
// ready sandboxes of one pod are an error (the pod is left out).
func (a *Agent) currentSandboxes(sbs []*runtimeapi.PodSandbox) (map[PodKey]*runtimeapi.PodSandbox, []error) {
	out := map[PodKey]*runtimeapi.PodSandbox{}
	twice := map[PodKey]bool{}
	var errs []error
	for _, sb := range sbs {
		k := a.key(sb.Metadata.Namespace, sb.Metadata.Name)
		ready := sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		cur, ok := out[k]
		curReady := ok && cur.State == runtimeapi.PodSandboxState_SANDBOX_READY
		switch {
		case ready && curReady:
			if !twice[k] {
				errs = append(errs, fmt.Errorf("peerrun: two ready sandboxes for pod %s", k))
			}
			twice[k] = true
		case !ok, ready && !curReady, !ready && !curReady && sb.CreatedAt > cur.CreatedAt:
			out[k] = sb
		}
	}
	for k := range twice {
		delete(out, k)
	}
	return out, errs
}
