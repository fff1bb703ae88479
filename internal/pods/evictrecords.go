package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// EvictionsDir is where evictions are recorded, relative to the state directory.
const EvictionsDir = "pods/evicted"

// EvictionRecord is an eviction as kept on disk: enough to show the pod evicted again after a
// restart, and never to start it again by itself.
type EvictionRecord struct {
	UID         string            `json:"uid"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Message     string            `json:"message"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Time        time.Time         `json:"time"`
}

// EvictionRecords keeps one small file per evicted pod in a directory, written atomically and
// fsynced before the pod is stopped (EvictPod), so that an evicted pod never comes back by
// itself after slicelet restarts; a record goes once no source wants its pod any more (deleted
// through the API, its manifest changed or removed).
type EvictionRecords struct {
	dir string
}

// NewEvictionRecords returns the records kept in dir (created when needed).
func NewEvictionRecords(dir string) *EvictionRecords { return &EvictionRecords{dir: dir} }

// path is a record's file: a hash of the UID (a file pod's metadata.uid may be any string).
func (e *EvictionRecords) path(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return filepath.Join(e.dir, hex.EncodeToString(sum[:16])+".json")
}

// Save writes r durably: on disk (file and directory fsynced) when it returns nil.
func (e *EvictionRecords) Save(r EvictionRecord) error {
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return fmt.Errorf("eviction record: %w", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("eviction record of pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	if err := atomicfile.WriteFile(e.path(r.UID), data); err != nil {
		return fmt.Errorf("eviction record of pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

// Load returns every record by UID. A record that does not decode is an error naming it (and is
// skipped): it is kept, so a later fix finds it.
func (e *EvictionRecords) Load() (map[string]EvictionRecord, error) {
	entries, err := os.ReadDir(e.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]EvictionRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eviction records: %w", err)
	}
	out := map[string]EvictionRecord{}
	var errs []error
	for _, ent := range entries {
		path := filepath.Join(e.dir, ent.Name())
		if strings.HasPrefix(ent.Name(), atomicfile.TempPrefix) {
			_ = os.Remove(path) // an interrupted write: its pod was not stopped yet
			continue
		}
		data, err := os.ReadFile(path)
		var r EvictionRecord
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err == nil && r.UID == "" {
			err = errors.New("no uid")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("eviction record %s: %w", path, err))
			continue
		}
		out[r.UID] = r
	}
	return out, errors.Join(errs...)
}

// Remove deletes the record of uid (none is fine), durably.
func (e *EvictionRecords) Remove(uid string) error {
	if err := os.Remove(e.path(uid)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("eviction record: %w", err)
	}
	return atomicfile.SyncDir(e.dir)
}
