package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	info "github.com/google/cadvisor/lib/model"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeCadvisor is a CadvisorSource.
type fakeCadvisor map[string]*info.ContainerInfo

func (f fakeCadvisor) ContainerInfo() map[string]*info.ContainerInfo { return f }
func (f fakeCadvisor) MachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: 4, NumPhysicalCores: 2, NumSockets: 1, MemoryCapacity: 8 << 30, MachineID: "m", SystemUUID: "U", BootID: "b"}, nil
}
func (f fakeCadvisor) VersionInfo() *info.VersionInfo {
	return &info.VersionInfo{KernelVersion: "6.1.0", ContainerOsVersion: "Debian GNU/Linux 13 (trixie)"}
}

// TestCadvisorFamilies: /metrics/cadvisor is cAdvisor's collectors with the kubelet's label
// set (container, id, image, name, namespace, pod; cpu="total" on the CPU usage), the
// families the kubernetes-mixin reads among them, machine_* with cAdvisor's machine labels;
// on the local endpoint and the kubelet API's handler alike.
func TestCadvisorFamilies(t *testing.T) {
	at := time.Unix(1000, 0)
	const cg = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope"
	src := fakeCadvisor{cg: {
		ContainerReference: info.ContainerReference{Name: cg, Id: "abc", Aliases: []string{"abc"}},
		Spec: info.ContainerSpec{Image: "nginx:1", CreationTime: at, HasCpu: true, HasMemory: true, HasProcesses: true,
			Cpu:    info.CpuSpec{Limit: 102, Quota: 50000, Period: 100000},
			Memory: info.MemorySpec{Limit: 256 << 20},
			Labels: map[string]string{labelPodName: "web", labelPodNamespace: "default", labelContainerName: "app"}},
		Stats: []*info.ContainerStats{{Timestamp: at,
			Cpu:       &info.CpuStats{Usage: info.CpuUsage{Total: 5e9, User: 3e9, System: 2e9}, CFS: info.CpuCFS{Periods: 100, ThrottledPeriods: 10, ThrottledTime: 5e8}},
			Memory:    &info.MemoryStats{Usage: 2000, WorkingSet: 1800, RSS: 1000, Cache: 600},
			Processes: &info.ProcessStats{ThreadsCurrent: 4}, OOMEvents: 1}},
	}}
	m := New(Options{Version: "1", NoRuntimeCollectors: true, Cadvisor: src})
	labels := `container="app",id="` + cg + `",image="nginx:1",name="abc",namespace="default",pod="web"`
	cpuLabels := `container="app",cpu="total",id="` + cg + `",image="nginx:1",name="abc",namespace="default",pod="web"`
	want := `
# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{` + cpuLabels + `} 5 1000000
# HELP container_cpu_cfs_periods_total Number of elapsed enforcement period intervals.
# TYPE container_cpu_cfs_periods_total counter
container_cpu_cfs_periods_total{` + labels + `} 100 1000000
# HELP container_cpu_cfs_throttled_periods_total Number of throttled period intervals.
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{` + labels + `} 10 1000000
# HELP container_memory_working_set_bytes Current working set in bytes.
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{` + labels + `} 1800 1000000
# HELP container_memory_rss Size of RSS in bytes.
# TYPE container_memory_rss gauge
container_memory_rss{` + labels + `} 1000 1000000
# HELP container_memory_cache Number of bytes of page cache memory.
# TYPE container_memory_cache gauge
container_memory_cache{` + labels + `} 600 1000000
# HELP container_spec_memory_limit_bytes Memory limit for the container.
# TYPE container_spec_memory_limit_bytes gauge
container_spec_memory_limit_bytes{` + labels + `} 2.68435456e+08
# HELP container_oom_events_total Count of out of memory events observed for the container
# TYPE container_oom_events_total counter
container_oom_events_total{` + labels + `} 1 1000000
# HELP machine_cpu_cores Number of logical CPU cores.
# TYPE machine_cpu_cores gauge
machine_cpu_cores{boot_id="b",machine_id="m",system_uuid="U"} 4
# HELP machine_memory_bytes Amount of memory installed on the machine.
# TYPE machine_memory_bytes gauge
machine_memory_bytes{boot_id="b",machine_id="m",system_uuid="U"} 8.589934592e+09
`
	names := []string{"container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
		"container_memory_working_set_bytes", "container_memory_rss", "container_memory_cache", "container_spec_memory_limit_bytes",
		"container_oom_events_total", "machine_cpu_cores", "machine_memory_bytes"}
	for _, h := range []struct {
		name string
		path string
	}{{"local", "/metrics/cadvisor"}} {
		rec := httptest.NewRecorder()
		m.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", h.path, nil))
		if rec.Code != 200 {
			t.Fatalf("%s %s: %d %s", h.name, h.path, rec.Code, rec.Body)
		}
		if err := testutil.GatherAndCompare(m.cadvisor, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
		for _, n := range names {
			if !strings.Contains(rec.Body.String(), "\n"+n+"{") {
				t.Errorf("%s %s: no %s", h.name, h.path, n)
			}
		}
	}
	if m.KubeletHandlers(nil).Cadvisor == nil {
		t.Fatal("the kubelet API has no /metrics/cadvisor handler")
	}
	if New(Options{NoRuntimeCollectors: true}).KubeletHandlers(nil).Cadvisor != nil {
		t.Error("a /metrics/cadvisor handler without a source")
	}
}

// TestCadvisorPressure: /metrics/cadvisor serves cAdvisor's six pressure stall families exactly
// where the kubelet does (the kernel accounts PSI per cgroup: cgroup v2 with PSI on), with
// Full.Total as stalled and Some.Total as waiting, the kernel's microseconds in seconds; on
// cgroup v1 (and v2 with psi=0) none of them.
func TestCadvisorPressure(t *testing.T) {
	at := time.Unix(1000, 0)
	const cg = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope"
	psi := func(some, full uint64) info.PSIStats {
		return info.PSIStats{Some: info.PSIData{Total: some, Avg10: 1.5}, Full: info.PSIData{Total: full}}
	}
	src := fakeCadvisor{cg: {
		ContainerReference: info.ContainerReference{Name: cg, Id: "abc", Aliases: []string{"abc"}},
		Spec: info.ContainerSpec{Image: "nginx:1", CreationTime: at, HasCpu: true, HasMemory: true, HasDiskIo: true,
			Labels: map[string]string{labelPodName: "web", labelPodNamespace: "default", labelContainerName: "app"}},
		Stats: []*info.ContainerStats{{Timestamp: at,
			Cpu:    &info.CpuStats{PSI: psi(2500000, 1000000)},
			Memory: &info.MemoryStats{PSI: psi(300000, 200000)},
			DiskIo: &info.DiskIoStats{PSI: psi(60000, 50000)}}},
	}}
	labels := `{container="app",id="` + cg + `",image="nginx:1",name="abc",namespace="default",pod="web"}`
	families := []struct{ name, help, value string }{
		{"container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", "1"},
		{"container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", "2.5"},
		{"container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", "0.2"},
		{"container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", "0.3"},
		{"container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", "0.05"},
		{"container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", "0.06"},
	}
	var names []string
	v2 := ""
	for _, f := range families {
		names = append(names, f.name)
		v2 += "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " counter\n" + f.name + labels + " " + f.value + " 1000000\n"
	}
	for _, tt := range []struct {
		name string
		psi  bool
		want string
	}{
		{name: "cgroup v2 with PSI", psi: true, want: v2},
		{name: "cgroup v1, or v2 with psi=0", psi: false, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Options{Version: "1", NoRuntimeCollectors: true, Cadvisor: src, CadvisorPressure: tt.psi})
			if err := testutil.GatherAndCompare(m.cadvisor, strings.NewReader(tt.want), names...); err != nil {
				t.Error(err)
			}
		})
	}
}
