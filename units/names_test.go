package units

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	// Expected values are what `systemd-escape` (systemd 252) prints for the same input.
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "abc:_XYZ019", "abc:_XYZ019"},
		{"dash", "a-b", `a\x2db`},
		{"slash", "a/b", "a-b"},
		{"leading slash", "/a/b", "-a-b"},
		{"leading dot", ".hidden", `\x2ehidden`},
		{"inner dot", "a.b", "a.b"},
		{"dot dot", "..", `\x2e.`},
		{"traversal", "../../etc/passwd", `\x2e.-..-etc-passwd`},
		{"backslash", `a\b`, `a\x5cb`},
		{"space", "a b", `a\x20b`},
		{"at", "a@b", `a\x40b`},
		{"newline", "a\nb", `a\x0ab`},
		{"nul", "a\x00b", `a\x00b`},
		{"utf8", "é", `\xc3\xa9`},
		{"glob", "*?[", `\x2a\x3f\x5b`},
		{"uid with dashes", "8f1c-22", `8f1c\x2d22`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escape(tt.in)
			if got != tt.want {
				t.Fatalf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := Unescape(got)
			if err != nil || back != tt.in {
				t.Fatalf("Unescape(%q) = %q, %v; want %q", got, back, err, tt.in)
			}
		})
	}
}

func TestUnescapeErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"truncated", `a\x2`},
		{"no x", `a\y20`},
		{"bad hex", `a\xzz`},
		{"lone backslash", `\`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Unescape(tt.in); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Unescape(%q) error = %v, want ErrInvalidName", tt.in, err)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen-len(".slice")) + ".slice"
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" means valid
	}{
		{"slice", "kubepods-burstable.slice", ""},
		{"root slice", "-.slice", ""},
		{"service", "slicelet-gc.service", ""},
		{"scope", `cri-containerd-ab\x2dcd.scope`, ""},
		{"timer", "slicelet-image-gc.timer", ""},
		{"instance", "getty@tty1.service", ""},
		{"instance with at", "a@b@c.service", ""},
		{"colon", "a:b.service", ""},
		{"max length", long, ""},
		{"empty", "", "empty"},
		{"too long", "a" + long, "longer than 255"},
		{"no suffix", "kubepods", "no type suffix"},
		{"only suffix", ".slice", "empty name before"},
		{"unknown type", "a.foo", `unknown unit type "foo"`},
		{"slash", "foo/bar.slice", `character '/'`},
		{"traversal", "../x.service", `character '/'`},
		{"nul", "a\x00b.service", `character '\x00'`},
		{"newline", "a\nb.service", `character '\n'`},
		{"space", "a b.service", `character ' '`},
		{"utf8", "é.service", `character`},
		{"glob", "a*.service", `character '*'`},
		{"template", "getty@.service", "template"},
		{"empty prefix before at", "@a.service", "empty name before '@'"},
		{"slice leading dash", "-a.slice", "empty level"},
		{"slice trailing dash", "a-.slice", "empty level"},
		{"slice double dash", "a--b.slice", "empty level"},
		{"slice instance", "a@b.slice", "instances"},
		{"suffix only dot", "a.", "unknown unit type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateName(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateName(%q) = nil, want error containing %q", tt.in, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateName(%q) = %v, want ErrInvalidName containing %q", tt.in, err, tt.wantErr)
			}
			// The offending name is quoted in the error.
			if q := `unit name "`; !strings.HasPrefix(err.Error(), q) {
				t.Fatalf("error %q does not start with %s…", err, q)
			}
		})
	}
}

func TestSliceName(t *testing.T) {
	tests := []struct {
		name    string
		parts   []string
		want    string
		wantErr string
	}{
		{"top", []string{"kubepods"}, "kubepods.slice", ""},
		{"qos", []string{"kubepods", "burstable"}, "kubepods-burstable.slice", ""},
		{"pod", []string{"kubepods", "besteffort", "pod8f1c_22aa"}, "kubepods-besteffort-pod8f1c_22aa.slice", ""},
		{"escaped part", []string{"a", Escape("x-y")}, `a-x\x2dy.slice`, ""},
		{"inner dot", []string{"a", "b.c"}, "a-b.c.slice", ""},
		{"no parts", nil, "", "no parts"},
		{"empty part", []string{"kubepods", ""}, "", `part 1 "": empty`},
		{"dash in part", []string{"kubepods", "pod8f1c-22aa"}, "", `part 1 "pod8f1c-22aa": contains '-'`},
		{"slash", []string{"a/b"}, "", `part 0 "a/b": character '/'`},
		{"traversal", []string{".."}, "", `starts with '.'`},
		{"nul", []string{"a\x00"}, "", `character '\x00'`},
		{"newline", []string{"a\n"}, "", `character '\n'`},
		{"bad escape", []string{`a\x2`}, "", "bad escape"},
		{"space", []string{"a b"}, "", `character ' '`},
		{"at", []string{"a@b"}, "", `character '@'`},
		{"too long", []string{strings.Repeat("a", 250)}, "", "longer than 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SliceName(tt.parts...)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SliceName(%q) = %q, %v; want ErrInvalidName containing %q", tt.parts, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SliceName(%q) = %q, %v; want %q", tt.parts, got, err, tt.want)
			}
		})
	}
}

func TestExpandSliceAndParent(t *testing.T) {
	tests := []struct {
		name, slice, path, parent string
	}{
		{"root", "-.slice", "/", ""},
		{"top", "kubepods.slice", "/kubepods.slice", "-.slice"},
		{"nested", "kubepods-burstable-pod1.slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice", "kubepods-burstable.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ExpandSlice(tt.slice)
			if err != nil || p != tt.path {
				t.Fatalf("ExpandSlice(%q) = %q, %v; want %q", tt.slice, p, err, tt.path)
			}
			par, err := SliceParent(tt.slice)
			if err != nil || par != tt.parent {
				t.Fatalf("SliceParent(%q) = %q, %v; want %q", tt.slice, par, err, tt.parent)
			}
		})
	}
	for _, bad := range []string{"a.service", "a/b.slice", "a--b.slice", "-a.slice", ".slice"} {
		if _, err := ExpandSlice(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ExpandSlice(%q) error = %v, want ErrInvalidName", bad, err)
		}
	}
}

func TestUnitName(t *testing.T) {
	tests := []struct {
		name    string
		suffix  string
		parts   []string
		want    string
		wantErr string
	}{
		{"service", SuffixService, []string{"slicelet", "gc"}, "slicelet-gc.service", ""},
		{"escapes dash", SuffixScope, []string{"pod", "a-b"}, `pod-a\x2db.scope`, ""},
		{"hostile", SuffixService, []string{"../../etc/x\n"}, `\x2e.-..-etc-x\x0a.service`, ""},
		{"timer", SuffixTimer, []string{"gc"}, "gc.timer", ""},
		{"slice refused", SuffixSlice, []string{"a"}, "", "use SliceName"},
		{"unknown suffix", ".exe", []string{"a"}, "", "unknown unit type"},
		{"no dot", "service", []string{"a"}, "", "unknown unit type"},
		{"no parts", SuffixService, nil, "", "no parts"},
		{"empty part", SuffixService, []string{"a", ""}, "", "part 1: empty"},
		{"too long", SuffixService, []string{strings.Repeat("-", 70)}, "", "longer than 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UnitName(tt.suffix, tt.parts...)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("UnitName(%q, %q) = %q, %v; want error containing %q", tt.suffix, tt.parts, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("UnitName(%q, %q) = %q, %v; want %q", tt.suffix, tt.parts, got, err, tt.want)
			}
		})
	}
	if n, err := ServiceName("a"); err != nil || n != "a.service" {
		t.Errorf("ServiceName = %q, %v", n, err)
	}
	if n, err := ScopeName("a"); err != nil || n != "a.scope" {
		t.Errorf("ScopeName = %q, %v", n, err)
	}
	if n, err := TimerName("a"); err != nil || n != "a.timer" {
		t.Errorf("TimerName = %q, %v", n, err)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a", "a-b", "/x/y", ".", "..", "../../etc", "\x00\n\xff", "é", `\x2d`, strings.Repeat("-", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		for i := 0; i < len(e); i++ {
			if !validNameChar(e[i]) || e[i] >= utf8.RuneSelf {
				t.Fatalf("Escape(%q) = %q has invalid byte %q", s, e, e[i])
			}
		}
		back, err := Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
		for _, suffix := range []string{SuffixService, SuffixScope, SuffixTimer} {
			name := e + suffix
			err := ValidateName(name)
			fits := s != "" && len(name) <= MaxNameLen
			if fits && err != nil {
				t.Fatalf("ValidateName(Escape(%q)+%q) = %v", s, suffix, err)
			}
			if !fits && err == nil {
				t.Fatalf("ValidateName(%q) accepted an empty or overlong name", name)
			}
			n, err := UnitName(suffix, s)
			if fits != (err == nil) || (err == nil && n != name) {
				t.Fatalf("UnitName(%q, %q) = %q, %v; fits=%v", suffix, s, n, err, fits)
			}
		}
		// A slice part either is accepted and yields a valid slice, or is rejected: never a
		// name ValidateName refuses.
		if n, err := SliceName(e); err == nil {
			if verr := ValidateName(n); verr != nil {
				t.Fatalf("SliceName(%q) = %q, which does not validate: %v", e, n, verr)
			}
		}
		if n, err := SliceName(s); err == nil {
			if verr := ValidateName(n); verr != nil || strings.ContainsAny(n, "/\x00\n") {
				t.Fatalf("SliceName(%q) = %q, invalid: %v", s, n, verr)
			}
		}
	})
}

// TestEscapeMatchesSystemdEscape compares Escape with the real systemd-escape for every byte
// (except NUL, which cannot be an argument) at the start and inside a string.
func TestEscapeMatchesSystemdEscape(t *testing.T) {
	bin, err := exec.LookPath("systemd-escape")
	if err != nil {
		t.Skip("systemd-escape not installed")
	}
	var args []string
	for b := 1; b < 256; b++ {
		args = append(args, string([]byte{byte(b)})+"x"+string([]byte{byte(b)}))
	}
	out, err := exec.Command(bin, append([]string{"--"}, args...)...).Output()
	if err != nil {
		t.Fatalf("systemd-escape: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != len(args) {
		t.Fatalf("systemd-escape printed %d names for %d inputs", len(got), len(args))
	}
	for i, in := range args {
		if e := Escape(in); e != got[i] {
			t.Errorf("Escape(%q) = %q, systemd-escape says %q", in, e, got[i])
		}
	}
}
