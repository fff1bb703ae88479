package eviction

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// readFile reads a file; a missing file is ErrUnavailable (a kernel without the feature or a
// cgroup that is gone), anything else a real error naming the path.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, ErrUnavailable)
		}
		return nil, err
	}
	return b, nil
}

// readUint reads a file holding one unsigned integer; "max" (cgroup v2's "no limit") reads
// as -1.
func readUint(path string) (int64, error) {
	b, err := readFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: value %q is not a number", path, s)
	}
	if v > 1<<63-1 {
		v = 1<<63 - 1
	}
	return int64(v), nil
}

// readKeyValues reads a flat "key value" file such as memory.stat.
func readKeyValues(path string) (map[string]int64, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: value %q is not a number", path, k, v)
		}
		if n > 1<<63-1 {
			n = 1<<63 - 1
		}
		out[k] = int64(n)
	}
	return out, nil
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
