package eviction

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/slicelet/slicelet/units"
)

// CgroupStats is what cAdvisor reports of one cgroup (its libcontainer handler's stats and
// spec, github.com/google/cadvisor container/libcontainer and container/common), read in one
// pass over the cgroup's files. A number the kernel does not provide (a controller not
// enabled, a file of a newer kernel) is zero, as in cAdvisor.
type CgroupStats struct {
	// Memory is the usage, inactive file pages, working set and RSS (ReadCgroupMemory's).
	Memory MemoryUsage
	// Cache is page cache: file (v2) or total_cache (v1) of memory.stat.
	Cache int64
	// MappedFile is mapped page cache: file_mapped (v2) or total_mapped_file (v1).
	MappedFile int64
	// Swap is swap used: memory.swap.current (v2) or total_swap of memory.stat (v1).
	Swap int64
	// MaxUsage is the peak usage: memory.peak (v2, kernels from 5.19) or
	// memory.max_usage_in_bytes (v1).
	MaxUsage int64
	// Failcnt is how often the limit was hit: max of memory.events (v2) or memory.failcnt
	// (v1).
	Failcnt int64
	// Pgfault and Pgmajfault are the page faults of memory.stat (the cgroup's own on v1,
	// pgfault and pgmajfault; v2 counts hierarchically).
	Pgfault, Pgmajfault int64
	// OOMKills are the processes the OOM killer killed in the cgroup: oom_kill of
	// memory.events (v2) or of memory.oom_control (v1, kernels from 4.13).
	OOMKills int64
	// MemoryLimit, SwapLimit and MemoryReservation are the limits (memory.max,
	// memory.swap.max, memory.min on v2; memory.limit_in_bytes, memory.memsw.limit_in_bytes,
	// memory.soft_limit_in_bytes on v1); 0 for none.
	MemoryLimit, SwapLimit, MemoryReservation int64

	// CPU is the CPU time used (ReadCgroupCPU's); CPUUser and CPUSystem split it (user_usec
	// and system_usec of cpu.stat on v2, cpuacct.stat's ticks on v1).
	CPU, CPUUser, CPUSystem time.Duration
	// Periods, ThrottledPeriods and ThrottledTime are the CFS bandwidth counters of cpu.stat
	// (nr_periods, nr_throttled, throttled_usec on v2 or throttled_time on v1).
	Periods, ThrottledPeriods int64
	ThrottledTime             time.Duration
	// CPUShares is cpu.shares (v1) or cpu.weight converted to shares (v2, cAdvisor's
	// conversion); CPUQuota and CPUPeriod are the CFS quota (0 for none) and period in
	// microseconds (cpu.max on v2, cpu.cfs_quota_us and cpu.cfs_period_us on v1).
	CPUShares, CPUQuota, CPUPeriod int64
	// HasCPUSpec and HasMemorySpec say whether the cpu and memory controllers' limits were
	// readable (cAdvisor exports the container_spec_* families only then).
	HasCPUSpec, HasMemorySpec bool

	// Threads and ThreadsMax are pids.current and pids.max (0 for no limit).
	Threads, ThreadsMax int64
	// HasThreads says pids.current was read (the pids controller is there): Threads is then
	// the process count the eviction manager ranks on (ReadPodProcesses').
	HasThreads bool
	// NoCPUAccounting says CPU, CPUUser and CPUSystem were not read: the v1 cgroup has no
	// cpuacct.usage (a cpuacct hierarchy mounted apart from cpu, where systemd does not create
	// units' cgroups), so the caller measures CPU another way.
	NoCPUAccounting bool
	// IO is the block I/O by device (io.stat on v2, blkio.throttle.io_service_bytes and
	// io_serviced on v1).
	IO []DeviceIO
	// CPUPressure, MemoryPressure and IOPressure are the cgroup's pressure stall information
	// (cpu.pressure, memory.pressure, io.pressure; cgroup v2 only). A kernel without PSI
	// (CONFIG_PSI off, psi=0) has no such files: they are then zero, as in cAdvisor.
	CPUPressure, MemoryPressure, IOPressure PSIStats
}

// PSIStats is one pressure file: the share of time some tasks of the cgroup were stalled on
// the resource (Some, "waiting" in cAdvisor's metrics) and all of them at once (Full,
// "stalled").
type PSIStats struct {
	Some, Full PSIData
}

// PSIData is one line of a pressure file: the averages over 10 s, 60 s and 300 s in percent,
// and the total stall time in microseconds.
type PSIData struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64
}

// DeviceIO is one block device's I/O in a cgroup.
type DeviceIO struct {
	Major, Minor                         uint64
	ReadBytes, WriteBytes, Reads, Writes int64
}

// The keys of memory.stat read, on v2 and v1: a kernel's memory.stat has some 40 to 50 lines,
// and only the keys asked for are kept (a key kept is a string allocated, for each cgroup of
// each pod at each sample).
var (
	statKeysV2 = []string{"anon", "file", "inactive_file", "file_mapped", "pgfault", "pgmajfault"}
	statKeysV1 = []string{"total_inactive_file", "total_rss", "total_cache", "total_mapped_file", "total_swap", "pgfault", "pgmajfault"}
)

// userHZ is the unit of cpuacct.stat: USER_HZ, 100 on every Linux architecture slicelet
// runs on.
const userHZ = 100

// ReadCgroupStats reads a cgroup's stats (CgroupStats) at cgroupPath. The error wraps
// ErrUnavailable when the cgroup is gone (its memory files missing); a file that exists but
// cannot be read or parsed is an error too. CPU time missing on v1 is NoCPUAccounting, not an
// error.
func ReadCgroupStats(cgroupRoot string, mode units.Mode, cgroupPath string) (CgroupStats, error) {
	if mode == units.ModeUnified {
		return readStatsV2(cgroupRoot, cgroupPath)
	}
	return readStatsV1(cgroupRoot, mode, cgroupPath)
}

// optional is a read whose missing file is a zero value.
func optional(v int64, err error) (int64, error) {
	if errors.Is(err, ErrUnavailable) {
		return 0, nil
	}
	return v, err
}

// limit turns a limit read by readUint ("max" is -1) into cAdvisor's: 0 for none.
func limit(v int64) int64 {
	if v < 0 || v > unlimitedMemory {
		return 0
	}
	return v
}

// The other keys read: memory.events, cpu.stat (v2, v1), cpuacct.stat and v1's
// memory.oom_control.
var (
	eventKeysV2   = []string{"max", "oom_kill"}
	cpuStatKeysV2 = []string{"usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec"}
	cpuStatKeysV1 = []string{"nr_periods", "nr_throttled", "throttled_time"}
	cpuacctKeys   = []string{"user", "system"}
	oomKeysV1     = []string{"oom_kill"}
)

func readStatsV2(root, cgroupPath string) (CgroupStats, error) {
	var s CgroupStats
	file := func(name string) fileAt { return fileAt{root: root, cgroup: cgroupPath, name: name} }
	stat, err := readKeysAt(file("memory.stat"), statKeysV2)
	if err != nil {
		return s, fmt.Errorf("memory of %s: %w", cgroupPath, file("memory.stat").named(err))
	}
	s.Memory.Usage, err = readUintAt(file("memory.current"))
	if err != nil && isRoot(cgroupPath) {
		s.Memory.Usage, err = stat.get("anon")+stat.get("file"), nil
	}
	if err != nil {
		return s, fmt.Errorf("memory of %s: %w", cgroupPath, file("memory.current").named(err))
	}
	s.Memory.InactiveFile, s.Memory.RSS = stat.get("inactive_file"), stat.get("anon")
	s.Memory.WorkingSet = max(s.Memory.Usage-s.Memory.InactiveFile, 0)
	s.Cache, s.MappedFile = stat.get("file"), stat.get("file_mapped")
	s.Pgfault, s.Pgmajfault = stat.get("pgfault"), stat.get("pgmajfault")
	var errs []error
	read := func(dst *int64, name string) {
		v, err := optional(readUintAt(file(name)))
		*dst = v
		if err != nil {
			errs = append(errs, err)
		}
	}
	read(&s.Swap, "memory.swap.current")
	read(&s.MaxUsage, "memory.peak")
	if ev, err := readKeysAt(file("memory.events"), eventKeysV2); err == nil {
		s.Failcnt, s.OOMKills = ev.get("max"), ev.get("oom_kill")
	} else if !errors.Is(err, ErrUnavailable) {
		errs = append(errs, err)
	}
	if v, err := readUintAt(file("memory.max")); err == nil {
		s.HasMemorySpec, s.MemoryLimit = true, limit(v)
		read(&s.SwapLimit, "memory.swap.max")
		s.SwapLimit = limit(s.SwapLimit)
		read(&s.MemoryReservation, "memory.min")
	}
	if cpu, err := readKeysAt(file("cpu.stat"), cpuStatKeysV2); err == nil {
		s.CPU = time.Duration(cpu.get("usage_usec")) * time.Microsecond
		s.CPUUser = time.Duration(cpu.get("user_usec")) * time.Microsecond
		s.CPUSystem = time.Duration(cpu.get("system_usec")) * time.Microsecond
		s.Periods, s.ThrottledPeriods = cpu.get("nr_periods"), cpu.get("nr_throttled")
		s.ThrottledTime = time.Duration(cpu.get("throttled_usec")) * time.Microsecond
	} else if !errors.Is(err, ErrUnavailable) {
		errs = append(errs, err)
	}
	if w, err := readUintAt(file("cpu.weight")); err == nil {
		s.HasCPUSpec = true
		if w >= 1 && w <= 10000 {
			// cAdvisor's convertCPUWeightToCPULimit.
			s.CPUShares = 2 + ((w-1)*262142)/9999
		}
		if q, p, err := readCPUMax(file("cpu.max")); err == nil {
			s.CPUQuota, s.CPUPeriod = q, p
		} else if !errors.Is(err, ErrUnavailable) {
			errs = append(errs, err)
		}
	}
	if v, err := readUintAt(file("pids.current")); err == nil {
		s.Threads, s.HasThreads = v, true
	} else if !errors.Is(err, ErrUnavailable) {
		errs = append(errs, err)
	}
	read(&s.ThreadsMax, "pids.max")
	s.ThreadsMax = max(s.ThreadsMax, 0)
	io, err := readIOStat(file("io.stat"))
	if err != nil && !errors.Is(err, ErrUnavailable) {
		errs = append(errs, err)
	}
	s.IO = io
	if err := ReadCgroupPressure(root, cgroupPath, &s); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("stats of %s: %w", cgroupPath, err)
	}
	return s, nil
}

// ReadCgroupPressure reads the pressure files of the cgroup v2 cgroup at cgroupPath into
// CgroupStats' CPUPressure, MemoryPressure and IOPressure (ReadCgroupStats reads them with
// the rest; the node's root cgroup is read apart). Missing files are zero.
func ReadCgroupPressure(root, cgroupPath string, s *CgroupStats) error {
	var errs []error
	read := func(name string) PSIStats {
		f := fileAt{root: root, cgroup: cgroupPath, name: name}
		v, err := readFileAt(f, parsePSI)
		if err != nil && !errors.Is(err, ErrUnavailable) {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
		}
		return v
	}
	s.CPUPressure, s.MemoryPressure, s.IOPressure = read("cpu.pressure"), read("memory.pressure"), read("io.pressure")
	return errors.Join(errs...)
}

// parsePSI parses a pressure file (Documentation/accounting/psi.rst):
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// The full line is missing from cpu.pressure before Linux 5.13; a key the kernel adds is
// ignored.
func parsePSI(b []byte) (PSIStats, error) {
	var out PSIStats
	for line := range bytes.Lines(b) {
		kind, rest, _ := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		var d *PSIData
		switch string(kind) {
		case "some":
			d = &out.Some
		case "full":
			d = &out.Full
		default:
			continue
		}
		// Fields one by one: bytes.Fields would allocate a slice per line.
		for len(rest) > 0 {
			var kv []byte
			kv, rest, _ = bytes.Cut(bytes.TrimLeft(rest, " "), []byte{' '})
			if len(kv) == 0 {
				continue
			}
			k, v, ok := bytes.Cut(kv, []byte{'='})
			if !ok {
				return PSIStats{}, fmt.Errorf("%s line: %q is not key=value", kind, kv)
			}
			var err error
			switch string(k) {
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(string(v), 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(string(v), 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(string(v), 64)
			case "total":
				d.Total, err = strconv.ParseUint(string(v), 10, 64)
			}
			if err != nil {
				return PSIStats{}, fmt.Errorf("%s line: %s %q is not a number", kind, k, v)
			}
		}
	}
	return out, nil
}

// PSIAvailable says whether the kernel accounts pressure stall information per cgroup: the
// root cgroup of the unified hierarchy at cgroupRoot has cpu.pressure (the kubelet's
// IsPsiEnabled, pkg/kubelet/cadvisor/cadvisor_linux.go). It is false on cgroup v1 and hybrid
// hosts (cgroupRoot is then a tmpfs of controller hierarchies) and on a v2 kernel booted with
// psi=0 or built without CONFIG_PSI.
func PSIAvailable(cgroupRoot string) bool {
	f, err := os.Open(filepath.Join(cgroupRoot, "cpu.pressure"))
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

func readStatsV1(root string, mode units.Mode, cgroupPath string) (CgroupStats, error) {
	var s CgroupStats
	if _, err := controllerDir(root, mode, "memory", cgroupPath); err != nil {
		return s, err
	}
	file := func(controller, name string) fileAt { return cgroupFile(root, mode, controller, cgroupPath, name) }
	stat, err := readKeysAt(file("memory", "memory.stat"), statKeysV1)
	if err != nil {
		return s, fmt.Errorf("memory of %s: %w", cgroupPath, file("memory", "memory.stat").named(err))
	}
	if s.Memory.Usage, err = readUintAt(file("memory", "memory.usage_in_bytes")); err != nil {
		return s, fmt.Errorf("memory of %s: %w", cgroupPath, file("memory", "memory.usage_in_bytes").named(err))
	}
	s.Memory.InactiveFile, s.Memory.RSS = stat.get("total_inactive_file"), stat.get("total_rss")
	s.Memory.WorkingSet = max(s.Memory.Usage-s.Memory.InactiveFile, 0)
	s.Cache, s.MappedFile, s.Swap = stat.get("total_cache"), stat.get("total_mapped_file"), stat.get("total_swap")
	s.Pgfault, s.Pgmajfault = stat.get("pgfault"), stat.get("pgmajfault")
	var errs []error
	read := func(dst *int64, controller, name string) bool {
		v, err := readUintAt(file(controller, name))
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				errs = append(errs, err)
			}
			return false
		}
		*dst = v
		return true
	}
	read(&s.MaxUsage, "memory", "memory.max_usage_in_bytes")
	read(&s.Failcnt, "memory", "memory.failcnt")
	if oc, err := readKeysAt(file("memory", "memory.oom_control"), oomKeysV1); err == nil {
		s.OOMKills = oc.get("oom_kill")
	}
	if read(&s.MemoryLimit, "memory", "memory.limit_in_bytes") {
		s.HasMemorySpec, s.MemoryLimit = true, limit(s.MemoryLimit)
		read(&s.SwapLimit, "memory", "memory.memsw.limit_in_bytes")
		s.SwapLimit = limit(s.SwapLimit)
		read(&s.MemoryReservation, "memory", "memory.soft_limit_in_bytes")
		s.MemoryReservation = limit(s.MemoryReservation)
	}
	s.NoCPUAccounting = true
	if read((*int64)(&s.CPU), "cpuacct", "cpuacct.usage") {
		s.NoCPUAccounting = false
		if st, err := readKeysAt(file("cpuacct", "cpuacct.stat"), cpuacctKeys); err == nil {
			s.CPUUser = time.Duration(st.get("user")) * time.Second / userHZ
			s.CPUSystem = time.Duration(st.get("system")) * time.Second / userHZ
		}
	}
	if st, err := readKeysAt(file("cpu", "cpu.stat"), cpuStatKeysV1); err == nil {
		s.Periods, s.ThrottledPeriods = st.get("nr_periods"), st.get("nr_throttled")
		s.ThrottledTime = time.Duration(st.get("throttled_time"))
	}
	if read(&s.CPUShares, "cpu", "cpu.shares") {
		s.HasCPUSpec = true
		read(&s.CPUPeriod, "cpu", "cpu.cfs_period_us")
		if q, err := readFileAt(file("cpu", "cpu.cfs_quota_us"), parseQuota); err == nil {
			s.CPUQuota = q
		}
	}
	s.HasThreads = read(&s.Threads, "pids", "pids.current")
	read(&s.ThreadsMax, "pids", "pids.max")
	s.ThreadsMax = max(s.ThreadsMax, 0)
	s.IO = readBlkio(file("blkio", ""))
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("stats of %s: %w", cgroupPath, err)
	}
	return s, nil
}

// parseQuota parses cpu.cfs_quota_us: -1 (no quota) is 0.
func parseQuota(b []byte) (int64, error) {
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu.cfs_quota_us: value %q is not a number", bytes.TrimSpace(b))
	}
	return max(v, 0), nil
}

// readCPUMax reads cpu.max ("$MAX $PERIOD", MAX "max" for no quota).
func readCPUMax(path fileAt) (quota, period int64, err error) {
	type qp struct{ q, p int64 }
	v, err := readFileAt(path, func(b []byte) (qp, error) {
		f := bytes.Fields(b)
		if len(f) != 2 {
			return qp{}, fmt.Errorf("%s: %q is not \"quota period\"", path, bytes.TrimSpace(b))
		}
		var out qp
		var err error
		if string(f[0]) != "max" {
			if out.q, err = strconv.ParseInt(string(f[0]), 10, 64); err != nil {
				return qp{}, fmt.Errorf("%s: quota %q is not a number", path, f[0])
			}
		}
		if out.p, err = strconv.ParseInt(string(f[1]), 10, 64); err != nil {
			return qp{}, fmt.Errorf("%s: period %q is not a number", path, f[1])
		}
		return out, nil
	})
	return v.q, v.p, err
}

// readIOStat reads io.stat: one line per device, "MAJ:MIN rbytes=… wbytes=… rios=… wios=…".
func readIOStat(path fileAt) ([]DeviceIO, error) {
	return readFileAt(path, func(b []byte) ([]DeviceIO, error) {
		var out []DeviceIO
		for line := range bytes.Lines(b) {
			f := bytes.Fields(line)
			if len(f) == 0 {
				continue
			}
			d, ok := parseDevice(f[0])
			if !ok {
				continue
			}
			for _, kv := range f[1:] {
				k, v, ok := bytes.Cut(kv, []byte{'='})
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					continue
				}
				switch string(k) {
				case "rbytes":
					d.ReadBytes = n
				case "wbytes":
					d.WriteBytes = n
				case "rios":
					d.Reads = n
				case "wios":
					d.Writes = n
				}
			}
			out = append(out, d)
		}
		return out, nil
	})
}

// readBlkio reads v1's blkio.throttle.io_service_bytes and io_serviced ("MAJ:MIN Read N"
// lines); missing files are no I/O.
func readBlkio(dir fileAt) []DeviceIO {
	byDev := map[[2]uint64]*DeviceIO{}
	var order [][2]uint64
	for _, f := range []struct {
		file        string
		read, write func(*DeviceIO) *int64
	}{
		{"blkio.throttle.io_service_bytes", func(d *DeviceIO) *int64 { return &d.ReadBytes }, func(d *DeviceIO) *int64 { return &d.WriteBytes }},
		{"blkio.throttle.io_serviced", func(d *DeviceIO) *int64 { return &d.Reads }, func(d *DeviceIO) *int64 { return &d.Writes }},
	} {
		file := dir
		file.name = f.file
		_, _ = readFileAt(file, func(b []byte) (struct{}, error) {
			for line := range bytes.Lines(b) {
				fl := bytes.Fields(line)
				if len(fl) != 3 {
					continue
				}
				d, ok := parseDevice(fl[0])
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(string(fl[2]), 10, 64)
				if err != nil {
					continue
				}
				key := [2]uint64{d.Major, d.Minor}
				have, ok := byDev[key]
				if !ok {
					have = &DeviceIO{Major: d.Major, Minor: d.Minor}
					byDev[key] = have
					order = append(order, key)
				}
				switch string(fl[1]) {
				case "Read":
					*f.read(have) = n
				case "Write":
					*f.write(have) = n
				}
			}
			return struct{}{}, nil
		})
	}
	var out []DeviceIO
	for _, k := range order {
		out = append(out, *byDev[k])
	}
	return out
}

// parseDevice parses "MAJ:MIN".
func parseDevice(b []byte) (DeviceIO, bool) {
	ma, mi, ok := bytes.Cut(b, []byte{':'})
	if !ok {
		return DeviceIO{}, false
	}
	major, err1 := strconv.ParseUint(string(ma), 10, 32)
	minor, err2 := strconv.ParseUint(string(mi), 10, 32)
	if err1 != nil || err2 != nil {
		return DeviceIO{}, false
	}
	return DeviceIO{Major: major, Minor: minor}, true
}
