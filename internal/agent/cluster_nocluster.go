//go:build nocluster

package agent

import (
	"context"
	"errors"
	"log/slog"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

// clusterMode is cluster mode as the daemon runs it; this binary was built without it (build
// tag nocluster: no client-go in the daemon).
type clusterMode interface {
	Run(ctx context.Context)
	// Kick tells it the pod controller's pods changed: their statuses go to the API server
	// now, not at its next periodic sync.
	Kick()
}

// clusterNode is nil: without cluster mode there is no Node object (pods with node selectors
// or affinity are refused at validation).
func (d *daemon) clusterNode() *v1.Node { return nil }

// clusterConn is cluster mode's connection; this binary has none.
type clusterConn struct{}

// newClusterConn refuses [cluster] enabled: this binary was built without cluster mode.
func newClusterConn(_ context.Context, cfg *config.Config, _ string, _ *metrics.KubeletFamilies, _ *slog.Logger) (*clusterConn, error) {
	if cfg.Cluster.Enabled {
		return nil, errors.New("cluster.enabled: this slicelet was built without cluster mode (build tag nocluster)")
	}
	return nil, nil
}

// close has nothing to release.
func (c *clusterConn) close() {}

// objects is nil: no cluster pods.
func (c *clusterConn) objects() worker.ClusterObjects { return nil }

// recorder is nil: no API server to send events to.
func (c *clusterConn) recorder() worker.EventRecorder { return nil }

// newCluster is nil: no cluster mode.
func newCluster(*daemon) (clusterMode, error) { return nil, nil }
