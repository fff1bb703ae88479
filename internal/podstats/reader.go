// Package podstats measures what each container of a pod uses — its working-set memory and the
// CPU time it has used — from the pod's cgroup, as cAdvisor measures it for the kubelet's
// summary API, in both runtimes: the systemd runtime's container services and a CRI runtime's
// container scopes are child cgroups of the pod slice. It serves the eviction manager (which
// names the offending containers in its message) and the API (`slicectl top`).
//
// The definitions are the kubelet's (cAdvisor's): working set = usage − inactive_file, at least
// 0 (cgroup v2: memory.current and inactive_file of memory.stat; v1: memory.usage_in_bytes and
// total_inactive_file), the number eviction ranks on; CPU = cumulative usage (v2 usage_usec of
// cpu.stat, v1 cpuacct.usage), turned into cores by Sampler over two samples, as metrics-server
// turns the summary's usageCoreNanoSeconds into its usage.
//
// Which child cgroup is which container is the runtime's knowledge (a unit name, a container
// ID): a Namer tells. Every path comes from the injected cgroup root.
package podstats

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/procfs"
	"github.com/slicelet/slicelet/units"
)

// ContainerCgroup is what a child cgroup of a pod's cgroup is: a container of the pod and which
// instance of it (the systemd runtime's unit instance, the CRI attempt). Of several cgroups of
// one container (a restart caught halfway, a dead instance's cgroup not yet removed), the
// highest instance's is the container's.
type ContainerCgroup struct {
	Name     string
	Instance int
}

// Namer names the containers of a pod's child cgroups.
type Namer interface {
	// ContainerCgroups maps the child cgroups of the pod's cgroup (directory names, as listed)
	// that are the pod's containers to which container and instance each is. A directory that
	// is none of them (a sandbox, a foreign cgroup) is left out.
	ContainerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]ContainerCgroup, error)
}

// NamerFunc adapts a function to Namer.
type NamerFunc func(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]ContainerCgroup, error)

// ContainerCgroups calls f.
func (f NamerFunc) ContainerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]ContainerCgroup, error) {
	return f(ctx, pod, dirs)
}

// Usage is what one cgroup uses at a moment.
type Usage struct {
	// MemoryWorkingSet is usage − inactive_file in bytes, at least 0.
	MemoryWorkingSet int64 `json:"memoryWorkingSetBytes"`
	// MemoryUsage is the cgroup's memory usage (memory.current, v1 memory.usage_in_bytes).
	MemoryUsage int64 `json:"memoryUsageBytes,omitempty"`
	// MemoryRSS is its anonymous memory (anon of memory.stat, v1 total_rss).
	MemoryRSS int64 `json:"memoryRSSBytes,omitempty"`
	// CPU is the CPU time used since the cgroup was created.
	CPU time.Duration `json:"cpuUsage"`
	// Stats is everything else read of the cgroup in the same pass (cAdvisor's numbers:
	// page cache, swap, CFS throttling, limits, OOM kills, I/O); zero for a reading of
	// memory alone.
	Stats eviction.CgroupStats `json:"-"`
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	// Name is the container's name in the pod spec.
	Name string `json:"name"`
	// Cgroup is the container's cgroup path (a CPU sample is only compared with one of the
	// same cgroup: a restarted container is a new cgroup whose count starts at 0).
	Cgroup string `json:"cgroup"`
	Usage
}

// PodUsage is a pod's usage and its containers', read at one moment.
type PodUsage struct {
	// Usage is the pod cgroup's own (everything under it, sandbox included).
	Usage
	// Containers are the containers with a cgroup now: regular containers, then init
	// containers, each in spec order (the order in which the kubelet's eviction message names
	// them).
	Containers []ContainerUsage `json:"containers"`
	// Network are the interfaces of the pod's network namespace (read from one of its
	// processes), without the loopback; none for a pod on the host's network or without a
	// process.
	Network []procfs.NetInterface `json:"-"`
	// Cgroup is the pod's cgroup path the usage was read from.
	Cgroup string `json:"-"`
}

// Reader reads pods' usage from cgroupfs.
type Reader struct {
	root  string
	proc  string
	mode  units.Mode
	namer Namer

	mu    sync.Mutex
	names map[types.UID]podNames // the namer's last answer for each pod
}

// podNames is what the Namer said of a pod's child cgroups. The same directories are the same
// containers and instances (a directory name carries its container's ID or unit instance,
// which never change), so the answer holds while the pod's child cgroups are those: the CRI
// runtime's namer asks the runtime, which costs a call per pod per sample otherwise.
type podNames struct {
	dirs  []string
	names map[string]ContainerCgroup
}

// NewReader returns a reader of the cgroup tree at cgroupRoot (normally /sys/fs/cgroup) in
// mode; procRoot (normally /proc) is read for the node's CPU time when the root cgroup has no
// cpu.stat. namer names the containers' cgroups; nil means the pod's containers are not
// measured (only the pod's totals are).
func NewReader(cgroupRoot, procRoot string, mode units.Mode, namer Namer) *Reader {
	return &Reader{root: cgroupRoot, proc: procRoot, mode: mode, namer: namer}
}

// ReadNode reads the node's usage: the root cgroup's working set (the one memory.available is
// computed from), CPU time and the swap in use (<procRoot>/meminfo); where the root cgroup
// does not account CPU (no cpu.stat in a cgroup v2 root), the CPU time the kernel counts in
// <procRoot>/stat.
func (r *Reader) ReadNode() (Usage, error) {
	m, err := eviction.ReadCgroupMemory(r.root, r.mode, "/")
	if err != nil {
		return Usage{}, err
	}
	cpu, err := eviction.ReadCgroupCPU(r.root, r.mode, "/")
	if errors.Is(err, eviction.ErrUnavailable) {
		cpu, err = procCPU(r.proc)
	}
	if err != nil {
		return Usage{}, err
	}
	u := Usage{MemoryWorkingSet: m.WorkingSet, MemoryUsage: m.Usage, MemoryRSS: m.RSS, CPU: cpu}
	// The node's swap in use is the machine's (the root cgroup counts none of its own on v2).
	if swap, err := procfs.SwapUsed(r.proc); err == nil {
		u.Stats.Swap = swap
	}
	// The node's pressure is the root cgroup's (v2; the system-wide /proc/pressure figures).
	if r.mode == units.ModeUnified {
		if err := eviction.ReadCgroupPressure(r.root, "/", &u.Stats); err != nil {
			return Usage{}, err
		}
	}
	return u, nil
}

// procCPU is the CPU time the node has used, from procRoot/stat: user, nice, system, irq,
// softirq and steal of the "cpu" line (idle and iowait are not use; guest time is inside user).
func procCPU(procRoot string) (time.Duration, error) {
	d, err := procfs.NodeCPU(procRoot)
	if err != nil {
		return 0, fmt.Errorf("node cpu: %w", err)
	}
	return d, nil
}

// ReadCgroup reads one cgroup's working set and CPU time. The error wraps
// eviction.ErrUnavailable when the cgroup is gone or a controller file is missing.
//
// On cgroup v1 a cgroup may have no cpuacct.usage although its memory is accounted: where the
// cpuacct controller is mounted on its own rather than with cpu ("cpu,cpuacct", as systemd
// mounts it), systemd does not create units' cgroups in it. The CPU time is then the CPU time
// of the processes the cgroup holds now (utime + stime of <procRoot>/<pid>/stat): what they
// used while alive, without processes that already exited, so a rate over it skips a window in
// which one exited (the sum went down).
func (r *Reader) ReadCgroup(cgroupPath string) (Usage, error) {
	return r.readCgroup(cgroupPath, nil)
}

// readCgroup is ReadCgroup; walked, when not nil, holds the processes' CPU time of cgroups
// measured by earlier walks (processesCPU): a cgroup it has is not walked again, and a walk
// adds what it measured.
func (r *Reader) readCgroup(cgroupPath string, walked map[string]time.Duration) (Usage, error) {
	st, err := eviction.ReadCgroupStats(r.root, r.mode, cgroupPath)
	if err != nil {
		return Usage{}, err
	}
	m, cpu := st.Memory, st.CPU
	if st.NoCPUAccounting {
		var ok bool
		if cpu, ok = walked[cgroupPath]; ok {
			err = nil
		} else {
			var all map[string]time.Duration
			if all, err = r.processesCPU(cgroupPath); err == nil && walked != nil {
				maps.Copy(walked, all)
			}
			cpu = all[cgroupPath]
		}
	}
	if err != nil {
		return Usage{}, err
	}
	st.CPU = cpu
	return Usage{MemoryWorkingSet: m.WorkingSet, MemoryUsage: m.Usage, MemoryRSS: m.RSS, CPU: cpu, Stats: st}, nil
}

// processesCPU is the CPU time of the processes in cgroupPath and in each of its descendants,
// each including its own descendants' (their cgroup.procs in the memory hierarchy), by cgroup
// path: one walk of the tree serves a pod and its containers. A process that exits while it is
// read is left out, as is a child cgroup removed during the walk.
func (r *Reader) processesCPU(cgroupPath string) (map[string]time.Duration, error) {
	dir, err := eviction.CgroupDir(r.root, r.mode, "memory", cgroupPath)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	if _, err := r.walkCPU(dir, cgroupPath, out, true); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cpu of %s: %w", cgroupPath, eviction.ErrUnavailable)
		}
		return nil, fmt.Errorf("cpu of %s: %w", cgroupPath, err)
	}
	return out, nil
}

// walkCPU adds to out the CPU time of the processes of the cgroup at dir (cgroupPath) and of
// each of its descendants, and returns the cgroup's. A cgroup that is gone is an error wrapping
// os.ErrNotExist for the top one (top) and counts nothing for a descendant.
func (r *Reader) walkCPU(dir, cgroupPath string, out map[string]time.Duration, top bool) (time.Duration, error) {
	children, err := subdirs(dir)
	if errors.Is(err, os.ErrNotExist) && !top {
		return 0, nil // a child cgroup removed during the walk
	}
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, name := range children {
		d, err := r.walkCPU(filepath.Join(dir, name), path.Join(cgroupPath, name), out, false)
		if err != nil {
			return 0, err
		}
		total += d
	}
	procs := filepath.Join(dir, "cgroup.procs")
	b, err := os.ReadFile(procs)
	switch {
	case errors.Is(err, os.ErrNotExist) && !top:
		return 0, nil
	case err != nil:
		return 0, err
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a pid", procs, f)
		}
		d, err := procfs.ProcessCPU(r.proc, pid)
		if err != nil {
			continue // exited
		}
		total += d
	}
	out[cgroupPath] = total
	return total, nil
}

// ReadPod reads the pod's usage from its cgroup (podCgroup as slices.PodCgroupPath gives it)
// and each container's from the child cgroups the Namer names. A container whose cgroup went
// away while it was read (it exited) is left out. The error wraps eviction.ErrUnavailable when
// the pod's cgroup is not there (a pod starting or gone).
func (r *Reader) ReadPod(ctx context.Context, pod *v1.Pod, podCgroup string) (PodUsage, error) {
	// Where CPU time comes from the processes (see ReadCgroup), the pod's walk measures its
	// containers too: each process is read once per ReadPod, not once for the pod and again
	// for its container.
	walked := map[string]time.Duration{}
	u, err := r.readPod(ctx, pod, podCgroup, func(cg string) (Usage, error) { return r.readCgroup(cg, walked) })
	if err != nil || pod.Spec.HostNetwork {
		return u, err
	}
	u.Network = r.podNetwork(podCgroup)
	return u, nil
}

// podNetwork reads the network interfaces of the pod's namespace through the first process
// found in its cgroup (every container of a pod shares the namespace), leaving out the
// loopback as cAdvisor does. A pod without a process, or one in the host's namespace, has
// none.
func (r *Reader) podNetwork(podCgroup string) []procfs.NetInterface {
	dir, err := eviction.CgroupDir(r.root, r.mode, "memory", podCgroup)
	if err != nil {
		return nil
	}
	pid := firstPID(dir, 0)
	if pid <= 0 {
		return nil
	}
	if host, err := procfs.NetNamespace(r.proc, 1); err == nil {
		if ns, err := procfs.NetNamespace(r.proc, pid); err != nil || ns == host {
			return nil
		}
	}
	ifs, err := procfs.NetDev(r.proc, pid)
	if err != nil {
		return nil
	}
	out := ifs[:0]
	for _, i := range ifs {
		if i.Name != "lo" {
			out = append(out, i)
		}
	}
	return out
}

// firstPID is a process of the cgroup at dir or of a descendant (depth-first, at most 4
// levels: a pod's containers and their own children), 0 for none.
func firstPID(dir string, depth int) int {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
	}
	if depth >= 4 {
		return 0
	}
	children, err := subdirs(dir)
	if err != nil {
		return 0
	}
	for _, c := range children {
		if pid := firstPID(filepath.Join(dir, c), depth+1); pid > 0 {
			return pid
		}
	}
	return 0
}

// readPod is ReadPod with read measuring each cgroup (ReadCgroup, or readMemory alone).
func (r *Reader) readPod(ctx context.Context, pod *v1.Pod, podCgroup string, read func(string) (Usage, error)) (PodUsage, error) {
	total, err := read(podCgroup)
	if err != nil {
		return PodUsage{}, err
	}
	out := PodUsage{Usage: total, Containers: []ContainerUsage{}, Cgroup: podCgroup}
	if r.namer == nil {
		return out, nil
	}
	dirs, err := r.children(podCgroup)
	if err != nil {
		return PodUsage{}, err
	}
	if len(dirs) == 0 {
		return out, nil
	}
	names, err := r.containerCgroups(ctx, pod, dirs)
	if err != nil {
		return PodUsage{}, fmt.Errorf("pod %s/%s: containers' cgroups: %w", pod.Namespace, pod.Name, err)
	}
	current := map[string]string{} // container → the directory of its highest instance
	for dir, c := range names {
		if have, ok := current[c.Name]; !ok || names[have].Instance < c.Instance {
			current[c.Name] = dir
		}
	}
	byName := make(map[string]ContainerUsage, len(current))
	for name, dir := range current {
		cg := path.Join(podCgroup, dir)
		u, err := read(cg)
		if errors.Is(err, eviction.ErrUnavailable) {
			continue
		}
		if err != nil {
			return PodUsage{}, fmt.Errorf("pod %s/%s: container %s: %w", pod.Namespace, pod.Name, name, err)
		}
		byName[name] = ContainerUsage{Name: name, Cgroup: cg, Usage: u}
	}
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if u, ok := byName[c.Name]; ok {
				out.Containers = append(out.Containers, u)
			}
		}
	}
	return out, nil
}

// containerCgroups is the Namer's answer for the pod's child cgroups dirs: the last one while
// they are the same directories (podNames), else asked now and kept. The map returned is
// shared: callers only read it.
func (r *Reader) containerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]ContainerCgroup, error) {
	r.mu.Lock()
	last, ok := r.names[pod.UID]
	r.mu.Unlock()
	if ok && slices.Equal(last.dirs, dirs) {
		return last.names, nil
	}
	names, err := r.namer.ContainerCgroups(ctx, pod, dirs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.names == nil {
		r.names = map[types.UID]podNames{}
	}
	r.names[pod.UID] = podNames{dirs: slices.Clone(dirs), names: names}
	r.mu.Unlock()
	return names, nil
}

// Retain forgets the containers' names of the pods keep does not hold (the Sampler calls it
// with the active pods after each sample).
func (r *Reader) Retain(keep map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.names {
		if !keep[uid] {
			delete(r.names, uid)
		}
	}
}

// children lists the child cgroups of cgroupPath: in the unified tree on cgroup v2, in the
// memory hierarchy on v1 (every container unit has memory accounting).
func (r *Reader) children(cgroupPath string) ([]string, error) {
	dir, err := eviction.CgroupDir(r.root, r.mode, "memory", cgroupPath)
	if err != nil {
		return nil, err
	}
	out, err := subdirs(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, eviction.ErrUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("child cgroups of %s: %w", cgroupPath, err)
	}
	return out, nil
}

// readMemory reads a cgroup's working set alone (CPU left zero).
func (r *Reader) readMemory(cgroupPath string) (Usage, error) {
	m, err := eviction.ReadCgroupMemory(r.root, r.mode, cgroupPath)
	if err != nil {
		return Usage{}, err
	}
	return Usage{MemoryWorkingSet: m.WorkingSet, MemoryUsage: m.Usage, MemoryRSS: m.RSS}, nil
}

// ContainerMemory reads the working set of each of the pod's containers for the eviction
// manager (eviction.ManagerOptions.ContainerMemory), in ReadPod's order. It reads memory only:
// the manager runs it for every pod at every cycle, and CPU time can cost a walk of the
// cgroup's processes and their /proc/<pid>/stat on cgroup v1 (see ReadCgroup).
func (r *Reader) ContainerMemory(ctx context.Context, p eviction.ActivePod) ([]eviction.ContainerUsage, error) {
	if p.CgroupPath == "" {
		return nil, fmt.Errorf("pod %s/%s has no cgroup yet: %w", p.Pod.Namespace, p.Pod.Name, eviction.ErrUnavailable)
	}
	u, err := r.readPod(ctx, p.Pod, p.CgroupPath, r.readMemory)
	if err != nil {
		return nil, err
	}
	out := make([]eviction.ContainerUsage, 0, len(u.Containers))
	for _, c := range u.Containers {
		out = append(out, eviction.ContainerUsage{Name: c.Name, Memory: resource.NewQuantity(c.MemoryWorkingSet, resource.BinarySI)})
	}
	return out, nil
}
