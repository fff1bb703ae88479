package manifest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzCheckBounds: CheckBounds never panics, and a one-document manifest it accepts decodes
// (as the pod decoder converts YAML) to JSON within MaxDocumentJSONBytes: the measure on the
// node graph is an upper bound of the real size.
func FuzzCheckBounds(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
		"a: &x [1, 2]\nb: [*x, *x]\n",
		"a: &a [*a]\n",
		"a: y\nb: 0x1F\nc: 2001-12-14\nd: 1_000\ne: 1:30\nf: .inf\n",
		"a: \"<>&\\u2028\\x01\"\n",
		"l0: &l0 lol\nl1: &l1 [*l0,*l0,*l0]\nl2: [*l1,*l1,*l1]\n",
		"{\"a\": [1, 2.5e3, null, true]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckBounds(data) != nil || bytes.Contains(data, []byte("---")) || bytes.Contains(data, []byte("...")) {
			return
		}
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal(j, &v) != nil {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) != nil {
			return
		}
		if n := buf.Len() - 1; n > MaxDocumentJSONBytes {
			t.Fatalf("accepted a document of %d bytes as JSON: %s", n, strings.TrimSpace(buf.String()[:min(buf.Len(), 200)]))
		}
	})
}
