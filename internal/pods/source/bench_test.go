package source

import (
	"fmt"
	"testing"
)

// BenchmarkManifestDirScan measures a scan of a directory of 1000 one-pod manifests: the first
// read (every file parsed) and a rescan of the unchanged directory (read and hashed only).
func BenchmarkManifestDirScan(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("pod-%04d.yaml", i)] = podYAML(fmt.Sprintf("pod-%04d", i), "  restartPolicy: Always\n")
	}
	writeFiles(b, dir, files)
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if s := m.Scan(); len(s.Pods) != 1000 {
				b.Fatalf("%d pods", len(s.Pods))
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		m.Scan()
		for b.Loop() {
			if s := m.Scan(); len(s.Pods) != 1000 {
				b.Fatalf("%d pods", len(s.Pods))
			}
		}
	})
}
