package source

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces dir/name with data so that a crash at any point leaves the old or
// the new content, never a torn file: write a temporary file (tempPrefix, same directory, so
// the rename stays on one filesystem), fsync it, rename it over the target, fsync the
// directory (the rename is durable only once the directory entry is on disk).
func writeFileAtomic(dir, name string, data []byte) error {
	final := filepath.Join(dir, name)
	f, err := os.CreateTemp(dir, tempPrefix+name+"-")
	if err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	tmp := f.Name()
	err = func() error {
		if _, err := f.Write(data); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return fmt.Errorf("fsync: %w", err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.Rename(tmp, final)
	}()
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", final, err)
	}
	return syncDir(dir)
}

// removeFileDurable removes dir/name (a missing file is fine) and fsyncs dir.
func removeFileDurable(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so renames and removals in it survive a crash.
func syncDir(dir string) error {
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
