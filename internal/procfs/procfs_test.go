package procfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestMemTotal(t *testing.T) {
	tests := []struct {
		name     string
		meminfo  string // "" = no file
		want     int64
		wantErr  string
		notExist bool
		noValue  bool
	}{
		{name: "kB", meminfo: "MemTotal:       16384 kB\nMemFree: 1 kB\nHugePages_Total: 0\n", want: 16384 << 10},
		{name: "no MemTotal", meminfo: "MemFree: 1 kB\n", wantErr: "no MemTotal line", noValue: true},
		{name: "unknown unit", meminfo: "MemTotal: 1 MB\n", wantErr: "MemTotal"},
		{name: "not a number", meminfo: "MemTotal: lots kB\n", wantErr: "meminfo"},
		{name: "missing", wantErr: "meminfo", notExist: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"stat": ""}
			if tt.meminfo != "" {
				files["meminfo"] = tt.meminfo
			}
			root := writeTree(t, files)
			got, err := MemTotal(root)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("MemTotal = %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("MemTotal error = %v, want it to mention %q", err, tt.wantErr)
			}
			if errors.Is(err, fs.ErrNotExist) != tt.notExist || errors.Is(err, ErrNoValue) != tt.noValue {
				t.Errorf("MemTotal error %v: ErrNotExist %v, ErrNoValue %v", err, errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrNoValue))
			}
		})
	}
	t.Run("missing root names the file", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "none")
		_, err := MemTotal(root)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != filepath.Join(root, "meminfo") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("MemTotal(missing root) = %v, want a PathError of %s", err, filepath.Join(root, "meminfo"))
		}
	})
}

func TestPIDLimit(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr string
	}{
		{"threads-max lower", map[string]string{"sys/kernel/pid_max": "4194304\n", "sys/kernel/threads-max": "126329\n"}, 126329, ""},
		{"pid_max lower", map[string]string{"sys/kernel/pid_max": "32768\n", "sys/kernel/threads-max": "126329\n"}, 32768, ""},
		{"bad pid_max", map[string]string{"sys/kernel/pid_max": "lots\n", "sys/kernel/threads-max": "1\n"}, 0, "pid_max"},
		{"missing threads-max", map[string]string{"sys/kernel/pid_max": "1\n"}, 0, "threads-max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PIDLimit(writeTree(t, tt.files))
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("PIDLimit = %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("PIDLimit error = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
	_, err := PIDLimit(filepath.Join(t.TempDir(), "none"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || !strings.HasSuffix(pe.Path, "sys/kernel/pid_max") {
		t.Errorf("PIDLimit(missing root) = %v, want a PathError of sys/kernel/pid_max", err)
	}
}

func TestTasks(t *testing.T) {
	for _, tt := range []struct {
		loadavg string
		want    int64
		wantErr string
	}{
		{"0.10 0.20 0.30 2/517 12345\n", 517, ""},
		{"0.10 0.20 0.30\n", 0, "want 5 fields"},
		{"0.10 0.20 0.30 517 1\n", 0, "not running/total"},
	} {
		got, err := Tasks(writeTree(t, map[string]string{"loadavg": tt.loadavg}))
		if tt.wantErr == "" && (err != nil || got != tt.want) {
			t.Errorf("Tasks(%q) = %d, %v; want %d", tt.loadavg, got, err, tt.want)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Tasks(%q) error = %v, want %q", tt.loadavg, err, tt.wantErr)
		}
	}
}

func TestCPU(t *testing.T) {
	root := writeTree(t, map[string]string{
		// USER_HZ is 100: 100 ticks are one second.
		"stat":    "cpu  100 20 30 5000 400 6 7 8 0 0\ncpu0 100 20 30 5000 400 6 7 8 0 0\nintr 0\nctxt 0\nbtime 0\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n",
		"42/stat": "42 (a (weird) name) S 1 42 42 0 -1 4194560 91 0 0 0 150 50 0 0 20 0 1 0 1234 8192 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
	})
	// user + nice + system + irq + softirq + steal = 100+20+30+6+7+8 ticks.
	if got, err := NodeCPU(root); err != nil || got != 1710*time.Millisecond {
		t.Errorf("NodeCPU = %v, %v; want 1.71s", got, err)
	}
	if got, err := ProcessCPU(root, 42); err != nil || got != 2*time.Second {
		t.Errorf("ProcessCPU = %v, %v; want utime+stime 2s", got, err)
	}
	if _, err := ProcessCPU(root, 43); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ProcessCPU of a gone process: %v, want ErrNotExist", err)
	}
	if _, err := NodeCPU(filepath.Join(root, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NodeCPU of a missing root: %v", err)
	}
}

func TestProcessOOMAndCaps(t *testing.T) {
	status := "Name:\tsystemd\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t0000000001000000\n"
	for _, tt := range []struct {
		name     string
		files    map[string]string
		caps     uint64
		adj      int
		wantErr  string // for either call
		notExist bool
	}{
		{name: "CAP_SYS_RESOURCE only, lowered adj", files: map[string]string{"1/status": status, "1/oom_score_adj": "-900\n"}, caps: 1 << 24, adj: -900},
		{name: "no process", files: map[string]string{"2/status": status}, wantErr: "1", notExist: true},
		{name: "bad CapEff", files: map[string]string{"1/status": "CapEff:\tzz\n", "1/oom_score_adj": "0\n"}, wantErr: "capabilities of process 1"},
		{name: "bad oom_score_adj", files: map[string]string{"1/status": status, "1/oom_score_adj": "low\n"}, caps: 1 << 24, wantErr: `oom_score_adj`},
		{name: "no oom_score_adj", files: map[string]string{"1/status": status}, caps: 1 << 24, wantErr: "oom_score_adj of process 1", notExist: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			caps, err := EffectiveCaps(root, 1)
			var adj int
			if err == nil {
				if caps != tt.caps {
					t.Errorf("EffectiveCaps = %#x, want %#x", caps, tt.caps)
				}
				adj, err = OOMScoreAdj(root, 1)
			}
			if tt.wantErr == "" {
				if err != nil || adj != tt.adj {
					t.Fatalf("OOMScoreAdj = %d, %v; want %d", adj, err, tt.adj)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, fs.ErrNotExist) != tt.notExist {
				t.Fatalf("error = %v, want it to mention %q (not exist: %v)", err, tt.wantErr, tt.notExist)
			}
		})
	}
}

func TestProcessStart(t *testing.T) {
	root := writeTree(t, map[string]string{
		"stat":    "cpu  100 20 30 5000 400 6 7 8 0 0\nintr 0\nctxt 0\nbtime 1700000000\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n",
		"42/stat": "42 (slicelet) S 1 42 42 0 -1 4194560 91 0 0 0 150 50 0 0 20 0 1 0 1234 8192 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
	})
	// starttime 1234 ticks (USER_HZ 100) after the boot.
	want := time.Unix(1700000012, 340_000_000)
	if got, err := ProcessStart(root, 42); err != nil || got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("ProcessStart = %v, %v; want %v", got, err, want)
	}
	if _, err := ProcessStart(root, 43); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ProcessStart of a gone process: %v, want ErrNotExist", err)
	}
}

func TestSwapUsed(t *testing.T) {
	root := writeTree(t, map[string]string{"meminfo": "MemTotal: 16384 kB\nSwapTotal: 4096 kB\nSwapFree: 1024 kB\n"})
	if got, err := SwapUsed(root); err != nil || got != 3072<<10 {
		t.Errorf("SwapUsed = %v, %v; want 3 MiB", got, err)
	}
	none := writeTree(t, map[string]string{"meminfo": "MemTotal: 16384 kB\n"})
	if _, err := SwapUsed(none); !errors.Is(err, ErrNoValue) {
		t.Errorf("SwapUsed without swap lines: %v, want ErrNoValue", err)
	}
}
