package vmtest

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type cpioEntry struct {
	name         string
	mode         uint32
	rmajor, rmin uint32
	data         string
}

// readCPIO parses a newc archive up to its trailer, checking the alignment
// the kernel's unpacker relies on.
func readCPIO(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("offset %d field %d: %v", off, i, err)
		}
		return uint32(v)
	}
	for {
		if off%4 != 0 {
			t.Fatalf("entry at offset %d is not 4-aligned", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("offset %d: magic %q", off, b[off:off+6])
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(namesize)-1])
		dataOff := align4(off + 110 + int(namesize))
		data := string(b[dataOff : dataOff+int(size)])
		off = align4(dataOff + int(size))
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, cpioEntry{name, mode, rmaj, rmin, data})
	}
}

func TestCPIOWriter(t *testing.T) {
	var buf bytes.Buffer
	c := newCPIOWriter(&buf)
	c.Dir("bin", 0o755)
	c.File("bin/busybox", 0o755, []byte("abcde"))
	c.Symlink("bin/sh", "busybox")
	c.CharDev("dev/console", 0o600, 5, 1)
	c.File("empty", 0o644, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := readCPIO(t, buf.Bytes())
	want := []cpioEntry{
		{"bin", 0o040755, 0, 0, ""},
		{"bin/busybox", 0o100755, 0, 0, "abcde"},
		{"bin/sh", 0o120777, 0, 0, "busybox"},
		{"dev/console", 0o020600, 5, 1, ""},
		{"empty", 0o100644, 0, 0, ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
}

// fakeBzImage returns a bzImage-shaped buffer: boot protocol header, setup
// sectors and a payload with the decompressed size appended.
func fakeBzImage(setupSects byte, version uint16, payload []byte, size uint32) []byte {
	img := make([]byte, (int(setupSects)+1)*512+64)
	img[0x1f1] = setupSects
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x206:], version)
	const payloadOffset = 32
	full := binary.LittleEndian.AppendUint32(slices.Clone(payload), size)
	binary.LittleEndian.PutUint32(img[0x248:], payloadOffset)
	binary.LittleEndian.PutUint32(img[0x24c:], uint32(len(full)))
	start := (int(setupSects)+1)*512 + payloadOffset
	img = append(img[:start], full...)
	return append(img, make([]byte, 100)...) // trailing data after the payload
}

func TestBzImagePayload(t *testing.T) {
	xz := append(slices.Clone(xzMagic), "stream"...)
	tests := []struct {
		name     string
		img      []byte
		wantSize uint32
		wantErr  string
	}{
		{name: "xz payload", img: fakeBzImage(27, 0x20f, xz, 12345), wantSize: 12345},
		{name: "zero setup_sects means 4", img: fakeBzImage(4, 0x20f, xz, 7), wantSize: 7},
		{name: "not a bzimage", img: make([]byte, 4096), wantErr: "no x86 boot protocol header"},
		{name: "old boot protocol", img: fakeBzImage(4, 0x207, xz, 7), wantErr: "boot protocol 0x207"},
		{name: "zstd payload", img: fakeBzImage(4, 0x20f, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0}, 7), wantErr: "only xz"},
		{name: "payload past the end", img: func() []byte {
			img := fakeBzImage(4, 0x20f, xz, 7)
			binary.LittleEndian.PutUint32(img[0x24c:], 1<<20)
			return img
		}(), wantErr: "outside the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "zero setup_sects means 4" {
				tt.img[0x1f1] = 0
			}
			payload, size, err := bzImagePayload(tt.img)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(payload, xz) || size != tt.wantSize {
				t.Errorf("payload %q size %d, want %q size %d", payload, size, xz, tt.wantSize)
			}
		})
	}
}

func TestCheckPVHRejectsNonELF(t *testing.T) {
	if err := checkPVH([]byte("MZ not an elf")); err == nil {
		t.Fatal("checkPVH accepted a non-ELF file")
	}
}

func TestModuleLoadOrder(t *testing.T) {
	tests := []struct {
		name    string
		mods    []moduleInfo
		want    []string
		wantErr string
	}{
		{
			name: "debian 6.1 9p stack in recipe order",
			mods: []moduleInfo{
				{Name: "virtio_ring"}, {Name: "virtio"}, {Name: "virtio_mmio", Depends: []string{"virtio", "virtio_ring"}},
				{Name: "netfs"}, {Name: "fscache", Depends: []string{"netfs"}}, {Name: "9pnet"},
				{Name: "9pnet_virtio", Depends: []string{"9pnet", "virtio", "virtio_ring"}},
				{Name: "9p", Depends: []string{"9pnet", "netfs", "fscache"}},
			},
			want: []string{"virtio_ring", "virtio", "virtio_mmio", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p"},
		},
		{
			name: "dependencies listed after their users",
			mods: []moduleInfo{{Name: "9p", Depends: []string{"9pnet"}}, {Name: "9pnet_virtio", Depends: []string{"9pnet"}}, {Name: "9pnet"}},
			want: []string{"9pnet", "9p", "9pnet_virtio"},
		},
		{
			name:    "missing dependency",
			mods:    []moduleInfo{{Name: "9p", Depends: []string{"netfs"}}},
			wantErr: "module netfs: needed by 9p",
		},
		{
			name:    "cycle",
			mods:    []moduleInfo{{Name: "a", Depends: []string{"b"}}, {Name: "b", Depends: []string{"a"}}},
			wantErr: "cycle: a -> b -> a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := moduleLoadOrder(tt.mods)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMissingDepends(t *testing.T) {
	mods := []moduleInfo{
		{Name: "9p", Depends: []string{"netfs", "9pnet", "fscache"}},
		{Name: "9pnet"},
		{Name: "fscache", Depends: []string{"netfs"}},
	}
	if got, want := missingDepends(mods), []string{"netfs"}; !slices.Equal(got, want) {
		t.Errorf("missingDepends = %v, want %v", got, want)
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "plain flag", in: "-test.run=^TestX$", want: `'-test.run=^TestX$'`},
		{name: "safe word", in: "-test.v", want: "-test.v"},
		{name: "env", in: "SLICELET_SYSTEMDTEST=vm", want: "SLICELET_SYSTEMDTEST=vm"},
		{name: "empty", in: "", want: "''"},
		{name: "single quote", in: "it's", want: `'it'\''s'`},
		{name: "spaces and dollar", in: "a $HOME b", want: `'a $HOME b'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellQuote(tt.in); got != tt.want {
				t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestRunScript(t *testing.T) {
	tests := []struct {
		name, dir, want string
	}{
		{name: "in the io dir", want: "#!/bin/sh\nmkdir -p /var/lib/vmtest-bin && cp /mnt/io/units.test /var/lib/vmtest-bin/units.test || exit 125\n" +
			"cd /mnt/io || exit 125\nexport HOME=/root TMPDIR=/tmp\n" +
			"export SLICELET_SYSTEMDTEST=vm\nexport 'X=a b'\n" +
			"exec /var/lib/vmtest-bin/units.test -test.v '-test.run=^TestSlice$|Timer'\n"},
		{name: "in the package dir", dir: "/work/my repo/units", want: "#!/bin/sh\nmkdir -p /var/lib/vmtest-bin && cp /mnt/io/units.test /var/lib/vmtest-bin/units.test || exit 125\n" +
			"cd '/work/my repo/units' || exit 125\nexport HOME=/root TMPDIR=/tmp\n" +
			"export SLICELET_SYSTEMDTEST=vm\nexport 'X=a b'\n" +
			"exec /var/lib/vmtest-bin/units.test -test.v '-test.run=^TestSlice$|Timer'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runScript("units.test", tt.dir, []string{"-test.v", "-test.run=^TestSlice$|Timer"},
				[]string{"SLICELET_SYSTEMDTEST=vm", "X=a b"})
			if got != tt.want {
				t.Errorf("runScript:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestValidEnv(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "name and value", in: "SLICELET_SYSTEMDTEST=vm", want: true},
		{name: "empty value", in: "X=", want: true},
		{name: "no equals", in: "X", want: false},
		{name: "empty name", in: "=x", want: false},
		{name: "leading digit", in: "1X=x", want: false},
		{name: "dash in name", in: "A-B=x", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validEnv(tt.in); got != tt.want {
				t.Errorf("validEnv(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestTSCKHzFromCPUInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{name: "first cpu wins", in: "processor\t: 0\ncpu MHz\t\t: 2445.434\nprocessor\t: 1\ncpu MHz\t\t: 1000.000\n", want: 2445434},
		{name: "no cpu MHz", in: "processor\t: 0\nflags\t: fpu\n", want: 0},
		{name: "garbage", in: "cpu MHz\t: fast\n", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tscKHzFromCPUInfo([]byte(tt.in)); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{name: "shorter than n", in: "a\nb\n", n: 3, want: "a\nb"},
		{name: "cut", in: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		{name: "empty", in: "", n: 2, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tailLines([]byte(tt.in), tt.n)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseKernelDepends(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "bookworm", in: "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n", want: "linux-image-6.1.0-56-amd64"},
		{name: "alternatives first", in: "linux-image-amd64\n |Depends: <virtual>\n  Depends: linux-image-6.12.9-amd64\n", want: "linux-image-6.12.9-amd64"},
		{name: "none", in: "linux-image-amd64\n  Recommends: firmware\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKernelDepends([]byte(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// unitSection returns the lines of section sec in a unit file.
func unitSection(unit, sec string) []string {
	var out []string
	in := false
	for l := range strings.SplitSeq(unit, "\n") {
		if strings.HasPrefix(l, "[") {
			in = l == "["+sec+"]"
			continue
		}
		if in && l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestRunnerUnitPowersOffFromUnitSection(t *testing.T) {
	// In [Service] systemd ignores these and the VM never stops.
	unit := unitSection(runnerUnitText, "Unit")
	for _, want := range []string{"SuccessAction=poweroff-force", "FailureAction=poweroff-force"} {
		if !slices.Contains(unit, want) {
			t.Errorf("[Unit] of the runner lacks %s: %v", want, unit)
		}
	}
}

func TestRunnerDropIn(t *testing.T) {
	tests := []struct {
		name           string
		timeout, guard time.Duration
		want           string
	}{
		{name: "no guard", timeout: 30 * time.Second, want: "[Service]\nRuntimeMaxSec=30\n"},
		{name: "guard", timeout: 120 * time.Second, guard: 90 * time.Second,
			want: "[Service]\nRuntimeMaxSec=120\nEnvironment=SLICELET_VMTEST_GUARD=90\n"},
		{name: "rounds up", timeout: 1500 * time.Millisecond, want: "[Service]\nRuntimeMaxSec=2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runnerDropInText(tt.timeout, tt.guard); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGuardFor(t *testing.T) {
	tests := []struct {
		name          string
		timeout, want time.Duration
	}{
		{name: "short timeout: host kills", timeout: 30 * time.Second, want: 0},
		{name: "default", timeout: DefaultTimeout, want: 90 * time.Second},
		{name: "one minute", timeout: time.Minute, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := guardFor(tt.timeout); got != tt.want {
				t.Errorf("guardFor(%s) = %s, want %s", tt.timeout, got, tt.want)
			}
		})
	}
}

func TestInitScriptLoadsModulesInOrder(t *testing.T) {
	s := initScript([]string{"virtio_ring", "virtio", "9p"}, []string{"bin", "lib"})
	last := -1
	for _, m := range []string{"virtio_ring", "virtio", "9p"} {
		i := strings.Index(s, "insmod /lib/modules/"+m+".ko ")
		if i < 0 || i < last {
			t.Fatalf("insmod %s missing or out of order in:\n%s", m, s)
		}
		last = i
	}
	for _, want := range []string{"ln -s usr/bin bin\n", "ln -s usr/lib lib\n", "exec switch_root /newroot /lib/systemd/systemd\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("/init lacks %q", want)
		}
	}
}

func TestQEMUArgs(t *testing.T) {
	args := qemuArgs(qemuSpec{Kernel: "/c/vmlinux", Initrd: "/c/initrd.gz", IODir: "/r/io", Console: "/r/console.log", Mem: 512, SMP: 1, TSCKHz: 2445434})
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg,thread=multi,tb-size=512", "-machine microvm", "-smp 1", "-m 512", "-no-reboot",
		"-serial file:/r/console.log", "-kernel /c/vmlinux", "-initrd /c/initrd.gz",
		"tsc_early_khz=2445434", "cgroup_no_v1=all", "systemd.unified_cgroup_hierarchy=1",
		"path=/usr,security_model=none,readonly=on", "path=/r/io,security_model=none",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("qemu args lack %q: %s", want, joined)
		}
	}
}

func TestGuestTestArgs(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{
			name: "go test -v",
			in:   []string{"-test.testlogfile=/tmp/go-build1/b001/testlog.txt", "-test.paniconexit0", "-test.timeout=10m0s", "-test.v=true"},
			want: []string{"-test.paniconexit0", "-test.timeout=10m0s", "-test.v=true"},
		},
		{
			name: "profiles with separate values",
			in:   []string{"-test.run", "TestX", "-test.coverprofile", "/tmp/c.out", "--test.cpuprofile=cpu.out", "-test.count=1"},
			want: []string{"-test.run", "TestX", "-test.count=1"},
		},
		{
			name: "positional args kept",
			in:   []string{"-test.v", "x", "-test.trace=t.out"},
			want: []string{"-test.v", "x"},
		},
		{name: "empty", in: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GuestTestArgs(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("GuestTestArgs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCheckDir(t *testing.T) {
	tests := []struct {
		name, dir, wantErr string
	}{
		{name: "package dir", dir: "/work/main/units"},
		{name: "relative", dir: "units", wantErr: "not a clean absolute path"},
		{name: "unclean", dir: "/work/../tmp/x", wantErr: "not a clean absolute path"},
		{name: "root", dir: "/", wantErr: "host's root"},
		{name: "under /tmp: shared elsewhere", dir: "/tmp/go-build1/pkg"},
		{name: "under /usr: shared elsewhere", dir: "/usr/share/x"},
		{name: "tmpx is not tmp", dir: "/tmpx/pkg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDir(tt.dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestGuestDir(t *testing.T) {
	for _, tt := range []struct{ dir, want string }{
		{"/work/main/units", "/work/main/units"},
		{"/tmp/ci/clone/units", guestAltWorkDir},
		{"/tmp", guestAltWorkDir},
		{"/usr/src/x", guestAltWorkDir},
		{"/mnt/io/x", guestAltWorkDir},
		{"/tmpx/pkg", "/tmpx/pkg"},
		{"/home/ci/slicelet/slices", "/home/ci/slicelet/slices"},
	} {
		if got := guestDir(tt.dir); got != tt.want {
			t.Errorf("guestDir(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}
