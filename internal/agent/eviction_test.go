package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// stallingPods is an eviction.PodLister that hangs while stall is set.
type stallingPods struct {
	mu    sync.Mutex
	stall chan struct{}
}

func (s *stallingPods) ActivePods() []eviction.ActivePod {
	s.mu.Lock()
	ch := s.stall
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return nil
}
func (s *stallingPods) EvictPod(context.Context, *v1.Pod, time.Duration, string, map[string]string) error {
	return nil
}
func (s *stallingPods) PodCleanedUp(string) bool { return true }

// TestWatchdogStopsWhenTheEvictionLoopStalls: the monitor pings systemd every half watchdog
// interval while the health tracker says the eviction loop's lease and the systemd connection
// are good; a dead connection or a stalled loop stops the pings, recovery resumes them.
func TestWatchdogStopsWhenTheEvictionLoopStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sp := &stallingPods{}
		tracker := health.New(health.Options{})
		m, err := eviction.NewManager(eviction.ManagerOptions{
			Pods: sp, Evictor: sp, MonitoringInterval: 10 * time.Second, Health: tracker,
			Observe: func(time.Time) (eviction.Observations, []eviction.Unavailable) { return nil, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)

		var pings atomic.Int64
		notify := func(s string) (bool, error) {
			if s == units.NotifyWatchdog {
				pings.Add(1)
			}
			return true, nil
		}
		var dead atomic.Bool
		alive := func(context.Context) error {
			if dead.Load() {
				return errors.New("connection closed")
			}
			return nil
		}
		mon := &monitor{health: tracker, interval: 10 * time.Second, watchdog: true, notify: notify,
			clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler),
			probes: []probe{{systemdWarnable, alive}}}
		go mon.run(ctx)

		time.Sleep(time.Minute)
		synctest.Wait()
		if n := pings.Load(); n != 6 {
			t.Fatalf("healthy loop: %d pings in 1m at 10s, want 6", n)
		}

		// The systemd connection dies: no pings.
		dead.Store(true)
		before := pings.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := pings.Load() - before; n != 0 {
			t.Errorf("%d pings with a dead systemd connection", n)
		}
		dead.Store(false)

		// The loop hangs: pings go on until the health bound passes, then stop.
		stall := make(chan struct{})
		sp.mu.Lock()
		sp.stall = stall
		sp.mu.Unlock()
		time.Sleep(10 * time.Second) // the next cycle starts and hangs
		synctest.Wait()
		before = pings.Load()
		time.Sleep(m.HealthBound() + 20*time.Second)
		synctest.Wait()
		stalled := pings.Load()
		if stalled == before {
			t.Error("pings stopped before the health bound passed")
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := pings.Load() - stalled; n != 0 {
			t.Errorf("%d pings while the eviction loop is stalled, want 0", n)
		}
		close(stall)
		sp.mu.Lock()
		sp.stall = nil
		sp.mu.Unlock()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if pings.Load() == stalled {
			t.Error("pings did not resume after the loop recovered")
		}
	})
}

// noSlices and noRuntime are the smallest pods.Slices and pods.Runtime: a controller without
// pods.
type noSlices struct{}

func (noSlices) EnsurePod(context.Context, *v1.Pod) (slices.PodSlice, error) {
	return slices.PodSlice{}, nil
}
func (noSlices) DestroyPod(context.Context, string) error { return nil }
func (noSlices) CleanupOrphans(context.Context) ([]slices.Orphan, error) {
	return nil, nil
}
func (noSlices) Pods() []slices.PodSlice { return nil }

type noRuntime struct{}

func (noRuntime) Name() string                     { return "none" }
func (noRuntime) Validate(*v1.Pod) field.ErrorList { return nil }
func (noRuntime) SyncPod(context.Context, *v1.Pod, slices.PodSlice) (v1.PodStatus, error) {
	return v1.PodStatus{}, nil
}
func (noRuntime) KillPod(context.Context, *v1.Pod, time.Duration) (v1.PodStatus, error) {
	return v1.PodStatus{}, nil
}
func (noRuntime) Forget(context.Context, string) error      { return nil }
func (noRuntime) PodUIDs(context.Context) ([]string, error) { return nil, nil }
func (noRuntime) Logs(context.Context, *v1.Pod, string, pods.LogOptions, io.Writer) error {
	return pods.ErrNoLogs
}
func (noRuntime) Relist(context.Context, []*v1.Pod) (pods.Relisted, error) {
	return pods.Relisted{}, nil
}
func (noRuntime) NextSync(string) time.Time { return time.Time{} }

func TestNewEvictionManager(t *testing.T) {
	tests := []struct {
		name    string
		hard    map[string]string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"bad threshold", map[string]string{"memory.available": "lots"}, "eviction thresholds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := config.Default()
				cfg.StateDir = t.TempDir()
				if tt.hard != nil {
					cfg.Eviction.Hard = tt.hard
				}
				ctrl := pods.NewController(pods.ControllerOptions{Slices: noSlices{}, Runtime: noRuntime{},
					Admitter: admission.Admitter{Node: func() admission.NodeState { return admission.NodeState{} }}})
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()
				root := t.TempDir()
				tracker := health.New(health.Options{})
				m, err := newEvictionManager(evictionOptions{Config: cfg, CgroupRoot: root, ProcRoot: root, Mode: units.ModeUnified,
					Controller: ctrl, Logger: slog.New(slog.DiscardHandler), Health: tracker})
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("newEvictionManager error = %v, want %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() { m.Run(ctx) })
				synctest.Wait()
				if loop := tracker.Get(eviction.LoopWarnable); !loop.Healthy() || len(m.Conditions()) != 0 || m.Summary() != "no node pressure; no evictions" {
					t.Errorf("fresh manager: loop %+v conditions %v summary %q", loop, m.Conditions(), m.Summary())
				}
				if got := m.HealthBound(); got != 3*cfg.Eviction.MonitoringInterval+eviction.ImmediateGracePeriod+eviction.PodCleanupTimeout {
					t.Errorf("HealthBound = %v", got)
				}
			})
		})
	}
}

// TestMonitorProbesSystemd: the monitor's systemd probe succeeds on a live connection and
// fails on a closed one; without WATCHDOG_USEC it probes but never pings.
func TestMonitorProbesSystemd(t *testing.T) {
	env := systemdtest.Require(t)
	sd, err := units.Connect(t.Context(), units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	tracker := health.New(health.Options{})
	pinged := false
	d := &daemon{health: tracker, sd: sd, rt: noRuntime{}, clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler)}
	t.Setenv("WATCHDOG_USEC", "")
	interval, err := units.WatchdogInterval()
	if err != nil || interval != 0 {
		t.Fatalf("WatchdogInterval without a watchdog = %v, %v", interval, err)
	}
	mon := newMonitor(d, interval, func(string) (bool, error) { pinged = true; return true, nil })
	mon.probe(t.Context())
	mon.ping()
	if ws := tracker.Get(systemdWarnable); !ws.Healthy() || !ws.Expires.After(time.Now()) {
		t.Errorf("systemd on a live connection: %+v", ws)
	}
	if ws := tracker.Get(runtimeWarnable); !ws.Healthy() {
		t.Errorf("runtime: %+v", ws)
	}
	sd.Close()
	mon.probe(t.Context())
	if ws := tracker.Get(systemdWarnable); ws.Status != health.StatusUnhealthy || ws.Message == "" {
		t.Errorf("systemd on a closed connection: %+v", ws)
	}
	if pinged {
		t.Error("pinged without a watchdog")
	}
}
