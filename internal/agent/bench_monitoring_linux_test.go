package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkMonitoringScrape: what the kubelet's metrics paths cost on a node of 110 pods (the
// kubelet's default max_pods; SLICELET_BENCH_PODS overrides): slicelet as a service with its
// metrics endpoint on loopback, the pods Running and sampled, then 20 scrapes of each of
// /metrics, /metrics/cadvisor and /metrics/probes one after the other, as a Prometheus would.
// Reports each path's median scrape time, the series it served, and slicelet's VmRSS before
// the first scrape and after the last (the samples the scrapes read exist either way: the
// difference is what serving them costs).
func BenchmarkMonitoringScrape(b *testing.B) {
	sd := benchSystemd(b)
	n := envInt(b, benchPodsEnv, 110)
	unit := "bench-slicelet-monitoring.service"
	a := newBenchAgent(b, sd, unit, n+10, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := os.ReadFile(a.cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "[metrics]\naddress = \"\"", fmt.Sprintf("[metrics]\naddress = %q", addr), 1))
	if err := os.WriteFile(a.cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	benchAgentService(b, sd, unit, a.cfgPath)
	b.Cleanup(func() { _ = sd.Stop(context.Background(), unit) })
	pid := mainPID(b, sd, unit)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("mon-p%04d", i)
	}
	a.drop(b, names)
	waitEvery(b, time.Second, 15*time.Minute, "every pod Running", func() (bool, string) {
		list, err := a.client.ListPods(b.Context())
		if err != nil {
			return false, err.Error()
		}
		ok := 0
		for _, p := range list {
			if p.Status.Phase == v1.PodRunning {
				ok++
			}
		}
		return ok == n, fmt.Sprintf("%d of %d Running", ok, n)
	})
	// Two sampling intervals (10 s each): every pod sampled twice.
	time.Sleep(25 * time.Second)
	before := procStatus(b, pid)
	get := func(path string) (time.Duration, int, int) {
		start := time.Now()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %s %v", path, resp.Status, err)
		}
		d := time.Since(start)
		series := 0
		for line := range strings.Lines(string(body)) {
			if !strings.HasPrefix(line, "#") {
				series++
			}
		}
		return d, series, len(body)
	}
	for range b.N {
		for _, path := range []string{"/metrics", "/metrics/cadvisor", "/metrics/probes"} {
			var times []time.Duration
			var series, size int
			for range 20 {
				d, s, z := get(path)
				times, series, size = append(times, d), s, z
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			name := strings.TrimPrefix(strings.ReplaceAll(path, "/", "-"), "-")
			b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), name+"-ms")
			b.ReportMetric(float64(series), name+"-series")
			b.ReportMetric(float64(size)/1024, name+"-KiB")
		}
	}
	after := procStatus(b, pid)
	b.ReportMetric(float64(n), "pods")
	b.ReportMetric(before["VmRSS"]/1024, "rss-before-scrapes-MiB")
	b.ReportMetric(after["VmRSS"]/1024, "rss-after-scrapes-MiB")
	b.ReportMetric(after["VmHWM"]/1024, "hwm-MiB")
	a.removeAll(b)
}
