package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// aliasBomb is a ~300 KB document whose aliases expand to about 2 GB of JSON: one 100 KB
// anchored string, referred to 20000 times.
func aliasBomb() []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations:\n    a: &s \"")
	b.WriteString(strings.Repeat("x", 100<<10))
	b.WriteString("\"\nspec:\n  containers:\n  - name: c\n    image: i\n    args: [")
	for i := range 20000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("*s")
	}
	b.WriteString("]\n")
	return []byte(b.String())
}

func TestCheckBoundsAliasBombRefusedFastInBoundedMemory(t *testing.T) {
	bomb := aliasBomb()
	if len(bomb) < 150<<10 || len(bomb) > 400<<10 {
		t.Fatalf("bomb is %d bytes, want ~300 KB", len(bomb))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := CheckBounds(bomb)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1.5 MiB") {
		t.Fatalf("CheckBounds(bomb) = %v, want ErrTooLarge naming the 1.5 MiB limit", err)
	}
	// Linear in the input: a few MB of nodes, never the 2 GB expansion.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("CheckBounds allocated %d bytes for a %d-byte input, want < 64 MiB", alloc, len(bomb))
	}
	t.Logf("refused in %v, %d bytes allocated", elapsed, after.TotalAlloc-before.TotalAlloc)
}

// nested is the classic billion laughs: each level lists ten aliases of the previous one.
func nested(levels int) []byte {
	var b strings.Builder
	b.WriteString("l0: &l0 \"lol\"\n")
	for i := 1; i <= levels; i++ {
		b.WriteString("l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("*l" + strconv.Itoa(i-1))
		}
		b.WriteString("]\n")
	}
	return []byte(b.String())
}

func TestCheckBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr string // "" for no error
		tooBig  bool
	}{
		{name: "pod", data: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i}]\n")},
		{name: "json pod", data: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`)},
		{name: "empty", data: nil},
		{name: "comments only", data: []byte("# nothing\n---\n# still nothing\n")},
		{name: "small aliases", data: nested(3)},
		{name: "billion laughs", data: nested(12), wantErr: "document 0: more than 1572864 bytes as JSON", tooBig: true},
		{name: "second document too large", data: []byte("a: 1\n---\nb: \"" + strings.Repeat("<", 2<<20) + "\"\n"), wantErr: "document 1: more than", tooBig: true},
		{name: "input over 3 MiB", data: bytes.Repeat([]byte("#"), 3<<20+1), wantErr: "3145729 bytes, the limit is 3145728 (3 MiB", tooBig: true},
		{name: "dense flow sequence", data: []byte("a: [" + strings.Repeat("1,", 1<<20) + "1]\n"), wantErr: "more than 100000 YAML nodes", tooBig: true},
		{name: "separators in quoted strings do not count", data: []byte("a: \"" + strings.Repeat(",[{", 1<<18) + "\"\nb: '" + strings.Repeat("{,''", 1<<17) + "'\n")},
		{name: "alias cycle", data: []byte("a: &a [1, *a]\n"), wantErr: "an alias refers to a node that contains it"},
		{name: "quantity exponent that stalls the parser", data: []byte("spec:\n  containers:\n  - resources: {limits: {memory: 12E45678901234}}\n"), wantErr: "line 3 column 34: number \"12E45678901234\": exponent beyond ±100"},
		{name: "slow negative exponent, quoted", data: []byte("a: \"1e-1000000\"\n"), wantErr: "exponent beyond ±100"},
		{name: "largest exponent", data: []byte("a: 1e100\nb: 1e-100\nc: 1e\nd: 5E\ne: 1e1x\n")},
		{name: "syntax error", data: []byte("a: [1, 2\n"), wantErr: "document 0: yaml:"},
		{name: "escapes counted", data: []byte("a: \"" + strings.Repeat("\\u0001", MaxDocumentJSONBytes/6) + "\"\n"), wantErr: "more than", tooBig: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBounds(tc.data)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckBounds: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckBounds = %v, want an error containing %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrTooLarge); got != tc.tooBig {
				t.Errorf("errors.Is(err, ErrTooLarge) = %v, want %v", got, tc.tooBig)
			}
		})
	}
}

// TestJSONSizeExact: for documents of strings (quoted, or plain ones that cannot be YAML 1.1
// booleans or numbers), mappings and sequences the measured size is the length of the compact JSON, without HTML escaping, that the document decodes to.
func TestJSONSizeExact(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"flat", "a: bbbbb\nc: ddddd\n"},
		{"short plain strings may be YAML 1.1 booleans", "a: \"b\"\nc: \"d\"\n"},
		{"nested", "a: {b: [xyzzyz, \"y\", {z: wwwwww}]}\n"},
		{"escapes", "a: \"q\\\"b\\\\s\\n\\t\\u0001<>&\"\n"},
		{"unicode", "a: \"é漢\\u2028\"\n"},
		{"aliases", "a: &x {k: [vvvvv, wwwww]}\nb: *x\nc: [*x, *x]\n"},
		{"empty collections", "a: {}\nb: []\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := yaml.YAMLToJSON([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(j, &v); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			want := int64(buf.Len() - 1) // the encoder's newline
			got, err := documentSize([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("size = %d, want %d (%s)", got, want, buf.String())
			}
		})
	}
}

// documentSize measures the first document of data.
func documentSize(data []byte) (int64, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return 0, err
	}
	m := measurer{sizes: map[*yaml3.Node]int64{}, active: map[*yaml3.Node]bool{}}
	return m.size(&doc)
}
