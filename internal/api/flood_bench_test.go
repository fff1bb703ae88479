package api

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkApplyUnderFlood: 15 000 connections of one uid with stalled bodies and four clients
// trickling theirs, while another client applies a pod. Reports the slowest apply of the run
// and the process's memory (VmRSS and its peak VmHWM: the server, and the client ends of the
// connections, which hold no buffers).
//
//	go test -run '^$' -bench ApplyUnderFlood -benchtime 20x ./internal/api/
func BenchmarkApplyUnderFlood(b *testing.B) {
	p := newPeers(b)
	s, _ := startLimited(b, p, Options{}, nil)
	const flood = 15000
	head := postHead(len(webManifest))
	for i := range flood {
		c, err := p.dialErr(s.Socket(), 1000)
		for errors.Is(err, syscall.EAGAIN) { // the listen backlog is full: as a flooder would, retry
			time.Sleep(time.Millisecond)
			c, err = p.dialErr(s.Socket(), 1000)
		}
		if err != nil {
			b.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, head+"apiVersion: v1\n") // then nothing
	}
	done := make(chan struct{})
	defer close(done)
	for i := range 4 {
		c, err := p.dialErr(s.Socket(), uint32(2000+i))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, postHead(1<<20))
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					_, _ = c.Write([]byte{'#'}) // a byte a second
				}
			}
		}()
	}
	client := p.client(s.Socket(), 0)
	var slowest time.Duration
	b.ResetTimer()
	for i := range b.N {
		m := strings.Replace(webManifest, "{name: web}", "{name: web-"+strconv.Itoa(i)+"}", 1)
		start := time.Now()
		if _, err := client.ApplyPod(context.Background(), []byte(m)); err != nil {
			b.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-apply-ms")
	rss, hwm := procMemory()
	b.ReportMetric(rss, "VmRSS-MiB")
	b.ReportMetric(hwm, "VmHWM-MiB")
	h := s.Holdings()
	b.ReportMetric(float64(h.Conns), "held-conns")
}

// procMemory is this process's VmRSS and VmHWM in MiB.
func procMemory() (rss, hwm float64) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}
