package units

import (
	"errors"
	"fmt"
	"strings"

	cgroupsystemd "github.com/opencontainers/cgroups/systemd"
)

// Unit names are checked and built in this file only. The rules follow systemd's
// src/basic/unit-name.c (unit_name_is_valid, unit_name_escape, slice_name_is_valid) and
// systemd.unit(5) "Description": a name is "prefix[@instance].type", at most 255 bytes, the
// prefix made of ASCII letters, digits and ":-_.\", and anything else escaped as \xNN.
//
// A valid unit name never contains '/', NUL or a newline, so it is always a single path
// component: systemd turns it into cgroup directory names and object paths as a whole, which is
// why a ".." inside a name (legal for systemd, e.g. systemd-escape "../x" gives "\x2e.-x") can
// never traverse anything.

// MaxNameLen is the longest unit name systemd accepts (UNIT_NAME_MAX - 1).
const MaxNameLen = 255

// ErrInvalidName is wrapped by every error about a malformed unit name or name part.
var ErrInvalidName = errors.New("invalid unit name")

// unitTypes are the suffixes systemd knows (unit_type_to_string), without the dot.
var unitTypes = map[string]bool{
	"service": true, "socket": true, "target": true, "device": true, "mount": true,
	"automount": true, "swap": true, "timer": true, "path": true, "slice": true, "scope": true,
}

// Suffixes of the unit types slicelet creates.
const (
	SuffixSlice   = ".slice"   // a node of the cgroup tree (kubepods, QoS classes, pods)
	SuffixService = ".service" // processes systemd starts
	SuffixScope   = ".scope"   // processes started elsewhere and adopted
	SuffixTimer   = ".timer"   // triggers the service of the same name
)

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validNameChar reports whether c may appear in a unit name prefix (UNIT_NAME_VALID_CHARS).
func validNameChar(c byte) bool {
	return isAlnum(c) || c == ':' || c == '-' || c == '_' || c == '.' || c == '\\'
}

// keepByte reports whether Escape leaves c as it is. '-' and '\' are valid in names but are
// escaped because they carry meaning ('-' is the slice hierarchy separator and the escaped '/',
// '\' starts an escape).
func keepByte(c byte) bool {
	return isAlnum(c) || c == ':' || c == '_' || c == '.'
}

const hexDigits = "0123456789abcdef"

// Escape returns s escaped like `systemd-escape s` (unit_name_escape): '/' becomes '-', a
// leading '.' and every byte other than ASCII letters, digits, ':', '_' and '.' become \xNN
// (lower-case hex). The result contains only characters valid in a unit name and round-trips
// through Unescape. Escape("") is "", and the result of a long input can exceed MaxNameLen: use
// UnitName to get a checked name.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case keepByte(c) && !(c == '.' && i == 0):
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
	}
	return b.String()
}

// Unescape reverses Escape: \xNN becomes the byte NN and '-' becomes '/'. (systemd-escape
// --unescape only maps '-' back to '/' with --path; here '-' always means '/', so that
// Unescape(Escape(s)) == s for every s.) It returns an error wrapping ErrInvalidName for a
// malformed escape sequence.
func Unescape(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '-':
			b.WriteByte('/')
		case '\\':
			v, ok := hexEscape(s, i)
			if !ok {
				return "", fmt.Errorf("escaped text %q: bad escape sequence at byte %d: %w", s, i, ErrInvalidName)
			}
			b.WriteByte(v)
			i += 3
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// hexEscape decodes the \xNN sequence starting at s[i].
func hexEscape(s string, i int) (byte, bool) {
	if i+3 >= len(s) {
		return 0, false
	}
	if s[i] != '\\' || s[i+1] != 'x' {
		return 0, false
	}
	hi, ok1 := unhex(s[i+2])
	lo, ok2 := unhex(s[i+3])
	if !ok1 || !ok2 {
		return 0, false
	}
	return hi<<4 | lo, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ValidateName checks that name is a complete unit name systemd accepts for a unit that can be
// started: "prefix.type" or "prefix@instance.type" (templates "prefix@.type" are rejected, they
// cannot run), at most MaxNameLen bytes, a known type suffix, only letters, digits and ":-_.\@"
// before the suffix, and for slices the hierarchy rules of slice_name_is_valid (no leading,
// trailing or doubled '-'; "-.slice" is the root slice). The error quotes name and wraps
// ErrInvalidName.
func ValidateName(name string) error {
	if err := validateName(name); err != nil {
		return fmt.Errorf("unit name %q: %s: %w", name, err, ErrInvalidName)
	}
	return nil
}

func validateName(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%d bytes long, longer than %d", len(name), MaxNameLen)
	}
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return errors.New("no type suffix such as .service or .slice")
	}
	if dot == 0 {
		return errors.New("empty name before the type suffix")
	}
	if typ := name[dot+1:]; !unitTypes[typ] {
		return fmt.Errorf("unknown unit type %q", typ)
	}
	prefix := name[:dot]
	at := -1
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if c == '@' {
			if at < 0 {
				at = i
			}
			continue
		}
		if !validNameChar(c) {
			return fmt.Errorf("character %q at byte %d not allowed (only letters, digits and \":-_.\\@\"; escape other text with Escape)", c, i)
		}
	}
	switch {
	case at == 0:
		return errors.New("empty name before '@'")
	case at == len(prefix)-1:
		return errors.New("template name (empty instance after '@') cannot be started")
	}
	if name[dot:] == SuffixSlice {
		if at >= 0 {
			return errors.New("slices cannot have instances ('@')")
		}
		if prefix != "-" && (prefix[0] == '-' || prefix[len(prefix)-1] == '-' || strings.Contains(prefix, "--")) {
			return errors.New("slice name has an empty level (leading, trailing or doubled '-')")
		}
	}
	return nil
}

// validateKind checks name and that it ends in suffix.
func validateKind(name, suffix string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if !strings.HasSuffix(name, suffix) {
		return fmt.Errorf("unit name %q: not a %s unit: %w", name, strings.TrimPrefix(suffix, "."), ErrInvalidName)
	}
	return nil
}

// checkPart checks that part is a non-empty name component in escaped form without '-': letters,
// digits, ':', '_', '.' (not leading) and \xNN sequences, i.e. exactly what Escape produces for
// text without '/'.
func checkPart(part string) error {
	if part == "" {
		return errors.New("empty")
	}
	for i := 0; i < len(part); i++ {
		c := part[i]
		switch {
		case c == '-':
			return fmt.Errorf("contains '-' at byte %d (it separates slice levels; replace it, e.g. the kubelet maps '-' in pod UIDs to '_')", i)
		case c == '.' && i == 0:
			return errors.New("starts with '.'")
		case c == '\\':
			if _, ok := hexEscape(part, i); !ok {
				return fmt.Errorf("bad escape sequence at byte %d", i)
			}
			i += 3
		case !keepByte(c):
			return fmt.Errorf("character %q at byte %d not allowed (only letters, digits, ':', '_', '.' and \\xNN escapes)", c, i)
		}
	}
	return nil
}

// SliceName builds the name of a nested slice from its levels: SliceName("kubepods",
// "burstable", "pod1234") is "kubepods-burstable-pod1234.slice", whose parent is
// "kubepods-burstable.slice". Every part must be non-empty and in escaped form without '-'
// (letters, digits, ':', '_', non-leading '.', \xNN); other text is rejected, never silently
// changed, with an error quoting the part and wrapping ErrInvalidName. The result is checked with
// ValidateName.
func SliceName(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("slice name: no parts: %w", ErrInvalidName)
	}
	for i, p := range parts {
		if err := checkPart(p); err != nil {
			return "", fmt.Errorf("slice name part %d %q: %s: %w", i, p, err, ErrInvalidName)
		}
	}
	name := strings.Join(parts, "-") + SuffixSlice
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return name, nil
}

// SliceParent returns the parent slice of a slice: "a-b-c.slice" → "a-b.slice", "a.slice" →
// "-.slice" (the root slice), "-.slice" → "" (the root has no parent).
func SliceParent(slice string) (string, error) {
	if err := validateKind(slice, SuffixSlice); err != nil {
		return "", err
	}
	prefix := strings.TrimSuffix(slice, SuffixSlice)
	if prefix == "-" {
		return "", nil
	}
	i := strings.LastIndexByte(prefix, '-')
	if i < 0 {
		return "-.slice", nil
	}
	return prefix[:i] + SuffixSlice, nil
}

// ExpandSlice returns the cgroup path of a slice as systemd lays it out, computed by the
// kubelet's own cgroup driver (opencontainers/cgroups/systemd.ExpandSlice):
// "a-b-c.slice" → "/a.slice/a-b.slice/a-b-c.slice", the root slice "-.slice" → "/". The name is
// checked against systemd's rules first; a bad one is an error wrapping ErrInvalidName.
func ExpandSlice(slice string) (string, error) {
	if err := validateKind(slice, SuffixSlice); err != nil {
		return "", err
	}
	p, err := cgroupsystemd.ExpandSlice(slice)
	if err != nil {
		return "", fmt.Errorf("slice %q: %w: %w", slice, err, ErrInvalidName)
	}
	return p, nil
}

// UnitName builds "<Escape(parts[0])>-<Escape(parts[1])>...<suffix>" from arbitrary text, for
// units that are not slices (services, scopes, timers). Each part is escaped on its own, so a
// '-' or '/' inside a part cannot be confused with the separator. suffix is one of the
// Suffix* constants (or another known type). The result is validated; an empty part or a too
// long result is an error wrapping ErrInvalidName. Use SliceName for slices, whose '-' means
// nesting.
func UnitName(suffix string, parts ...string) (string, error) {
	if !strings.HasPrefix(suffix, ".") || !unitTypes[suffix[1:]] {
		return "", fmt.Errorf("unit suffix %q: unknown unit type: %w", suffix, ErrInvalidName)
	}
	if suffix == SuffixSlice {
		return "", fmt.Errorf("unit suffix %q: use SliceName for slices: %w", suffix, ErrInvalidName)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("unit name: no parts: %w", ErrInvalidName)
	}
	esc := make([]string, len(parts))
	for i, p := range parts {
		if p == "" {
			return "", fmt.Errorf("unit name part %d: empty: %w", i, ErrInvalidName)
		}
		esc[i] = Escape(p)
	}
	name := strings.Join(esc, "-") + suffix
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return name, nil
}

// ServiceName is UnitName(SuffixService, parts...).
func ServiceName(parts ...string) (string, error) { return UnitName(SuffixService, parts...) }

// ScopeName is UnitName(SuffixScope, parts...).
func ScopeName(parts ...string) (string, error) { return UnitName(SuffixScope, parts...) }

// TimerName is UnitName(SuffixTimer, parts...).
func TimerName(parts ...string) (string, error) { return UnitName(SuffixTimer, parts...) }

// unitType returns the D-Bus interface suffix for the unit's type ("Service", "Slice", ...).
func unitType(name string) string {
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return ""
	}
	t := name[dot+1:]
	if !unitTypes[t] {
		return ""
	}
	return strings.ToUpper(t[:1]) + t[1:]
}
