package metrics

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/health"
)

// fakePods is a PodSource.
type fakePods []v1.Pod

func (f fakePods) Pods() []v1.Pod { return f }

func pod(qos v1.PodQOSClass, phase v1.PodPhase, reason string, containers int) v1.Pod {
	p := v1.Pod{Status: v1.PodStatus{QOSClass: qos, Phase: phase, Reason: reason}}
	for i := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: fmt.Sprint("c", i)})
	}
	return p
}

// Warnables of the tests: a pressure condition, a GC condition, a liveness.
var (
	memoryPressure = &health.Warnable{Code: "memory-pressure", Title: "memory pressure", Severity: health.SeverityWarning,
		Condition: &health.Condition{Type: "MemoryPressure"}}
	diskPressure = &health.Warnable{Code: "disk-pressure", Title: "disk pressure", Severity: health.SeverityWarning,
		Condition: &health.Condition{Type: "DiskPressure"}}
	gcFailing = &health.Warnable{Code: "gc-images", Title: "image garbage collection", Severity: health.SeverityWarning,
		FailuresToUnhealthy: 3, Condition: &health.Condition{Type: "ImageGCFailing"}}
	loop = &health.Warnable{Code: "eviction-loop", Title: "eviction loop", Severity: health.SeverityCritical, Watchdog: true}
)

// testTracker is a tracker at t0 with memory pressure (a transition at t0+1s), no disk
// pressure, a live eviction loop and image GC never run.
func testTracker() *health.Tracker {
	clk := clocktesting.NewFakeClock(t0)
	tr := health.New(health.Options{Clock: clk})
	tr.Register(memoryPressure, diskPressure, gcFailing, loop)
	tr.SetHealthy(memoryPressure)
	tr.SetHealthy(diskPressure)
	tr.Renew(loop, time.Hour)
	clk.Step(time.Second)
	tr.SetUnhealthy(memoryPressure, "low")
	return tr
}

var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// TestLint runs promlint over everything the registry exports, runtime collectors included,
// with every metric family populated.
func TestLint(t *testing.T) {
	m := New(Options{Version: "1.2.3", Pods: populatedPods, Health: testTracker()})
	populate(m)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Errorf("gathered %d series, want the slicelet ones plus the Go and process collectors (> 50)", n)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "slicelet_build_info"} {
		if c, err := testutil.GatherAndCount(m.Registry(), name); err != nil || c == 0 {
			t.Errorf("%s: %d series, %v; want it exported", name, c, err)
		}
	}
}

// populatedPods gives the pod families a series each.
var populatedPods = fakePods{pod(v1.PodQOSBurstable, v1.PodRunning, "", 1), pod(v1.PodQOSBestEffort, v1.PodFailed, "OutOfpods", 0)}

// populate gives every other slicelet metric family at least one series.
func populate(m *Metrics) {
	m.ObserveSystemd("start", "success", 3*time.Millisecond)
	m.AdmissionRejected("OutOfcpu")
	m.Evicted("memory.available")
	m.GCRun(GCKindImages, ResultSuccess, 1<<20, 2)
	m.SetSignalObservation("memory.available", 1<<30, time.Now())
	m.SetSignalObservation("pid.available", 4000, time.Now())
}

// TestRegistryContents checks every slicelet metric, its help, type and values after the
// typed methods were called.
func TestRegistryContents(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(t0)
	m := New(Options{Version: "1.2.3", Clock: clock, NoRuntimeCollectors: true, Health: testTracker(), Pods: fakePods{
		pod(v1.PodQOSGuaranteed, v1.PodRunning, "", 1),
		pod(v1.PodQOSGuaranteed, v1.PodRunning, "", 2),
		pod(v1.PodQOSBurstable, v1.PodPending, "", 0),
		pod(v1.PodQOSBestEffort, v1.PodFailed, "OutOfcpu", 0),
		pod(v1.PodQOSBestEffort, v1.PodFailed, "OutOfcpu", 0),
		pod(v1.PodQOSBurstable, v1.PodFailed, "UnsupportedPodSpec", 0),
		pod(v1.PodQOSBurstable, v1.PodFailed, "Error", 1), // ran and failed: not a rejection
	}})
	// Binary fractions of a second, so the sum is exact: 1/256 s and 1/32 s.
	m.ObserveSystemd("start", "success", 3906250*time.Nanosecond)
	m.ObserveSystemd("start", "success", 31250*time.Microsecond)
	m.ObserveSystemd("stop", "timeout", 31*time.Second)
	m.AdmissionRejected("OutOfcpu")
	m.AdmissionRejected("OutOfcpu")
	m.AdmissionRejected("OutOfpods")
	m.Evicted("memory.available")
	m.GCRun(GCKindImages, ResultSuccess, 3000, 2)
	m.GCRun(GCKindImages, ResultError, 500, 1)
	m.GCRun(GCKindContainers, ResultSuccess, 0, 4)
	m.SetSignalObservation("memory.available", 2<<30, t0.Add(-10*time.Second))
	m.SetSignalObservation("nodefs.inodesFree", 12345, t0.Add(-1500*time.Millisecond))
	m.SetSignalObservation("pid.available", 4000, t0.Add(time.Second)) // from the future: age 0

	want := `
# HELP slicelet_admission_rejections_total Pods refused at admission, by the kubelet's reason (OutOfcpu, OutOfmemory, OutOfpods, Evicted, ...).
# TYPE slicelet_admission_rejections_total counter
slicelet_admission_rejections_total{reason="OutOfcpu"} 2
slicelet_admission_rejections_total{reason="OutOfpods"} 1
# HELP slicelet_build_info Always 1; the labels carry the slicelet version and the Go version it was built with.
# TYPE slicelet_build_info gauge
slicelet_build_info{goversion="` + runtime.Version() + `",version="1.2.3"} 1
# HELP slicelet_eviction_signal_available Inodes or process IDs available at the latest observation of a counting eviction signal (nodefs.inodesFree, imagefs.inodesFree, pid.available).
# TYPE slicelet_eviction_signal_available gauge
slicelet_eviction_signal_available{signal="nodefs.inodesFree"} 12345
slicelet_eviction_signal_available{signal="pid.available"} 4000
# HELP slicelet_eviction_signal_available_bytes Bytes available at the latest observation of a memory or filesystem eviction signal (memory.available, nodefs.available, ...).
# TYPE slicelet_eviction_signal_available_bytes gauge
slicelet_eviction_signal_available_bytes{signal="memory.available"} 2.147483648e+09
# HELP slicelet_eviction_signal_observation_age_seconds Seconds since the latest observation of an eviction signal.
# TYPE slicelet_eviction_signal_observation_age_seconds gauge
slicelet_eviction_signal_observation_age_seconds{signal="memory.available"} 10
slicelet_eviction_signal_observation_age_seconds{signal="nodefs.inodesFree"} 1.5
slicelet_eviction_signal_observation_age_seconds{signal="pid.available"} 0
# HELP slicelet_evictions_total Pods evicted by the eviction manager, by the signal under pressure (memory.available, nodefs.available, ...).
# TYPE slicelet_evictions_total counter
slicelet_evictions_total{signal="memory.available"} 1
# HELP slicelet_gc_freed_bytes_total Bytes freed by garbage collection, by kind (images, containers).
# TYPE slicelet_gc_freed_bytes_total counter
slicelet_gc_freed_bytes_total{kind="containers"} 0
slicelet_gc_freed_bytes_total{kind="images"} 3500
# HELP slicelet_gc_removed_total Images or dead containers removed by garbage collection, by kind (images, containers).
# TYPE slicelet_gc_removed_total counter
slicelet_gc_removed_total{kind="containers"} 4
slicelet_gc_removed_total{kind="images"} 3
# HELP slicelet_gc_runs_total Garbage collection runs, by kind (images, containers) and result (success, error).
# TYPE slicelet_gc_runs_total counter
slicelet_gc_runs_total{kind="containers",result="error"} 0
slicelet_gc_runs_total{kind="containers",result="success"} 1
slicelet_gc_runs_total{kind="images",result="error"} 1
slicelet_gc_runs_total{kind="images",result="success"} 1
# HELP slicelet_health_last_transition_timestamp_seconds Unix time of the last status change of each part of slicelet the health tracker follows.
# TYPE slicelet_health_last_transition_timestamp_seconds gauge
slicelet_health_last_transition_timestamp_seconds{warnable="disk-pressure"} 1.795248e+09
slicelet_health_last_transition_timestamp_seconds{warnable="eviction-loop"} 1.795248e+09
slicelet_health_last_transition_timestamp_seconds{warnable="memory-pressure"} 1.795248001e+09
# HELP slicelet_health_status State of each part of slicelet the health tracker follows (systemd connection, eviction loop, garbage collection, ...): 1 for the current status (Healthy, Unhealthy, Unknown), 0 for the others.
# TYPE slicelet_health_status gauge
slicelet_health_status{severity="critical",status="Healthy",warnable="eviction-loop"} 1
slicelet_health_status{severity="critical",status="Unhealthy",warnable="eviction-loop"} 0
slicelet_health_status{severity="critical",status="Unknown",warnable="eviction-loop"} 0
slicelet_health_status{severity="warning",status="Healthy",warnable="disk-pressure"} 1
slicelet_health_status{severity="warning",status="Healthy",warnable="gc-images"} 0
slicelet_health_status{severity="warning",status="Healthy",warnable="memory-pressure"} 0
slicelet_health_status{severity="warning",status="Unhealthy",warnable="disk-pressure"} 0
slicelet_health_status{severity="warning",status="Unhealthy",warnable="gc-images"} 0
slicelet_health_status{severity="warning",status="Unhealthy",warnable="memory-pressure"} 1
slicelet_health_status{severity="warning",status="Unknown",warnable="disk-pressure"} 0
slicelet_health_status{severity="warning",status="Unknown",warnable="gc-images"} 1
slicelet_health_status{severity="warning",status="Unknown",warnable="memory-pressure"} 0
# HELP slicelet_health_transitions_total Changes between healthy and unhealthy of each part of slicelet the health tracker follows.
# TYPE slicelet_health_transitions_total counter
slicelet_health_transitions_total{warnable="disk-pressure"} 0
slicelet_health_transitions_total{warnable="eviction-loop"} 0
slicelet_health_transitions_total{warnable="gc-images"} 0
slicelet_health_transitions_total{warnable="memory-pressure"} 1
# HELP slicelet_node_condition Node conditions slicelet reports (MemoryPressure, DiskPressure, PIDPressure, ImageGCFailing, ContainerGCFailing): 1 when the condition is true, 0 when false; absent while unknown.
# TYPE slicelet_node_condition gauge
slicelet_node_condition{condition="DiskPressure"} 0
slicelet_node_condition{condition="MemoryPressure"} 1
# HELP slicelet_pods Pods slicelet knows, by QoS class and phase (admitted and rejected alike).
# TYPE slicelet_pods gauge
slicelet_pods{phase="Failed",qos="BestEffort"} 2
slicelet_pods{phase="Failed",qos="Burstable"} 2
slicelet_pods{phase="Failed",qos="Guaranteed"} 0
slicelet_pods{phase="Pending",qos="BestEffort"} 0
slicelet_pods{phase="Pending",qos="Burstable"} 1
slicelet_pods{phase="Pending",qos="Guaranteed"} 0
slicelet_pods{phase="Running",qos="BestEffort"} 0
slicelet_pods{phase="Running",qos="Burstable"} 0
slicelet_pods{phase="Running",qos="Guaranteed"} 2
slicelet_pods{phase="Succeeded",qos="BestEffort"} 0
slicelet_pods{phase="Succeeded",qos="Burstable"} 0
slicelet_pods{phase="Succeeded",qos="Guaranteed"} 0
slicelet_pods{phase="Unknown",qos="BestEffort"} 0
slicelet_pods{phase="Unknown",qos="Burstable"} 0
slicelet_pods{phase="Unknown",qos="Guaranteed"} 0
# HELP slicelet_pods_rejected Pods currently refused at admission (phase Failed with a reason, no container ever ran), by the kubelet's reason.
# TYPE slicelet_pods_rejected gauge
slicelet_pods_rejected{reason="OutOfcpu"} 2
slicelet_pods_rejected{reason="UnsupportedPodSpec"} 1
# HELP slicelet_systemd_operation_duration_seconds Duration of systemd operations over D-Bus (start and stop include waiting for the job), by operation and result.
# TYPE slicelet_systemd_operation_duration_seconds histogram
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.0005"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.001"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.0025"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.005"} 1
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.01"} 1
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.025"} 1
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.05"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.1"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.25"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="0.5"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="1"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="2.5"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="5"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="10"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="30"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="start",result="success",le="+Inf"} 2
slicelet_systemd_operation_duration_seconds_sum{operation="start",result="success"} 0.03515625
slicelet_systemd_operation_duration_seconds_count{operation="start",result="success"} 2
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.0005"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.001"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.0025"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.005"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.01"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.025"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.05"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.1"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.25"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="0.5"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="1"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="2.5"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="5"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="10"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="30"} 0
slicelet_systemd_operation_duration_seconds_bucket{operation="stop",result="timeout",le="+Inf"} 1
slicelet_systemd_operation_duration_seconds_sum{operation="stop",result="timeout"} 31
slicelet_systemd_operation_duration_seconds_count{operation="stop",result="timeout"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// The age follows the clock at scrape time.
	clock.SetTime(t0.Add(time.Minute))
	wantAge := `
# HELP slicelet_eviction_signal_observation_age_seconds Seconds since the latest observation of an eviction signal.
# TYPE slicelet_eviction_signal_observation_age_seconds gauge
slicelet_eviction_signal_observation_age_seconds{signal="memory.available"} 70
slicelet_eviction_signal_observation_age_seconds{signal="nodefs.inodesFree"} 61.5
slicelet_eviction_signal_observation_age_seconds{signal="pid.available"} 59
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantAge), "slicelet_eviction_signal_observation_age_seconds"); err != nil {
		t.Error(err)
	}
}

// TestNoPodSource checks that nothing about pods or health is exported without their sources.
func TestNoPodSource(t *testing.T) {
	m := New(Options{NoRuntimeCollectors: true})
	n, err := testutil.GatherAndCount(m.Registry(), "slicelet_pods", "slicelet_pods_rejected", "slicelet_health_status", "slicelet_node_condition")
	if err != nil || n != 0 {
		t.Errorf("pod and health series without sources = %d, %v; want 0", n, err)
	}
}

func TestCountPods(t *testing.T) {
	tests := []struct {
		name     string
		pods     []v1.Pod
		want     map[qosPhase]int // non-zero entries only
		rejected map[string]int
	}{
		{name: "none", want: map[qosPhase]int{}, rejected: map[string]int{}},
		{
			name: "by qos and phase",
			pods: []v1.Pod{
				pod(v1.PodQOSGuaranteed, v1.PodRunning, "", 1),
				pod(v1.PodQOSGuaranteed, v1.PodSucceeded, "", 1),
				pod(v1.PodQOSBestEffort, v1.PodRunning, "", 1),
			},
			want: map[qosPhase]int{
				{v1.PodQOSGuaranteed, v1.PodRunning}: 1, {v1.PodQOSGuaranteed, v1.PodSucceeded}: 1,
				{v1.PodQOSBestEffort, v1.PodRunning}: 1,
			},
			rejected: map[string]int{},
		},
		{
			name:     "no phase is Unknown",
			pods:     []v1.Pod{pod(v1.PodQOSBurstable, "", "", 0)},
			want:     map[qosPhase]int{{v1.PodQOSBurstable, v1.PodUnknown}: 1},
			rejected: map[string]int{},
		},
		{
			name: "rejections need a reason and no container",
			pods: []v1.Pod{
				pod(v1.PodQOSBurstable, v1.PodFailed, "OutOfmemory", 0),
				pod(v1.PodQOSBurstable, v1.PodFailed, "", 0),             // no reason
				pod(v1.PodQOSBurstable, v1.PodFailed, "Evicted", 2),      // containers ran
				pod(v1.PodQOSBurstable, v1.PodPending, "OutOfmemory", 0), // not failed
				func() v1.Pod {
					p := pod(v1.PodQOSBurstable, v1.PodFailed, "InitFailed", 0)
					p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init"}}
					return p
				}(),
			},
			want: map[qosPhase]int{
				{v1.PodQOSBurstable, v1.PodFailed}: 4, {v1.PodQOSBurstable, v1.PodPending}: 1,
			},
			rejected: map[string]int{"OutOfmemory": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := countPods(tt.pods)
			if len(got.byQOSPhase) != len(qosClasses)*len(podPhases) {
				t.Errorf("%d qos/phase series, want all %d", len(got.byQOSPhase), len(qosClasses)*len(podPhases))
			}
			for k, n := range got.byQOSPhase {
				if n != tt.want[k] {
					t.Errorf("pods{qos=%s,phase=%s} = %d, want %d", k.qos, k.phase, n, tt.want[k])
				}
			}
			if fmt.Sprint(got.rejected) != fmt.Sprint(tt.rejected) {
				t.Errorf("rejected = %v, want %v", got.rejected, tt.rejected)
			}
		})
	}
}

func TestCountsItems(t *testing.T) {
	tests := []struct {
		signal string
		want   bool
	}{
		{"memory.available", false},
		{"allocatableMemory.available", false},
		{"nodefs.available", false},
		{"imagefs.available", false},
		{"containerfs.available", false},
		{"nodefs.inodesFree", true},
		{"imagefs.inodesFree", true},
		{"containerfs.inodesFree", true},
		{"pid.available", true},
	}
	for _, tt := range tests {
		t.Run(tt.signal, func(t *testing.T) {
			if got := countsItems(tt.signal); got != tt.want {
				t.Errorf("countsItems(%q) = %v, want %v", tt.signal, got, tt.want)
			}
		})
	}
}

// TestNilMetrics checks that a nil *Metrics is a valid, silent sink.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveSystemd("start", "success", time.Millisecond)
	m.AdmissionRejected("OutOfcpu")
	m.Evicted("memory.available")
	m.GCRun(GCKindImages, ResultSuccess, 1, 1)
	m.SetSignalObservation("memory.available", 1, time.Now())
}
