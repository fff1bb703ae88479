package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// monitorEvery is how often monitor logs what the node's CPUs go to.
const monitorEvery = time.Minute

// monitor logs, every monitorEvery until ctx ends, the node's load average and the processes
// that used the most CPU time since the last line: under emulation a batch that crawls shows
// what the guest spends itself on (an agent, containerd, a pod's command, a burner of CPU).
func monitor(ctx context.Context, logf func(string, ...any)) {
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		logf("monitor: %v", err)
		return
	}
	prev := cpuTimes(fs)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := cpuTimes(fs)
		type use struct {
			name string
			sec  float64
		}
		var uses []use
		for pid, c := range cur {
			if d := c.sec - prev[pid].sec; d >= 0.5 {
				uses = append(uses, use{fmt.Sprintf("%s[%d]", c.comm, pid), d})
			}
		}
		prev = cur
		slices.SortFunc(uses, func(a, b use) int { return int((b.sec - a.sec) * 1000) })
		var top []string
		for _, u := range uses[:min(len(uses), 6)] {
			top = append(top, fmt.Sprintf("%s %.0fs", u.name, u.sec))
		}
		load := "?"
		if l, err := fs.LoadAvg(); err == nil {
			load = fmt.Sprintf("%.1f %.1f %.1f", l.Load1, l.Load5, l.Load15)
		}
		logf("monitor: load %s; %d processes; CPU in the last %s: %s", load, len(cur), monitorEvery, strings.Join(top, ", "))
	}
}

// procCPU is a process's name and CPU time (user and system, seconds).
type procCPU struct {
	comm string
	sec  float64
}

// cpuTimes reads every process's CPU time.
func cpuTimes(fs procfs.FS) map[int]procCPU {
	out := map[int]procCPU{}
	procs, err := fs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		out[p.PID] = procCPU{comm: st.Comm, sec: st.CPUTime()}
	}
	return out
}
