// Package procfs is slicelet's /proc adapter: the few kernel facts the node's capacity, the
// eviction signals and the pods' usage (podstats) read, parsed by github.com/prometheus/procfs (the
// parser node_exporter uses) under an injected procfs root, with errors that name the file.
//
// A file or value the kernel does not provide is an error wrapping fs.ErrNotExist (a missing
// file, as *fs.PathError naming it) or ErrNoValue (a file without the line): callers treat
// those as a missing feature, not a failure.
package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	promprocfs "github.com/prometheus/procfs"
)

// ErrNoValue is wrapped when a file exists but lacks the value asked for.
var ErrNoValue = errors.New("value not provided by the kernel")

// open returns the procfs at root for reading file. A root that does not exist is reported
// as the file being missing, so callers always see which file they could not read.
func open(root, file string) (promprocfs.FS, error) {
	p, err := promprocfs.NewFS(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return p, &fs.PathError{Op: "open", Path: filepath.Join(root, file), Err: fs.ErrNotExist}
		}
		return p, err
	}
	return p, nil
}

// MemTotal returns MemTotal of root/meminfo in bytes: the node's memory capacity for the
// scheduler's view and for the memory.available eviction signal alike.
func MemTotal(root string) (int64, error) {
	path := filepath.Join(root, "meminfo")
	p, err := open(root, "meminfo")
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	mi, err := p.Meminfo()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("meminfo: %w", err)
	case err != nil:
		return 0, fmt.Errorf("meminfo %s: MemTotal: %w", path, err)
	case mi.MemTotalBytes == nil:
		return 0, fmt.Errorf("meminfo %s: no MemTotal line: %w", path, ErrNoValue)
	}
	return int64(min(*mi.MemTotalBytes, 1<<63-1)), nil
}

// PIDLimit returns min(kernel.pid_max, kernel.threads-max): how many processes and threads the
// node can have at once, the kubelet's pid capacity.
func PIDLimit(root string) (int64, error) {
	limit := int64(-1)
	for _, sysctl := range []string{"kernel.pid_max", "kernel.threads-max"} {
		v, err := sysctlInt(root, sysctl)
		if err != nil {
			return 0, err
		}
		if limit < 0 || v < limit {
			limit = v
		}
	}
	return limit, nil
}

// sysctlInt reads a sysctl holding one integer under root/sys.
func sysctlInt(root, sysctl string) (int64, error) {
	rel := filepath.Join("sys", strings.ReplaceAll(sysctl, ".", "/"))
	p, err := open(root, rel)
	if err != nil {
		return 0, fmt.Errorf("sysctl %s: %w", sysctl, err)
	}
	vs, err := p.SysctlInts(sysctl)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("sysctl %s: %w", sysctl, err)
		}
		return 0, fmt.Errorf("sysctl %s (%s): %w", sysctl, filepath.Join(root, rel), err)
	}
	if len(vs) != 1 {
		return 0, fmt.Errorf("sysctl %s (%s): %d values, want one: %w", sysctl, filepath.Join(root, rel), len(vs), ErrNoValue)
	}
	return int64(vs[0]), nil
}

// Tasks returns the number of tasks (processes and threads) on the node: the total of the
// fourth field of root/loadavg ("running/total"), which is the kernel's nr_threads — what the
// kubelet counts with sysinfo(2)'s procs, but readable under an injected root.
// prometheus/procfs's LoadAvg parses only the three averages, so the field is read here.
func Tasks(root string) (int64, error) {
	path := filepath.Join(root, "loadavg")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 4 {
		return 0, fmt.Errorf("%s: want 5 fields, have %q", path, strings.TrimSpace(string(b)))
	}
	_, total, ok := strings.Cut(fields[3], "/")
	tasks, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%s: field %q is not running/total", path, fields[3])
	}
	return tasks, nil
}

// NodeCPU is the CPU time the node has used, from root/stat: user, nice, system, irq, softirq
// and steal of the "cpu" line (idle and iowait are not use; guest time is inside user).
func NodeCPU(root string) (time.Duration, error) {
	p, err := open(root, "stat")
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(root, "stat"), err)
	}
	c := st.CPUTotal
	secs := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return time.Duration(secs * float64(time.Second)), nil
}

// process is process pid under root; one that is gone is an error wrapping fs.ErrNotExist.
func process(root string, pid int) (promprocfs.Proc, error) {
	p, err := open(root, strconv.Itoa(pid))
	if err != nil {
		return promprocfs.Proc{}, err
	}
	return p.Proc(pid)
}

// ProcessCPU is the CPU time process pid has used, utime + stime of root/<pid>/stat. A process
// that is gone is an error wrapping fs.ErrNotExist.
func ProcessCPU(root string, pid int) (time.Duration, error) {
	proc, err := process(root, pid)
	if err != nil {
		return 0, err
	}
	st, err := proc.Stat()
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), nil
}

// EffectiveCaps returns the effective capability set of process pid: CapEff of root/<pid>/status
// (every kernel since 2.6.25 writes the line), as a bitmap indexed by capability number.
func EffectiveCaps(root string, pid int) (uint64, error) {
	proc, err := process(root, pid)
	if err != nil {
		return 0, err
	}
	st, err := proc.NewStatus()
	if err != nil {
		return 0, fmt.Errorf("capabilities of process %d: %w", pid, err)
	}
	return st.CapEff, nil
}

// OOMScoreAdj returns root/<pid>/oom_score_adj, the value process pid's children inherit.
// prometheus/procfs parses oom_score but not oom_score_adj, so the one integer is read here.
func OOMScoreAdj(root string, pid int) (int, error) {
	path := filepath.Join(root, strconv.Itoa(pid), "oom_score_adj")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("oom_score_adj of process %d: %w", pid, err)
	}
	adj, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("oom_score_adj %s: %q is not an integer", path, strings.TrimSpace(string(b)))
	}
	return adj, nil
}

// NetInterface is one network interface's counters in a network namespace (a line of
// /proc/<pid>/net/dev).
type NetInterface struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// NetDev returns the interfaces of process pid's network namespace, root/<pid>/net/dev, in
// the file's order. A process that is gone is an error wrapping fs.ErrNotExist.
func NetDev(root string, pid int) ([]NetInterface, error) {
	proc, err := process(root, pid)
	if err != nil {
		return nil, err
	}
	nd, err := proc.NetDev()
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	out := make([]NetInterface, 0, len(nd))
	for _, name := range slices.Sorted(maps.Keys(nd)) {
		l := nd[name]
		out = append(out, NetInterface{Name: l.Name, RxBytes: l.RxBytes, RxPackets: l.RxPackets, RxErrors: l.RxErrors, RxDropped: l.RxDropped,
			TxBytes: l.TxBytes, TxPackets: l.TxPackets, TxErrors: l.TxErrors, TxDropped: l.TxDropped})
	}
	return out, nil
}

// NetNamespace is the network namespace of process pid (the target of root/<pid>/ns/net,
// "net:[4026531840]"), to tell a pod's own namespace from the host's.
func NetNamespace(root string, pid int) (string, error) {
	return os.Readlink(filepath.Join(root, strconv.Itoa(pid), "ns", "net"))
}

// Topology is the CPUs' physical layout: distinct (socket, core) pairs and sockets.
type Topology struct{ Cores, Sockets int }

// CPUTopology counts the physical cores and sockets of root/cpuinfo ("physical id" and
// "core id" of each processor); a cpuinfo without them (some architectures) counts each
// processor as a core of one socket.
func CPUTopology(root string) (Topology, error) {
	p, err := open(root, "cpuinfo")
	if err != nil {
		return Topology{}, err
	}
	cpus, err := p.CPUInfo()
	if err != nil {
		return Topology{}, err
	}
	cores, sockets := map[[2]string]bool{}, map[string]bool{}
	for _, c := range cpus {
		cores[[2]string{c.PhysicalID, c.CoreID}] = true
		sockets[c.PhysicalID] = true
	}
	return Topology{Cores: len(cores), Sockets: len(sockets)}, nil
}

// SwapTotal is SwapTotal of root/meminfo in bytes.
func SwapTotal(root string) (int64, error) {
	p, err := open(root, "meminfo")
	if err != nil {
		return 0, err
	}
	mi, err := p.Meminfo()
	if err != nil {
		return 0, err
	}
	if mi.SwapTotalBytes == nil {
		return 0, fmt.Errorf("%s: SwapTotal: %w", filepath.Join(root, "meminfo"), ErrNoValue)
	}
	return int64(*mi.SwapTotalBytes), nil
}

// SwapUsed is the swap in use of root/meminfo, SwapTotal − SwapFree, in bytes: the node's
// swap usage (node_swap_usage_bytes).
func SwapUsed(root string) (int64, error) {
	p, err := open(root, "meminfo")
	if err != nil {
		return 0, err
	}
	mi, err := p.Meminfo()
	if err != nil {
		return 0, err
	}
	if mi.SwapTotalBytes == nil || mi.SwapFreeBytes == nil {
		return 0, fmt.Errorf("%s: SwapTotal, SwapFree: %w", filepath.Join(root, "meminfo"), ErrNoValue)
	}
	return int64(*mi.SwapTotalBytes) - int64(*mi.SwapFreeBytes), nil
}

// ProcessStart is when process pid started: starttime of root/<pid>/stat after the boot time
// of root/stat, as component-base's process_start_time_seconds reads it.
func ProcessStart(root string, pid int) (time.Time, error) {
	proc, err := process(root, pid)
	if err != nil {
		return time.Time{}, err
	}
	st, err := proc.Stat()
	if err != nil {
		return time.Time{}, fmt.Errorf("process %d: %w", pid, err)
	}
	secs, err := st.StartTime()
	if err != nil {
		return time.Time{}, fmt.Errorf("process %d: start time: %w", pid, err)
	}
	return time.Unix(0, int64(secs*float64(time.Second))), nil
}
