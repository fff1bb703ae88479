// Package atomicfile replaces files so that a crash at any point leaves the old or the new
// content, never a torn file: the state and records files slicelet keeps across restarts.
package atomicfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of a temporary file being written: TempPrefix + the target's base
// name + "-" + a random suffix, in the target's directory. One left over is from a crash and
// may be removed.
const TempPrefix = ".tmp-"

// WriteFile replaces path with data: it writes a temporary file in the same directory (so the
// rename stays on one filesystem), fsyncs it, renames it over path and fsyncs the directory
// (the rename is durable only once the directory entry is on disk). The directory must exist;
// the file gets mode 0600. On an error the temporary file is removed and path is left as it
// was, unless only the final fsync of the directory failed.
func WriteFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+filepath.Base(path)+"-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// WriteJSON replaces path with v as indented JSON and a final newline (WriteFile).
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFile(path, append(data, '\n'))
}

// SyncDir fsyncs a directory, so that renames, creations and removals in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
