package slices

import (
	"path"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNodeAllocatableRoot(t *testing.T) {
	tests := []struct {
		name, root string
		perQOS     bool
		driver     string
		want       string
	}{
		{"root, per QoS, cgroupfs: /kubepods", "/", true, DriverCgroupfs, "/kubepods"},
		{"root, no per QoS, cgroupfs: the root itself", "/", false, DriverCgroupfs, "/"},
		{"custom root, per QoS, cgroupfs: kubepods below it", "/custom", true, DriverCgroupfs, "/custom/kubepods"},
		{"custom root, no per QoS, cgroupfs: the root itself", "/custom", false, DriverCgroupfs, "/custom"},
		{"root, per QoS, systemd: kubepods.slice", "/", true, DriverSystemd, "/kubepods.slice"},
		{"empty root is the root", "", true, DriverCgroupfs, "/kubepods"},
		{"custom root, per QoS, systemd: nested slices", "/custom", true, DriverSystemd, "/custom.slice/custom-kubepods.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeAllocatableRoot(tt.root, tt.perQOS, tt.driver); got != tt.want {
				t.Errorf("NodeAllocatableRoot(%q, %v, %s) = %q, want %q", tt.root, tt.perQOS, tt.driver, got, tt.want)
			}
		})
	}
}

func TestCgroupNameToSystemd(t *testing.T) {
	tests := []struct {
		name string
		in   CgroupName
		want string
	}{
		{"dashes in a part become underscores", CgroupName{"Burstable", "pod-123"}, "/Burstable.slice/Burstable-pod_123.slice"},
		{"no parts is the root slice", CgroupName{}, "/"},
		{"one part is one slice", CgroupName{"kubepods"}, "/kubepods.slice"},
		{"a trailing empty part is ignored", CgroupName{"kubepods", ""}, "/kubepods.slice"},
		{"a leading empty part is ignored", CgroupName{"", "Burstable", "pod-123"}, "/Burstable.slice/Burstable-pod_123.slice"},
		{"single empty part", CgroupName{""}, "/"},
		{"a parsed trailing slash adds no level", NewCgroupName(ParseCgroupfsToCgroupName("/a/"), "b"), "/a.slice/a-b.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.ToSystemd(); got != tt.want {
				t.Errorf("ToSystemd(%q) = %q, want %q", []string(tt.in), got, tt.want)
			}
		})
	}
	t.Run("a pod UID becomes underscores in the slice name", func(t *testing.T) {
		got := path.Base(CgroupName{"BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"}.ToSystemd())
		if want := "BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("invalid component is an error, not a panic, with Systemd", func(t *testing.T) {
		if _, err := (CgroupName{"a b"}).Systemd(); err == nil {
			t.Error("Systemd of a name with a space succeeded")
		}
	})
}

func TestCgroupNameToCgroupfs(t *testing.T) {
	tests := []struct {
		name string
		in   CgroupName
		want string
	}{
		{"no parts is /", CgroupName{}, "/"},
		{"parts are joined with slashes", CgroupName{"Burstable"}, "/Burstable"},
		{"nested", CgroupName{"kubepods", "burstable", "pod1"}, "/kubepods/burstable/pod1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.ToCgroupfs(); got != tt.want {
				t.Errorf("ToCgroupfs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseSystemdToCgroupName(t *testing.T) {
	tests := []struct {
		name, in string
		want     CgroupName
	}{
		{"a name without .slice", "/test", CgroupName{"test"}},
		{"the .slice suffix is dropped", "/test.slice", CgroupName{"test"}},
		{"each level keeps only its own part, underscores back to dashes", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice", CgroupName{"kubepods", "burstable", "pod12-34"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseSystemdToCgroupName(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("ParseSystemdToCgroupName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewCgroupName(t *testing.T) {
	t.Run("a parsed trailing slash is an empty part", func(t *testing.T) {
		got := NewCgroupName(ParseCgroupfsToCgroupName("/a/"), "b")
		if want := (CgroupName{"a", "", "b"}); !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("does not alias base", func(t *testing.T) {
		base := make(CgroupName, 1, 4)
		base[0] = "kubepods"
		a := NewCgroupName(base, "burstable")
		b := NewCgroupName(base, "besteffort")
		if a[1] != "burstable" || b[1] != "besteffort" {
			t.Errorf("aliasing: %q %q", a, b)
		}
	})
	for _, bad := range []string{"a/b", "a_b"} {
		t.Run("panics on "+bad, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("NewCgroupName(%q) did not panic", bad)
				}
			}()
			NewCgroupName(CgroupName{"kubepods"}, bad)
		})
	}
}

func TestPodNames(t *testing.T) {
	tests := []struct {
		name      string
		qos       v1.PodQOSClass
		uid       string
		wantSlice string
		wantPath  string
		wantCgfs  string
	}{
		{"a dash in the UID becomes an underscore in the slice, stays in cgroupfs", v1.PodQOSBurstable, "0f1c-22", "kubepods-burstable-pod0f1c_22.slice",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c_22.slice", "/kubepods/burstable/pod0f1c-22"},
		{"guaranteed", v1.PodQOSGuaranteed, "6c1a4e95-6bb6-11e6-bc26-28d2444e470d", "kubepods-pod6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
			"/kubepods.slice/kubepods-pod6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice", "/kubepods/pod6c1a4e95-6bb6-11e6-bc26-28d2444e470d"},
		{"besteffort", v1.PodQOSBestEffort, "abc", "kubepods-besteffort-podabc.slice",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podabc.slice", "/kubepods/besteffort/podabc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := PodSliceName(tt.qos, tt.uid)
			fatalIf(t, err)
			p, err := PodCgroupPath(tt.qos, tt.uid)
			fatalIf(t, err)
			n, err := PodCgroupName(tt.qos, tt.uid)
			fatalIf(t, err)
			if s != tt.wantSlice || p != tt.wantPath || n.ToCgroupfs() != tt.wantCgfs || n.Name(DriverSystemd) != tt.wantPath {
				t.Errorf("got %q %q %q, want %q %q %q", s, p, n.ToCgroupfs(), tt.wantSlice, tt.wantPath, tt.wantCgfs)
			}
			qos, uid, ok := ParsePodSliceName(s)
			if !ok || qos != tt.qos || uid != tt.uid {
				t.Errorf("ParsePodSliceName(%q) = %s, %q, %v", s, qos, uid, ok)
			}
			qos, uid, ok = ParsePodSliceName(p)
			if !ok || qos != tt.qos || uid != tt.uid {
				t.Errorf("ParsePodSliceName(%q) = %s, %q, %v", p, qos, uid, ok)
			}
		})
	}
	for _, bad := range []struct {
		name string
		qos  v1.PodQOSClass
		uid  string
	}{
		{"empty uid", v1.PodQOSBurstable, ""},
		{"underscore", v1.PodQOSBurstable, "a_b"},
		{"slash", v1.PodQOSBurstable, "a/b"},
		{"dot", v1.PodQOSBurstable, "a.b"},
		{"too long", v1.PodQOSBurstable, string(make([]byte, 65))},
		{"unknown qos", "Gold", "abc"},
	} {
		t.Run("rejects "+bad.name, func(t *testing.T) {
			if s, err := PodSliceName(bad.qos, bad.uid); err == nil {
				t.Errorf("PodSliceName(%s, %q) = %q, want error", bad.qos, bad.uid, s)
			}
		})
	}
}

func TestQOSSliceNames(t *testing.T) {
	for qos, want := range map[v1.PodQOSClass]string{
		v1.PodQOSGuaranteed: KubepodsSlice, v1.PodQOSBurstable: BurstableSlice, v1.PodQOSBestEffort: BestEffortSlice,
	} {
		if got := QOSSliceName(qos); got != want {
			t.Errorf("QOSSliceName(%s) = %q, want %q", qos, got, want)
		}
	}
	if got := (CgroupName{}).SliceUnit(); got != RootSlice {
		t.Errorf("root SliceUnit = %q", got)
	}
}

func TestParsePodSliceNameRejects(t *testing.T) {
	for _, name := range []string{
		"kubepods.slice",
		"kubepods-burstable.slice",
		"kubepods-besteffort.slice",
		"kubepods-burstable-pod.slice",               // empty uid
		"kubepods-burstable-foo.slice",               // not pod-prefixed
		"kubepods-system-pod1234.slice",              // not a QoS container
		"kubepods-burstable-pod1234-extra.slice",     // not a direct child
		"system-pod1234.slice",                       // not under kubepods
		"kubepods-burstable-pod1234.scope",           // not a slice
		"kubepods-burstable-pod1234.slice/ctr.scope", // a container below
		"kubepods-burstable-podab.cd.slice",          // invalid uid characters
	} {
		t.Run(name, func(t *testing.T) {
			if qos, uid, ok := ParsePodSliceName(name); ok {
				t.Errorf("ParsePodSliceName(%q) = %s, %q, true", name, qos, uid)
			}
		})
	}
}
