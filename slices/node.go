package slices

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/procfs"
)

// ResourcePID is the kubelet's internal "pid" resource (pkg/kubelet/stats/pidlimit): reservable
// in system-reserved/kube-reserved and enforced as pids.max on kubepods, never reported to the
// scheduler.
const ResourcePID v1.ResourceName = "pid"

// Capacity is what the node has, as the kubelet sees it.
type Capacity struct {
	// CPU is the number of online CPUs in millicores.
	CPU int64 `json:"cpu"`
	// Memory is MemTotal in bytes.
	Memory int64 `json:"memory"`
	// Pids is min(kernel.pid_max, kernel.threads-max).
	Pids int64 `json:"pids"`
	// EphemeralStorage is the size in bytes of the filesystem holding pod data (0 if unknown).
	EphemeralStorage int64 `json:"ephemeralStorage"`
	// HugePages maps page size in bytes → pre-allocated hugepage memory in bytes
	// (nr_hugepages × size), one entry per size the host supports, zero included.
	HugePages map[int64]int64 `json:"hugepages"`
}

// HugePageResourceName returns the canonical resource name of a page size: hugepages-2Mi,
// hugepages-1Gi (the kubelet's HugePageResourceName).
func HugePageResourceName(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}

// PageSizes returns the host's hugepage sizes in bytes, ascending.
func (c Capacity) PageSizes() []int64 {
	sizes := make([]int64, 0, len(c.HugePages))
	for s := range c.HugePages {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	return sizes
}

// ResourceList returns the capacity as the node status reports it: cpu, memory,
// ephemeral-storage (when known) and hugepages-<size>.
func (c Capacity) ResourceList() v1.ResourceList {
	rl := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(c.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(c.Memory, resource.BinarySI),
	}
	if c.EphemeralStorage > 0 {
		rl[v1.ResourceEphemeralStorage] = *resource.NewQuantity(c.EphemeralStorage, resource.BinarySI)
	}
	for size, bytes := range c.HugePages {
		rl[HugePageResourceName(size)] = *resource.NewQuantity(bytes, resource.BinarySI)
	}
	return rl
}

// InternalResourceList is ResourceList plus the internal pid resource (the kubelet's
// internalCapacity).
func (c Capacity) InternalResourceList() v1.ResourceList {
	rl := c.ResourceList()
	if c.Pids > 0 {
		rl[ResourcePID] = *resource.NewQuantity(c.Pids, resource.DecimalSI)
	}
	return rl
}

// SumResources adds resource lists; absent and zero entries are left out.
func SumResources(lists ...v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, rl := range lists {
		for name, q := range rl {
			total := out[name]
			total.Add(q)
			out[name] = total
		}
	}
	for name, q := range out {
		if q.IsZero() {
			delete(out, name)
		}
	}
	return out
}

// NodeAllocatable is the allocatable the kubelet reports to the scheduler
// (capacity − GetNodeAllocatableReservation, pkg/kubelet/cm/node_container_manager_linux.go):
// capacity − (systemReserved + kubeReserved + hardEvictionReservation) per resource, clamped at
// 0, and then the hugepage capacity subtracted from memory (clamped at 0). hardEviction is the
// memory and ephemeral-storage amount of the hard memory.available and nodefs.available
// thresholds (see the eviction package). The internal pid resource is not part of it.
func NodeAllocatable(capacity Capacity, systemReserved, kubeReserved, hardEviction v1.ResourceList) v1.ResourceList {
	reservation := SumResources(systemReserved, kubeReserved, hardEviction)
	out := v1.ResourceList{}
	for name, q := range capacity.ResourceList() {
		v := q.DeepCopy()
		if r, ok := reservation[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	mem := out[v1.ResourceMemory]
	for _, bytes := range capacity.HugePages {
		mem.Sub(*resource.NewQuantity(bytes, resource.BinarySI))
	}
	if mem.Sign() < 0 {
		mem.Set(0)
	}
	out[v1.ResourceMemory] = mem
	return out
}

// KubepodsLimits is what kubepods.slice is limited to (the kubelet's
// getNodeAllocatableInternalAbsolute, pkg/kubelet/cm/node_container_manager_linux.go): internal capacity (pid included) − systemReserved −
// kubeReserved per resource, clamped at 0. Eviction thresholds are NOT subtracted (pods may use
// memory down to the threshold; eviction guards the gap) and hugepages are not taken from memory.
func KubepodsLimits(capacity Capacity, systemReserved, kubeReserved v1.ResourceList) v1.ResourceList {
	reservation := SumResources(systemReserved, kubeReserved)
	out := v1.ResourceList{}
	for name, q := range capacity.InternalResourceList() {
		v := q.DeepCopy()
		if r, ok := reservation[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}

// ValidateReservation fails when any reserved resource exceeds the capacity, with the kubelet's
// message per resource (validateNodeAllocatable), in resource-name order. reservation is
// systemReserved + kubeReserved + hardEviction (SumResources); capacity includes the pid resource.
func ValidateReservation(capacity Capacity, reservation v1.ResourceList) error {
	internal := capacity.InternalResourceList()
	var problems []string
	for _, name := range sortedNames(reservation) {
		r := reservation[name]
		c := internal[name]
		v := c.DeepCopy()
		v.Sub(r)
		if v.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("Resource %q has a reservation of %v but capacity of %v. Expected capacity >= reservation.", name, r.String(), c.String()))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("node allocatable reservation: %s", strings.Join(problems, " "))
	}
	return nil
}

// CgroupConfig is the kubelet's getCgroupConfig(rl, compressibleOnly): CPU shares from cpu and,
// unless compressibleOnly, the memory limit, pids limit (internal pid resource) and hugepage
// limits. A nil list gives nil.
func CgroupConfig(rl v1.ResourceList, compressibleOnly bool) *ResourceConfig {
	if rl == nil {
		return nil
	}
	var rc ResourceConfig
	if q, ok := rl[v1.ResourceCPU]; ok {
		shares := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &shares
	}
	if compressibleOnly {
		return &rc
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		v := q.Value()
		rc.Memory = &v
	}
	if q, ok := rl[ResourcePID]; ok {
		v := q.Value()
		rc.PidsLimit = &v
	}
	rc.HugePageLimit = HugePageLimits(rl)
	return &rc
}

// Enforcement keys of enforce_node_allocatable (the kubelet's enforceNodeAllocatable,
// pkg/kubelet/types/constants.go); config's values are these, so the file, its validation and
// the enforcement agree.
const (
	// EnforceNone enforces nothing; it must be the only entry.
	EnforceNone = "none"
	// EnforcePods limits kubepods.slice to capacity − system_reserved − kube_reserved.
	EnforcePods = "pods"
	// EnforceSystemReserved limits the system-reserved cgroup to system_reserved.
	EnforceSystemReserved = "system-reserved"
	// EnforceSystemReservedCompressible limits it to the system_reserved CPU only.
	EnforceSystemReservedCompressible = "system-reserved-compressible"
	// EnforceKubeReserved limits the kube-reserved cgroup to kube_reserved.
	EnforceKubeReserved = "kube-reserved"
	// EnforceKubeReservedCompressible limits it to the kube_reserved CPU only.
	EnforceKubeReservedCompressible = "kube-reserved-compressible"
)

// Enforcement is a parsed enforce_node_allocatable list.
type Enforcement struct {
	// Pods limits kubepods.slice to KubepodsLimits; without it kubepods gets the raw capacity.
	Pods bool
	// SystemReserved limits the system-reserved cgroup to system_reserved (all resources).
	SystemReserved bool
	// SystemReservedCompressible limits it to the system_reserved CPU only.
	SystemReservedCompressible bool
	// KubeReserved limits the kube-reserved cgroup to kube_reserved (all resources).
	KubeReserved bool
	// KubeReservedCompressible limits it to the kube_reserved CPU only.
	KubeReservedCompressible bool
}

// ParseEnforcement parses an enforce_node_allocatable list with the kubelet's rules: known keys
// only, "none" only on its own, a -compressible key excludes its non-compressible twin. Every
// problem is reported. An empty list enforces nothing.
func ParseEnforcement(keys []string) (Enforcement, error) {
	var e Enforcement
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
		switch k {
		case EnforceNone:
		case EnforcePods:
			e.Pods = true
		case EnforceSystemReserved:
			e.SystemReserved = true
		case EnforceSystemReservedCompressible:
			e.SystemReservedCompressible = true
		case EnforceKubeReserved:
			e.KubeReserved = true
		case EnforceKubeReservedCompressible:
			e.KubeReservedCompressible = true
		default:
			errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: unknown, valid keys are %q, %q, %q, %q, %q, %q", k,
				EnforceNone, EnforcePods, EnforceSystemReserved, EnforceSystemReservedCompressible, EnforceKubeReserved, EnforceKubeReservedCompressible))
		}
	}
	if seen[EnforceNone] && len(keys) > 1 {
		errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: must be the only entry", EnforceNone))
	}
	if e.SystemReserved && e.SystemReservedCompressible {
		errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: excludes %q", EnforceSystemReservedCompressible, EnforceSystemReserved))
	}
	if e.KubeReserved && e.KubeReservedCompressible {
		errs = append(errs, fmt.Errorf("enforce_node_allocatable %q: excludes %q", EnforceKubeReservedCompressible, EnforceKubeReserved))
	}
	if len(errs) > 0 {
		return Enforcement{}, errors.Join(errs...)
	}
	return e, nil
}

// KubepodsConfig is the configuration of kubepods.slice at start (createNodeAllocatableCgroups /
// enforceNodeAllocatableCgroups): CgroupConfig(KubepodsLimits) with "pods" enforcement, else
// CgroupConfig of the raw internal capacity — so kubepods always gets CPU shares worth the
// whole node, since the default weight would starve pods. clearMemoryProtection (cgroup v2 with
// MemoryQoS off) adds memory.min=0 and memory.low=0 to clear stale values.
func KubepodsConfig(capacity Capacity, systemReserved, kubeReserved v1.ResourceList, enforce Enforcement, clearMemoryProtection bool) ResourceConfig {
	rl := capacity.InternalResourceList()
	if enforce.Pods {
		rl = KubepodsLimits(capacity, systemReserved, kubeReserved)
	}
	rc := *CgroupConfig(rl, false)
	if clearMemoryProtection {
		rc.Unified = map[string]string{UnifiedMemoryMin: "0", UnifiedMemoryLow: "0"}
	}
	return rc
}

// ReservedCgroupConfig is the configuration the kubelet writes on an existing system-reserved or
// kube-reserved cgroup (enforceExistingCgroup): CgroupConfig(reserved, compressibleOnly), plus,
// with MemoryQoS, memory.min = the reserved memory. Nil when reserved is nil.
func ReservedCgroupConfig(reserved v1.ResourceList, compressibleOnly, enforceMemoryQoS bool) *ResourceConfig {
	rc := CgroupConfig(reserved, compressibleOnly)
	if rc != nil && enforceMemoryQoS && rc.Memory != nil {
		rc.Unified = map[string]string{UnifiedMemoryMin: strconv.FormatInt(*rc.Memory, 10)}
	}
	return rc
}

// ReadCapacity reads the node's capacity from a procfs root (normally "/proc"), a sysfs root
// (normally "/sys") and, when ephemeralDir is non-empty, the size of the filesystem holding it:
//   - CPU: the count of sys/devices/system/cpu/online, in millicores;
//   - Memory: MemTotal of proc/meminfo;
//   - Pids: min(proc/sys/kernel/pid_max, proc/sys/kernel/threads-max);
//   - HugePages: nr_hugepages × size of each sys/kernel/mm/hugepages/hugepages-<N>kB (no
//     directory means no hugepage support: an empty map, not an error);
//   - EphemeralStorage: total bytes of statfs(ephemeralDir).
func ReadCapacity(procRoot, sysRoot, ephemeralDir string) (Capacity, error) {
	var c Capacity
	online, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu/online"))
	if err != nil {
		return c, fmt.Errorf("online cpus: %w", err)
	}
	n, err := CountCPUList(strings.TrimSpace(string(online)))
	if err != nil {
		return c, fmt.Errorf("online cpus %s: %w", filepath.Join(sysRoot, "devices/system/cpu/online"), err)
	}
	c.CPU = int64(n) * MilliCPUToCPU

	if c.Memory, err = procfs.MemTotal(procRoot); err != nil {
		return c, err
	}
	if c.Pids, err = procfs.PIDLimit(procRoot); err != nil {
		return c, err
	}

	if c.HugePages, err = readHugePages(filepath.Join(sysRoot, "kernel/mm/hugepages")); err != nil {
		return c, err
	}

	if ephemeralDir != "" {
		if c.EphemeralStorage, err = filesystemSize(ephemeralDir); err != nil {
			return c, fmt.Errorf("ephemeral storage %s: %w", ephemeralDir, err)
		}
	}
	return c, nil
}

// CountCPUList counts the CPUs of a kernel CPU list such as "0-3,5,7-8".
func CountCPUList(list string) (int, error) {
	if list == "" {
		return 0, fmt.Errorf("cpu list: empty")
	}
	n := 0
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q: %w", list, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("cpu list %q: %w", list, err)
			}
		}
		if a < 0 || b < a {
			return 0, fmt.Errorf("cpu list %q: bad range %q", list, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("kernel limit: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("kernel limit %s: %w", path, err)
	}
	return v, nil
}

// readHugePages reads nr_hugepages of every hugepages-<N>kB directory under dir.
func readHugePages(dir string) (map[int64]int64, error) {
	out := map[int64]int64{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok || !strings.HasSuffix(kb, "kB") {
			continue
		}
		size, err := strconv.ParseInt(strings.TrimSuffix(kb, "kB"), 10, 64)
		if err != nil || size <= 0 {
			return nil, fmt.Errorf("hugepages %s: bad page size directory", filepath.Join(dir, e.Name()))
		}
		nr, err := readInt(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, fmt.Errorf("hugepages: %w", err)
		}
		out[size*1024] = nr * size * 1024
	}
	return out, nil
}
