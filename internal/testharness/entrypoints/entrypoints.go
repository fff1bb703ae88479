// Package entrypoints holds the manifests every way a manifest reaches slicelet must judge
// alike (testdata/entrypoints: a UTF-8 byte-order mark, CRLF line ends, pods the API's
// validation refuses...) and the verdict of internal/manifest's Read on each, for the tests of
// the manifest directory, the local API, `slicectl apply --dry-run`, `slicectl explain` and the
// oracle's slicelet side to compare theirs with.
package entrypoints

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/manifest"
)

// Case is one manifest and manifest.Read's verdict on it.
type Case struct {
	// File is the manifest's base name, Path its absolute path, Data its bytes.
	File, Path string
	Data       []byte
	// Accepted is whether Read accepted it; Pods are then the pods' "namespace/name".
	Accepted bool
	Pods     []string
	// Problems are Read's errors, one per problem, without the leading file name.
	Problems []string
}

// Load reads every manifest of dir (testdata/entrypoints) and Read's verdict on each, as the
// manifest directory reads them (name and source the absolute path).
func Load(t testing.TB, dir string) []Case {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []Case
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c := Case{File: e.Name(), Path: p, Data: data}
		m, err := manifest.Read(p, p, data)
		if err == nil {
			c.Accepted = true
			for _, pod := range m.Pods {
				c.Pods = append(c.Pods, pod.Namespace+"/"+pod.Name)
			}
		} else {
			for _, line := range strings.Split(err.Error(), "\n") {
				c.Problems = append(c.Problems, strings.TrimPrefix(line, p+": "))
			}
		}
		cases = append(cases, c)
	}
	if len(cases) < 5 {
		t.Fatalf("%s holds %d manifests; want the whole set", dir, len(cases))
	}
	return cases
}

// Check compares an entry point's verdict on c with Read's: the same acceptance, the same pods
// when accepted, and every one of Read's problems in msg when refused.
func (c Case) Check(t testing.TB, entry string, accepted bool, pods []string, msg string) {
	t.Helper()
	if accepted != c.Accepted {
		t.Errorf("%s: %s accepted=%v (%s), manifest.Read accepted=%v (%v)", c.File, entry, accepted, msg, c.Accepted, c.Problems)
		return
	}
	if accepted {
		got, want := append([]string(nil), pods...), append([]string(nil), c.Pods...)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: %s pods %v, manifest.Read %v", c.File, entry, got, want)
		}
		return
	}
	for _, p := range c.Problems {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: %s refused without %q:\n%s", c.File, entry, p, msg)
		}
	}
}
