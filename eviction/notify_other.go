//go:build !linux

package eviction

import (
	"context"
	"fmt"
)

// Run implements Notifier; PSI exists on Linux only.
func (p *PSINotifier) Run(context.Context, func()) error {
	return fmt.Errorf("psi: %w", ErrUnavailable)
}

// Run implements Notifier; memory cgroups exist on Linux only.
func (n *MemcgThresholdNotifier) Run(context.Context, func()) error {
	return fmt.Errorf("memory thresholds: %w", ErrUnavailable)
}

// Rearm implements Rearmer; there is nothing to re-arm here.
func (p *PSINotifier) Rearm() {}

// Rearm implements Rearmer; there is nothing to re-arm here.
func (n *MemcgThresholdNotifier) Rearm() {}
