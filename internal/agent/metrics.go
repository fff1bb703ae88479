package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/buildinfo"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/units"
)

// newMetrics returns the daemon's metrics. It is built before systemd is connected, so the
// units observer (systemdObserver) records every D-Bus operation from the first one on; it
// costs nothing to serve when metrics are off.
func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Options{Version: buildinfo.Version})
}

// systemdObserver feeds every systemd operation of units.Manager into
// slicelet_systemd_operation_duration_seconds. The unit name is dropped: one series per unit
// would grow without bound.
func systemdObserver(m *metrics.Metrics) units.ObserveFunc {
	return func(op, _ string, d time.Duration, err error) {
		m.ObserveSystemd(op, units.ResultOf(err), d)
	}
}

// startMetrics makes every scrape count the pods of ctrl (the pod controller: slicelet_pods by
// QoS class and phase, slicelet_pods_rejected by reason) and binds cfg.Metrics.Address, so a
// bad or busy address fails the start like the API socket does. It returns the function that
// serves until its context ends; with metrics off (empty address) that function returns at
// once.
func startMetrics(m *metrics.Metrics, cfg *config.Config, ctrl metrics.PodSource, log *slog.Logger) (serve func(context.Context), err error) {
	m.SetPodSource(ctrl)
	log = log.With("component", "metrics")
	srv, err := m.Listen(cfg.Metrics.Address, log)
	if err != nil {
		return nil, err
	}
	if srv == nil {
		log.Info("metrics off ([metrics] address is empty)")
		return func(context.Context) {}, nil
	}
	log.Info("serving metrics", "address", cfg.Metrics.Address, "listen", srv.Addr().String())
	return func(ctx context.Context) {
		if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
			log.Error("metrics server stopped", "error", err)
		}
	}, nil
}
