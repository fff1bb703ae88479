package podstats_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/internal/procfs"
)

// TestCadvisorInfo: the samples as cAdvisor's containers, as the kubelet's /metrics/cadvisor
// labels them: the node as "/", the pod's cgroup with its pod and namespace (and its network),
// each container's cgroup with the runtime's container ID as its alias, the image of its
// status, the io.kubernetes.* labels, its limits as spec; the numbers are the sample's.
func TestCadvisorInfo(t *testing.T) {
	at := time.Unix(1000, 0)
	const podCg = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
	const appCg = podCg + "/cri-containerd-abc.scope"
	app := podstats.ContainerUsage{Name: "app", Cgroup: appCg, Usage: podstats.Usage{MemoryWorkingSet: 1800, MemoryUsage: 2000, MemoryRSS: 1000, CPU: 5 * time.Second,
		Stats: eviction.CgroupStats{Cache: 600, Periods: 100, ThrottledPeriods: 10, OOMKills: 1, HasMemorySpec: true, MemoryLimit: 256 << 20,
			HasCPUSpec: true, CPUShares: 102, CPUQuota: 50000, CPUPeriod: 100000,
			CPUPressure:    eviction.PSIStats{Some: eviction.PSIData{Avg10: 1.5, Total: 2500000}, Full: eviction.PSIData{Total: 1000}},
			MemoryPressure: eviction.PSIStats{Some: eviction.PSIData{Total: 300}, Full: eviction.PSIData{Total: 200}},
			IOPressure:     eviction.PSIStats{Some: eviction.PSIData{Total: 60}, Full: eviction.PSIData{Total: 50}}}}}
	samples := []podstats.PodLatest{{Namespace: "default", Name: "web", UID: "1", Latest: podstats.Latest[podstats.PodUsage]{At: at,
		Usage: podstats.PodUsage{Cgroup: podCg, Usage: podstats.Usage{MemoryWorkingSet: 2000, CPU: 6 * time.Second},
			Containers: []podstats.ContainerUsage{app},
			Network:    []procfs.NetInterface{{Name: "eth0", RxBytes: 10, TxBytes: 20}}}}}}
	pods := []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
		Status: v1.PodStatus{StartTime: &metav1.Time{Time: at.Add(-time.Minute)}, ContainerStatuses: []v1.ContainerStatus{{Name: "app",
			Image: "docker.io/library/nginx:latest", ContainerID: "containerd://abc",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Time{Time: at.Add(-30 * time.Second)}}}}}}}}
	node := podstats.Latest[podstats.Usage]{At: at, Usage: podstats.Usage{MemoryWorkingSet: 5 << 30, CPU: time.Hour}}

	got := podstats.CadvisorInfo(samples, pods, podstats.CadvisorOptions{SysRoot: t.TempDir(), Node: &node})
	if len(got) != 3 {
		t.Fatalf("%d containers, want the node, the pod and its container", len(got))
	}
	root := got["/"]
	if root == nil || root.Stats[0].Memory.WorkingSet != 5<<30 || root.Stats[0].Cpu.Usage.Total != uint64(time.Hour) {
		t.Errorf("root: %+v", root)
	}
	pod := got[podCg]
	if pod == nil || pod.Spec.Labels[podstats.PodNameLabel] != "web" || pod.Spec.Labels[podstats.PodNamespaceLabel] != "default" ||
		pod.Spec.Labels[podstats.ContainerNameLabel] != "" || pod.Spec.Image != "" || len(pod.Aliases) != 0 {
		t.Errorf("pod cgroup: %+v", pod)
	}
	if pod != nil && (pod.Stats[0].Network == nil || pod.Stats[0].Network.Interfaces[0].Name != "eth0" || pod.Stats[0].Network.Interfaces[0].TxBytes != 20 || !pod.Spec.HasNetwork) {
		t.Errorf("pod network: %+v", pod.Stats[0].Network)
	}
	c := got[appCg]
	if c == nil {
		t.Fatal("no container")
	}
	if c.Aliases[0] != "abc" || c.Spec.Image != "docker.io/library/nginx:latest" || c.Spec.Labels[podstats.ContainerNameLabel] != "app" ||
		!c.Spec.StartTime.Equal(at.Add(-30*time.Second)) {
		t.Errorf("container: %+v", c)
	}
	if !c.Spec.HasMemory || c.Spec.Memory.Limit != 256<<20 || !c.Spec.HasCpu || c.Spec.Cpu.Quota != 50000 || c.Spec.Cpu.Period != 100000 || c.Spec.Cpu.Limit != 102 {
		t.Errorf("container spec: %+v", c.Spec)
	}
	s := c.Stats[0]
	if !s.Timestamp.Equal(at) || s.Cpu.Usage.Total != uint64(5*time.Second) || s.Cpu.CFS.ThrottledPeriods != 10 || s.Memory.WorkingSet != 1800 ||
		s.Memory.Cache != 600 || s.Memory.RSS != 1000 || s.OOMEvents != 1 || s.Network != nil {
		t.Errorf("container stats: cpu %+v memory %+v oom %d network %v", s.Cpu, s.Memory, s.OOMEvents, s.Network)
	}
	// The pressure files' figures, in the kernel's microseconds; the disk I/O stats are there
	// without I/O, for io.pressure, as cAdvisor's are.
	if s.Cpu.PSI.Some.Total != 2500000 || s.Cpu.PSI.Some.Avg10 != 1.5 || s.Cpu.PSI.Full.Total != 1000 ||
		s.Memory.PSI.Some.Total != 300 || s.Memory.PSI.Full.Total != 200 ||
		s.DiskIo == nil || s.DiskIo.PSI.Some.Total != 60 || s.DiskIo.PSI.Full.Total != 50 || len(s.DiskIo.IoServiceBytes) != 0 {
		t.Errorf("container pressure: cpu %+v memory %+v io %+v", s.Cpu.PSI, s.Memory.PSI, s.DiskIo)
	}
}
