package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type fakeInfo struct{ mode fs.FileMode }

func (f fakeInfo) Name() string       { return "x" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return false }
func (f fakeInfo) Sys() any           { return nil }

func TestCheckPrerequisites(t *testing.T) {
	good := hostProbe{
		euid:     func() int { return 0 },
		stat:     func(string) (os.FileInfo, error) { return fakeInfo{0o755}, nil },
		lookPath: func(s string) (string, error) { return "/usr/bin/" + s, nil },
		fsType:   func(string) (int64, error) { return unix.TMPFS_MAGIC, nil },
	}
	tests := []struct {
		name   string
		change func(*hostProbe)
		want   []string
	}{
		{"all there", func(*hostProbe) {}, nil},
		{"not root", func(h *hostProbe) { h.euid = func() int { return 1000 } }, []string{"euid 1000, want root"}},
		{"no setpriv and no systemd", func(h *hostProbe) {
			h.lookPath = func(s string) (string, error) {
				if s == "setpriv" {
					return "", errors.New("not found")
				}
				return s, nil
			}
			h.stat = func(p string) (os.FileInfo, error) {
				if p == systemdBinary {
					return nil, fs.ErrNotExist
				}
				return fakeInfo{0o755}, nil
			}
		}, []string{"tool setpriv", "file /lib/systemd/systemd"}},
		{"pure cgroup v2 host", func(h *hostProbe) {
			h.fsType = func(string) (int64, error) { return unix.CGROUP2_SUPER_MAGIC, nil }
		}, []string{"not the v1/hybrid tmpfs layout"}},
		{"not executable", func(h *hostProbe) {
			h.stat = func(string) (os.FileInfo, error) { return fakeInfo{0o644}, nil }
		}, []string{"not executable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := good
			tc.change(&h)
			err := checkPrerequisites(h)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error naming %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestProcStartTimeAndAlive(t *testing.T) {
	st, err := procStartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		pid   int
		start uint64
		want  bool
	}{
		{"self", os.Getpid(), st, true},
		{"self with another start time: a reused pid", os.Getpid(), st + 1, false},
		{"no pid", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := alive(tc.pid, tc.start); got != tc.want {
				t.Errorf("alive(%d, %d) = %v, want %v", tc.pid, tc.start, got, tc.want)
			}
		})
	}
}
