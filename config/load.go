package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/manifest"
)

// Load reads the configuration: defaults, then the main file, then every
// <dir of the main file>/config.d/*.toml in lexical order, each overriding the
// keys it sets. path "" means DefaultPath, which may be missing (defaults
// apply); an explicitly given path must exist.
//
// Merging is per key: a drop-in that sets only [eviction]
// pressure_transition_period changes only that. A table-valued setting that is
// a map (eviction.hard, node.system_reserved, …) is one value and is replaced
// whole, as the kubelet replaces its default evictionHard when one is given.
//
// On any problem it returns nil and a Problems error listing every problem
// found, in file order, each with its file:line:column when it has one.
func Load(path string) (*Config, error) {
	if path == "" {
		return load(DefaultPath, false)
	}
	return load(path, true)
}

// load is Load with the "must the main file exist" decision made by the caller.
func load(path string, explicit bool) (*Config, error) {
	l := &loader{cfg: Default(), origin: map[string]source{}}

	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		l.file(path, data)
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// No main file: defaults, plus any drop-ins.
	case errors.Is(err, fs.ErrNotExist):
		return nil, Problems{{File: path, Msg: "configuration file not found"}}
	default:
		return nil, Problems{{File: path, Msg: fmt.Sprintf("configuration file unreadable: %v", err)}}
	}

	dropIns, err := filepath.Glob(filepath.Join(filepath.Dir(path), DropInDir, "*.toml"))
	if err != nil {
		return nil, fmt.Errorf("config drop-in pattern: %w", err)
	}
	for _, f := range dropIns { // Glob sorts lexically
		if strings.HasPrefix(filepath.Base(f), ".") {
			continue // editor and package-manager leftovers
		}
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			l.problem(Problem{File: f, Msg: fmt.Sprintf("configuration file unreadable: %v", err)})
			continue
		}
		l.file(f, data)
	}

	l.finish()
	l.validate()
	if len(l.problems) > 0 {
		l.sortProblems()
		return nil, l.problems
	}
	return l.cfg, nil
}

// Parse reads one TOML document over the defaults, with no drop-ins. name is
// used in problem locations. It is Load for tests and tools.
func Parse(name string, data []byte) (*Config, error) {
	l := &loader{cfg: Default(), origin: map[string]source{}}
	l.file(name, data)
	l.finish()
	l.validate()
	if len(l.problems) > 0 {
		l.sortProblems()
		return nil, l.problems
	}
	return l.cfg, nil
}

// offsetPosition is the 1-based line and column (in bytes, as Problem's) of byte offset off in
// data.
// The TOML parser's own line is the lexer's, one too far when the error is at a newline it
// had already consumed, and its column counts from elsewhere on some errors (a duplicate key);
// its byte offset is exact.
func offsetPosition(data []byte, off int) (line, col int) {
	off = max(0, min(off, len(data)))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return bytes.Count(data[:off], []byte{'\n'}) + 1, off - start + 1
}

// QuantityInRange reports whether the quantity written as s (already accepted by
// resource.ParseQuantity) fits an int64 in magnitude, as the kubelet's math and systemd's
// properties need: ParseQuantity clamps "99999999999999999999Ei" to 2^63-1 without a word,
// so the text itself is measured.
func QuantityInRange(s string) bool {
	i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("+-0123456789.", r) })
	if i < 0 {
		i = len(s)
	}
	num := s[:i]
	if strings.Trim(num, "+-.") == "" {
		return true // ParseQuantity reads "+", "." as zero
	}
	r, ok := new(big.Rat).SetString(strings.TrimSuffix(num, "."))
	if !ok {
		return false
	}
	if r.Sign() == 0 {
		return true
	}
	suffix := s[i:]
	switch {
	case suffix == "":
	case len(suffix) == 2 && suffix[1] == 'i':
		shift := strings.IndexByte("KMGTPE", suffix[0]) + 1
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(10*shift))))
	case len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E'):
		exp, err := strconv.Atoi(suffix[1:])
		switch {
		case err != nil || exp > 100:
			return false
		case exp < -len(num)-1:
			return true // below 1 in magnitude
		}
		r.Mul(r, pow10(exp))
	default:
		exp := map[string]int{"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[suffix]
		r.Mul(r, pow10(exp))
	}
	return r.Abs(r).Cmp(new(big.Rat).SetInt64(math.MaxInt64)) <= 0
}

// pow10 is 10^exp as a rational.
func pow10(exp int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil)
	if exp < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

// source is where a key was last set.
type source struct {
	file string
	pos  position
}

type loader struct {
	cfg      *Config
	origin   map[string]source // key → where the value in cfg came from
	problems Problems
	fileRank map[string]int
}

func (l *loader) problem(p Problem) { l.problems = append(l.problems, p) }

// file applies one document to l.cfg.
func (l *loader) file(name string, data []byte) {
	if l.fileRank == nil {
		l.fileRank = map[string]int{}
	}
	l.fileRank[name] = len(l.fileRank)
	l.cfg.files = append(l.cfg.files, name)

	var raw map[string]any
	if _, err := toml.NewDecoder(strings.NewReader(string(data))).Decode(&raw); err != nil {
		p := Problem{File: name, Msg: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			p.Line, p.Col = offsetPosition(data, pe.Position.Start)
			p.Msg = pe.Message
		}
		l.problem(p)
		return
	}
	d := &decoder{l: l, file: name, pos: locateKeys(data)}
	d.table(raw, reflect.ValueOf(l.cfg).Elem(), nil)
}

// finish applies the kubelet's defaulting that depends on what was set.
func (l *loader) finish() {
	e := &l.cfg.Eviction
	if e.MergeDefaults {
		for k, v := range DefaultEvictionHard() {
			if _, ok := e.Hard[k]; !ok {
				e.Hard[k] = v
			}
		}
	}
	// The kubelet converts a zero evictionPressureTransitionPeriod to 5m.
	if e.PressureTransitionPeriod == 0 {
		e.PressureTransitionPeriod = 5 * time.Minute
	}
}

// where returns the location of the first of keys that some file set, or the
// first key without a location when none was.
func (l *loader) where(keys ...toml.Key) (toml.Key, source) {
	for _, k := range keys {
		if s, ok := l.origin[k.String()]; ok {
			return k, s
		}
	}
	return keys[0], source{}
}

func (l *loader) sortProblems() {
	rank := func(p Problem) int {
		if r, ok := l.fileRank[p.File]; ok {
			return r
		}
		return math.MaxInt
	}
	slices.SortStableFunc(l.problems, func(a, b Problem) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		if rank(a) == math.MaxInt {
			return 0
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}

// decoder maps one parsed document onto the Config struct, reporting every
// unknown key and wrong type instead of stopping at the first.
type decoder struct {
	l    *loader
	file string
	pos  map[string]position
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	quantityType = reflect.TypeFor[resource.Quantity]()
)

func (d *decoder) problem(key toml.Key, format string, args ...any) {
	p := d.pos[key.String()]
	d.l.problem(Problem{File: d.file, Line: p.Line, Col: p.Col, Key: key.String(), Msg: fmt.Sprintf(format, args...)})
}

// keysInFileOrder sorts a table's keys by where they are written.
func (d *decoder) keysInFileOrder(raw map[string]any, path toml.Key) []string {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		pa, pb := d.pos[append(slices.Clone(path), a).String()], d.pos[append(slices.Clone(path), b).String()]
		if pa.Line != pb.Line {
			return pa.Line - pb.Line
		}
		if pa.Col != pb.Col {
			return pa.Col - pb.Col
		}
		return strings.Compare(a, b)
	})
	return keys
}

// table decodes raw into the struct rv.
func (d *decoder) table(raw map[string]any, rv reflect.Value, path toml.Key) {
	fields := tomlFields(rv.Type())
	for _, k := range d.keysInFileOrder(raw, path) {
		key := append(slices.Clone(path), k)
		idx, ok := fields[k]
		if !ok {
			msg := "unknown key"
			if s := suggest(k, fields); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			d.problem(key, "%s", msg)
			continue
		}
		d.value(raw[k], rv.Field(idx), key)
	}
}

// value decodes one raw TOML value into v, or reports why it cannot.
func (d *decoder) value(raw any, v reflect.Value, key toml.Key) {
	set := func(x reflect.Value) {
		v.Set(x)
		d.setOrigin(key)
	}
	t := v.Type()
	switch {
	case t == durationType:
		s, ok := raw.(string)
		if !ok {
			d.problem(key, "wrong type: got %s, want a duration string such as \"1m30s\"", tomlType(raw))
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.problem(key, "invalid duration %q: want a Go duration such as \"1m30s\"", s)
			return
		}
		set(reflect.ValueOf(dur))
	case t == quantityType:
		var q resource.Quantity
		switch r := raw.(type) {
		case string:
			if err := manifest.CheckQuantityText(r); err != nil {
				d.problem(key, "invalid quantity: %v", err)
				return
			}
			var err error
			if q, err = resource.ParseQuantity(r); err != nil {
				d.problem(key, "invalid quantity %q: want a Kubernetes quantity such as \"500Mi\" or \"100m\"", r)
				return
			}
			if !QuantityInRange(r) {
				d.problem(key, "quantity %q is out of range: at most 8Ei (2^63-1 bytes or units) in magnitude", r)
				return
			}
		case int64:
			q = *resource.NewQuantity(r, resource.DecimalSI)
		default:
			d.problem(key, "wrong type: got %s, want a quantity string such as \"500Mi\"", tomlType(raw))
			return
		}
		set(reflect.ValueOf(q))
	case t.Kind() == reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			d.problem(key, "wrong type: got %s, want a table", tomlType(raw))
			return
		}
		d.setOrigin(key)
		d.table(m, v, key)
	case t.Kind() == reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.problem(key, "wrong type: got %s, want string", tomlType(raw))
			return
		}
		// Strings of the eviction maps are quantities, parsed later.
		if err := manifest.CheckQuantityText(s); err != nil {
			d.problem(key, "invalid value: %v", err)
			return
		}
		set(reflect.ValueOf(s).Convert(t))
	case t.Kind() == reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			d.problem(key, "wrong type: got %s, want boolean (true or false)", tomlType(raw))
			return
		}
		set(reflect.ValueOf(b))
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int32 || t.Kind() == reflect.Int64:
		n, ok := raw.(int64)
		if !ok {
			d.problem(key, "wrong type: got %s, want integer", tomlType(raw))
			return
		}
		if v.OverflowInt(n) {
			d.problem(key, "integer %d out of range for a %d-bit value", n, t.Bits())
			return
		}
		x := reflect.New(t).Elem()
		x.SetInt(n)
		set(x)
	case t.Kind() == reflect.Float64:
		switch r := raw.(type) {
		case float64:
			set(reflect.ValueOf(r))
		case int64:
			set(reflect.ValueOf(float64(r)))
		default:
			d.problem(key, "wrong type: got %s, want number", tomlType(raw))
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		arr, ok := raw.([]any)
		if !ok {
			d.problem(key, "wrong type: got %s, want array of strings", tomlType(raw))
			return
		}
		out := reflect.MakeSlice(t, 0, len(arr))
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				d.problem(key, "wrong type: element %d is %s, want string", i, tomlType(e))
				return
			}
			out = reflect.Append(out, reflect.ValueOf(s).Convert(t.Elem()))
		}
		set(out)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		m, ok := raw.(map[string]any)
		if !ok {
			d.problem(key, "wrong type: got %s, want a table such as { name = value }", tomlType(raw))
			return
		}
		// A map is one value: drop what earlier files said about its entries.
		prefix := key.String() + "."
		for k := range d.l.origin {
			if strings.HasPrefix(k, prefix) {
				delete(d.l.origin, k)
			}
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for _, k := range d.keysInFileOrder(m, key) {
			ek := append(slices.Clone(key), k)
			ev := reflect.New(t.Elem()).Elem()
			before := len(d.l.problems)
			d.value(m[k], ev, ek)
			if len(d.l.problems) == before {
				out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
			}
		}
		set(out)
	default:
		panic(fmt.Sprintf("config: no decoder for %s (%s)", t, key))
	}
}

func (d *decoder) setOrigin(key toml.Key) {
	d.l.origin[key.String()] = source{file: d.file, pos: d.pos[key.String()]}
}

// tomlFields maps TOML key names to struct field indexes.
func tomlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name != "" && name != "-" {
			out[name] = i
		}
	}
	return out
}

// tomlType names a decoded value's TOML type for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	case time.Time:
		return "datetime"
	}
	return fmt.Sprintf("%T", v)
}

// suggest returns the known key closest to k, if it is close enough to be a typo.
func suggest(k string, fields map[string]int) string {
	best, bestDist := "", math.MaxInt
	for name := range fields {
		if dist := editDistance(k, name); dist < bestDist || dist == bestDist && name < best {
			best, bestDist = name, dist
		}
	}
	if bestDist > max(2, len(k)/4) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
