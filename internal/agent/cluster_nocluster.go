//go:build nocluster

package agent

import (
	"context"
	"errors"
	"log/slog"

	v1 "k8s.io/api/core/v1"

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

// clusterNode is nil: without cluster mode there is no Node object (pods with node selectors
// or affinity are refused at validation).
func (d *daemon) clusterNode() *v1.Node { return nil }

// newCluster refuses [cluster] enabled: this binary was built without cluster mode.
func newCluster(d *daemon, _ string, _ []string, _ *slog.Logger) (clusterMode, error) {
	if d.cfg.Cluster.Enabled {
		return nil, errors.New("cluster.enabled: this slicelet was built without cluster mode (build tag nocluster)")
	}
	return nil, nil
}
