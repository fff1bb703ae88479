package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/units"
)

// podList is a metrics.PodSource.
type podList []v1.Pod

func (p podList) Pods() []v1.Pod { return p }

func TestStartMetrics(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "metrics.sock")
	cfg := config.Default()
	cfg.Metrics.Address = "unix:" + sock
	ops := metrics.NewSystemdOperations()
	observe := systemdObserver(ops)
	observe("start", "kubepods.slice", 2*time.Millisecond, nil)
	observe("stop", "kubepods-pod1.slice", 30*time.Second, &units.JobError{Unit: "kubepods-pod1.slice", Op: "stop", Waited: 30 * time.Second})
	ctrl := podList{
		{Status: v1.PodStatus{QOSClass: v1.PodQOSBurstable, Phase: v1.PodRunning}},
		{Status: v1.PodStatus{QOSClass: v1.PodQOSBestEffort, Phase: v1.PodFailed, Reason: "OutOfpods"}},
	}
	m := metrics.New(metrics.Options{Systemd: ops, Pods: ctrl})
	serve, err := listenMetrics(m, cfg.Metrics.Address, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { serve(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	resp, err := client.Get("http://slicelet/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	for _, want := range []string{
		`slicelet_pods{phase="Running",qos="Burstable"} 1`,
		`slicelet_pods{phase="Failed",qos="BestEffort"} 1`,
		`slicelet_pods_rejected{reason="OutOfpods"} 1`,
		`slicelet_systemd_operation_duration_seconds_count{operation="start",result="success"} 1`,
		`slicelet_systemd_operation_duration_seconds_count{operation="stop",result="timeout"} 1`,
		`slicelet_build_info{goversion="`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), "kubepods.slice") {
		t.Errorf("/metrics carries a unit name; units must not become labels")
	}
}

func TestStartMetricsOffAndBad(t *testing.T) {
	cfg := config.Default()
	cfg.Metrics.Address = ""
	serve, err := listenMetrics(metrics.New(metrics.Options{}), cfg.Metrics.Address, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("metrics off: %v", err)
	}
	serve(t.Context()) // returns at once: nothing to serve

	cfg.Metrics.Address = "unix:relative.sock"
	if _, err := listenMetrics(metrics.New(metrics.Options{}), cfg.Metrics.Address, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "unix:relative.sock") {
		t.Errorf("bad address: %v, want an error naming it", err)
	}
}
