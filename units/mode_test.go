package units

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

func TestDetectModeFromStatfs(t *testing.T) {
	tests := []struct {
		name    string
		types   map[string]int64 // path → f_type; missing paths do not exist
		want    Mode
		wantErr bool
	}{
		{"unified", map[string]int64{"/cg": cgroup2SuperMagic}, ModeUnified, false},
		{"hybrid", map[string]int64{"/cg": tmpfsMagic, "/cg/unified": cgroup2SuperMagic}, ModeHybrid, false},
		{"legacy without unified", map[string]int64{"/cg": tmpfsMagic}, ModeLegacy, false},
		{"legacy with unified dir on tmpfs", map[string]int64{"/cg": tmpfsMagic, "/cg/unified": tmpfsMagic}, ModeLegacy, false},
		{"missing root", map[string]int64{}, ModeUnknown, true},
		{"ext4 root", map[string]int64{"/cg": 0xef53}, ModeUnknown, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			statfs := func(p string) (int64, error) {
				if v, ok := tt.types[p]; ok {
					return v, nil
				}
				return 0, &fs.PathError{Op: "statfs", Path: p, Err: fs.ErrNotExist}
			}
			got, err := detectMode("/cg", statfs)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("detectMode = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDetectModeReal runs the statfs path against real directories: a temporary directory is
// never a cgroup root, and /sys/fs/cgroup (when mounted) is one of the known layouts.
func TestDetectModeReal(t *testing.T) {
	if _, err := DetectMode(t.TempDir() + "/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DetectMode(missing) error = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("no /sys/fs/cgroup")
	}
	m, err := DetectMode("/sys/fs/cgroup")
	if err != nil || m == ModeUnknown {
		t.Fatalf("DetectMode(/sys/fs/cgroup) = %v, %v", m, err)
	}
	t.Logf("this machine: %v", m)
}
