package source

import (
	"os"
	"path/filepath"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// writeFileAtomic replaces dir/name with data so that a crash at any point leaves the old or
// the new content, never a torn file (atomicfile.WriteFile).
func writeFileAtomic(dir, name string, data []byte) error {
	return atomicfile.WriteFile(filepath.Join(dir, name), data)
}

// removeFileDurable removes dir/name (a missing file is fine) and fsyncs dir.
func removeFileDurable(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return atomicfile.SyncDir(dir)
}
