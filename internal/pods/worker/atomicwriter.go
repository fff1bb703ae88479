package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fileProjection is one file of a volume's payload.
type fileProjection struct {
	Data []byte
	Mode fs.FileMode
}

// dataDir is the symlink to the current payload (pkg/volume/util/atomic_writer.go's ..data).
const dataDir = "..data"

// writePayload makes dir hold payload (relative path → file) the way the kubelet's
// AtomicWriter does, so a reader never sees a mix of two versions: the files go to a new
// timestamped directory ..<time>, a ..data_tmp symlink to it is renamed over ..data, and every
// top-level entry of the payload is a symlink <name> → ..data/<name>; the previous timestamped
// directory and entries no longer in the payload are removed. A payload equal to the current
// one changes nothing. The timestamped directory is named after now. gid, when not -1, owns what is written (fsGroup). It reports whether it
// wrote.
func writePayload(dir string, payload map[string]fileProjection, gid int, now time.Time) (bool, error) {
	for p := range payload {
		if err := checkPayloadPath(p); err != nil {
			return false, err
		}
	}
	// The pod's state directories stay private (0750); the volume itself is bind-mounted, so
	// only its own mode (0755) matters to the containers' users.
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return false, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	old, _ := os.Readlink(filepath.Join(dir, dataDir))
	if old != "" && samePayload(filepath.Join(dir, old), payload) {
		return false, nil
	}
	ts, err := os.MkdirTemp(dir, ".."+now.UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		return false, err
	}
	for p, f := range payload {
		path := filepath.Join(ts, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(path, f.Data, f.Mode); err != nil {
			return false, err
		}
		if err := os.Chmod(path, f.Mode); err != nil { // not masked by the umask
			return false, err
		}
	}
	if gid != -1 {
		if err := filepath.WalkDir(ts, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, -1, gid)
		}); err != nil {
			return false, err
		}
	}
	tmp := filepath.Join(dir, dataDir+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDir)); err != nil {
		return false, err
	}
	// The user-visible entries: the payload's top-level names.
	top := map[string]bool{}
	for p := range payload {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataDir, name) {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDir, name), link); err != nil {
			return false, err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case n == dataDir || n == filepath.Base(ts):
		case strings.HasPrefix(n, ".."):
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return false, err
			}
		case !top[n]:
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// checkPayloadPath refuses paths that would leave the volume or hide the writer's entries:
// absolute, with "..", or starting with "..".
func checkPayloadPath(p string) error {
	switch {
	case p == "" || filepath.IsAbs(p):
		return fmt.Errorf("path %q: must be a relative path", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("path %q: must not start with '..'", p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." || e == "" {
			return fmt.Errorf("path %q: must not contain '..' or empty elements", p)
		}
	}
	return nil
}

// samePayload reports whether dir holds exactly payload.
func samePayload(dir string, payload map[string]fileProjection) bool {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f, ok := payload[rel]
		if !ok {
			return errors.New("extra")
		}
		fi, err := d.Info()
		if err != nil || fi.Mode().Perm() != f.Mode.Perm() {
			return errors.New("mode")
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(data, f.Data) {
			return errors.New("data")
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}
