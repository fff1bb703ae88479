package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOverlaySubmounts(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		want      []string
		wantErr   string
	}{
		{
			name: "this machine kind",
			mountinfo: `22 27 0:21 / /proc rw - proc proc rw
23 27 0:22 / /sys rw - sysfs sysfs rw
24 27 0:6 / /dev rw - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw
27 1 254:0 / / rw - ext4 /dev/vda rw
28 27 0:25 / /mnt/tools ro - tmpfs tools ro
31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw
`,
			want: []string{"/mnt/tools", "/sys"},
		},
		{
			name: "separate /var and /work, a mount below /var",
			mountinfo: `27 1 254:0 / / rw - ext4 /dev/vda rw
50 27 254:1 / /var rw - ext4 /dev/vdb rw
51 50 254:2 / /var/lib/big rw - xfs /dev/vdc rw
52 27 254:3 / /work rw - ext4 /dev/vdd rw
`,
			want: []string{"/var", "/work"},
		},
		{
			name: "a mount stacked on /",
			mountinfo: `27 1 254:0 / / rw - ext4 /dev/vda rw
28 27 254:0 / /boot rw - ext4 /dev/vda rw
60 27 0:40 / / rw - overlay overlay rw
61 60 0:41 / /srv rw - tmpfs tmpfs rw
`,
			want: []string{"/srv"},
		},
		{
			name:      "no root",
			mountinfo: "22 27 0:21 / /proc rw - proc proc rw\n",
			wantErr:   "no mount at /",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := parseMountinfo(strings.NewReader(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			got, err := overlaySubmounts(ms)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateOverlayStateRoot(t *testing.T) {
	tests := []struct {
		name, root string
		ok         bool
	}{
		{"default", DefaultStateRoot, true},
		{"comma", "/var/lib/a,b", false},
		{"colon", "/var/lib/a:b", false},
		{"backslash", `/var/lib/a\b`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := validateOverlayStateRoot(tc.root); (err == nil) != tc.ok {
				t.Errorf("validateOverlayStateRoot(%q) = %v, want ok=%v", tc.root, err, tc.ok)
			}
		})
	}
}

// TestCheckOverlayRootRefusesTheHostRoot: the guard that stands before making / writable must
// refuse anything but the overlay the setup mounted. On the host, / is not it.
func TestCheckOverlayRootRefusesTheHostRoot(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dev  uint64
		want string
	}{
		{"another device", st.Dev + 1, "want the overlay mounted by the setup"},
		{"the host root's own device", st.Dev, "want overlayfs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOverlayRoot(tc.dev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkOverlayRoot(%#x) = %v, want an error with %q", tc.dev, err, tc.want)
			}
		})
	}
}

// rootModes are the two kinds of root an instance can have, for tests that run in both.
var rootModes = []struct {
	name    string
	overlay bool
}{
	{"read-only root", false},
	{"overlay root", true},
}

// hostFiles are checksummed before and after an overlay instance wrote to its root.
var hostFiles = []string{"/etc/group", "/etc/passwd", "/etc/shadow", "/etc/gshadow", "/var/lib/dpkg/status", "/etc/hostname"}

func checksums(t testing.TB, files []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			out[f] = "absent"
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[f] = hex.EncodeToString(sum[:])
	}
	return out
}

// hostMountinfoLines is the host's whole mount table (this process's mount namespace): an overlay
// instance must add, remove or change no mount there.
func hostMountinfoLines(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestOverlayRootWritesStayInside(t *testing.T) {
	requireSandbox(t)
	before := snapshotHost(t)
	mountsBefore := hostMountinfoLines(t)
	sumsBefore := checksums(t, hostFiles)
	marker, err := os.CreateTemp("/tmp", "slicelet-sandbox-marker-*")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	t.Cleanup(func() { os.Remove(marker.Name()) })
	// A host file that the instance deletes inside: overlayfs must record a whiteout in its upper
	// layer, never unlink the lower file.
	victim := filepath.Join("/var/lib", "slicelet-overlay-victim-"+randomName())
	if err := os.WriteFile(victim, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(victim) })
	created := []string{
		"/usr/bin/slicelet-overlay-probe", "/etc/slicelet-overlay-probe", "/var/lib/dpkg/slicelet-overlay-probe",
		"/usr/lib/systemd/system/slicelet-overlay-probe.service", "/slicelet-overlay-probe",
	}
	for _, p := range created {
		if exists(p) {
			t.Fatalf("%s exists on the host before the test", p)
		}
	}

	inst := startInstance(t, Options{OverlayRoot: true})
	t.Logf("boot %s", inst.BootDuration())
	if got := inside(t, inst, "findmnt", "-n", "-o", "FSTYPE", "/"); got != "overlay" {
		t.Errorf("root file system inside is %q, want overlay", got)
	}
	if got := inside(t, inst, "systemctl", "is-system-running"); got != "running" {
		t.Errorf("is-system-running = %q, want running", got)
	}
	script := strings.Join([]string{
		"set -e",
		"for f in " + strings.Join(created, " ") + "; do echo inside > $f; done",
		"echo 'slicelet-overlay-probe:x:4242:' >> /etc/group",
		"echo probe >> /var/lib/dpkg/status",
		"rm " + victim,
		"test ! -e " + victim,
		"grep -q slicelet-overlay-probe /etc/group",
	}, "\n")
	inside(t, inst, "sh", "-c", script)
	for _, p := range append(created, "/etc/group") {
		if p == "/etc/group" {
			if sumsBefore[p] != checksums(t, []string{p})[p] {
				t.Errorf("host %s changed while the instance runs", p)
			}
			continue
		}
		if exists(p) {
			t.Errorf("%s written inside appeared on the host", p)
			os.Remove(p)
		}
	}
	if !exists(victim) {
		t.Errorf("host file %s deleted inside is gone on the host", victim)
	}

	// The state dir is the host's, writable; every host mount other than the overlay is
	// read-only, and no overlay other than / exists inside.
	probe := filepath.Join(inst.StateDir(), "probe")
	inside(t, inst, "sh", "-c", "echo state > "+probe)
	if b, err := os.ReadFile(probe); err != nil || strings.TrimSpace(string(b)) != "state" {
		t.Errorf("state dir file written inside: %q, %v", b, err)
	}
	mi := inside(t, inst, "cat", "/proc/self/mountinfo")
	sawSys := false
	for _, line := range strings.Split(mi, "\n") {
		f := strings.Fields(line)
		pre, post, _ := strings.Cut(line, " - ")
		g := strings.Fields(post)
		if len(f) < 6 || len(g) < 1 {
			continue
		}
		mp, opts, fstype := f[4], strings.Split(strings.Fields(pre)[5], ","), g[0]
		if fstype == "overlay" && mp != "/" {
			t.Errorf("overlay mount inside at %s, want only /", mp)
		}
		if mp == "/" && !slices.Contains(opts, "rw") {
			t.Errorf("overlay root inside is %q, want rw", opts)
		}
		if mp == "/sys" {
			sawSys = true
			if !slices.Contains(opts, "ro") {
				t.Errorf("/sys inside is %q, want ro", opts)
			}
		}
		if mp == filepath.Join(inst.StateDir(), overlayDir) {
			t.Errorf("the overlay's tmpfs is reachable inside at %s", mp)
		}
	}
	if !sawSys {
		t.Errorf("no /sys mount inside:\n%s", mi)
	}
	for _, p := range []string{"/sys/kernel/slicelet-probe", "/sys/fs/cgroup/slicelet-probe"} {
		if err := inst.Command(context.Background(), "mkdir", p).Run(); err == nil {
			t.Errorf("mkdir %s inside succeeded, want read-only", p)
		}
	}

	if err := inst.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, p := range created {
		if exists(p) {
			t.Errorf("%s written inside exists on the host after stop", p)
			os.Remove(p)
		}
	}
	if got := checksums(t, hostFiles); !maps.Equal(got, sumsBefore) {
		t.Errorf("host files changed:\nbefore %v\nafter  %v", sumsBefore, got)
	}
	if !exists(victim) {
		t.Errorf("host file %s deleted inside is gone after stop", victim)
	}
	if !exists(marker.Name()) {
		t.Errorf("marker %s in the host /tmp is gone", marker.Name())
	}
	if exists(inst.StateDir()) {
		t.Errorf("state dir %s left after stop", inst.StateDir())
	}
	if got := hostMountinfoLines(t); !slices.Equal(got, mountsBefore) {
		t.Errorf("host mount table changed:\nbefore %q\nafter  %q", mountsBefore, got)
	}
	checkHostUnchanged(t, before, snapshotHost(t))
}

// TestCommandWorkingDirIsInside: a command's working directory is the instance's, never a host
// mount. (nsenter --wd=<dir> opens dir in the caller's namespace; a command started that way sat
// on the host's writable root, and `touch ./x` wrote to the machine.)
func TestCommandWorkingDirIsInside(t *testing.T) {
	requireSandbox(t)
	for _, tc := range rootModes {
		t.Run(tc.name, func(t *testing.T) {
			inst := startInstance(t, Options{OverlayRoot: tc.overlay})
			probe := "slicelet-cwd-probe-" + randomName()
			t.Cleanup(func() { os.Remove("/" + probe); os.Remove("/etc/" + probe) })
			for _, dir := range []string{"/", "/etc"} {
				cmd := inst.CommandIn(context.Background(), dir, "sh", "-c", `pwd; stat -c %d . "$PWD"; touch ./`+probe+` 2>/dev/null || true`)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("in %s: %v", dir, err)
				}
				f := strings.Fields(string(out))
				if len(f) != 3 || f[0] != dir || f[1] != f[2] {
					t.Errorf("in %s: pwd and the devices of . and $PWD = %q, want %s and one device", dir, f, dir)
				}
				if p := filepath.Join(dir, probe); exists(p) {
					t.Errorf("a relative write inside (working dir %s) created %s on the host", dir, p)
				}
			}
			// The bare nsenter (the readiness poll's) starts in PID 1's working directory.
			_ = inst.nsenter(context.Background(), []string{"touch", "./" + probe}).Run()
			if exists("/" + probe) {
				t.Errorf("a relative write through nsenter created /%s on the host", probe)
			}
		})
	}
}
