//go:build !linux

package eviction

import (
	"context"
	"fmt"
)

// walker is the directory walker; measuring directories is implemented on Linux only.
type walker struct{ truncated bool }

func newWalker(context.Context, int, map[string]bool, func(string, []string)) *walker {
	return &walker{}
}

// measure reports that directory measurement is unavailable here.
func (w *walker) measure(root string) (DiskUsage, error) {
	return DiskUsage{}, fmt.Errorf("directory %s: measuring: %w", root, ErrUnavailable)
}
