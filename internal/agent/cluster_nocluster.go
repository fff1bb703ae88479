//go:build nocluster

package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// clusterMode is cluster mode as the daemon runs it; this binary was built without it (build
// tag nocluster: no client-go in the daemon).
type clusterMode interface {
	Run(ctx context.Context)
	// Kick tells it the pod controller's pods changed: their statuses go to the API server
	// now, not at its next periodic sync.
	Kick()
	worker.EventRecorder
}

// newCluster refuses [cluster] enabled: this binary was built without cluster mode.
func newCluster(d *daemon, _ string, _ []string, _ *slog.Logger) (clusterMode, error) {
	if d.cfg.Cluster.Enabled {
		return nil, errors.New("cluster.enabled: this slicelet was built without cluster mode (build tag nocluster)")
	}
	return nil, nil
}
