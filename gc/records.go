package gc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// recordsVersion is the format of the records file.
const recordsVersion = 1

// recordsFile is the records file: image ID → what image GC remembers about it.
type recordsFile struct {
	Version int               `json:"version"`
	Images  map[string]Record `json:"images"`
}

// loadRecords reads the records file. A missing file is an empty set; a file that cannot be
// read is an error; a file that is not valid records is reported as corrupt (corrupt true),
// so the caller can move it aside and start fresh.
func loadRecords(path string) (recs map[string]Record, corrupt bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Record{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("image gc records %s: %w", path, err)
	}
	var f recordsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, true, fmt.Errorf("image gc records %s: %w", path, err)
	}
	if f.Version != recordsVersion {
		return nil, true, fmt.Errorf("image gc records %s: version %d, want %d", path, f.Version, recordsVersion)
	}
	// Sizes and pinned flags are refreshed at every detection, so only the keys are checked.
	for id := range f.Images {
		if id == "" {
			return nil, true, fmt.Errorf("image gc records %s: an image with an empty ID", path)
		}
	}
	if f.Images == nil {
		f.Images = map[string]Record{}
	}
	return f.Images, false, nil
}

// saveRecords writes the records file atomically (atomicfile.WriteJSON): a crash leaves the
// old or the new file, never a torn one.
func saveRecords(path string, recs map[string]Record) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("image gc records %s: %w", path, err)
	}
	if err := atomicfile.WriteJSON(path, recordsFile{Version: recordsVersion, Images: recs}); err != nil {
		return fmt.Errorf("image gc records: %w", err)
	}
	return nil
}
