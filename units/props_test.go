package units

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestToVariant(t *testing.T) {
	tests := []struct {
		name    string
		prop    Property
		sig     string // D-Bus signature of the variant
		value   string // godbus text form of the value (GVariant-like, with its quirks)
		wantErr string
	}{
		{"bool", Property{"Delegate", true}, "b", "true", ""},
		{"string", Property{"Description", "pod x"}, "s", `"pod x"`, ""},
		{"int32", Property{"OOMScoreAdjust", int32(-5)}, "i", "-5", ""},
		{"uint32", Property{"X", uint32(7)}, "u", "@u 7", ""},
		{"int64", Property{"X", int64(-7)}, "x", "@x -7", ""},
		{"uint64", Property{"MemoryMax", uint64(1 << 30)}, "t", "@t 1073741824", ""},
		{"strings", Property{"Environment", []string{"A=1", "B=2"}}, "as", `["A=1", "B=2"]`, ""},
		{"pids", Property{"PIDs", []uint32{1, 2}}, "au", "@au [1, 2]", ""},
		{"duration in µs", Property{"AccuracyUSec", 1500 * time.Millisecond}, "t", "@t 1500000", ""},
		{"exec", Property{"ExecStart", Exec{Path: "/bin/sleep", Args: []string{"sleep", "1"}}}, "a(sasb)", `[("/bin/sleep", ["sleep", "1"], false,)]`, ""},
		{"exec default argv", Property{"ExecStart", Exec{Path: "/bin/true", IgnoreFailure: true}}, "a(sasb)", `[("/bin/true", ["/bin/true"], true,)]`, ""},
		{"execs", Property{"ExecStartPre", []Exec{{Path: "/a"}, {Path: "/b"}}}, "a(sasb)", `[("/a", ["/a"], false,), ("/b", ["/b"], false,)]`, ""},
		{"bind", Property{"BindReadOnlyPaths", BindPath{Source: "/etc/x", Recursive: true}}, "a(ssbt)", `@a(ssbt) [("/etc/x", "/etc/x", false, 16384,)]`, ""},
		{"binds", Property{"BindPaths", []BindPath{{Source: "/a", Destination: "/b", IgnoreMissing: true}}}, "a(ssbt)", `@a(ssbt) [("/a", "/b", true, 0,)]`, ""},
		{"calendar", Property{"TimersCalendar", TimerCalendar{"OnCalendar", "*:0/5"}}, "a(ss)", `[("OnCalendar", "*:0/5",)]`, ""},
		{"monotonic", Property{"TimersMonotonic", []TimerMonotonic{{"OnActiveSec", time.Second}, {"OnUnitActiveSec", 2 * time.Second}}}, "a(st)", `@a(st) [("OnActiveSec", 1000000,), ("OnUnitActiveSec", 2000000,)]`, ""},
		{"syscall filter", Property{"SystemCallFilter", SyscallFilter{Allow: true, Names: []string{"read", "write"}}}, "(bas)", `(true, ["read", "write"],)`, ""},
		{"apparmor", Property{"AppArmorProfile", Profile{Name: "web"}}, "(bs)", `(false, "web",)`, ""},
		{"empty filter", Property{"SystemCallFilter", SyscallFilter{Allow: true}}, "", "", "empty system call filter"},
		{"slice", Property{"Slice", "kubepods-burstable.slice"}, "s", `"kubepods-burstable.slice"`, ""},
		{"bad slice", Property{"Slice", "../x.slice"}, "", "", `property Slice: unit name "../x.slice"`},
		{"slice not a slice", Property{"Slice", "x.service"}, "", "", "not a slice unit"},
		{"slice wrong type", Property{"Slice", 3}, "", "", "unsupported value type int"},
		{"int unsupported", Property{"CPUWeight", 100}, "", "", "property CPUWeight: unsupported value type int"},
		{"float unsupported", Property{"CPUWeight", 1.5}, "", "", "unsupported value type float64"},
		{"nil", Property{"MemoryMax", nil}, "", "", "property MemoryMax: no value"},
		{"negative duration", Property{"RuntimeMaxUSec", -time.Second}, "", "", "negative duration"},
		{"negative elapse", Property{"TimersMonotonic", TimerMonotonic{"OnActiveSec", -1}}, "", "", "negative elapse"},
		{"exec without path", Property{"ExecStart", Exec{Args: []string{"x"}}}, "", "", "exec with empty path"},
		{"empty name", Property{"", true}, "", "", "property with empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := toVariant(tt.prop)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidProperty) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("toVariant(%+v) error = %v, want ErrInvalidProperty containing %q", tt.prop, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("toVariant(%+v): %v", tt.prop, err)
			}
			if v.Name != tt.prop.Name {
				t.Errorf("name = %q, want %q", v.Name, tt.prop.Name)
			}
			if got := v.Value.Signature().String(); got != tt.sig {
				t.Errorf("signature = %q, want %q", got, tt.sig)
			}
			if got := v.Value.String(); got != tt.value {
				t.Errorf("value = %s, want %s", got, tt.value)
			}
		})
	}
}

func TestToVariantsStopsAtFirstBad(t *testing.T) {
	_, err := toVariants([]Property{{"Description", "x"}, {"CPUWeight", 100}, {"MemoryMax", nil}})
	if err == nil || !strings.Contains(err.Error(), "CPUWeight") {
		t.Fatalf("toVariants error = %v, want one naming CPUWeight", err)
	}
}

func TestSplitLive(t *testing.T) {
	props := []Property{
		{"Description", "d"}, {"ExecStart", Exec{Path: "/bin/true"}}, {"MemoryMax", uint64(1)},
		{"CPUShares", uint64(2)}, {"Slice", "a.slice"}, {"TasksMax", uint64(3)}, {"PIDs", []uint32{1}},
	}
	live, skipped := splitLive(props)
	var liveNames []string
	for _, p := range live {
		liveNames = append(liveNames, p.Name)
	}
	if got, want := strings.Join(liveNames, ","), "Description,MemoryMax,CPUShares,TasksMax"; got != want {
		t.Errorf("live = %s, want %s", got, want)
	}
	if got, want := strings.Join(skipped, ","), "ExecStart,Slice,PIDs"; got != want {
		t.Errorf("skipped = %s, want %s", got, want)
	}
}

func TestDescriptionOf(t *testing.T) {
	tests := []struct {
		name  string
		props []Property
		want  string
	}{
		{"given", []Property{{"Description", "slicelet pod x"}}, "slicelet pod x"},
		{"default is the name", []Property{{"MemoryMax", uint64(1)}}, "a.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := descriptionOf("a.slice", tt.props); got != tt.want {
				t.Errorf("descriptionOf = %q, want %q", got, tt.want)
			}
		})
	}
}
