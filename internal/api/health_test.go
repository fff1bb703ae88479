package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/slicelet/slicelet/internal/health"
)

// TestHealthEndpoints: /healthz and /readyz answer from the health tracker, and GET /v1/node
// carries its state.
func TestHealthEndpoints(t *testing.T) {
	loop := &health.Warnable{Code: "eviction-loop", Title: "eviction loop", Severity: health.SeverityCritical, Watchdog: true}
	rt := &health.Warnable{Code: "runtime", Title: "container runtime", Severity: health.SeverityCritical}
	tr := health.New(health.Options{})
	tr.Register(loop, rt)
	tr.SetHealthy(loop)
	tr.SetUnhealthy(rt, "connection refused")
	_, c := startServerWith(t, newFakeBackend(), 0, Options{Health: tr})
	ctx := context.Background()
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health with a live loop and the runtime down: %v", err)
	}
	resp, err := c.do(ctx, http.MethodGet, "/readyz", nil)
	if resp != nil {
		resp.Body.Close()
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the runtime down = %v, %v; want 503", resp, err)
	}
	n, err := c.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Health) != 2 || n.Health[1].Code != "runtime" || n.Health[1].Status != health.StatusUnhealthy || n.Health[1].Message != "connection refused" {
		t.Errorf("node health = %+v", n.Health)
	}
	tr.SetUnhealthy(loop, "stuck")
	if err := c.Health(ctx); !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable {
		t.Errorf("Health with a stuck loop = %v, want 503", err)
	}
}
