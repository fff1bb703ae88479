package eviction

import (
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/procfs"
	"github.com/slicelet/slicelet/units"
)

// unlimitedMemory is cAdvisor's bound for "no limit": cgroup v1 reports an unlimited cgroup
// as PAGE_COUNTER_MAX pages (9223372036854771712 on 4 KiB pages), never as "max", so any
// limit above 2^62 counts as none (cAdvisor's isMemoryUnlimited).
const unlimitedMemory = int64(1) << 62

// MemoryUsage is a cgroup's memory as cAdvisor reports it.
type MemoryUsage struct {
	// Usage is memory.current (v2) or memory.usage_in_bytes (v1), in bytes.
	Usage int64
	// InactiveFile is inactive_file (v2) or total_inactive_file (v1) of memory.stat.
	InactiveFile int64
	// WorkingSet is Usage − InactiveFile, at least 0: what the kubelet ranks and evicts on.
	// Active page cache counts as used (kubernetes#43916).
	WorkingSet int64
	// RSS is anonymous memory: anon (v2) or total_rss (v1) of memory.stat, cAdvisor's RSS
	// (the kubelet's summary API rssBytes).
	RSS int64
}

// ReadMemory observes memory.available: capacity is MemTotal of procRoot/meminfo, the
// working set is the root cgroup's usage minus inactive_file, available = capacity −
// working set (at least 0), and the observation's capacity is available + working set, as
// the kubelet's summary makes it.
//
// The root cgroup's usage is read as cAdvisor reads it through runc's cgroup library: on v1
// memory.usage_in_bytes of the memory hierarchy's root; on v2 the root has no memory.current,
// so usage is anon + file of the root memory.stat (opencontainers/cgroups
// fs2.rootStatsFromMeminfo emulates v1's usage_in_bytes this way).
func ReadMemory(cgroupRoot, procRoot string, mode units.Mode, now time.Time) (Observation, error) {
	total, err := procfs.MemTotal(procRoot)
	if err != nil {
		return Observation{}, fmt.Errorf("memory capacity: %w", procfsError(err))
	}
	m, err := ReadCgroupMemory(cgroupRoot, mode, "/")
	if err != nil {
		return Observation{}, err
	}
	available := max(total-m.WorkingSet, 0)
	return newObservation(available, available+m.WorkingSet, resource.BinarySI, now), nil
}

// ReadAllocatableMemory observes allocatableMemory.available from the kubepods cgroup
// (kubepodsPath, normally "/kubepods.slice"): its memory limit minus its working set. A
// cgroup without a memory limit gives no observation (ErrUnavailable), as in the kubelet,
// whose summary has no AvailableBytes then.
func ReadAllocatableMemory(cgroupRoot string, mode units.Mode, kubepodsPath string, now time.Time) (Observation, error) {
	dir, err := controllerDir(cgroupRoot, mode, "memory", kubepodsPath)
	if err != nil {
		return Observation{}, err
	}
	limitFile := "memory.max"
	if mode != units.ModeUnified {
		limitFile = "memory.limit_in_bytes"
	}
	limit, err := readUint(filepath.Join(dir, limitFile))
	if err != nil {
		return Observation{}, fmt.Errorf("allocatable memory: %w", err)
	}
	if limit < 0 || limit > unlimitedMemory {
		return Observation{}, fmt.Errorf("allocatable memory: %s has no memory limit: %w", kubepodsPath, ErrUnavailable)
	}
	m, err := ReadCgroupMemory(cgroupRoot, mode, kubepodsPath)
	if err != nil {
		return Observation{}, err
	}
	available := max(limit-m.WorkingSet, 0)
	return newObservation(available, available+m.WorkingSet, resource.BinarySI, now), nil
}

// ReadCgroupMemory reads a cgroup's usage and working set. The root cgroup on v2 has no
// memory.current; its usage is anon + file of memory.stat (see ReadMemory).
func ReadCgroupMemory(cgroupRoot string, mode units.Mode, cgroupPath string) (MemoryUsage, error) {
	dir, err := controllerDir(cgroupRoot, mode, "memory", cgroupPath)
	if err != nil {
		return MemoryUsage{}, err
	}
	// The keys read: inactive file pages and anonymous memory (cAdvisor's RSS); v2's root
	// also needs file for its usage.
	keys := []string{"total_inactive_file", "total_rss"}
	if mode == units.ModeUnified {
		keys = []string{"inactive_file", "anon", "file"}
	}
	inactiveKey, rssKey := keys[0], keys[1]
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"), keys...)
	if err != nil {
		return MemoryUsage{}, fmt.Errorf("memory of %s: %w", cgroupPath, err)
	}
	var m MemoryUsage
	if mode == units.ModeUnified {
		m.Usage, err = readUint(filepath.Join(dir, "memory.current"))
		if err != nil && isRoot(cgroupPath) {
			m.Usage, err = stat["anon"]+stat["file"], nil
		}
	} else {
		m.Usage, err = readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	}
	if err != nil {
		return MemoryUsage{}, fmt.Errorf("memory of %s: %w", cgroupPath, err)
	}
	m.InactiveFile, m.RSS = stat[inactiveKey], stat[rssKey]
	m.WorkingSet = max(m.Usage-m.InactiveFile, 0)
	return m, nil
}

func isRoot(cgroupPath string) bool { return cgroupPath == "" || cgroupPath == "/" }
