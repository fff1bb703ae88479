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
// feature or a cgroup that is gone), anything else a real error naming the path. It reads into
// a pooled buffer with plain system calls: os.ReadFile would allocate a buffer of the size
// kernfs reports (4 KiB) and an *os.File, and register the file with the runtime's poller, for
// each of the per-pod reads of every eviction and stats cycle.
func readFile[T any](path string, parse func(b []byte) (T, error)) (T, error) {
	var zero T
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return zero, fmt.Errorf("%s: %w", path, ErrUnavailable)
		}
		return zero, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	b := (*bp)[:0]
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
			return zero, &fs.PathError{Op: "read", Path: path, Err: err}
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
	return readFile(path, func(b []byte) (int64, error) {
		s := bytes.TrimSpace(b)
		if string(s) == "max" {
			return -1, nil
		}
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: value %q is not a number", path, s)
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
		for line := range bytes.Lines(b) {
			k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
			if !ok || (len(keys) > 0 && !hasKey(keys, k)) {
				continue
			}
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: value %q is not a number", path, k, v)
			}
			if n > 1<<63-1 {
				n = 1<<63 - 1
			}
			out[string(k)] = int64(n)
		}
		return out, nil
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
