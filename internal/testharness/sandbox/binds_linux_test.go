package sandbox

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

// fakeHost is a host file system for planMounts: path to mode; anything else does not exist.
type fakeHost map[string]fs.FileMode

func (h fakeHost) stat(p string) (fs.FileInfo, error) {
	m, ok := h[p]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return fakeInfo{m}, nil
}

func TestPlanMounts(t *testing.T) {
	host := fakeHost{
		"/work/main": fs.ModeDir, "/work/main/units": fs.ModeDir, "/work/m": fs.ModeDir,
		"/tmp/co": fs.ModeDir, "/tmp/co/bin": fs.ModeDir, "/srv/data": fs.ModeDir,
		"/etc/peer/one": 0, "/etc/peer/ten": 0,
	}
	tests := []struct {
		name string
		o    Options
		want mountPlan
	}{
		{
			name: "extra binds: nested dropped, duplicates dropped, a prefix that is no parent kept",
			o:    Options{ExtraBinds: []string{"/work/main/units", "/work/main", "/work/m", "/work/main"}},
			want: mountPlan{binds: []Bind{
				{Source: "/work/m", Target: "/work/m"},
				{Source: "/work/main", Target: "/work/main"},
			}},
		},
		{
			name: "a bind given as extra bind and as Bind is one",
			o:    Options{ExtraBinds: []string{"/tmp/co"}, Binds: []Bind{{Source: "/tmp/co"}}},
			want: mountPlan{binds: []Bind{{Source: "/tmp/co", Target: "/tmp/co"}}},
		},
		{
			name: "another target, read-only, sorted by target",
			o: Options{Binds: []Bind{
				{Source: "/srv/data", Target: "/var/lib/data", ReadOnly: true},
				{Source: "/tmp/co", Target: "/opt/co"},
			}},
			want: mountPlan{binds: []Bind{
				{Source: "/tmp/co", Target: "/opt/co"},
				{Source: "/srv/data", Target: "/var/lib/data", ReadOnly: true},
			}},
		},
		{
			name: "a read-only bind below a read-write one is kept, and so is a read-write one below it",
			o: Options{Binds: []Bind{
				{Source: "/tmp/co"}, {Source: "/tmp/co/bin", ReadOnly: true}, {Source: "/work/main"},
				{Source: "/tmp/co/bin", Target: "/tmp/co/bin/x"},
			}},
			want: mountPlan{binds: []Bind{
				{Source: "/tmp/co", Target: "/tmp/co"},
				{Source: "/tmp/co/bin", Target: "/tmp/co/bin", ReadOnly: true},
				{Source: "/tmp/co/bin", Target: "/tmp/co/bin/x"},
				{Source: "/work/main", Target: "/work/main"},
			}},
		},
		{
			name: "files and links sorted by target",
			o: Options{
				FileBinds: []FileBind{
					{Source: "/etc/peer/ten", Target: "/proc/sys/kernel/panic"},
					{Source: "/etc/peer/one", Target: "/proc/sys/kernel/panic_on_oops"},
					{Source: "/etc/peer/one", Target: "/dev/null2"},
				},
				Symlinks: []Symlink{{Path: "/dev/kmsg", Target: "/dev/console"}, {Path: "/dev/a", Target: "b"}},
			},
			want: mountPlan{
				files: []FileBind{
					{Source: "/etc/peer/one", Target: "/dev/null2"},
					{Source: "/etc/peer/ten", Target: "/proc/sys/kernel/panic"},
					{Source: "/etc/peer/one", Target: "/proc/sys/kernel/panic_on_oops"},
				},
				links: []Symlink{{Path: "/dev/a", Target: "b"}, {Path: "/dev/kmsg", Target: "/dev/console"}},
			},
		},
		{name: "nothing", o: Options{}, want: mountPlan{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planMounts(tc.o, host.stat)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlanMountsRefuses(t *testing.T) {
	host := fakeHost{"/tmp/co": fs.ModeDir, "/var": fs.ModeDir, "/srv": fs.ModeDir, "/etc/one": 0, "/etc/d": fs.ModeDir}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"relative", Options{ExtraBinds: []string{"tmp/x"}}, "clean absolute path"},
		{"not clean", Options{Binds: []Bind{{Source: "/tmp/co/../co"}}}, "clean absolute path"},
		{"root", Options{ExtraBinds: []string{"/"}}, "clean absolute path"},
		{"proc target", Options{ExtraBinds: []string{"/proc/self"}}, "which the instance replaces"},
		{"sys target", Options{Binds: []Bind{{Source: "/srv", Target: "/sys/fs/cgroup/x"}}}, "which the instance replaces"},
		{"dev source", Options{Binds: []Bind{{Source: "/dev/sda", Target: "/srv/disk"}}}, "under the machine's /dev"},
		{"missing source", Options{ExtraBinds: []string{"/nonexistent/slicelet"}}, "stat /nonexistent/slicelet"},
		{"covers /var/tmp", Options{ExtraBinds: []string{"/var"}}, "would cover /var/tmp"},
		{"is /run", Options{Binds: []Bind{{Source: "/srv", Target: "/run"}}}, "would cover /run"},
		{"one target twice", Options{Binds: []Bind{{Source: "/srv", Target: "/opt/x"}, {Source: "/tmp/co", Target: "/opt/x"}}}, `"/opt/x": given twice`},
		{"a mode twice", Options{Binds: []Bind{{Source: "/srv"}, {Source: "/srv", ReadOnly: true}}}, "given twice"},
		{"file bind of a directory", Options{FileBinds: []FileBind{{Source: "/etc/d", Target: "/etc/x"}}}, "a directory, want a regular file"},
		{"file bind from /proc", Options{FileBinds: []FileBind{{Source: "/proc/sys/vm/overcommit_memory", Target: "/etc/x"}}}, "under the machine's /proc"},
		{"file bind into cgroupfs", Options{FileBinds: []FileBind{{Source: "/etc/one", Target: "/sys/fs/cgroup/memory/x"}}}, "own cgroupfs"},
		{"file bind target twice", Options{FileBinds: []FileBind{{Source: "/etc/one", Target: "/etc/x"}, {Source: "/etc/one", Target: "/etc/x"}}}, "given twice"},
		{"file bind without target", Options{FileBinds: []FileBind{{Source: "/etc/one"}}}, "clean absolute path"},
		{"symlink in /proc", Options{Symlinks: []Symlink{{Path: "/proc/kmsg", Target: "/dev/console"}}}, "kernel file system"},
		{"symlink without target", Options{Symlinks: []Symlink{{Path: "/dev/kmsg"}}}, "want a target"},
		{"symlink twice", Options{Symlinks: []Symlink{{Path: "/dev/kmsg", Target: "a"}, {Path: "/dev/kmsg", Target: "b"}}}, "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planMounts(tc.o, host.stat)
			if err == nil {
				t.Fatalf("planMounts accepted %+v: %+v", tc.o, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
