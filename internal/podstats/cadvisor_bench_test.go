package podstats_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	info "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/internal/procfs"
)

// benchSource is the daemon's CadvisorSource over fixed samples: CadvisorInfo at each scrape,
// as podstats.Cadvisor does over the sampler's.
type benchSource struct {
	samples []podstats.PodLatest
	pods    []v1.Pod
	node    podstats.Latest[podstats.Usage]
}

func (b *benchSource) ContainerInfo() map[string]*info.ContainerInfo {
	return podstats.CadvisorInfo(b.samples, b.pods, podstats.CadvisorOptions{SysRoot: "/nonexistent", Node: &b.node})
}
func (b *benchSource) MachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: 2, MemoryCapacity: 8 << 30}, nil
}
func (b *benchSource) VersionInfo() *info.VersionInfo { return &info.VersionInfo{KernelVersion: "6.1"} }

// benchNode is a node of n pods of two containers each, every cgroup with the numbers a real
// sample has (limits, throttling, one block device, the pod's eth0).
func benchNode(n int) *benchSource {
	at := time.Unix(1000, 0)
	st := eviction.CgroupStats{Cache: 1 << 20, MappedFile: 1 << 19, MaxUsage: 8 << 20, Pgfault: 100, Periods: 1000, ThrottledPeriods: 10,
		ThrottledTime: time.Second, CPUShares: 102, CPUQuota: 10000, CPUPeriod: 100000, HasCPUSpec: true, HasMemorySpec: true,
		MemoryLimit: 64 << 20, Threads: 3, IO: []eviction.DeviceIO{{Major: 8, ReadBytes: 4096, Reads: 1}}}
	u := podstats.Usage{MemoryWorkingSet: 4 << 20, MemoryUsage: 5 << 20, MemoryRSS: 3 << 20, CPU: time.Minute, Stats: st}
	b := &benchSource{node: podstats.Latest[podstats.Usage]{At: at, Usage: u}}
	for i := range n {
		uid := types.UID(fmt.Sprintf("0000-%04d", i))
		podCg := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%04d.slice", i)
		var cs []podstats.ContainerUsage
		var statuses []v1.ContainerStatus
		var specs []v1.Container
		for _, c := range []string{"app", "sidecar"} {
			id := fmt.Sprintf("%s%04d%056d", c[:1], i, 0)
			cs = append(cs, podstats.ContainerUsage{Name: c, Cgroup: podCg + "/cri-containerd-" + id + ".scope", Usage: u})
			statuses = append(statuses, v1.ContainerStatus{Name: c, Image: "registry.example/" + c + ":1", ContainerID: "containerd://" + id,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}})
			specs = append(specs, v1.Container{Name: c, Image: c})
		}
		b.samples = append(b.samples, podstats.PodLatest{Namespace: "default", Name: fmt.Sprintf("pod-%04d", i), UID: uid,
			Latest: podstats.Latest[podstats.PodUsage]{At: at, Usage: podstats.PodUsage{Usage: u, Containers: cs, Cgroup: podCg,
				Network: []procfs.NetInterface{{Name: "eth0", RxBytes: 1000, TxBytes: 2000}}}}})
		b.pods = append(b.pods, v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%04d", i), UID: uid},
			Spec: v1.PodSpec{Containers: specs}, Status: v1.PodStatus{StartTime: &metav1.Time{Time: at}, ContainerStatuses: statuses}})
	}
	return b
}

// BenchmarkCadvisorScrape: one scrape of /metrics/cadvisor of a node with 110 pods (the
// kubelet's default maxPods) of two containers each: the samples turned into cAdvisor's model
// and written by cAdvisor's collectors in the text format. Reports the series and bytes of a
// scrape.
func BenchmarkCadvisorScrape(b *testing.B) {
	for _, n := range []int{110} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			m := metrics.New(metrics.Options{NoRuntimeCollectors: true, Cadvisor: benchNode(n)})
			h := m.Handler(nil)
			var size, lines int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/cadvisor", nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
				lines = 0
				for line := range strings.Lines(rec.Body.String()) {
					if !strings.HasPrefix(line, "#") {
						lines++
					}
				}
				_, _ = io.Copy(io.Discard, rec.Body)
			}
			b.ReportMetric(float64(lines), "series")
			b.ReportMetric(float64(size)/1024, "KiB")
		})
	}
}
