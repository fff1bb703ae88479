package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
)

// TestPrintNodeHealth: `slicectl node` shows the health tracker's state: every part, its
// status and since when, and the message of what is failing.
func TestPrintNodeHealth(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	n := api.NodeInfo{Health: []health.WarnableState{
		{Code: "systemd", Status: health.StatusHealthy, Since: now.Add(-2 * time.Hour)}, // ago() shows minutes up to 3h,
		{Code: "gc-images", Status: health.StatusHealthy, Since: now.Add(-time.Hour), Failures: 1, Message: "runtime: connection refused"},
		{Code: "runtime", Status: health.StatusUnhealthy, Since: now.Add(-5 * time.Minute), Message: "container runtime unavailable"},
		{Code: "gc-timers", Status: health.StatusHealthy, Message: "a note"},
		{Code: "api-store", Status: health.StatusUnknown},
	}}
	var b bytes.Buffer
	printNodeInfo(&b, n, now)
	want := "Health:\n" +
		"  PART       STATUS     SINCE  MESSAGE\n" +
		"  systemd    Healthy    120m   -\n" +
		"  gc-images  Healthy    60m    runtime: connection refused\n" +
		"  runtime    Unhealthy  5m     container runtime unavailable\n" +
		"  gc-timers  Healthy    -      -\n" +
		"  api-store  Unknown    -      -\n"
	if !bytes.Contains(b.Bytes(), []byte(want)) {
		t.Errorf("output:\n%s\nwant it to contain:\n%s", b.String(), want)
	}
}
