package atomicfile

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	cases := []struct {
		name     string
		existing string // "" : no file before
		data     string
	}{
		{"new file", "", "hello\n"},
		{"replaces", "old content that is longer", "new"},
		{"empty", "old", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if c.existing != "" {
				if err := os.WriteFile(path, []byte(c.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte(c.data)); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != c.data {
				t.Errorf("content %q, %v; want %q", got, err, c.data)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
			}
			assertNoTemp(t, dir)
		})
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		path string
		want error
	}{
		{"missing directory", filepath.Join(dir, "missing", "f"), fs.ErrNotExist},
		// The rename over a non-empty directory fails: the old one stays, the temp file goes.
		{"target is a directory", dir, nil},
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := WriteFile(c.path, []byte("x"))
			if err == nil || !strings.Contains(err.Error(), c.path) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("error %v, want one naming %s (%v)", err, c.path, c.want)
			}
			assertNoTemp(t, filepath.Dir(c.path))
		})
	}
}

func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "records.json")
	v := struct {
		Version int               `json:"version"`
		Images  map[string]string `json:"images"`
	}{1, map[string]string{"a": "b"}}
	if err := WriteJSON(path, v); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"version\": 1,\n  \"images\": {\n    \"a\": \"b\"\n  }\n}\n"
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Errorf("content %q, %v; want %q", got, err, want)
	}
	if err := WriteJSON(path, math.NaN()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unencodable value: error %v, want one naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("a failed write changed the file: %q", got)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Error(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if err := SyncDir(missing); err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: %v", err)
	}
}

// assertNoTemp fails when dir holds a temporary file.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
