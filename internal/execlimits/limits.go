// Package execlimits holds what systemd and the kernel refuse when they run a container's
// command, as pure checks of a Pod's fields: user and group ids systemd accepts, the argument
// and environment sizes execve(2) accepts after $(VAR) expansion, path lengths, the length of
// a unit file's line and of a unit name. A pod that passes runs, or fails for another reason:
// never a crash loop on a limit validation could have seen.
package execlimits

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The limits, each with where it comes from.
const (
	// MaxArgStrlen is the largest single argument or environment string execve(2) accepts,
	// its terminating NUL included: MAX_ARG_STRLEN, 32 pages (include/uapi/linux/binfmts.h).
	MaxArgStrlen = 32 * 4096
	// ArgMax is the room execve(2) gives argv and envp (strings with their NULs, and one
	// pointer each) with the default 8 MiB stack: a quarter of the stack rlimit
	// (fs/exec.c get_arg_page), sysconf(_SC_ARG_MAX).
	ArgMax = 2 << 20
	// reservedEnv is left in ArgMax for what systemd and slicelet add to a container's
	// environment (INVOCATION_ID, JOURNAL_STREAM, the pod's own variables...).
	reservedEnv = 64 << 10
	// LongLineMax is the longest line systemd reads from a unit file, transient ones included
	// (ExecStart=, Environment=): LONG_LINE_MAX, 1 MiB (src/basic/def.h).
	LongLineMax = 1 << 20
	// PathMax is the longest path the kernel resolves, its NUL included: PATH_MAX
	// (include/uapi/linux/limits.h).
	PathMax = 4096
	// NameMax is the longest path component: NAME_MAX (include/uapi/linux/limits.h).
	NameMax = 255
	// UnitNameMax is the longest unit name systemd accepts: UNIT_NAME_MAX 256 with its NUL
	// (src/basic/unit-name.h).
	UnitNameMax = 255
)

// ID checks a user or group id (what is "user" or "group"): 0 to 4294967294; 4294967295 is
// (uid_t) -1. 65535, which systemd refuses in User= and Group= as the 16-bit -1 (uid_is_valid,
// src/basic/user-util.h), is valid: the systemd runtime sets it through setpriv.
func ID(p *field.Path, id int64, what string) field.ErrorList {
	switch {
	case id < 0 || id >= 1<<32-1:
		return field.ErrorList{field.Invalid(p, id, fmt.Sprintf("must be a %s id between 0 and 4294967294", what))}
	}
	return nil
}

// Path checks an absolute path's length: at most PathMax-1 bytes, each component at most
// NameMax.
func Path(p *field.Path, path string) field.ErrorList {
	if len(path) > PathMax-1 {
		return field.ErrorList{field.TooLong(p, "", PathMax-1)}
	}
	for _, c := range strings.Split(path, "/") {
		if len(c) > NameMax {
			return field.ErrorList{field.Invalid(p, path, fmt.Sprintf("the path component %.20q... is %d bytes, the limit (NAME_MAX) is %d", c, len(c), NameMax))}
		}
	}
	return nil
}

// UnitName checks a unit name's length (UnitNameMax).
func UnitName(p *field.Path, value, unit string) field.ErrorList {
	if len(unit) > UnitNameMax {
		return field.ErrorList{field.Invalid(p, value, fmt.Sprintf("makes the unit name %d bytes long, systemd's limit is %d", len(unit), UnitNameMax))}
	}
	return nil
}

// saturate bounds the computed lengths: anything past it is over every limit, and sums of
// saturated lengths never overflow.
const saturate = 1 << 40

func addLen(a, b int64) int64 { return min(a+b, saturate) }

// ExpandedLen is the length s would have after the kubelet's $(VAR) expansion
// (third_party/forked/golang/expansion, as lifecycle.Expand does it) with variables of the given
// lengths, computed without expanding (saturating at 2^40): $(NAME) of a defined variable counts
// its length, an undefined one stays as written, $$ is one byte, any other $ is kept.
func ExpandedLen(s string, vars map[string]int64) int64 {
	var n int64
	for len(s) > 0 {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			return addLen(n, int64(len(s)))
		}
		n = addLen(n, int64(i))
		s = s[i:]
		switch s[1] {
		case '$':
			n = addLen(n, 1)
			s = s[2:]
			continue
		case '(':
			if end := strings.IndexByte(s, ')'); end > 0 {
				if l, ok := vars[s[2:end]]; ok {
					n = addLen(n, l)
				} else {
					n = addLen(n, int64(end+1))
				}
				s = s[end+1:]
				continue
			}
		}
		n = addLen(n, 1)
		s = s[1:]
	}
	return n
}

// lineCost is the most a byte costs in a unit file's line: systemd writes ExecStart= and
// Environment= values quoted, escaping quotes, backslashes, '$' and '%' (two bytes) and
// control characters (\xNN, four bytes).
func lineCost(c byte) int64 {
	switch {
	case c < 0x20 || c == 0x7f:
		return 4
	case c == '"' || c == '\\' || c == '$' || c == '%' || c == '\'':
		return 2
	}
	return 1
}

// lineLen bounds the unit-file form of the strings (each quoted, separated by a space).
// Expanded strings are not built: a string's cost is its own worst case per byte times its
// expanded length over its written length, at least 1 per byte.
func lineLen(written []string, expanded []int64) int64 {
	var n int64
	for i, s := range written {
		worst := int64(1)
		for j := 0; j < len(s); j++ {
			worst = max(worst, lineCost(s[j]))
		}
		n = addLen(n, addLen(3, min(expanded[i], saturate/4)*worst))
	}
	return n
}

// Container checks what execve(2) and systemd will be given for a container once its env
// values, command and args are expanded (in order, as the kubelet does): each argument and
// each NAME=value at most MaxArgStrlen-1 bytes, all of them together (with a pointer each)
// within ArgMax less what systemd and slicelet add, and the ExecStart= and Environment= lines
// within LongLineMax. Lengths are computed, never expanded: a pod whose $(VAR) references
// multiply to gigabytes costs nothing to refuse.
func Container(p *field.Path, c *v1.Container) field.ErrorList {
	var errs field.ErrorList
	vars := map[string]int64{}
	var total int64
	envWritten := make([]string, 0, len(c.Env))
	envLens := make([]int64, 0, len(c.Env))
	for i, e := range c.Env {
		l := ExpandedLen(e.Value, vars)
		vars[e.Name] = l
		entry := addLen(int64(len(e.Name))+1, l) // NAME=value
		if entry > MaxArgStrlen-1 {
			errs = append(errs, field.TooLong(p.Child("env").Index(i).Child("value"), "", int(MaxArgStrlen-1-int64(len(e.Name))-1)))
		}
		total = addLen(total, addLen(entry, 1+8))
		envWritten = append(envWritten, e.Name+"="+e.Value)
		envLens = append(envLens, entry)
	}
	words := make([]string, 0, len(c.Command)+len(c.Args))
	wordLens := make([]int64, 0, cap(words))
	for _, part := range []struct {
		name string
		list []string
	}{{"command", c.Command}, {"args", c.Args}} {
		for i, w := range part.list {
			l := ExpandedLen(w, vars)
			if l > MaxArgStrlen-1 {
				errs = append(errs, field.Invalid(p.Child(part.name).Index(i), truncate(w),
					fmt.Sprintf("is %s after $(VAR) expansion; the kernel's limit for one argument (MAX_ARG_STRLEN) is %d", size(l), MaxArgStrlen-1)))
			}
			total = addLen(total, addLen(l, 1+8))
			words = append(words, w)
			wordLens = append(wordLens, l)
		}
	}
	if total > ArgMax-reservedEnv {
		errs = append(errs, field.Invalid(p, c.Name,
			fmt.Sprintf("command, args and env take %s after $(VAR) expansion; execve(2) accepts at most %d (ARG_MAX, less %d for the environment systemd and slicelet add)", size(total), ArgMax-reservedEnv, reservedEnv)))
	}
	if l := lineLen(words, wordLens); l > LongLineMax {
		errs = append(errs, field.Invalid(p.Child("args"), fmt.Sprintf("%d arguments", len(words)),
			fmt.Sprintf("the unit's ExecStart= line would be up to %s; systemd reads at most %d (LONG_LINE_MAX)", size(l), LongLineMax)))
	}
	if l := lineLen(envWritten, envLens); l > LongLineMax {
		errs = append(errs, field.Invalid(p.Child("env"), fmt.Sprintf("%d variables", len(c.Env)),
			fmt.Sprintf("the unit's Environment= line would be up to %s; systemd reads at most %d (LONG_LINE_MAX)", size(l), LongLineMax)))
	}
	return errs
}

// size writes a computed length, saturated ones as such.
func size(n int64) string {
	if n >= saturate {
		return "over 1 TiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

// truncate shortens a long value for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}
