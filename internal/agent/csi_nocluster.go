//go:build nocluster

package agent

import (
	"context"
	"log/slog"

	"github.com/slicelet/slicelet/internal/pods/csi"
)

// csiPlugin is cluster mode's CSI volume plugin; this binary has none.
type csiPlugin struct{ m *csi.Manager }

// newCSI is nil: without cluster mode no pod may use a CSI volume.
func newCSI(*daemon, *slog.Logger) *csiPlugin { return nil }

func (*csiPlugin) start(context.Context, *slog.Logger) {}
