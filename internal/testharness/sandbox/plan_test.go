package sandbox

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// hostMountinfo is this machine kind's layout: v1 hierarchies one per controller, name=systemd,
// cgroup2 at unified, and unmounted net_cls/net_prio/perf_event/hugetlb.
const hostMountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 27 0:50 / /mnt/with\040space rw - tmpfs tmpfs rw
`

const hostProcCgroup = `9:name=systemd:/
4:memory:/process_api/abc
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
`

func TestParseMountinfo(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(hostMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 10 {
		t.Fatalf("got %d entries, want 10", len(ms))
	}
	tests := []struct {
		name              string
		idx               int
		mountPoint, fs    string
		wantSuperContains string
	}{
		{"proc", 0, "/proc", "proc", "rw"},
		{"cgroup v1 cpu", 3, "/sys/fs/cgroup/cpu", "cgroup", "cpu"},
		{"named hierarchy", 7, "/sys/fs/cgroup/systemd", "cgroup", "name=systemd"},
		{"octal escape", 9, "/mnt/with space", "tmpfs", "rw"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := ms[tc.idx]
			if m.MountPoint != tc.mountPoint || m.FSType != tc.fs || !slices.Contains(m.SuperOptions, tc.wantSuperContains) {
				t.Errorf("got %+v, want %s %s with %s", m, tc.mountPoint, tc.fs, tc.wantSuperContains)
			}
		})
	}
}

func TestParseMountinfoErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"no separator", "1 2 0:1 / / rw ext4 x rw\n"},
		{"short", "1 2 - ext4\n"},
		{"bad major:minor", "1 2 0-1 / / rw - ext4 /dev/x rw\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseMountinfo(strings.NewReader(tc.in)); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestPlanHierarchies(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(hostMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	own, err := parseProcCgroup(strings.NewReader(hostProcCgroup))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := planHierarchies(ms, own, "sb-1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hierarchy{}
	for _, h := range hs {
		got[h.Rel] = h
	}
	tests := []struct {
		name, rel, dir, options string
	}{
		{"controller at root", "cpu", "/sys/fs/cgroup/cpu/sb-1", "cpu"},
		{"caller in a sub-cgroup", "memory", "/sys/fs/cgroup/memory/process_api/abc/sb-1", "memory"},
		{"named hierarchy", "systemd", "/sys/fs/cgroup/systemd/sb-1", "name=systemd"},
		{"cgroup2", "unified", "/sys/fs/cgroup/unified/sb-1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := got[tc.rel]
			if !ok {
				t.Fatalf("no hierarchy %q in %+v", tc.rel, hs)
			}
			if h.Dir != tc.dir || h.Options != tc.options {
				t.Errorf("got dir %q options %q, want %q %q", h.Dir, h.Options, tc.dir, tc.options)
			}
		})
	}
	if len(hs) != 6 {
		t.Errorf("got %d hierarchies, want 6", len(hs))
	}
}

func TestPlanHierarchiesErrors(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(hostMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, procCgroup, want string
	}{
		{"hierarchy missing from own cgroups", "1:cpu:/\n0::/\n", "caller is in no cgroup"},
		{"caller outside its cgroup namespace", "9:name=systemd:/../x\n4:memory:/\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n", "outside this cgroup namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			own, err := parseProcCgroup(strings.NewReader(tc.procCgroup))
			if err != nil {
				t.Fatal(err)
			}
			_, err = planHierarchies(ms, own, "x")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecoyDirs(t *testing.T) {
	tests := []struct {
		name    string
		enabled []string
		mounted []hierarchy
		want    []string
	}{
		{
			name:    "this machine: cpu and cpuacct apart, net and perf unmounted",
			enabled: []string{"cpuset", "cpu", "cpuacct", "memory", "net_cls", "perf_event", "net_prio", "hugetlb"},
			mounted: []hierarchy{
				{Rel: "cpuset", Controllers: []string{"cpuset"}}, {Rel: "cpu", Controllers: []string{"cpu"}},
				{Rel: "cpuacct", Controllers: []string{"cpuacct"}}, {Rel: "memory", Controllers: []string{"memory"}},
			},
			want: []string{"cpu,cpuacct", "hugetlb", "net_cls", "net_cls,net_prio", "net_prio", "perf_event"},
		},
		{
			name:    "joined mount present: nothing to fake",
			enabled: []string{"cpu", "cpuacct", "memory"},
			mounted: []hierarchy{{Rel: "cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}}, {Rel: "memory", Controllers: []string{"memory"}}},
			want:    nil,
		},
		{
			name:    "one of a pair enabled: its own name",
			enabled: []string{"net_cls"},
			want:    []string{"net_cls"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decoyDirs(tc.enabled, tc.mounted)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEnabledControllers(t *testing.T) {
	in := "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\nrdma\t0\t1\t0\nhugetlb\t0\t1\t1\n"
	got, err := enabledControllers(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cpuset", "hugetlb"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestMaskList(t *testing.T) {
	fsys := fstest.MapFS{
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service": {},
		"lib/systemd/system/sysinit.target.wants/systemd-journald.service":       {},
		"lib/systemd/system/sockets.target.wants/dbus.socket":                    {},
		"lib/systemd/system/sockets.target.wants/systemd-journald-audit.socket":  {},
		"lib/systemd/system/multi-user.target.wants/dbus.service":                {},
		"etc/systemd/system/multi-user.target.wants/postgresql.service":          {},
		"etc/systemd/system/getty.target.wants/getty@tty1.service":               {},
		"lib/systemd/system/udev-extra.service":                                  {},
		"lib/systemd/system/sys-kernel-debug.mount":                              {},
		"lib/systemd/system/ssh.service":                                         {},
		"lib/systemd/system/initrd.target.wants/initrd-parse-etc.service":        {},
	}
	got, err := MaskList(fsys, []string{"/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		unit   string
		masked bool
	}{
		{"pulled in by sysinit", "systemd-tmpfiles-setup.service", true},
		{"pulled in from /etc", "postgresql.service", true},
		{"template instance", "getty@tty1.service", true},
		{"audit socket", "systemd-journald-audit.socket", true},
		{"matched by a pattern", "udev-extra.service", true},
		{"udev named though absent", "systemd-udevd.service", true},
		{"kernel mount", "sys-kernel-debug.mount", true},
		{"named though absent", "systemd-logind.service", true},
		{"journald kept", "systemd-journald.service", false},
		{"dbus socket kept", "dbus.socket", false},
		{"dbus service kept", "dbus.service", false},
		{"not pulled in", "ssh.service", false},
		{"target outside the list", "initrd-parse-etc.service", false},
		{"sysinit itself stays", "sysinit.target", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Contains(got, tc.unit) != tc.masked {
				t.Errorf("%s masked=%v, want %v (list %q)", tc.unit, !tc.masked, tc.masked, got)
			}
		})
	}
	if !slices.IsSorted(got) {
		t.Errorf("mask list not sorted: %q", got)
	}
}

func TestUnitFiles(t *testing.T) {
	files := unitFiles([]string{"a.service"})
	byPath := map[string]unitFile{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	tests := []struct {
		name, path, contains string
		mask                 bool
	}{
		{"boot target wants the kept units", bootTarget, "Wants=systemd-journald.socket systemd-journald-dev-log.socket systemd-journald.service dbus.socket dbus.service", false},
		{"boot target has no default deps", bootTarget, "DefaultDependencies=no", false},
		{"dbus socket drop-in", "dbus.socket.d/slicelet-sandbox.conf", "DefaultDependencies=no", false},
		{"dbus service drop-in", "dbus.service.d/slicelet-sandbox.conf", "DefaultDependencies=no", false},
		{"mask", "a.service", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := byPath[tc.path]
			if !ok {
				t.Fatalf("no file %s", tc.path)
			}
			if f.Mask != tc.mask || !strings.Contains(f.Content, tc.contains) {
				t.Errorf("got %+v", f)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"simple", "sb-1a2b", true},
		{"empty", "", false},
		{"upper case", "SB", false},
		{"slash", "a/b", false},
		{"dot dot", "..", false},
		{"leading dash", "-a", false},
		{"too long", strings.Repeat("a", 49), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := validateName(tc.in); (err == nil) != tc.ok {
				t.Errorf("validateName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestValidateStateRoot(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"default", DefaultStateRoot, true},
		{"under /tmp: hidden by the private tmpfs", "/tmp/sb", false},
		{"under /run", "/run/sb", false},
		{"under /var/lib/systemd", "/var/lib/systemd/sb", false},
		{"relative", "var/lib/sb", false},
		{"unclean", "/var/lib/../sb", false},
		{"root", "/", false},
		{"similar prefix is fine", "/tmpx/sb", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := validateStateRoot(tc.in); (err == nil) != tc.ok {
				t.Errorf("validateStateRoot(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}
