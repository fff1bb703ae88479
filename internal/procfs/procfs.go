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
	"os"
	"path/filepath"
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
