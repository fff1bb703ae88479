package podstats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/units"
)

const (
	systemdPodCgroup = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaaaaaa_0000_0000_0000_000000000001.slice"
	criPodCgroup     = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podbbbbbbbb_0000_0000_0000_000000000002.slice"
	mib              = 1 << 20
)

// systemdPod is the fixture's systemd-runtime pod: app and hog (restarted: instance 2 is
// current, instance 1's cgroup lingers), a finished init container setup, and a sidecar with no
// cgroup.
func systemdPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "aaaaaaaa-0000-0000-0000-000000000001"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}},
			Containers:     []v1.Container{{Name: "app"}, {Name: "hog"}, {Name: "idle"}},
		},
	}
}

// criPod is the fixture's CRI pod: one container c1 next to its sandbox's scope.
func criPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cache", UID: "bbbbbbbb-0000-0000-0000-000000000002"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c1"}}},
	}
}

// criNamer names containers as the CRI runtime would: from the container IDs it knows.
var criNamer = podstats.NamerFunc(func(_ context.Context, pod *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	ids := map[string]string{"c1c1c1c1c1c1": "c1"}
	out := map[string]podstats.ContainerCgroup{}
	for _, d := range dirs {
		id := strings.TrimSuffix(strings.TrimPrefix(d, "cri-containerd-"), ".scope")
		if name, ok := ids[id]; ok {
			out[d] = podstats.ContainerCgroup{Name: name}
		}
	}
	return out, nil
})

func usageString(u podstats.PodUsage) string {
	s := fmt.Sprintf("pod ws=%dMi cpu=%v", u.MemoryWorkingSet/mib, u.CPU)
	for _, c := range u.Containers {
		s += fmt.Sprintf(" | %s ws=%dMi cpu=%v %s", c.Name, c.MemoryWorkingSet/mib, c.CPU, filepath.Base(c.Cgroup))
	}
	return s
}

// TestReadPod reads the v1 (hybrid) and v2 fixture trees. The numbers, from the fixture files:
// app 100Mi − 20Mi inactive_file = 80Mi, 1.5 s; hog instance 2 512Mi, 4 s (instance 1 is not
// current); setup's inactive_file is above its usage, so its working set is 0; the foreign
// unit of another pod and the CRI sandbox's scope are not containers of the pod.
func TestReadPod(t *testing.T) {
	systemd := podstats.NamerFunc(systemdrt.ContainerCgroups)
	tests := []struct {
		name   string
		pod    *v1.Pod
		cgroup string
		namer  podstats.Namer
		want   string
	}{
		{name: "systemd runtime", pod: systemdPod(), cgroup: systemdPodCgroup, namer: systemd,
			want: "pod ws=660Mi cpu=6s | app ws=80Mi cpu=1.5s slicelet-aaaaaaaa_0000_0000_0000_000000000001-app-1.service" +
				" | hog ws=512Mi cpu=4s slicelet-aaaaaaaa_0000_0000_0000_000000000001-hog-2.service" +
				" | setup ws=0Mi cpu=5ms slicelet-aaaaaaaa_0000_0000_0000_000000000001-setup-1.service"},
		{name: "cri runtime", pod: criPod(), cgroup: criPodCgroup, namer: criNamer,
			want: "pod ws=60Mi cpu=2s | c1 ws=56Mi cpu=1.9s cri-containerd-c1c1c1c1c1c1.scope"},
		{name: "no namer: the pod's totals only", pod: criPod(), cgroup: criPodCgroup,
			want: "pod ws=60Mi cpu=2s"},
	}
	for _, tree := range []struct {
		name string
		mode units.Mode
	}{{"v1", units.ModeHybrid}, {"v2", units.ModeUnified}} {
		for _, tt := range tests {
			t.Run(tree.name+"/"+tt.name, func(t *testing.T) {
				r := podstats.NewReader(filepath.Join("testdata", tree.name, "cgroup"), filepath.Join("testdata", tree.name, "proc"), tree.mode, tt.namer)
				u, err := r.ReadPod(t.Context(), tt.pod, tt.cgroup)
				if err != nil {
					t.Fatal(err)
				}
				if got := usageString(u); got != tt.want {
					t.Errorf("got  %s\nwant %s", got, tt.want)
				}
			})
		}
	}
}

func TestReadPodErrors(t *testing.T) {
	r := podstats.NewReader(filepath.Join("testdata", "v2", "cgroup"), "", units.ModeUnified, podstats.NamerFunc(systemdrt.ContainerCgroups))
	if _, err := r.ReadPod(t.Context(), systemdPod(), "/kubepods.slice/gone.slice"); !errors.Is(err, eviction.ErrUnavailable) {
		t.Errorf("pod cgroup gone: %v, want ErrUnavailable", err)
	}
	broken := podstats.NewReader(filepath.Join("testdata", "v2", "cgroup"), "", units.ModeUnified,
		podstats.NamerFunc(func(context.Context, *v1.Pod, []string) (map[string]podstats.ContainerCgroup, error) {
			return nil, errors.New("runtime down")
		}))
	if _, err := broken.ReadPod(t.Context(), systemdPod(), systemdPodCgroup); err == nil || !strings.Contains(err.Error(), "pod default/web: containers' cgroups: runtime down") {
		t.Errorf("namer failing: %v", err)
	}
	if _, err := r.ContainerMemory(t.Context(), eviction.ActivePod{Pod: systemdPod()}); !errors.Is(err, eviction.ErrUnavailable) {
		t.Errorf("no cgroup yet: %v", err)
	}
	// A container that exits between the listing and the read is left out, not an error.
	dir := t.TempDir()
	pod := filepath.Join(dir, "cgroup", "pod.slice")
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(pod, "memory.current"), "100\n")
	write(filepath.Join(pod, "memory.stat"), "inactive_file 0\n")
	write(filepath.Join(pod, "cpu.stat"), "usage_usec 1\n")
	os.MkdirAll(filepath.Join(pod, "slicelet-aaaaaaaa_0000_0000_0000_000000000001-app-1.service"), 0o755) // emptied: no files
	r = podstats.NewReader(filepath.Join(dir, "cgroup"), "", units.ModeUnified, podstats.NamerFunc(systemdrt.ContainerCgroups))
	u, err := r.ReadPod(t.Context(), systemdPod(), "/pod.slice")
	if err != nil || len(u.Containers) != 0 || u.MemoryWorkingSet != 100 {
		t.Errorf("exited container: %+v, %v", u, err)
	}
}

// TestContainerMemory is what the eviction manager gets: regular containers first, then init
// containers, in spec order, as the kubelet's eviction message walks them.
func TestContainerMemory(t *testing.T) {
	r := podstats.NewReader(filepath.Join("testdata", "v1", "cgroup"), "", units.ModeHybrid, podstats.NamerFunc(systemdrt.ContainerCgroups))
	got, err := r.ContainerMemory(t.Context(), eviction.ActivePod{Pod: systemdPod(), CgroupPath: systemdPodCgroup})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, c := range got {
		s = append(s, c.Name+"="+c.Memory.String())
	}
	if strings.Join(s, " ") != "app=80Mi hog=512Mi setup=0" {
		t.Errorf("container memory: %v", s)
	}
}

// TestReadNode: the node's working set is the root cgroup's (v2: anon + file − inactive_file,
// the root having no memory.current), its usage and RSS (v1 total_rss, v2 anon) too; its CPU is cpuacct.usage of the root on v1 and, where a
// v2 root has no cpu.stat, the busy time of /proc/stat (USER_HZ 100: user 500 s + nice 1 s +
// system 300 s + irq 2 s + softirq 3 s = 806 s).
func TestReadNode(t *testing.T) {
	for _, tt := range []struct {
		tree string
		mode units.Mode
		want podstats.Usage
	}{
		{"v1", units.ModeHybrid, podstats.Usage{MemoryWorkingSet: 5 << 30, MemoryUsage: 6 << 30, MemoryRSS: 5 << 30, CPU: 900 * time.Second}},
		// v2's proc has a meminfo: 1 GiB of its 2 GiB of swap in use.
		{"v2", units.ModeUnified, podstats.Usage{MemoryWorkingSet: 5 << 30, MemoryUsage: 6 << 30, MemoryRSS: 4 << 30, CPU: 806 * time.Second,
			// The root's pressure files are the node's.
			Stats: eviction.CgroupStats{Swap: 1 << 30,
				CPUPressure:    eviction.PSIStats{Some: eviction.PSIData{Avg10: 0.5, Avg60: 0.25, Avg300: 0.1, Total: 4000000}},
				MemoryPressure: eviction.PSIStats{Some: eviction.PSIData{Total: 3000}, Full: eviction.PSIData{Total: 2000}},
				IOPressure:     eviction.PSIStats{Some: eviction.PSIData{Total: 700}, Full: eviction.PSIData{Total: 600}}}}},
	} {
		r := podstats.NewReader(filepath.Join("testdata", tt.tree, "cgroup"), filepath.Join("testdata", tt.tree, "proc"), tt.mode, nil)
		got, err := r.ReadNode()
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, %v; want %+v", tt.tree, got, err, tt.want)
		}
	}
}

// TestReadCgroupWithoutCPUAccounting: on a v1 host whose cpuacct controller is mounted on its
// own (systemd then creates no unit cgroups in it), a cgroup's CPU time is its processes' (and
// its descendants'): utime + stime of /proc/<pid>/stat at USER_HZ 100 — 150 + 50 ticks for 101
// and 30 + 20 for 102 = 2.5 s; pid 103 has exited and counts nothing.
func TestReadCgroupWithoutCPUAccounting(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unit := filepath.Join(dir, "cgroup", "memory", "pod.slice", "app.service")
	write(filepath.Join(unit, "..", "memory.usage_in_bytes"), "1048576\n")
	write(filepath.Join(unit, "..", "memory.stat"), "total_inactive_file 0\n")
	write(filepath.Join(unit, "..", "cgroup.procs"), "")
	write(filepath.Join(unit, "memory.usage_in_bytes"), "1048576\n")
	write(filepath.Join(unit, "memory.stat"), "total_inactive_file 0\n")
	write(filepath.Join(unit, "cgroup.procs"), "101\n102\n103\n")
	stat := func(pid, comm string, utime, stime int) string {
		return fmt.Sprintf("%s (%s) S 1 %s %s 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 1 0 100 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n", pid, comm, pid, pid, utime, stime)
	}
	write(filepath.Join(dir, "proc", "101", "stat"), stat("101", "dd", 150, 50))
	write(filepath.Join(dir, "proc", "102", "stat"), stat("102", "sleep", 30, 20))
	r := podstats.NewReader(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), units.ModeHybrid, nil)
	for _, cg := range []string{"/pod.slice/app.service", "/pod.slice"} {
		u, err := r.ReadCgroup(cg)
		if err != nil || u.CPU != 2500*time.Millisecond || u.MemoryWorkingSet != 1<<20 {
			t.Errorf("%s: %+v, %v; want 2.5s of CPU", cg, u, err)
		}
	}
	// ReadPod measures the pod and its container from one walk of the pod's cgroups: the same
	// numbers. A pid in the pod's own cgroup counts for the pod, not for the container.
	write(filepath.Join(unit, "..", "cgroup.procs"), "102\n")
	write(filepath.Join(unit, "cgroup.procs"), "101\n")
	namer := podstats.NamerFunc(func(_ context.Context, _ *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
		return map[string]podstats.ContainerCgroup{"app.service": {Name: "app"}}, nil
	})
	r = podstats.NewReader(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), units.ModeHybrid, namer)
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	u, err := r.ReadPod(t.Context(), pod, "/pod.slice")
	if err != nil || u.CPU != 2500*time.Millisecond || len(u.Containers) != 1 || u.Containers[0].CPU != 2*time.Second {
		t.Errorf("ReadPod: %+v, %v; want 2.5s of CPU for the pod, 2s for its container", u, err)
	}
}

// writeFile writes s to p, creating its directory.
func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestContainerMemoryReadsNoCPU: the eviction manager's per-cycle read of every pod measures
// memory alone. On a v1 host without cpuacct in the units' cgroups ReadCgroup would walk the
// processes for their CPU time; here that walk would fail (a cgroup.procs the test made
// unreadable as pids), and ContainerMemory must not care.
func TestContainerMemoryReadsNoCPU(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) { writeFile(t, p, s) }
	pod := filepath.Join(dir, "cgroup", "memory", "pod.slice")
	app := filepath.Join(pod, "slicelet-aaaaaaaa_0000_0000_0000_000000000001-app-1.service")
	for _, cg := range []string{pod, app} {
		write(filepath.Join(cg, "memory.usage_in_bytes"), "2097152\n")
		write(filepath.Join(cg, "memory.stat"), "total_inactive_file 1048576\n")
		write(filepath.Join(cg, "cgroup.procs"), "not-a-pid\n")
	}
	r := podstats.NewReader(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), units.ModeHybrid, podstats.NamerFunc(systemdrt.ContainerCgroups))
	if _, err := r.ReadPod(t.Context(), systemdPod(), "/pod.slice"); err == nil {
		t.Fatal("ReadPod read no CPU: the fixture does not exercise the process walk")
	}
	got, err := r.ContainerMemory(t.Context(), eviction.ActivePod{Pod: systemdPod(), CgroupPath: "/pod.slice"})
	if err != nil || len(got) != 1 || got[0].Name != "app" || got[0].Memory.Value() != 1<<20 {
		t.Errorf("ContainerMemory = %+v, %v; want app's 1Mi working set", got, err)
	}
}
