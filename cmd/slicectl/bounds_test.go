package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/manifest"
)

// TestReadDocumentsBounded: slicectl decodes manifests locally (names, explain), so it bounds
// them first: a ~300 KB alias bomb and a file over 3 MiB are refused before any decoding.
func TestReadDocumentsBounded(t *testing.T) {
	dir := t.TempDir()
	bomb := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations: {a: &s \"" + strings.Repeat("x", 100<<10) + "\"}\n" +
		"spec:\n  containers:\n  - name: c\n    args: [*s" + strings.Repeat(",*s", 20000) + "]\n"
	for _, tc := range []struct{ name, content, want string }{
		{"bomb.yaml", bomb, "bomb.yaml: manifest too large: document 0: more than 1572864 bytes as JSON"},
		{"huge.yaml", "# " + strings.Repeat("x", manifest.MaxInputBytes), "huge.yaml: manifest too large: more than 3145728 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := readDocuments(nil, []string{path}, false)
			if !errors.Is(err, manifest.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readDocuments = %v, want %q", err, tc.want)
			}
			_, err = readPods(nil, []string{path}, false)
			if !errors.Is(err, manifest.ErrTooLarge) {
				t.Errorf("readPods (explain) = %v, want ErrTooLarge", err)
			}
		})
	}
}
