package corpus

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWalkManifests: manifest files in lexical order, subdirectories included; hidden files
// and other extensions skipped.
func TestWalkManifests(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.yml", "c.json", "notes.txt", ".a.yaml.swp", ".hidden.yaml", "sub/d.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := WalkManifests(dir, func(path string) error {
		rel, _ := filepath.Rel(dir, path)
		got = append(got, rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.yml", "b.yaml", "c.json", "sub/d.yaml"}
	if !slices.Equal(got, want) {
		t.Errorf("walked %q, want %q", got, want)
	}
	if err := WalkManifests(filepath.Join(dir, "missing"), func(string) error { return nil }); err == nil {
		t.Error("a missing directory: no error")
	}
}
