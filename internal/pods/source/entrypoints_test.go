package source

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/entrypoints"
)

// TestEntryPointsAgree: the manifest directory and the local API's store judge every manifest
// of testdata/entrypoints (a byte-order mark among them) as internal/manifest's Read does.
func TestEntryPointsAgree(t *testing.T) {
	cases := entrypoints.Load(t, filepath.Join("..", "..", "..", "testdata", "entrypoints"))

	t.Run("manifest directory", func(t *testing.T) {
		dir := t.TempDir()
		for _, c := range cases {
			if err := os.WriteFile(filepath.Join(dir, c.File), c.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s := m.Scan()
		for _, c := range cases {
			origin := filepath.Join(dir, c.File)
			var pods []string
			for _, d := range s.Pods {
				if d.Origin == origin {
					pods = append(pods, podKey(d.Pod))
				}
			}
			msg := ""
			for _, p := range s.Problems {
				if p.Origin == origin {
					msg += p.Error + "\n"
				}
			}
			c.Check(t, "manifest directory", msg == "", pods, msg)
		}
	})

	t.Run("local API", func(t *testing.T) {
		store, err := OpenAPIStore(t.TempDir(), APIStoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			pod, err := store.Apply(c.Data, ApplyOptions{DryRun: true})
			var pods []string
			msg := ""
			if err != nil {
				msg = err.Error()
			} else {
				pods = []string{podKey(pod)}
			}
			c.Check(t, "local API", err == nil, pods, msg)
		}
	})
}
