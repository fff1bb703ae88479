package eviction

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/slicelet/slicelet/internal/procfs"
	"github.com/slicelet/slicelet/units"
)

// This file holds the small file readers the signal readers share. Every path is built from
// an injected root; nothing here knows /sys/fs/cgroup or /proc.

// controllerDir returns the directory of cgroupPath (e.g. "/kubepods.slice", "/" for the
// root) for a v1 controller: on cgroup v2 every controller lives in the one unified tree; on
// v1 and hybrid hosts each controller has its own hierarchy under <root>/<controller>.
func controllerDir(cgroupRoot string, mode units.Mode, controller, cgroupPath string) (string, error) {
	switch mode {
	case units.ModeUnified:
		return filepath.Join(cgroupRoot, cgroupPath), nil
	case units.ModeLegacy, units.ModeHybrid:
		return filepath.Join(cgroupRoot, controller, cgroupPath), nil
	default:
		return "", fmt.Errorf("cgroup mode %v: %w", mode, ErrUnavailable)
	}
}

// readFile reads a small kernel file (cgroupfs, procfs) and returns parse's result on its
// content, which parse must not keep; a missing file is ErrUnavailable (a kernel without the
// feature or a cgroup that is gone), anything else a real error naming the path.
func readFile[T any](path string, parse func(b []byte) (T, error)) (T, error) {
	v, err := readFileAt(fileAt{name: path}, parse)
	if err == ErrUnavailable {
		err = fmt.Errorf("%s: %w", path, ErrUnavailable)
	}
	return v, err
}

// fileAt is a file's path in parts: a root, a controller's hierarchy (v1; "" on v2 and for
// other files), a cgroup path and a file name, joined with "/" (empty parts left out) only
// when the file is opened, in readFileAt's pooled buffer: the per-cgroup reads of every
// sample build no path string.
type fileAt struct{ root, controller, cgroup, name string }

// cgroupFile is the file name of cgroupPath for the controller in mode (controllerDir's
// layout).
func cgroupFile(root string, mode units.Mode, controller, cgroupPath, name string) fileAt {
	if mode == units.ModeUnified {
		controller = ""
	}
	return fileAt{root, controller, cgroupPath, name}
}

// String is the file's path, for errors.
func (f fileAt) String() string { return filepath.Join(f.root, f.controller, f.cgroup, f.name) }

// appendPath appends the file's path and a NUL (the system call's string) to b.
func (f fileAt) appendPath(b []byte) []byte {
	for _, part := range [...]string{f.root, f.controller, f.cgroup, f.name} {
		if part == "" {
			continue
		}
		if len(b) > 0 && b[len(b)-1] != '/' && part[0] != '/' {
			b = append(b, '/')
		}
		b = append(b, part...)
	}
	return append(b, 0)
}

// named is err with the file's path where it is ErrUnavailable itself (readFileAt's missing
// file).
func (f fileAt) named(err error) error {
	if err == ErrUnavailable {
		return fmt.Errorf("%s: %w", f, ErrUnavailable)
	}
	return err
}

// readFileAt is readFile of f, except that a missing file is ErrUnavailable itself (f.named
// adds the path where the error is reported, not where it is only tested). It reads into a
// pooled buffer with plain system calls, the path composed in the same buffer: os.ReadFile
// would allocate the path's C string, a buffer of the size kernfs reports (4 KiB) and an
// *os.File, and register the file with the runtime's poller, for each of the per-pod reads of
// every eviction and stats cycle.
func readFileAt[T any](f fileAt, parse func(b []byte) (T, error)) (T, error) {
	var zero T
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	b := f.appendPath((*bp)[:0])
	*bp = b
	fd, err := openPath(b)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return zero, ErrUnavailable
		}
		return zero, &fs.PathError{Op: "open", Path: f.String(), Err: err}
	}
	defer syscall.Close(fd)
	b = b[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			*bp = b
			return zero, &fs.PathError{Op: "read", Path: f.String(), Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	*bp = b
	return parse(b)
}

// readBuffers are readFile's buffers.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4096)
	return &b
}}

// readUint reads a file holding one unsigned integer; "max" (cgroup v2's "no limit") reads
// as -1.
func readUint(path string) (int64, error) {
	v, err := readUintAt(fileAt{name: path})
	if err == ErrUnavailable {
		err = fmt.Errorf("%s: %w", path, ErrUnavailable)
	}
	return v, err
}

// readUintAt is readUint of f, a missing file ErrUnavailable itself (readFileAt).
func readUintAt(f fileAt) (int64, error) {
	return readFileAt(f, func(b []byte) (int64, error) {
		s := bytes.TrimSpace(b)
		if string(s) == "max" {
			return -1, nil
		}
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: value %q is not a number", f, s)
		}
		if v > 1<<63-1 {
			v = 1<<63 - 1
		}
		return int64(v), nil
	})
}

// readKeyValues reads a flat "key value" file such as memory.stat; given keys, it keeps only
// those (the per-pod reads of every cycle need one or two of memory.stat's forty lines) and
// allocates nothing for the other lines.
func readKeyValues(path string, keys ...string) (map[string]int64, error) {
	return readFile(path, func(b []byte) (map[string]int64, error) {
		out := make(map[string]int64, len(keys))
		err := eachKeyValue(b, keys, func(k []byte, n int64) { out[string(k)] = n })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return out, nil
	})
}

// eachKeyValue calls f with each line of a flat "key value" file whose key is one of keys
// (every line for none).
func eachKeyValue(b []byte, keys []string, f func(k []byte, v int64)) error {
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		if !ok || (len(keys) > 0 && !hasKey(keys, k)) {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: value %q is not a number", k, v)
		}
		if n > 1<<63-1 {
			n = 1<<63 - 1
		}
		f(k, int64(n))
	}
	return nil
}

// maxKeys is the most keys a keyValues holds.
const maxKeys = 8

// keyValues are the values of the keys read of a flat "key value" file (readKeysAt): a
// fixed array, where a map would allocate itself and a string per key at each read. A key
// the file does not have is 0.
type keyValues struct {
	keys []string
	vals [maxKeys]int64
}

// get is the value of key k.
func (kv *keyValues) get(k string) int64 {
	for i, key := range kv.keys {
		if key == k {
			return kv.vals[i]
		}
	}
	return 0
}

// readKeysAt reads the keys (at most maxKeys; a package variable, so that nothing escapes) of
// the flat "key value" file f, a missing file ErrUnavailable itself (readFileAt).
func readKeysAt(f fileAt, keys []string) (keyValues, error) {
	return readFileAt(f, func(b []byte) (keyValues, error) {
		kv := keyValues{keys: keys[:min(len(keys), maxKeys)]}
		err := eachKeyValue(b, kv.keys, func(k []byte, n int64) {
			for i, key := range kv.keys {
				if string(k) == key {
					kv.vals[i] = n
				}
			}
		})
		if err != nil {
			return keyValues{}, fmt.Errorf("%s: %w", f, err)
		}
		return kv, nil
	})
}

// hasKey reports whether k is one of keys (comparing without converting k to a string).
func hasKey(keys []string, k []byte) bool {
	for _, key := range keys {
		if string(k) == key {
			return true
		}
	}
	return false
}

// procfsError turns what the kernel does not provide (a missing file or line) into
// ErrUnavailable naming the file: a missing feature, not a failure.
func procfsError(err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", pe.Path, ErrUnavailable)
	case errors.Is(err, procfs.ErrNoValue):
		return fmt.Errorf("%w (%w)", err, ErrUnavailable)
	}
	return err
}

// CgroupDir is the directory of cgroupPath for a controller (controllerDir), for readers
// outside this package that walk a cgroup's children (podstats).
func CgroupDir(cgroupRoot string, mode units.Mode, controller, cgroupPath string) (string, error) {
	return controllerDir(cgroupRoot, mode, controller, cgroupPath)
}
