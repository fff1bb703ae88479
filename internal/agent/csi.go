//go:build !nocluster

package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/slicelet/slicelet/internal/cluster"
	"github.com/slicelet/slicelet/internal/pods/csi"
)

// csiPlugin is cluster mode's CSI volume plugin: the drivers' registrations and the pods' CSI
// volumes, and the CSINode object the drivers are recorded in.
type csiPlugin struct {
	m     *csi.Manager
	nodes *cluster.CSINodeInfo
}

// newCSI builds the CSI plugin under csi.root_dir; nil in stand-alone mode, where no pod may
// use a CSI volume (no API server gives a driver's CSIDriver object or binds a claim).
func newCSI(d *daemon, log *slog.Logger) *csiPlugin {
	if d.conn == nil {
		return nil
	}
	root := d.cfg.CSIRootDir()
	nodes := cluster.NewCSINodeInfo(d.conn.clients, d.nodeName)
	return &csiPlugin{nodes: nodes, m: csi.New(csi.Options{
		RegistryDir: filepath.Join(root, "plugins_registry"),
		PluginsDir:  filepath.Join(root, "plugins"),
		PodsDir:     filepath.Join(root, "pods"),
		NodeName:    d.nodeName,
		API:         d.conn.objs,
		NodeInfo:    nodes,
		Tokens:      d.conn.objs.CSIToken,
		Logger:      log.With("component", "csi"),
	})}
}

// start watches the registration directory (a failure is logged: the node runs without CSI
// drivers) and creates the node's CSINode once the Node exists, retrying until it does.
func (p *csiPlugin) start(ctx context.Context, log *slog.Logger) {
	if p == nil {
		return
	}
	if err := p.m.Start(ctx); err != nil {
		log.Error("csi drivers off", "error", err)
	}
	go csi.Retry(ctx, func() error { return p.nodes.Initialize(ctx) }, func(err error, wait time.Duration) {
		log.Warn("CSINode not created yet", "error", err, "retry_in", wait)
	})
}
