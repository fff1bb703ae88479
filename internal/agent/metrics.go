package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/units"
)

// systemdObserver feeds every systemd operation of units.Manager into
// slicelet_systemd_operation_duration_seconds. The unit name is dropped: one series per unit
// would grow without bound.
func systemdObserver(ops *metrics.SystemdOperations) units.ObserveFunc {
	return func(op, _ string, d time.Duration, err error) {
		ops.Observe(op, units.ResultOf(err), d)
	}
}

// listenMetrics binds the metrics address ([metrics] address), so a bad or busy address fails
// the start like the API socket does. It returns the function that serves until its context
// ends; with metrics off (empty address) that function returns at once.
func listenMetrics(m *metrics.Metrics, address string, log *slog.Logger) (serve func(context.Context), err error) {
	log = log.With("component", "metrics")
	srv, err := m.Listen(address, log)
	if err != nil {
		return nil, err
	}
	if srv == nil {
		log.Info("metrics off ([metrics] address is empty)")
		return func(context.Context) {}, nil
	}
	log.Info("serving metrics", "address", address, "listen", srv.Addr().String())
	return func(ctx context.Context) {
		if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
			log.Error("metrics server stopped", "error", err)
		}
	}, nil
}
