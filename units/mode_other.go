//go:build !linux

package units

import (
	"errors"
	"fmt"
)

// DetectMode reports ModeUnknown: cgroups exist only on Linux.
func DetectMode(cgroupRoot string) (Mode, error) {
	return ModeUnknown, fmt.Errorf("cgroup root %q: %w", cgroupRoot, errors.ErrUnsupported)
}
