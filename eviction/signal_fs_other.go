//go:build !linux

package eviction

import (
	"fmt"
	"time"
)

// ReadFs is Linux-only; elsewhere the filesystem signals are unavailable.
func ReadFs(path string, now time.Time) (bytes Observation, inodes *Observation, err error) {
	return Observation{}, nil, fmt.Errorf("statfs %s: %w", path, ErrUnavailable)
}
