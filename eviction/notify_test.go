package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

func TestUsageThreshold(t *testing.T) {
	tests := []struct {
		name                         string
		capacity, quantity, inactive int64
		want                         int64
		ok                           bool
	}{
		{"kubelet formula", 1000, 100, 50, 950, true},
		{"no inactive file", 1000, 100, 0, 900, true},
		{"threshold equal to capacity", 1000, 1000, 0, 0, false},
		{"threshold above capacity is never met", 1000, 1001, 10, 0, false},
		{"zero threshold", 1000, 0, 10, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := usageThreshold(tt.capacity, tt.quantity, tt.inactive)
			if err != nil || got != tt.want || ok != tt.ok {
				t.Errorf("usageThreshold = %d %v %v, want %d %v", got, ok, err, tt.want, tt.ok)
			}
		})
	}
}

func TestPressureNotifiers(t *testing.T) {
	mem, err := ParseThresholdConfig([]string{"pods"}, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := ParseThresholdConfig(nil, map[string]string{"nodefs.available": "10%"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := Sources{CgroupRoot: "/cg", ProcRoot: "/p", KubepodsCgroup: "/kubepods.slice"}
	tests := []struct {
		name       string
		mode       units.Mode
		thresholds []Threshold
		psi        string
		memcg      string
	}{
		{"v2 polls usage", units.ModeUnified, mem, "[/cg/kubepods.slice/memory.pressure /cg/memory.pressure|/p/pressure/memory]",
			"poll[memory.available@/ allocatableMemory.available@/kubepods.slice]"},
		{"hybrid uses the unified tree and v1 thresholds", units.ModeHybrid, mem,
			"[/cg/unified/kubepods.slice/memory.pressure /cg/unified/memory.pressure|/p/pressure/memory]",
			"[memory.available@/ allocatableMemory.available@/kubepods.slice]"},
		{"legacy", units.ModeLegacy, mem, "[/p/pressure/memory]", "[memory.available@/ allocatableMemory.available@/kubepods.slice]"},
		{"no memory threshold, no notifier", units.ModeUnified, disk, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := src
			s.Mode = tt.mode
			var psi, memcg string
			for _, n := range PressureNotifiers(s, tt.thresholds, nil) {
				switch n := n.(type) {
				case *PSINotifier:
					psi = fmt.Sprint(n.Files)
					if n.Window%DefaultPSIWindow != 0 {
						t.Errorf("PSI window %v is not a multiple of 2s", n.Window)
					}
				case *MemcgThresholdNotifier:
					var ts []string
					for _, tg := range n.Targets {
						ts = append(ts, string(tg.Threshold.Signal)+"@"+tg.CgroupPath)
					}
					memcg = fmt.Sprint(ts)
				case *UsagePoller:
					var ts []string
					for _, tg := range n.Targets {
						ts = append(ts, string(tg.Threshold.Signal)+"@"+tg.CgroupPath)
					}
					memcg = "poll" + fmt.Sprint(ts)
				}
			}
			if psi != tt.psi || memcg != tt.memcg {
				t.Errorf("notifiers: psi %s memcg %s, want psi %s memcg %s", psi, memcg, tt.psi, tt.memcg)
			}
		})
	}
}

func TestNotifiersWithoutTheFeatureAreUnavailable(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		n    Notifier
	}{
		{"psi files missing", &PSINotifier{Files: []string{filepath.Join(dir, "memory.pressure")}, Stall: DefaultPSIStall, Window: DefaultPSIWindow, Log: discard()}},
		{"memcg on cgroup v2", &MemcgThresholdNotifier{Sources: Sources{CgroupRoot: dir, Mode: units.ModeUnified}, Log: discard()}},
		{"memcg cgroup missing", &MemcgThresholdNotifier{Sources: Sources{CgroupRoot: dir, ProcRoot: dir, Mode: units.ModeHybrid},
			Targets: []ThresholdTarget{{CgroupPath: "/kubepods.slice"}}, Log: discard()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.n.Run(context.Background(), func() { t.Error("woken") })
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("Run = %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestUsagePollerWakesOncePerCrossing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		kp := filepath.Join(root, "kubepods.slice")
		if err := os.MkdirAll(kp, 0o755); err != nil {
			t.Fatal(err)
		}
		// Replace files whole (write + rename), as cgroupfs reads are atomic: the poller's first
		// read runs concurrently with the first step and must never see a truncated file.
		write := func(name, v string) {
			tmp := filepath.Join(root, name+".tmp")
			if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(kp, name)); err != nil {
				t.Fatal(err)
			}
		}
		write("memory.max", "1000\n")
		write("memory.stat", "inactive_file 0\n")
		write("memory.current", "100\n")
		th := Threshold{Signal: SignalAllocatableMemoryAvailable, Operator: OpLessThan,
			Value: ThresholdValue{Quantity: resource.NewQuantity(300, resource.BinarySI)}}
		u := &UsagePoller{Sources: Sources{CgroupRoot: root, ProcRoot: root, Mode: units.ModeUnified},
			Targets: []ThresholdTarget{{Threshold: th, CgroupPath: "/kubepods.slice"}}, Log: discard()}
		var wakes atomic.Int64
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = u.Run(ctx, func() { wakes.Add(1) }) }()
		steps := []struct {
			name    string
			current string
			want    int64
		}{
			{"below the threshold", "100", 0},
			{"crossing", "800", 1},
			{"staying above", "900", 1},
			{"back below", "100", 1},
			{"crossing again", "750", 2},
		}
		for _, s := range steps {
			write("memory.current", s.current+"\n")
			time.Sleep(DefaultUsagePoll)
			synctest.Wait()
			if got := wakes.Load(); got != s.want {
				t.Errorf("%s: %d wakes, want %d", s.name, got, s.want)
			}
		}
	})
}
