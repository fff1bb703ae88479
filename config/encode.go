package config

import (
	"bufio"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Encode writes cfg as TOML: every key, defaults filled in, tables in struct
// order, maps as inline tables with sorted keys. Loading the output gives cfg
// back (the `slicelet config print` round trip).
func Encode(w io.Writer, cfg *Config) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# slicelet effective configuration (defaults filled in)")
	encodeTable(bw, reflect.ValueOf(cfg).Elem(), nil)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("config encode: %w", err)
	}
	return nil
}

func encodeTable(w *bufio.Writer, v reflect.Value, path toml.Key) {
	t := v.Type()
	var scalars, tables []int
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || tomlName(f) == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != quantityType {
			tables = append(tables, i)
		} else {
			scalars = append(scalars, i)
		}
	}
	if len(scalars) > 0 && len(path) > 0 {
		fmt.Fprintf(w, "\n[%s]\n", path.String())
	}
	for _, i := range scalars {
		fmt.Fprintf(w, "%s = %s\n", toml.Key{tomlName(t.Field(i))}.String(), encodeValue(v.Field(i)))
	}
	for _, i := range tables {
		encodeTable(w, v.Field(i), append(slices.Clone(path), tomlName(t.Field(i))))
	}
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

func encodeValue(v reflect.Value) string {
	t := v.Type()
	switch {
	case t == durationType:
		return quote(time.Duration(v.Int()).String())
	case t == quantityType:
		q := v.Interface().(resource.Quantity)
		return quote(q.String())
	case t.Kind() == reflect.String:
		return quote(v.String())
	case t.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int32 || t.Kind() == reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case t.Kind() == reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") { // keep it a TOML float
			s += ".0"
		}
		return s
	case t.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = encodeValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case t.Kind() == reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		if len(keys) == 0 {
			return "{}"
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = toml.Key{k.String()}.String() + " = " + encodeValue(v.MapIndex(k))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	panic(fmt.Sprintf("config: no encoder for %s", t))
}

// quote writes a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
