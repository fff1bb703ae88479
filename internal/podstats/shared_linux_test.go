package podstats_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/units"
)

// node is a generated cgroup tree of n pods, each with two containers (app, sidecar) and a
// sandbox scope, as the CRI runtime lays them out, in mode.
type node struct {
	root string
	mode units.Mode
	pods []eviction.ActivePod
	dirs []string // every pod's and container's cgroup directory, in every controller
}

func (n *node) ActivePods() []eviction.ActivePod { return n.pods }

// sharedNamer names the generated containers by their scope's first letter.
var sharedNamer = podstats.NamerFunc(func(_ context.Context, _ *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	out := map[string]podstats.ContainerCgroup{}
	for _, d := range dirs {
		switch {
		case strings.HasPrefix(d, "cri-containerd-a"):
			out[d] = podstats.ContainerCgroup{Name: "app"}
		case strings.HasPrefix(d, "cri-containerd-b"):
			out[d] = podstats.ContainerCgroup{Name: "sidecar"}
		}
	}
	return out, nil
})

func newNode(t testing.TB, mode units.Mode, n int) *node {
	t.Helper()
	nd := &node{root: t.TempDir(), mode: mode}
	write := func(dir, file, s string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// cgroup writes one cgroup's files: usage MiB, inactive_file MiB, tasks.
	cgroup := func(cg string, usage, inactive, tasks int) {
		mib := func(v int) string { return fmt.Sprint(v << 20) }
		if mode == units.ModeUnified {
			dir := filepath.Join(nd.root, cg)
			nd.dirs = append(nd.dirs, dir)
			write(dir, "memory.current", mib(usage)+"\n")
			write(dir, "memory.stat", "anon "+mib(usage-inactive)+"\nfile "+mib(inactive)+"\ninactive_file "+mib(inactive)+"\npgfault 10\n")
			write(dir, "memory.max", "max\n")
			write(dir, "cpu.stat", "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n")
			write(dir, "cpu.weight", "100\n")
			write(dir, "cpu.max", "max 100000\n")
			write(dir, "pids.current", fmt.Sprint(tasks)+"\n")
			write(dir, "pids.max", "max\n")
			return
		}
		mem := filepath.Join(nd.root, "memory", cg)
		acct := filepath.Join(nd.root, "cpuacct", cg)
		pids := filepath.Join(nd.root, "pids", cg)
		nd.dirs = append(nd.dirs, mem, acct, pids)
		write(mem, "memory.usage_in_bytes", mib(usage)+"\n")
		write(mem, "memory.stat", "total_inactive_file "+mib(inactive)+"\ntotal_rss "+mib(usage-inactive)+"\npgfault 10\n")
		write(mem, "memory.limit_in_bytes", "9223372036854771712\n")
		write(acct, "cpuacct.usage", "1000000\n")
		write(pids, "pids.current", fmt.Sprint(tasks)+"\n")
	}
	for i := range n {
		cg := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%04d.slice", i)
		cgroup(cg, 30+i, 5, 3)
		cgroup(cg+fmt.Sprintf("/cri-containerd-a%04d.scope", i), 20+i, 4, 1)
		cgroup(cg+fmt.Sprintf("/cri-containerd-b%04d.scope", i), 8, 1, 1)
		cgroup(cg+fmt.Sprintf("/cri-containerd-s%04d.scope", i), 1, 0, 1)
		req := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%04d", i), UID: types.UID(fmt.Sprintf("uid-%04d", i))},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: req}, {Name: "sidecar"}}}}
		nd.pods = append(nd.pods, eviction.ActivePod{Pod: pod, CgroupPath: cg})
	}
	return nd
}

// evictor records evictions.
type evictor struct {
	mu      sync.Mutex
	evicted []string
}

func (e *evictor) EvictPod(_ context.Context, pod *v1.Pod, _ time.Duration, _ string, _ map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evicted = append(e.evicted, pod.Name)
	return nil
}
func (e *evictor) PodCleanedUp(string) bool { return true }

// interval is one monitoring interval's readers of the node's pod cgroups: the stats sampler
// and the eviction manager (with the sampler's samples when shared), with the node's memory
// available set to avail (the hard threshold is 100Mi).
type interval struct {
	sampler *podstats.Sampler
	manager *eviction.Manager
	ev      *evictor
}

func newInterval(t testing.TB, nd *node, shared bool, avail string) *interval {
	t.Helper()
	r := podstats.NewReader(nd.root, "/nonexistent", nd.mode, sharedNamer)
	s, err := podstats.NewSampler(podstats.SamplerOptions{Reader: r, Pods: nd})
	if err != nil {
		t.Fatal(err)
	}
	th, err := eviction.ParseThresholdConfig(nil, map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &evictor{}
	o := eviction.ManagerOptions{
		Config: eviction.Config{Thresholds: th}, Sources: eviction.Sources{CgroupRoot: nd.root, Mode: nd.mode},
		Pods: nd, Evictor: ev, ContainerMemory: r.ContainerMemory,
		Observe: func(now time.Time) (eviction.Observations, []eviction.Unavailable) {
			return eviction.Observations{eviction.SignalMemoryAvailable: {Available: resource.MustParse(avail), Capacity: resource.MustParse("8Gi"), Time: now}}, nil
		},
	}
	if shared {
		o.Sampled = s
	}
	m, err := eviction.NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	return &interval{sampler: s, manager: m, ev: ev}
}

// opens counts the files opened in watched directories (inotify IN_OPEN), by file name.
type opens struct {
	fd   int
	dirs map[int]string
}

func watchOpens(t testing.TB, dirs []string) *opens {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	o := &opens{fd: fd, dirs: map[int]string{}}
	for _, d := range dirs {
		wd, err := unix.InotifyAddWatch(fd, d, unix.IN_OPEN)
		if err != nil {
			t.Fatalf("inotify watch %s: %v", d, err)
		}
		o.dirs[wd] = d
	}
	return o
}

// take returns the files opened since the last take, by path;
// the events of finished opens are all queued already.
func (o *opens) take(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(o.fd, buf)
		if err == unix.EAGAIN {
			return out
		}
		if err != nil {
			t.Fatalf("inotify read: %v", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)])
			name = strings.TrimRight(name, "\x00")
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				t.Fatal("inotify queue overflowed")
			}
			if ev.Mask&unix.IN_ISDIR == 0 && name != "" {
				out[filepath.Join(o.dirs[int(ev.Wd)], name)]++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestOneCgroupReadPerPodPerInterval counts the files of the pods' cgroups opened in one
// monitoring interval by the stats sampler (whose samples also serve the summary API and
// /metrics/cadvisor) and the eviction manager. Shared, an idle cycle of the manager opens
// none: each pod's memory.stat is read once per interval, not three times (sampler, the
// manager's pod read, its containers' read). Under pressure the manager reads every pod
// itself, shared or not, and evicts the same pod.
func TestOneCgroupReadPerPodPerInterval(t *testing.T) {
	const pods = 4
	for _, mode := range []units.Mode{units.ModeUnified, units.ModeHybrid} {
		for _, tt := range []struct {
			name, avail string
			// unshared and shared are how often each pod cgroup's memory.stat is opened in
			// the interval.
			unshared, shared int
			evicted          string
		}{
			{name: "idle", avail: "4Gi", unshared: 3, shared: 1, evicted: "[]"},
			{name: "pressure", avail: "50Mi", unshared: 3, shared: 3, evicted: "[pod-0003]"},
		} {
			t.Run(fmt.Sprintf("%v/%s", mode, tt.name), func(t *testing.T) {
				var sampler, manager [2]map[string]int
				for i, shared := range []bool{false, true} {
					nd := newNode(t, mode, pods)
					iv := newInterval(t, nd, shared, tt.avail)
					w := watchOpens(t, nd.dirs)
					iv.sampler.Sample(t.Context())
					sampler[i] = w.take(t)
					iv.manager.Synchronize(t.Context())
					manager[i] = w.take(t)
					if got := fmt.Sprint(iv.ev.evicted); got != tt.evicted {
						t.Errorf("shared %v: evicted %s, want %s", shared, got, tt.evicted)
					}
					want := map[bool]int{false: tt.unshared, true: tt.shared}[shared]
					for _, p := range nd.pods {
						stat := filepath.Join(nd.root, p.CgroupPath, "memory.stat")
						if mode != units.ModeUnified {
							stat = filepath.Join(nd.root, "memory", p.CgroupPath, "memory.stat")
						}
						if got := sampler[i][stat] + manager[i][stat]; got != want {
							t.Errorf("shared %v: %s's memory.stat opened %d times in the interval (sampler %d, manager %d), want %d",
								shared, p.Pod.Name, got, sampler[i][stat], manager[i][stat], want)
						}
					}
					t.Logf("shared %v: files opened per pod in one interval: sampler %d, eviction manager %d",
						shared, total(sampler[i])/pods, total(manager[i])/pods)
				}
				if total(sampler[0]) != total(sampler[1]) {
					t.Errorf("the sampler opens %v shared, %v not: its reads must not change", sampler[1], sampler[0])
				}
			})
		}
	}
}

// TestSampledPodUsageIsTheManagersRead: what the eviction manager takes from a sample is what
// it reads of the pod itself (eviction.ReadPodUsage and Reader.ContainerMemory): the pod's
// working set and process count, its containers' working sets in the same order.
func TestSampledPodUsageIsTheManagersRead(t *testing.T) {
	for _, mode := range []units.Mode{units.ModeUnified, units.ModeHybrid} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			nd := newNode(t, mode, 3)
			iv := newInterval(t, nd, true, "4Gi")
			iv.sampler.Sample(t.Context())
			r := podstats.NewReader(nd.root, "/nonexistent", nd.mode, sharedNamer)
			str := func(u eviction.PodUsage) string {
				s := fmt.Sprintf("ws=%s procs=%d", u.Memory.String(), u.Processes)
				for _, c := range u.Containers {
					s += fmt.Sprintf(" %s=%s", c.Name, c.Memory)
				}
				return s
			}
			for _, p := range nd.pods {
				got, ok := iv.sampler.SampledPodUsage(p, time.Now().Add(-time.Minute))
				if !ok {
					t.Fatalf("%s: no sample", p.Pod.Name)
				}
				read, err := eviction.ReadPodUsage(nd.root, nd.mode, p.CgroupPath)
				if err != nil {
					t.Fatal(err)
				}
				ctrs, err := r.ContainerMemory(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				read.Containers = ctrs
				if str(got) != str(read) {
					t.Errorf("%s: sampled %s, read %s", p.Pod.Name, str(got), str(read))
				}
			}
			// Too old, another cgroup, a pod never sampled: no sample.
			p := nd.pods[0]
			if _, ok := iv.sampler.SampledPodUsage(p, time.Now().Add(time.Minute)); ok {
				t.Error("a sample older than since was given")
			}
			if _, ok := iv.sampler.SampledPodUsage(eviction.ActivePod{Pod: p.Pod, CgroupPath: p.CgroupPath + "x"}, time.Time{}); ok {
				t.Error("a sample of another cgroup was given")
			}
			other := p.Pod.DeepCopy()
			other.UID = "never-sampled"
			if _, ok := iv.sampler.SampledPodUsage(eviction.ActivePod{Pod: other, CgroupPath: p.CgroupPath}, time.Time{}); ok {
				t.Error("a pod never sampled has a sample")
			}
		})
	}
}

// TestSampledPodUsageWithoutPidsController: a sample without the process count (no pids
// controller) is not given: the manager counts the processes itself.
func TestSampledPodUsageWithoutPidsController(t *testing.T) {
	nd := newNode(t, units.ModeHybrid, 1)
	if err := os.RemoveAll(filepath.Join(nd.root, "pids")); err != nil {
		t.Fatal(err)
	}
	iv := newInterval(t, nd, true, "4Gi")
	iv.sampler.Sample(t.Context())
	if u, ok := iv.sampler.SampledPodUsage(nd.pods[0], time.Time{}); ok {
		t.Errorf("sample without pids.current given: %+v", u)
	}
}

// BenchmarkIdleInterval is one monitoring interval of an idle node of 110 pods: the stats
// sampler's sample and an eviction manager cycle, reading each pod's cgroups themselves
// (unshared) or the manager taking the sampler's samples (shared). Besides time it reports the
// pod cgroup files opened per interval (files/interval); allocations are -benchmem's.
func BenchmarkIdleInterval(b *testing.B) {
	const pods = 110
	for _, mode := range []units.Mode{units.ModeHybrid, units.ModeUnified} {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("%v/shared=%v", mode, shared), func(b *testing.B) {
				nd := newNode(b, mode, pods)
				iv := newInterval(b, nd, shared, "4Gi")
				w := watchOpens(b, nd.dirs)
				ctx := context.Background()
				b.ReportAllocs()
				files := 0
				for b.Loop() {
					iv.sampler.Sample(ctx)
					iv.manager.Synchronize(ctx)
					files += total(w.take(b))
				}
				b.ReportMetric(float64(files)/float64(b.N), "files/interval")
			})
		}
	}
}

// countingNamer is sharedNamer counting its calls by pod name.
type countingNamer struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingNamer) ContainerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	c.mu.Lock()
	c.calls[pod.Name]++
	c.mu.Unlock()
	return sharedNamer(ctx, pod, dirs)
}

// TestNamerAskedWhenTheCgroupsChange: the sampler asks the Namer (the CRI runtime's asks the
// runtime) about a pod's child cgroups once while they stay the same directories, again when
// one appears (a restarted container's), and forgets pods no longer active.
func TestNamerAskedWhenTheCgroupsChange(t *testing.T) {
	nd := newNode(t, units.ModeUnified, 3)
	namer := &countingNamer{calls: map[string]int{}}
	s, err := podstats.NewSampler(podstats.SamplerOptions{Reader: podstats.NewReader(nd.root, "/nonexistent", nd.mode, namer), Pods: nd})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step, want string) {
		t.Helper()
		namer.mu.Lock()
		got := fmt.Sprint(namer.calls)
		namer.mu.Unlock()
		if got != want {
			t.Errorf("%s: namer asked %s, want %s", step, got, want)
		}
	}
	for range 3 {
		s.Sample(t.Context())
	}
	check("three samples", "map[pod-0000:1 pod-0001:1 pod-0002:1]")

	// pod-0000's app restarted: a new scope next to the old one.
	dir := filepath.Join(nd.root, nd.pods[0].CgroupPath, "cri-containerd-a9999.scope")
	for f, v := range map[string]string{"memory.current": "1048576\n", "memory.stat": "inactive_file 0\nanon 1048576\n", "cpu.stat": "usage_usec 1\n", "pids.current": "1\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Sample(t.Context())
	s.Sample(t.Context())
	check("a new container cgroup", "map[pod-0000:2 pod-0001:1 pod-0002:1]")

	// pod-0002 goes and comes back (the same UID): asked again.
	all := nd.pods
	nd.pods = all[:2]
	s.Sample(t.Context())
	nd.pods = all
	s.Sample(t.Context())
	check("a pod gone and back", "map[pod-0000:2 pod-0001:1 pod-0002:2]")
}
