package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/units"
)

func statusPod(qos v1.PodQOSClass, phase v1.PodPhase) v1.Pod {
	return v1.Pod{Status: v1.PodStatus{QOSClass: qos, Phase: phase}}
}

// TestStatusLine: STATUS= counts pods by phase, and the QoS classes only of the active pods.
// A failed or succeeded pod is never counted among the running ones (it used to be: the QoS
// breakdown after "pods running" counted every pod).
func TestStatusLine(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("3800m"), v1.ResourceMemory: resource.MustParse("7Gi")}
	tests := []struct {
		name string
		pods []v1.Pod
		want string
	}{
		{"none", nil, "STATUS=0 pods running, 0 pending, 0 succeeded, 0 failed (active: Guaranteed 0, Burstable 0, BestEffort 0)"},
		{"a failed pod is not running", []v1.Pod{
			statusPod(v1.PodQOSGuaranteed, v1.PodRunning),
			statusPod(v1.PodQOSBurstable, v1.PodFailed),
			statusPod(v1.PodQOSBestEffort, v1.PodFailed),
		}, "STATUS=1 pods running, 0 pending, 0 succeeded, 2 failed (active: Guaranteed 1, Burstable 0, BestEffort 0)"},
		{"every phase", []v1.Pod{
			statusPod(v1.PodQOSGuaranteed, v1.PodRunning),
			statusPod(v1.PodQOSBurstable, v1.PodRunning),
			statusPod(v1.PodQOSBurstable, v1.PodPending),
			statusPod(v1.PodQOSBestEffort, v1.PodSucceeded),
			statusPod(v1.PodQOSBestEffort, v1.PodUnknown),
		}, "STATUS=2 pods running, 1 pending, 1 succeeded, 0 failed, 1 unknown (active: Guaranteed 1, Burstable 2, BestEffort 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusLine(api.CountPods(tt.pods, 110), alloc, "no node pressure; no evictions", health.State{})
			if want := tt.want + "; allocatable 3800m cpu / 7Gi memory; no node pressure; no evictions"; got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestStatusLineHealth: what the health tracker finds wrong ends the line, except the
// pressure conditions the eviction summary already shows.
func TestStatusLineHealth(t *testing.T) {
	tr := health.New(health.Options{})
	tr.SetUnhealthy(eviction.PressureWarnables[v1.NodeMemoryPressure], "slicelet has insufficient memory available")
	tr.SetUnhealthy(manifestsWarnable, problemsError([]pods.Problem{{Origin: "/etc/slicelet/pods.d/a.yaml", Error: "spec.containers[0].bogusField: unknown field"}}).Error())
	tr.SetHealthy(runtimeWarnable)
	got := statusLine(api.CountPods(nil, 110), v1.ResourceList{}, "MemoryPressure; no evictions", tr.State())
	if want := "; MemoryPressure; no evictions; unhealthy: manifest files: 1 manifest problems: /etc/slicelet/pods.d/a.yaml: spec.containers[0].bogusField: unknown field"; !strings.HasSuffix(got, want) {
		t.Errorf("got  %s\nwant it to end with %s", got, want)
	}
}

func TestProblemsError(t *testing.T) {
	if err := problemsError(nil); err != nil {
		t.Errorf("no problems: %v", err)
	}
	var ps []pods.Problem
	for _, f := range []string{"a", "b", "c", "d", "e"} {
		ps = append(ps, pods.Problem{Origin: f + ".yaml", Error: "broken"})
	}
	want := "5 manifest problems: a.yaml: broken; b.yaml: broken; c.yaml: broken; and 2 more (journalctl -u slicelet)"
	if err := problemsError(ps); err == nil || err.Error() != want {
		t.Errorf("problemsError = %v, want %s", err, want)
	}
}

// TestNodeConditions: the node's conditions all come from the tracker: the conditions of
// warnables that reported (none while unknown), and Ready, false while a critical warnable
// is not healthy, with the warnings in its message otherwise.
func TestNodeConditions(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	tr := health.New(health.Options{Clock: clk})
	tr.Register(systemdWarnable, runtimeWarnable, gcImagesWarnable)
	for _, w := range eviction.PressureWarnables {
		tr.SetHealthy(w)
	}
	byType := func() map[v1.NodeConditionType]v1.NodeCondition {
		out := map[v1.NodeConditionType]v1.NodeCondition{}
		for _, c := range nodeConditions(tr.State()) {
			out[c.Type] = c
		}
		return out
	}
	cs := byType()
	if len(cs) != 4 {
		t.Errorf("conditions = %v, want the three pressure conditions and Ready (image GC never ran)", cs)
	}
	if r := cs[v1.NodeReady]; r.Status != v1.ConditionFalse || r.Reason != "SliceletNotReady" ||
		r.Message != "systemd connection: not reported yet; container runtime: not reported yet" {
		t.Errorf("Ready before the first probe = %+v", r)
	}
	if m := cs[v1.NodeMemoryPressure]; m.Status != v1.ConditionFalse || m.Reason != "KubeletHasSufficientMemory" || m.Message != "slicelet has sufficient memory available" {
		t.Errorf("MemoryPressure = %+v", m)
	}

	clk.Step(time.Minute)
	tr.SetHealthy(systemdWarnable)
	tr.SetHealthy(runtimeWarnable)
	tr.SetUnhealthy(gcImagesWarnable, "runtime: connection refused")
	tr.SetUnhealthy(configWarnable, "memory_throttling_factor has no effect")
	cs = byType()
	if r := cs[v1.NodeReady]; r.Status != v1.ConditionTrue || r.Reason != "SliceletReady" ||
		r.Message != "slicelet is running; configuration: memory_throttling_factor has no effect" || !r.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("Ready = %+v", r)
	}
	// The kubelet's order (pressure conditions, then Ready), slicelet's own conditions after.
	var order []v1.NodeConditionType
	for _, c := range nodeConditions(tr.State()) {
		order = append(order, c.Type)
	}
	if want := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady, conditionImageGCFailing}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("conditions in the order %v, want %v", order, want)
	}
	if g := cs[conditionImageGCFailing]; g.Status != v1.ConditionFalse || g.Reason != "GCSucceeding" ||
		g.Message != "1 failures in a row (condition at 3); last error: runtime: connection refused" {
		t.Errorf("ImageGCFailing after one failure = %+v", g)
	}
	clk.Step(time.Minute)
	tr.SetUnhealthy(gcImagesWarnable, "runtime: connection refused")
	tr.SetUnhealthy(gcImagesWarnable, "runtime: connection refused")
	if g := byType()[conditionImageGCFailing]; g.Status != v1.ConditionTrue || g.Reason != "GCFailing" ||
		g.Message != "3 failures in a row; last error: runtime: connection refused" || !g.LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("ImageGCFailing after three failures = %+v", g)
	}
	tr.SetUnhealthy(runtimeWarnable, "container runtime unavailable")
	if r := byType()[v1.NodeReady]; r.Status != v1.ConditionFalse || r.Message != "container runtime: container runtime unavailable" {
		t.Errorf("Ready with the runtime down = %+v", r)
	}
}

func TestConfigProblems(t *testing.T) {
	cfg := config.Default()
	if p := configProblems(cfg, units.ModeHybrid); len(p) != 0 {
		t.Errorf("defaults: %v", p)
	}
	cfg.Cgroups.MemoryReservationPolicy = config.MemoryReservationTieredReservation
	cfg.Cgroups.MemoryThrottlingFactor = 0.9
	if p := configProblems(cfg, units.ModeUnified); len(p) != 1 || !strings.Contains(p[0].Error(), "memory_throttling_factor") {
		t.Errorf("v2: %v", p)
	}
	p := errors.Join(configProblems(cfg, units.ModeHybrid)...)
	if p == nil || !strings.Contains(p.Error(), "TieredReservation") || !strings.Contains(p.Error(), "cgroup v1") {
		t.Errorf("v1: %v", p)
	}
}

// TestMonitorProbesNetwork: with the CNI network the monitor probes the runtime's pod network,
// and while the runtime reports it not ready the node is not Ready, saying why (as a kubelet
// node before its CNI agent runs); on the host's network there is no such probe.
func TestMonitorProbesNetwork(t *testing.T) {
	notReady := errors.New("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
	netErr := notReady
	tr := health.New(health.Options{})
	tr.Register(networkWarnable)
	for _, w := range eviction.PressureWarnables {
		tr.SetHealthy(w)
	}
	d := &daemon{health: tr, prt: &podRuntime{network: func(context.Context) error { return netErr }}, log: slog.New(slog.DiscardHandler)}
	mon := newMonitor(d, 0, nil)
	var check func(context.Context) error
	for _, p := range mon.probes {
		if p.w == networkWarnable {
			check = p.check
		}
	}
	if check == nil {
		t.Fatal("no pod network probe with runtime.network cni")
	}
	ready := func() v1.NodeCondition {
		for _, c := range nodeConditions(tr.State()) {
			if c.Type == v1.NodeReady {
				return c
			}
		}
		t.Fatal("no Ready condition")
		return v1.NodeCondition{}
	}
	mon.probes = []probe{{networkWarnable, check}}
	mon.probe(t.Context())
	if r := ready(); r.Status != v1.ConditionFalse || r.Message != "pod network: "+notReady.Error() {
		t.Errorf("Ready with the network not ready = %+v", r)
	}
	netErr = nil
	mon.probe(t.Context())
	if r := ready(); r.Status != v1.ConditionTrue {
		t.Errorf("Ready with the network ready = %+v", r)
	}

	d.prt.network = nil
	for _, p := range newMonitor(d, 0, nil).probes {
		if p.w == networkWarnable {
			t.Error("a pod network probe on the host's network")
		}
	}
}
