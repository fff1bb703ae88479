//go:build !linux

package podstats

import (
	"fmt"

	"github.com/slicelet/slicelet/eviction"
)

// statFS reports that filesystem stats are read on Linux only.
func statFS(path string) (VolumeUsage, error) {
	return VolumeUsage{}, fmt.Errorf("statfs %s: %w", path, eviction.ErrUnavailable)
}
