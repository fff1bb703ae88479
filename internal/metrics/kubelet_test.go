package metrics

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// TestKubeletFamilies: the kubelet's families with its names, types, help (component-base's
// "[ALPHA] " included), labels and buckets (pkg/kubelet/metrics/metrics.go), fed through the
// typed methods; kubelet_evictions counts with slicelet_evictions_total.
func TestKubeletFamilies(t *testing.T) {
	k := NewKubeletFamilies()
	pods := fakePods{{Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		{Name: "b", ContainerID: "cri://b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}},
	}}}}
	m := New(Options{Version: "1", NoRuntimeCollectors: true, Kubelet: k, Pods: pods})
	k.SetNode("node-a", 2)
	k.PodWorker(PodWorkerCreate, 300*time.Millisecond)
	k.PodStarted(2500 * time.Millisecond)
	k.Relisted(time.Unix(100, 0), 20*time.Millisecond)
	k.Relisted(time.Unix(101, 0), 20*time.Millisecond)
	k.RuntimeOperation("list_containers", 3*time.Millisecond, false)
	k.RuntimeOperation("start_container", 40*time.Millisecond, true)
	k.RestRequest("200", "GET", "10.0.0.1:6443")
	k.CgroupManagerOperation("create", 30*time.Millisecond)
	k.CgroupManagerOperation("destroy", 2*time.Second)
	m.Evicted("memory.available")

	want := `
# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.
# TYPE kubelet_node_name gauge
kubelet_node_name{node="node-a"} 1
# HELP kubelet_cgroup_version [ALPHA] cgroup version on the hosts.
# TYPE kubelet_cgroup_version gauge
kubelet_cgroup_version 2
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 1
# HELP kubelet_running_containers [ALPHA] Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 1
# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="memory.available"} 1
# HELP kubelet_started_pods_total [ALPHA] Cumulative number of pods started
# TYPE kubelet_started_pods_total counter
kubelet_started_pods_total 1
# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="list_containers"} 1
kubelet_runtime_operations_total{operation_type="start_container"} 1
# HELP kubelet_runtime_operations_errors_total [ALPHA] Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="start_container"} 1
# HELP rest_client_requests_total [ALPHA] Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET"} 1
# HELP kubelet_pleg_last_seen_seconds [ALPHA] Timestamp in seconds when PLEG was last seen active.
# TYPE kubelet_pleg_last_seen_seconds gauge
kubelet_pleg_last_seen_seconds 101.02
# HELP kubelet_cgroup_manager_duration_seconds [ALPHA] Duration in seconds for cgroup manager operations. Broken down by method.
# TYPE kubelet_cgroup_manager_duration_seconds histogram
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.005"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.01"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.025"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.05"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.1"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.25"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.5"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="1"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="2.5"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="5"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="10"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="+Inf"} 1
kubelet_cgroup_manager_duration_seconds_sum{operation_type="create"} 0.03
kubelet_cgroup_manager_duration_seconds_count{operation_type="create"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.005"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.01"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.025"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.05"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.1"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.25"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="0.5"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="1"} 0
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="2.5"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="5"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="10"} 1
kubelet_cgroup_manager_duration_seconds_bucket{operation_type="destroy",le="+Inf"} 1
kubelet_cgroup_manager_duration_seconds_sum{operation_type="destroy"} 2
kubelet_cgroup_manager_duration_seconds_count{operation_type="destroy"} 1
`
	names := []string{"kubelet_node_name", "kubelet_cgroup_version", "kubelet_running_pods", "kubelet_running_containers", "kubelet_evictions",
		"kubelet_started_pods_total", "kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total", "rest_client_requests_total",
		"kubelet_pleg_last_seen_seconds", "kubelet_cgroup_manager_duration_seconds"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The histograms: the kubelet's buckets.
	buckets := map[string][]float64{
		"kubelet_pod_worker_duration_seconds":         {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		"kubelet_pod_start_duration_seconds":          {0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
		"kubelet_pleg_relist_duration_seconds":        {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		"kubelet_pleg_relist_interval_seconds":        {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		"kubelet_cgroup_manager_duration_seconds":     {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		"kubelet_runtime_operations_duration_seconds": {0.005, 0.0125, 0.03125, 0.078125, 0.1953125, 0.48828125, 1.220703125, 3.0517578125, 7.62939453125, 19.073486328125, 47.6837158203125, 119.20928955078125, 298.0232238769531, 745.0580596923828},
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		want, ok := buckets[mf.GetName()]
		if !ok {
			continue
		}
		seen[mf.GetName()] = true
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: type %v, want histogram", mf.GetName(), mf.GetType())
			continue
		}
		var got []float64
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			got = append(got, b.GetUpperBound())
		}
		if len(got) != len(want) {
			t.Errorf("%s: buckets %v, want %v", mf.GetName(), got, want)
			continue
		}
		for i := range got {
			if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: buckets %v, want %v", mf.GetName(), got, want)
				break
			}
		}
	}
	for name := range buckets {
		if !seen[name] {
			t.Errorf("%s not exported", name)
		}
	}
	if problems, err := testutil.GatherAndLint(m.Registry(), names...); err != nil || len(problems) > 0 {
		// kubelet_evictions is the kubelet's name, a counter without _total: promlint says
		// so, and the name stays the kubelet's.
		for _, p := range problems {
			if p.Metric != "kubelet_evictions" {
				t.Errorf("promlint: %v", p)
			}
		}
	}
}

// TestCountRunning: kubelet_running_pods counts pods with a sandbox up (Running, or Pending
// with PodReadyToStartContainers), kubelet_running_containers the containers of pods not
// finished by runtime state.
func TestCountRunning(t *testing.T) {
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	tests := []struct {
		name       string
		pods       []v1.Pod
		wantPods   int
		containers map[string]int
	}{
		{name: "none", containers: map[string]int{}},
		{name: "pending without sandbox", pods: []v1.Pod{{Status: v1.PodStatus{Phase: v1.PodPending,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}},
			containers: map[string]int{}},
		{name: "pending with sandbox, init running", pods: []v1.Pod{{Status: v1.PodStatus{Phase: v1.PodPending,
			Conditions:            []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}},
			InitContainerStatuses: []v1.ContainerStatus{{Name: "init", State: running}}}}},
			wantPods: 1, containers: map[string]int{"running": 1}},
		{name: "running, one exited, one created", pods: []v1.Pod{{Status: v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: running},
				{Name: "b", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "c", ContainerID: "cri://c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}}},
			wantPods: 1, containers: map[string]int{"running": 1, "exited": 1, "created": 1}},
		{name: "succeeded pod counts nothing", pods: []v1.Pod{{Status: v1.PodStatus{Phase: v1.PodSucceeded,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}}}}},
			containers: map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := countRunning(tt.pods)
			if got.pods != tt.wantPods || len(got.containers) != len(tt.containers) {
				t.Fatalf("got %+v, want %d pods, containers %v", got, tt.wantPods, tt.containers)
			}
			for k, v := range tt.containers {
				if got.containers[k] != v {
					t.Errorf("containers %v, want %v", got.containers, tt.containers)
				}
			}
		})
	}
}

// TestGoRuntimeFamilies: /metrics has the Go runtime's every metric, as the kubelet's Go
// collector registers them (its dashboards' go_goroutines among them).
func TestGoRuntimeFamilies(t *testing.T) {
	mfs, err := New(Options{Version: "1"}).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "go_gc_heap_goal_bytes", "go_sched_latencies_seconds", "go_cpu_classes_gc_total_cpu_seconds_total",
		"process_resident_memory_bytes", "process_start_time_seconds"} {
		if !got[name] {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestKubernetesBuildInfo: kubernetes_build_info with component-base's name, help and labels,
// major and minor of the Kubernetes version the node reports.
func TestKubernetesBuildInfo(t *testing.T) {
	k := NewKubeletFamilies()
	k.SetVersion("v1.37.2+slicelet.0.4.0-dirty", "0.4.0-dirty")
	m := New(Options{NoRuntimeCollectors: true, Kubelet: k})
	want := `
# HELP kubernetes_build_info ` + buildInfoHelp + `
# TYPE kubernetes_build_info gauge
kubernetes_build_info{build_date="",compiler="` + runtime.Compiler + `",git_commit="0.4.0-dirty",git_tree_state="dirty",git_version="v1.37.2+slicelet.0.4.0-dirty",go_version="` + runtime.Version() + `",major="1",minor="37",platform="` + runtime.GOOS + "/" + runtime.GOARCH + `"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "kubernetes_build_info"); err != nil {
		t.Error(err)
	}
}

// TestVolumeFamilies: storage_operation_duration_seconds with the kubelet's labels and
// buckets, volume_manager_total_volumes from the volume source by plugin and state.
func TestVolumeFamilies(t *testing.T) {
	k := NewKubeletFamilies()
	k.SetVolumes(func() (map[string]int, map[string]int) {
		return map[string]int{"kubernetes.io/empty-dir": 2, "kubernetes.io/configmap": 1}, map[string]int{"kubernetes.io/empty-dir": 1}
	})
	m := New(Options{NoRuntimeCollectors: true, Kubelet: k})
	k.VolumeOperation("kubernetes.io/empty-dir", "volume_mount", 200*time.Millisecond, false)
	k.VolumeOperation("kubernetes.io/configmap", "volume_mount", time.Second, true)
	want := `
# HELP volume_manager_total_volumes [ALPHA] Number of volumes in Volume Manager
# TYPE volume_manager_total_volumes gauge
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="desired_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="actual_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "volume_manager_total_volumes"); err != nil {
		t.Error(err)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "storage_operation_duration_seconds" {
			continue
		}
		if mf.GetHelp() != "[BETA] Storage operation duration" || len(mf.GetMetric()) != 2 {
			t.Errorf("storage_operation_duration_seconds: %v", mf)
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			wantStatus := "success"
			if labels["volume_plugin"] == "kubernetes.io/configmap" {
				wantStatus = "fail-unknown"
			}
			if labels["operation_name"] != "volume_mount" || labels["status"] != wantStatus || labels["migrated"] != "false" ||
				len(s.GetHistogram().GetBucket()) != len(storageOperationBuckets) {
				t.Errorf("storage_operation_duration_seconds series %v", s)
			}
		}
		return
	}
	t.Error("storage_operation_duration_seconds not exported")
}

// TestVolumeStatsFamilies: the kubelet_volume_stats_* families by namespace and claim, one
// series per claim (the first listed when several pods use it), and
// kubelet_volume_metric_collection_duration_seconds by source.
func TestVolumeStatsFamilies(t *testing.T) {
	k := NewKubeletFamilies()
	k.SetVolumeStats(func() []ClaimVolumeStats {
		return []ClaimVolumeStats{
			{Namespace: "db", Claim: "data-pg-0", Capacity: 1 << 30, Available: 3 << 28, Used: 1 << 28, Inodes: 1000, InodesFree: 900, InodesUsed: 100},
			{Namespace: "db", Claim: "data-pg-0", Capacity: 5},
			{Namespace: "web", Claim: "cache", Capacity: 5},
		}
	})
	m := New(Options{NoRuntimeCollectors: true, Kubelet: k})
	k.VolumeStatDuration("du", 30*time.Millisecond)
	k.VolumeStatDuration("hostpath.csi.k8s.io", 2*time.Millisecond)
	want := `
# HELP kubelet_volume_stats_available_bytes [ALPHA] Number of available bytes in the volume
# TYPE kubelet_volume_stats_available_bytes gauge
kubelet_volume_stats_available_bytes{namespace="db",persistentvolumeclaim="data-pg-0"} 8.05306368e+08
kubelet_volume_stats_available_bytes{namespace="web",persistentvolumeclaim="cache"} 0
# HELP kubelet_volume_stats_capacity_bytes [ALPHA] Capacity in bytes of the volume
# TYPE kubelet_volume_stats_capacity_bytes gauge
kubelet_volume_stats_capacity_bytes{namespace="db",persistentvolumeclaim="data-pg-0"} 1.073741824e+09
kubelet_volume_stats_capacity_bytes{namespace="web",persistentvolumeclaim="cache"} 5
# HELP kubelet_volume_stats_inodes [ALPHA] Maximum number of inodes in the volume
# TYPE kubelet_volume_stats_inodes gauge
kubelet_volume_stats_inodes{namespace="db",persistentvolumeclaim="data-pg-0"} 1000
kubelet_volume_stats_inodes{namespace="web",persistentvolumeclaim="cache"} 0
# HELP kubelet_volume_stats_inodes_free [ALPHA] Number of free inodes in the volume
# TYPE kubelet_volume_stats_inodes_free gauge
kubelet_volume_stats_inodes_free{namespace="db",persistentvolumeclaim="data-pg-0"} 900
kubelet_volume_stats_inodes_free{namespace="web",persistentvolumeclaim="cache"} 0
# HELP kubelet_volume_stats_inodes_used [ALPHA] Number of used inodes in the volume
# TYPE kubelet_volume_stats_inodes_used gauge
kubelet_volume_stats_inodes_used{namespace="db",persistentvolumeclaim="data-pg-0"} 100
kubelet_volume_stats_inodes_used{namespace="web",persistentvolumeclaim="cache"} 0
# HELP kubelet_volume_stats_used_bytes [ALPHA] Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="db",persistentvolumeclaim="data-pg-0"} 2.68435456e+08
kubelet_volume_stats_used_bytes{namespace="web",persistentvolumeclaim="cache"} 0
`
	names := []string{"kubelet_volume_stats_available_bytes", "kubelet_volume_stats_capacity_bytes", "kubelet_volume_stats_inodes",
		"kubelet_volume_stats_inodes_free", "kubelet_volume_stats_inodes_used", "kubelet_volume_stats_used_bytes"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(m.Registry(), "kubelet_volume_metric_collection_duration_seconds"); err != nil || n != 2 {
		t.Errorf("kubelet_volume_metric_collection_duration_seconds series: %d, %v; want 2", n, err)
	}
}
