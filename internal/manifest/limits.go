// Package manifest holds what every entry point of a Pod manifest (the API, the manifest
// directory, slicectl) applies before decoding it.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// The limits of a manifest, the Kubernetes API server's.
const (
	// MaxInputBytes is the largest manifest accepted, as written (YAML or JSON, every document):
	// the API server's request body limit (3 MiB, k8s.io/apiserver
	// pkg/server/config.go MaxRequestBodyBytes).
	MaxInputBytes = 3 << 20
	// MaxDocumentJSONBytes is the largest size one document may have once decoded, measured as
	// compact JSON without HTML escaping: etcd's request limit (1.5 MiB, etcd
	// embed.DefaultMaxRequestBytes), which bounds every object the API server stores.
	MaxDocumentJSONBytes = 3 << 19
)

// MaxNodes bounds the YAML nodes of a manifest, counted as the separators that can start
// one (structuralTokens) before it is parsed: the parser takes some 200 bytes of memory per
// node, so a 3 MiB input of "[1,1,1,..." would take over 300 MiB, this bound at most ~50 MiB. A
// real pod has a few thousand; a long script in a block scalar one per line.
const MaxNodes = 100_000

// structuralTokens counts what can start a YAML node: newlines, and ',', '[' and '{' outside
// quoted scalars (a quote opens only where a scalar can start: after a space, a line start or
// a flow indicator). It is an upper bound of the nodes of block and flow YAML and of JSON,
// counted in one pass without allocating.
func structuralTokens(data []byte) int {
	n := 0
	var quote byte
	prev := byte('\n')
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\n':
			n++
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case quote == '\'':
			if c == '\'' && i+1 < len(data) && data[i+1] == '\'' {
				i++ // '' is an escaped quote
			} else if c == '\'' {
				quote = 0
			}
		case c == '"' || c == '\'':
			if strings.IndexByte(" \t\n[{,:-", prev) >= 0 {
				quote = c
			}
		case c == ',' || c == '[' || c == '{':
			n++
		}
		prev = c
	}
	return n
}

// ErrTooLarge is wrapped by every error CheckBounds returns for a manifest over a limit.
var ErrTooLarge = errors.New("manifest too large")

// CheckBounds refuses, before anything is decoded into Go values, a manifest over
// MaxInputBytes or holding a document whose JSON form would be over MaxDocumentJSONBytes. The
// JSON size is computed on the YAML node graph with aliases NOT expanded: the size of an
// anchored node is computed once and reused by every alias to it, so an alias "bomb" (a small
// document whose aliases expand to gigabytes) costs time and memory linear in its input. An
// alias to a node that contains it (a cycle) is refused, and so is a number whose exponent
// would stall the quantity parser (CheckQuantityText). A YAML syntax error is an error too,
// with its line. The errors of a limit wrap ErrTooLarge and name the limit.
func CheckBounds(data []byte) error {
	if len(data) > MaxInputBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d (3 MiB, the Kubernetes API server's request limit)", ErrTooLarge, len(data), MaxInputBytes)
	}
	if n := structuralTokens(data); n > MaxNodes {
		return fmt.Errorf("%w: more than %d YAML nodes (counted %d separators), the limit that bounds the memory decoding takes", ErrTooLarge, MaxNodes, n)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for index := 0; ; index++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", index, err)
		}
		m := measurer{sizes: map[*yaml.Node]int64{}, active: map[*yaml.Node]bool{}}
		size, err := m.size(&doc)
		if err != nil {
			return fmt.Errorf("document %d: %w", index, err)
		}
		if size > MaxDocumentJSONBytes {
			return fmt.Errorf("%w: document %d: more than %d bytes as JSON (1.5 MiB, etcd's object limit)", ErrTooLarge, index, MaxDocumentJSONBytes)
		}
	}
}

// maxQuantityExponent bounds the decimal exponent of a number written in a manifest or a
// configuration: k8s.io/apimachinery's resource.ParseQuantity, which decodes every quantity
// field, takes seconds for "1e-1000000" and never returns for "12E45678901234"; real
// quantities stay within Ei (10^18).
const maxQuantityExponent = 100

// CheckQuantityText refuses a number (as resource.ParseQuantity reads it: digits, sign and
// point, then a suffix) whose decimal exponent ("e"/"E" and an integer) is beyond
// ±maxQuantityExponent; any other text passes.
func CheckQuantityText(s string) error {
	i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("+-0123456789.", r) })
	if i < 0 || i+1 >= len(s) || (s[i] != 'e' && s[i] != 'E') {
		return nil
	}
	exp := strings.TrimLeft(s[i+1:], "+-")
	if exp == "" || strings.Trim(exp, "0123456789") != "" {
		return nil
	}
	exp = strings.TrimLeft(exp, "0")
	if len(exp) > 3 || (len(exp) == 3 && exp > "100") {
		return fmt.Errorf("number %.40q: exponent beyond ±%d", s, maxQuantityExponent)
	}
	return nil
}

// measurer computes JSON sizes of one document's nodes, saturating just over the limit.
type measurer struct {
	sizes  map[*yaml.Node]int64 // memoized sizes of the nodes aliases point to
	active map[*yaml.Node]bool  // anchored nodes being measured: an alias to one is a cycle
}

// over is where sizes saturate: anything above the limit is simply "too large", so sums
// never overflow.
const over = MaxDocumentJSONBytes + 1

func add(a, b int64) int64 {
	if a+b > over {
		return over
	}
	return a + b
}

// size is the length of n's compact JSON form (as sigs.k8s.io/yaml converts YAML to JSON),
// exactly for strings and structure, at most a float's longest form for other scalars.
func (m *measurer) size(n *yaml.Node) (int64, error) {
	if n == nil {
		return 4, nil // null
	}
	if s, ok := m.sizes[n]; ok {
		return s, nil
	}
	if n.Anchor != "" {
		if m.active[n] {
			return 0, fmt.Errorf("line %d column %d: an alias refers to a node that contains it", n.Line, n.Column)
		}
		m.active[n] = true
		defer delete(m.active, n)
	}
	var s int64
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			cs, err := m.size(c)
			if err != nil {
				return 0, err
			}
			s = add(s, cs)
		}
	case yaml.AliasNode:
		if n.Alias == nil {
			return 0, fmt.Errorf("line %d column %d: an alias to an unknown anchor", n.Line, n.Column)
		}
		as, err := m.size(n.Alias)
		if err != nil {
			return 0, err
		}
		s = as
	case yaml.SequenceNode, yaml.MappingNode:
		s = 2 // [] or {}
		for i, c := range n.Content {
			cs, err := m.size(c)
			if err != nil {
				return 0, err
			}
			if n.Kind == yaml.MappingNode && i%2 == 0 {
				// A key: always a JSON string, followed by ':'.
				if c.Kind == yaml.ScalarNode {
					cs = stringSize(c.Value)
				}
				cs++
			}
			if i > 0 && (n.Kind == yaml.SequenceNode || i%2 == 0) {
				cs++ // ','
			}
			s = add(s, cs)
		}
	case yaml.ScalarNode:
		if err := CheckQuantityText(n.Value); err != nil {
			return 0, fmt.Errorf("line %d column %d: %w", n.Line, n.Column, err)
		}
		s = scalarSize(n)
	}
	if n.Anchor != "" || s >= over {
		m.sizes[n] = s
	}
	return s, nil
}

// longestNumber is the longest JSON form of a float64: -1.2345678901234567e-308.
const longestNumber = 24

// scalarSize is the JSON length of a scalar: a quoted string for !!str (and the tags that
// become strings), the literal for null and booleans, and for numbers at least their text and
// at most a float64's longest JSON form.
func scalarSize(n *yaml.Node) int64 {
	switch n.ShortTag() {
	case "!!null":
		return 4
	case "!!bool":
		return 5
	case "!!int", "!!float":
		return max(int64(len(n.Value)), longestNumber)
	}
	s := stringSize(n.Value)
	if n.Style == 0 && n.ShortTag() == "!!str" {
		// sigs.k8s.io/yaml decodes YAML 1.1, where some plain scalars YAML 1.2 reads as strings
		// are booleans ("y", "off": at most 5 bytes) or numbers ("0o17", "1_000", "1:30").
		s = max(s, 5)
		if n.Value != "" && strings.ContainsRune("0123456789+-.", rune(n.Value[0])) &&
			strings.Trim(n.Value, "0123456789_:+-.xXoOabcdefABCDEF") == "" {
			s = max(s, longestNumber)
		}
	}
	return s
}

// stringSize is the length of s as a JSON string without HTML escaping: quotes, two-byte
// escapes for '"', '\\' and the common controls, \u00XX for the other controls and for each
// byte of invalid UTF-8 (\ufffd), \u2028 and \u2029 (which encoding/json escapes).
func stringSize(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += int64(w)
		}
		i += w
	}
	return n
}
