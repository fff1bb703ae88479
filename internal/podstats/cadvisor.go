package podstats

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	info "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/procfs"
)

// The labels the container runtimes put on a container (and CRI on a sandbox), which the
// kubelet's /metrics/cadvisor reads its pod, namespace and container labels from
// (pkg/kubelet/types/labels.go).
const (
	PodNameLabel       = "io.kubernetes.pod.name"
	PodNamespaceLabel  = "io.kubernetes.pod.namespace"
	PodUIDLabel        = "io.kubernetes.pod.uid"
	ContainerNameLabel = "io.kubernetes.container.name"
)

// CadvisorOptions are what CadvisorInfo needs besides the samples.
type CadvisorOptions struct {
	// SysRoot is the sysfs root (normally /sys), where block devices are named.
	SysRoot string
	// Node is the node's last sample, reported as the root cgroup "/"; nil leaves it out.
	Node *Latest[Usage]
}

// CadvisorInfo turns the sampler's last samples into cAdvisor's model of the containers
// (github.com/google/cadvisor/lib/model ContainerInfo, one stats sample each), as the
// kubelet's cAdvisor reports them on /metrics/cadvisor: the root cgroup "/" (the node), each
// pod's cgroup (id the pod's cgroup path; pod and namespace, no container, image or name) and
// each container's (id its cgroup path, name the runtime's container ID, the image of its
// status or spec, or the program it runs when it has no image, the io.kubernetes.* labels). The pod's network interfaces go with the pod's cgroup
// (every container of a pod shares its network namespace). Nothing is read here but the
// names of block devices: the numbers are the samples'.
func CadvisorInfo(samples []PodLatest, pods []v1.Pod, o CadvisorOptions) map[string]*info.ContainerInfo {
	byUID := make(map[types.UID]*v1.Pod, len(pods))
	for i := range pods {
		byUID[pods[i].UID] = &pods[i]
	}
	out := make(map[string]*info.ContainerInfo, 1+3*len(samples))
	if n := o.Node; n != nil {
		ci := &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: "/"},
			Spec: info.ContainerSpec{HasCpu: true, HasMemory: true, HasProcesses: true}}
		ci.Stats = []*info.ContainerStats{cadvisorStats(n.At, n.Usage, nil, o.SysRoot)}
		out["/"] = ci
	}
	for _, s := range samples {
		p := byUID[s.UID]
		podCgroup := podCgroupOf(s.Usage)
		if podCgroup == "" {
			continue
		}
		podLabels := map[string]string{PodNameLabel: s.Name, PodNamespaceLabel: s.Namespace, PodUIDLabel: string(s.UID)}
		created := s.At
		if p != nil && p.Status.StartTime != nil {
			created = p.Status.StartTime.Time
		}
		pci := &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: podCgroup},
			Spec:  cadvisorSpec(s.Usage.Usage.Stats, created, time.Time{}, podLabels, "", len(s.Usage.Network) > 0),
			Stats: []*info.ContainerStats{cadvisorStats(s.At, s.Usage.Usage, s.Usage.Network, o.SysRoot)}}
		out[podCgroup] = pci
		statuses := map[string]v1.ContainerStatus{}
		images := map[string]string{}
		if p != nil {
			for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
				for _, cs := range list {
					statuses[cs.Name] = cs
				}
			}
			for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				images[c.Name] = containerImage(c)
			}
		}
		for _, c := range s.Usage.Containers {
			labels := map[string]string{PodNameLabel: s.Name, PodNamespaceLabel: s.Namespace, PodUIDLabel: string(s.UID), ContainerNameLabel: c.Name}
			image, id := images[c.Name], filepath.Base(c.Cgroup)
			var started time.Time
			if cs, ok := statuses[c.Name]; ok {
				if cs.Image != "" {
					image = cs.Image
				}
				if _, cid, ok := strings.Cut(cs.ContainerID, "://"); ok && cid != "" {
					id = cid
				}
				if cs.State.Running != nil {
					started = cs.State.Running.StartedAt.Time
				}
			}
			if started.IsZero() {
				started = created
			}
			ci := &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: c.Cgroup, Id: id, Aliases: []string{id}},
				Spec:  cadvisorSpec(c.Stats, started, started, labels, image, false),
				Stats: []*info.ContainerStats{cadvisorStats(s.At, c.Usage, nil, o.SysRoot)}}
			out[c.Cgroup] = ci
		}
	}
	return out
}

// containerImage is a container's image label: its image, or for a container without one
// (the systemd runtime runs host programs) the program it runs, so that the label tells a
// container's series from its pod's (image="") as the kubernetes-mixin's image!="" selectors
// expect.
func containerImage(c v1.Container) string {
	if c.Image != "" || len(c.Command) == 0 {
		return c.Image
	}
	return c.Command[0]
}

// podCgroupOf is the pod's cgroup path: the parent of its containers' cgroups, or the one the
// sample was read from.
func podCgroupOf(u PodUsage) string {
	if u.Cgroup != "" {
		return u.Cgroup
	}
	for _, c := range u.Containers {
		return filepath.Dir(c.Cgroup)
	}
	return ""
}

// cadvisorSpec is a cgroup's spec as cAdvisor's libcontainer handler makes it
// (container/common GetSpec): the CPU and memory limits where their controllers are there.
func cadvisorSpec(st eviction.CgroupStats, created, started time.Time, labels map[string]string, image string, network bool) info.ContainerSpec {
	return info.ContainerSpec{
		CreationTime: created, StartTime: started, Labels: labels, Image: image,
		HasCpu: st.HasCPUSpec, Cpu: info.CpuSpec{Limit: uint64(st.CPUShares), Quota: uint64(st.CPUQuota), Period: uint64(st.CPUPeriod)},
		HasMemory: st.HasMemorySpec, Memory: info.MemorySpec{Limit: uint64(st.MemoryLimit), Reservation: uint64(st.MemoryReservation), SwapLimit: uint64(st.SwapLimit)},
		HasNetwork: network, HasProcesses: true, HasDiskIo: len(st.IO) > 0,
	}
}

// cadvisorStats is one sample as cAdvisor's stats of a cgroup (container/libcontainer
// newContainerStats: its memory, CPU, CFS, processes, OOM kills and block I/O).
func cadvisorStats(at time.Time, u Usage, network []procfs.NetInterface, sysRoot string) *info.ContainerStats {
	st := u.Stats
	n := func(v int64) uint64 { return uint64(max(v, 0)) }
	out := &info.ContainerStats{
		Timestamp: at,
		Cpu: &info.CpuStats{
			Usage: info.CpuUsage{Total: n(int64(u.CPU)), User: n(int64(st.CPUUser)), System: n(int64(st.CPUSystem))},
			CFS:   info.CpuCFS{Periods: n(st.Periods), ThrottledPeriods: n(st.ThrottledPeriods), ThrottledTime: n(int64(st.ThrottledTime))},
			PSI:   cadvisorPSI(st.CPUPressure),
		},
		Memory: &info.MemoryStats{
			Usage: n(u.MemoryUsage), WorkingSet: n(u.MemoryWorkingSet), RSS: n(u.MemoryRSS),
			MaxUsage: n(st.MaxUsage), Cache: n(st.Cache), Swap: n(st.Swap), MappedFile: n(st.MappedFile),
			Failcnt: n(st.Failcnt), TotalInactiveFile: n(st.Memory.InactiveFile),
			ContainerData:    info.MemoryStatsMemoryData{Pgfault: n(st.Pgfault), Pgmajfault: n(st.Pgmajfault)},
			HierarchicalData: info.MemoryStatsMemoryData{Pgfault: n(st.Pgfault), Pgmajfault: n(st.Pgmajfault)},
			PSI:              cadvisorPSI(st.MemoryPressure),
		},
		Processes: &info.ProcessStats{ThreadsCurrent: n(st.Threads), ThreadsMax: n(st.ThreadsMax)},
		OOMEvents: n(st.OOMKills),
	}
	// As cAdvisor's libcontainer handler (newContainerStats with DiskIOMetrics), the disk
	// I/O stats are there even for a cgroup without I/O: they carry its io.pressure.
	io := &info.DiskIoStats{PSI: cadvisorPSI(st.IOPressure)}
	out.DiskIo = io
	if len(st.IO) > 0 {
		for _, d := range st.IO {
			dev := blockDevice(sysRoot, d.Major, d.Minor)
			io.IoServiceBytes = append(io.IoServiceBytes, info.PerDiskStats{Device: dev, Major: d.Major, Minor: d.Minor,
				Stats: map[string]uint64{"Read": n(d.ReadBytes), "Write": n(d.WriteBytes), "Total": n(d.ReadBytes + d.WriteBytes)}})
			io.IoServiced = append(io.IoServiced, info.PerDiskStats{Device: dev, Major: d.Major, Minor: d.Minor,
				Stats: map[string]uint64{"Read": n(d.Reads), "Write": n(d.Writes), "Total": n(d.Reads + d.Writes)}})
		}
	}
	if len(network) > 0 {
		ns := &info.NetworkStats{}
		for _, i := range network {
			ns.Interfaces = append(ns.Interfaces, info.InterfaceStats{Name: i.Name,
				RxBytes: i.RxBytes, RxPackets: i.RxPackets, RxErrors: i.RxErrors, RxDropped: i.RxDropped,
				TxBytes: i.TxBytes, TxPackets: i.TxPackets, TxErrors: i.TxErrors, TxDropped: i.TxDropped})
		}
		ns.InterfaceStats = ns.Interfaces[0]
		out.Network = ns
	}
	return out
}

// cadvisorPSI is a pressure file's figures in cAdvisor's model (Total in microseconds, as
// the kernel writes it; cAdvisor's metrics convert it to seconds).
func cadvisorPSI(p eviction.PSIStats) info.PSIStats {
	d := func(d eviction.PSIData) info.PSIData {
		return info.PSIData{Total: d.Total, Avg10: d.Avg10, Avg60: d.Avg60, Avg300: d.Avg300}
	}
	return info.PSIStats{Some: d(p.Some), Full: d(p.Full)}
}

// blockDevices caches block device names by number (they do not change while a device is
// there, and a scrape names the same few devices for every cgroup).
var blockDevices sync.Map

// blockDevice is the /dev name of block device major:minor, as cAdvisor names it (from the
// sysfs link <sysRoot>/dev/block/MAJ:MIN), or "MAJ:MIN" when sysfs does not know it.
func blockDevice(sysRoot string, major, minor uint64) string {
	num := strconv.FormatUint(major, 10) + ":" + strconv.FormatUint(minor, 10)
	key := sysRoot + "\x00" + num
	if v, ok := blockDevices.Load(key); ok {
		return v.(string)
	}
	name := num
	if target, err := os.Readlink(filepath.Join(sysRoot, "dev", "block", num)); err == nil {
		name = "/dev/" + filepath.Base(target)
	}
	blockDevices.Store(key, name)
	return name
}

// Cadvisor serves /metrics/cadvisor from the sampler's samples (metrics.CadvisorSource):
// nothing is read at a scrape but what the sampler keeps.
type Cadvisor struct {
	// Sampler holds the samples.
	Sampler *Sampler
	// Pods are the node's pods with their statuses (images, container IDs, start times).
	Pods func() []v1.Pod
	// SysRoot is the sysfs root, where block devices are named.
	SysRoot string
	// Machine and Version describe the node (MachineInfo, VersionInfo).
	Machine *info.MachineInfo
	Version *info.VersionInfo
}

// ContainerInfo is CadvisorInfo of the sampler's last samples.
func (c *Cadvisor) ContainerInfo() map[string]*info.ContainerInfo {
	o := CadvisorOptions{SysRoot: c.SysRoot}
	if n, ok := c.Sampler.LatestNode(); ok {
		o.Node = &n
	}
	return CadvisorInfo(c.Sampler.LatestPods(), c.Pods(), o)
}

// MachineInfo is the node's description.
func (c *Cadvisor) MachineInfo() (*info.MachineInfo, error) { return c.Machine, nil }

// VersionInfo is the kernel's and the OS's versions.
func (c *Cadvisor) VersionInfo() *info.VersionInfo { return c.Version }

// MachineOptions are what NewMachineInfo reads: the roots and the node's capacity.
type MachineOptions struct {
	// ProcRoot, SysRoot and EtcRoot are the procfs, sysfs and /etc roots.
	ProcRoot, SysRoot, EtcRoot string
	// Cores and MemoryBytes are the node's capacity (its online CPUs, MemTotal).
	Cores       int
	MemoryBytes int64
}

// NewMachineInfo describes the node as cAdvisor's machine collector reports it
// (machine_cpu_cores, machine_cpu_physical_cores, machine_cpu_sockets, machine_memory_bytes,
// machine_swap_bytes, with the machine_id, system_uuid and boot_id labels), and the versions
// of cadvisor_version_info. A file that cannot be read leaves its value empty.
func NewMachineInfo(o MachineOptions) (*info.MachineInfo, *info.VersionInfo) {
	first := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	topo, _ := procfs.CPUTopology(o.ProcRoot)
	swap, _ := procfs.SwapTotal(o.ProcRoot)
	m := &info.MachineInfo{
		Timestamp: time.Now(), NumCores: o.Cores, NumPhysicalCores: topo.Cores, NumSockets: topo.Sockets,
		MemoryCapacity: uint64(max(o.MemoryBytes, 0)), SwapCapacity: uint64(max(swap, 0)),
		MachineID:  first(filepath.Join(o.EtcRoot, "machine-id")),
		SystemUUID: strings.ToUpper(first(filepath.Join(o.SysRoot, "class", "dmi", "id", "product_uuid"))),
		BootID:     first(filepath.Join(o.ProcRoot, "sys", "kernel", "random", "boot_id")),
	}
	v := &info.VersionInfo{KernelVersion: first(filepath.Join(o.ProcRoot, "sys", "kernel", "osrelease")), ContainerOsVersion: osPrettyName(o.EtcRoot)}
	return m, v
}

// osPrettyName is PRETTY_NAME of <etcRoot>/os-release, as cAdvisor reports the OS.
func osPrettyName(etcRoot string) string {
	b, err := os.ReadFile(filepath.Join(etcRoot, "os-release"))
	if err != nil {
		return "Linux"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}
