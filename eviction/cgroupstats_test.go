package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/units"
)

// writeTree writes files (path relative to root → content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadCgroupStats: cAdvisor's numbers of one container cgroup, from the files cAdvisor's
// libcontainer handler reads, on cgroup v2 and on v1 (hybrid); a limit of "max" or v1's
// PAGE_COUNTER_MAX is no limit (0), a quota of "max" or -1 none, cpu.weight 39 (the weight of
// 1024 shares) is 998 shares by cAdvisor's lossy conversion; a v1 cgroup without cpuacct is NoCPUAccounting, not an error; a
// cgroup that is gone is ErrUnavailable.
func TestReadCgroupStats(t *testing.T) {
	const cg = "/kubepods.slice/pod.slice/app.scope"
	tests := []struct {
		name  string
		mode  units.Mode
		files map[string]string
		want  CgroupStats
	}{
		{
			name: "v2",
			mode: units.ModeUnified,
			files: map[string]string{
				cg + "/memory.stat":         "anon 1000\nfile 600\nfile_mapped 50\ninactive_file 200\npgfault 7\npgmajfault 1\n",
				cg + "/memory.current":      "2000\n",
				cg + "/memory.swap.current": "30\n",
				cg + "/memory.peak":         "4000\n",
				cg + "/memory.events":       "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n",
				cg + "/memory.max":          "max\n",
				cg + "/memory.swap.max":     "max\n",
				cg + "/memory.min":          "0\n",
				cg + "/cpu.stat":            "usage_usec 5000000\nuser_usec 3000000\nsystem_usec 2000000\nnr_periods 100\nnr_throttled 10\nthrottled_usec 500000\n",
				cg + "/cpu.weight":          "39\n",
				cg + "/cpu.max":             "50000 100000\n",
				cg + "/pids.current":        "4\n",
				cg + "/pids.max":            "max\n",
				cg + "/io.stat":             "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n",
				cg + "/cpu.pressure":        "some avg10=1.50 avg60=0.75 avg300=0.20 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n",
				cg + "/memory.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=300\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200\n",
				cg + "/io.pressure":         "some avg10=0.00 avg60=0.00 avg300=0.00 total=60\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=50\n",
			},
			want: CgroupStats{
				Memory: MemoryUsage{Usage: 2000, InactiveFile: 200, WorkingSet: 1800, RSS: 1000},
				Cache:  600, MappedFile: 50, Swap: 30, MaxUsage: 4000, Failcnt: 3, Pgfault: 7, Pgmajfault: 1, OOMKills: 2,
				HasMemorySpec: true,
				CPU:           5 * time.Second, CPUUser: 3 * time.Second, CPUSystem: 2 * time.Second,
				Periods: 100, ThrottledPeriods: 10, ThrottledTime: 500 * time.Millisecond,
				CPUShares: 998, CPUQuota: 50000, CPUPeriod: 100000, HasCPUSpec: true,
				Threads: 4, HasThreads: true,
				IO:             []DeviceIO{{Major: 8, Minor: 0, ReadBytes: 4096, WriteBytes: 8192, Reads: 1, Writes: 2}},
				CPUPressure:    PSIStats{Some: PSIData{Avg10: 1.5, Avg60: 0.75, Avg300: 0.2, Total: 2500000}, Full: PSIData{Total: 1000}},
				MemoryPressure: PSIStats{Some: PSIData{Total: 300}, Full: PSIData{Total: 200}},
				IOPressure:     PSIStats{Some: PSIData{Total: 60}, Full: PSIData{Total: 50}},
			},
		},
		{
			name: "v2 without PSI",
			mode: units.ModeUnified,
			files: map[string]string{
				cg + "/memory.stat":    "anon 1000\n",
				cg + "/memory.current": "1000\n",
			},
			want: CgroupStats{Memory: MemoryUsage{Usage: 1000, WorkingSet: 1000, RSS: 1000}},
		},
		{
			name: "v1",
			mode: units.ModeHybrid,
			files: map[string]string{
				"memory" + cg + "/memory.stat":                    "total_rss 1000\ntotal_cache 600\ntotal_mapped_file 50\ntotal_swap 30\ntotal_inactive_file 200\npgfault 7\npgmajfault 1\n",
				"memory" + cg + "/memory.usage_in_bytes":          "2000\n",
				"memory" + cg + "/memory.max_usage_in_bytes":      "4000\n",
				"memory" + cg + "/memory.failcnt":                 "3\n",
				"memory" + cg + "/memory.oom_control":             "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
				"memory" + cg + "/memory.limit_in_bytes":          "268435456\n",
				"memory" + cg + "/memory.soft_limit_in_bytes":     "9223372036854771712\n",
				"cpuacct" + cg + "/cpuacct.usage":                 "5000000000\n",
				"cpuacct" + cg + "/cpuacct.stat":                  "user 300\nsystem 200\n",
				"cpu" + cg + "/cpu.stat":                          "nr_periods 100\nnr_throttled 10\nthrottled_time 500000000\n",
				"cpu" + cg + "/cpu.shares":                        "1024\n",
				"cpu" + cg + "/cpu.cfs_period_us":                 "100000\n",
				"cpu" + cg + "/cpu.cfs_quota_us":                  "-1\n",
				"pids" + cg + "/pids.current":                     "4\n",
				"pids" + cg + "/pids.max":                         "1024\n",
				"blkio" + cg + "/blkio.throttle.io_service_bytes": "8:0 Read 4096\n8:0 Write 8192\n8:0 Total 12288\nTotal 12288\n",
				"blkio" + cg + "/blkio.throttle.io_serviced":      "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n",
			},
			want: CgroupStats{
				Memory: MemoryUsage{Usage: 2000, InactiveFile: 200, WorkingSet: 1800, RSS: 1000},
				Cache:  600, MappedFile: 50, Swap: 30, MaxUsage: 4000, Failcnt: 3, Pgfault: 7, Pgmajfault: 1, OOMKills: 2,
				MemoryLimit: 268435456, HasMemorySpec: true,
				CPU: 5 * time.Second, CPUUser: 3 * time.Second, CPUSystem: 2 * time.Second,
				Periods: 100, ThrottledPeriods: 10, ThrottledTime: 500 * time.Millisecond,
				CPUShares: 1024, CPUPeriod: 100000, HasCPUSpec: true,
				Threads: 4, ThreadsMax: 1024, HasThreads: true,
				IO: []DeviceIO{{Major: 8, Minor: 0, ReadBytes: 4096, WriteBytes: 8192, Reads: 1, Writes: 2}},
			},
		},
		{
			name: "v1 without cpuacct",
			mode: units.ModeHybrid,
			files: map[string]string{
				"memory" + cg + "/memory.stat":           "total_rss 1000\n",
				"memory" + cg + "/memory.usage_in_bytes": "1000\n",
			},
			want: CgroupStats{Memory: MemoryUsage{Usage: 1000, WorkingSet: 1000, RSS: 1000}, NoCPUAccounting: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			got, err := ReadCgroupStats(root, tt.mode, cg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if _, err := ReadCgroupStats(root, tt.mode, cg+"/gone"); !errors.Is(err, ErrUnavailable) {
				t.Errorf("a cgroup that is gone: %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestReadCgroupStatsAllocatesOnlyForWhatItReads: a kernel's memory.stat has some 50 lines
// (6.x, v2) of which the stats read six; the lines not read allocate nothing, so reading a
// full memory.stat allocates what reading one with only those six lines does.
func TestReadCgroupStatsAllocatesOnlyForWhatItReads(t *testing.T) {
	full := ""
	for i, k := range strings.Fields(`anon file kernel kernel_stack pagetables sec_pagetables percpu sock vmalloc shmem
		zswap zswapped file_mapped file_dirty file_writeback swapcached anon_thp file_thp shmem_thp inactive_anon
		active_anon inactive_file active_file unevictable slab_reclaimable slab_unreclaimable slab
		workingset_refault_anon workingset_refault_file workingset_activate_anon workingset_activate_file
		workingset_restore_anon workingset_restore_file workingset_nodereclaim pgscan pgsteal pgscan_kswapd
		pgscan_direct pgsteal_kswapd pgsteal_direct pgfault pgmajfault pgrefill pgactivate pgdeactivate
		pglazyfree pglazyfreed zswpin zswpout thp_fault_alloc thp_collapse_alloc`) {
		full += fmt.Sprintf("%s %d\n", k, 4096*(i+1))
	}
	allocs := map[string]float64{}
	for name, stat := range map[string]string{"full": full, "read keys only": "anon 4096\nfile 8192\nfile_mapped 53248\ninactive_file 90112\npgfault 163840\npgmajfault 167936\n"} {
		root := t.TempDir()
		dir := filepath.Join(root, "pod.slice")
		psi := "some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=789\n"
		for f, v := range map[string]string{"memory.stat": stat, "memory.current": "1000000\n",
			"cpu.pressure": psi, "memory.pressure": psi, "io.pressure": psi, "cpu.stat": "usage_usec 1\nuser_usec 1\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n",
			"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", "pids.current": "3\n"} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		allocs[name] = testing.AllocsPerRun(50, func() {
			if _, err := ReadCgroupStats(root, units.ModeUnified, "/pod.slice"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("allocations per ReadCgroupStats: %v", allocs)
	if allocs["full"] != allocs["read keys only"] {
		t.Errorf("a full memory.stat costs %v allocations, one with the keys read %v: the lines not read allocate", allocs["full"], allocs["read keys only"])
	}
	// The files' paths are composed in the read buffer and the values kept in an array: a
	// read of a cgroup whose files are all there allocates nothing.
	if allocs["full"] != 0 {
		t.Errorf("a cgroup read allocates %v times, want 0", allocs["full"])
	}
}

// TestParsePSI: the pressure files as the kernel writes them (cpu.pressure of a kernel before
// 5.13 has no full line; the root's full line of cpu.pressure is zeros), and a file that is
// not one is an error naming the line and value.
func TestParsePSI(t *testing.T) {
	tests := []struct {
		name, file string
		want       PSIStats
		wantErr    string
	}{
		{name: "some and full", file: "some avg10=2.04 avg60=0.75 avg300=0.40 total=157622356\nfull avg10=1.10 avg60=0.50 avg300=0.20 total=90126551\n",
			want: PSIStats{Some: PSIData{Avg10: 2.04, Avg60: 0.75, Avg300: 0.4, Total: 157622356}, Full: PSIData{Avg10: 1.1, Avg60: 0.5, Avg300: 0.2, Total: 90126551}}},
		{name: "cpu before 5.13: some only", file: "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n",
			want: PSIStats{Some: PSIData{Total: 42}}},
		{name: "total above 2^63", file: "some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551615\n",
			want: PSIStats{Some: PSIData{Total: 18446744073709551615}}},
		{name: "unknown key and line ignored", file: "some avg10=0.00 avg60=0.00 avg300=0.00 avg900=1.00 total=1\nlater avg10=9\n",
			want: PSIStats{Some: PSIData{Total: 1}}},
		{name: "empty", file: ""},
		{name: "bad total", file: "some avg10=0.00 avg60=0.00 avg300=0.00 total=x\n", wantErr: `some line: total "x" is not a number`},
		{name: "bad average", file: "full avg10=0.0.0 avg60=0.00 avg300=0.00 total=1\n", wantErr: `full line: avg10 "0.0.0" is not a number`},
		{name: "not key=value", file: "some 0.00 0.00\n", wantErr: `some line: "0.00" is not key=value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePSI([]byte(tt.file))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestReadCgroupStatsPSIError: a pressure file that cannot be parsed is an error naming it.
func TestReadCgroupStatsPSIError(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"/a/memory.stat": "anon 1\n", "/a/memory.current": "1\n", "/a/io.pressure": "some total=x\n"})
	_, err := ReadCgroupStats(root, units.ModeUnified, "/a")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "a", "io.pressure")+`: some line: total "x" is not a number`) {
		t.Errorf("error %v, want one naming io.pressure", err)
	}
}

// TestPSIAvailable: the kubelet's IsPsiEnabled rule, cpu.pressure at the root of the cgroup
// mount: a v2 root has it unless the kernel was booted with psi=0; a v1 or hybrid root (a
// tmpfs of controller directories) never has it.
func TestPSIAvailable(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{name: "v2", files: map[string]string{"cgroup.controllers": "cpu memory io\n", "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"}, want: true},
		{name: "v2 psi=0", files: map[string]string{"cgroup.controllers": "cpu memory io\n"}},
		{name: "hybrid", files: map[string]string{"memory/memory.stat": "", "unified/cpu.pressure": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			if got := PSIAvailable(root); got != tt.want {
				t.Errorf("PSIAvailable = %v, want %v", got, tt.want)
			}
		})
	}
}
