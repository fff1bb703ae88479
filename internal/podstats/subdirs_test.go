package podstats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSubdirs: the subdirectories os.ReadDir finds, sorted, and nothing else (files, a
// symlink to a directory); enough entries to take several getdents calls; a missing
// directory is fs.ErrNotExist.
func TestSubdirs(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 {
		name := fmt.Sprintf("child-%03d.service", i)
		if i%3 == 0 {
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			want = append(want, name)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, want[0]), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := subdirs(dir)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("subdirs = %v, %v; want %v", got, err, want)
	}
	if _, err := subdirs(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: %v, want fs.ErrNotExist", err)
	}
}
