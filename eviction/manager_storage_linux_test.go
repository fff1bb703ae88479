package eviction

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

// recordingEvictor records what the manager asks of the controller; it lists its pods as
// active until they are evicted.
type recordingEvictor struct {
	mu      sync.Mutex
	pods    []ActivePod
	evicted []Eviction
}

func (r *recordingEvictor) ActivePods() []ActivePod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ActivePod
	for _, p := range r.pods {
		if !slices.ContainsFunc(r.evicted, func(e Eviction) bool { return e.Pod == p.Pod }) {
			out = append(out, p)
		}
	}
	return out
}

func (r *recordingEvictor) get() []Eviction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evicted)
}

func (r *recordingEvictor) EvictPod(_ context.Context, pod *v1.Pod, grace time.Duration, msg string, ann map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evicted = append(r.evicted, Eviction{Pod: pod, Name: podName(pod), GracePeriod: grace, Message: msg, Annotations: ann})
	return nil
}

func (r *recordingEvictor) PodCleanedUp(string) bool { return true }

// systemdLayout is the systemd runtime's layout: emptyDir volumes in
// <state>/pods/<uid>/volumes/<name>; no container directories (the journal keeps the logs).
func systemdLayout(state string) func(*v1.Pod) PodDirs {
	return func(pod *v1.Pod) PodDirs {
		d := PodDirs{Volumes: map[string]string{}}
		for _, v := range pod.Spec.Volumes {
			if v.EmptyDir != nil {
				d.Volumes[v.Name] = filepath.Join(state, "pods", string(pod.UID), "volumes", v.Name)
			}
		}
		return d
	}
}

// criLogLayout adds the CRI log directories: /var/log/pods/<ns>_<name>_<uid>/<container>.
func criLogLayout(state, logs string) func(*v1.Pod) PodDirs {
	return func(pod *v1.Pod) PodDirs {
		d := systemdLayout(state)(pod)
		podLogs := filepath.Join(logs, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
		d.Containers = map[string][]string{}
		for _, c := range pod.Spec.Containers {
			d.Containers[c.Name] = []string{filepath.Join(podLogs, c.Name)}
		}
		d.Other = []string{podLogs}
		return d
	}
}

func sizeLimitedVolume(name, limit string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: q(limit)}}}
}

func newStorageManager(t *testing.T, pods []ActivePod, storage PodStorage, obs Observations, hard map[string]string) (*Manager, *recordingEvictor, *logBuffer) {
	t.Helper()
	th, err := ParseThresholdConfig(nil, hard, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &recordingEvictor{pods: pods}
	logs := &logBuffer{}
	m, err := NewManager(ManagerOptions{
		Config:  Config{Thresholds: th, LocalStorageCapacityIsolation: true},
		Pods:    ev,
		Evictor: ev,
		Storage: storage,
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe: func(time.Time) (Observations, []Unavailable) { return obs, nil },
		// Memory and processes from the cgroup; storage is what the test is about.
		PodUsage: func(ActivePod) *PodUsage { return &PodUsage{Memory: resource.MustParse("10Mi")} },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, ev, logs
}

func TestManagerEvictsPodsOverTheirLocalStorageLimits(t *testing.T) {
	noPressure := Observations{SignalMemoryAvailable: obsOf("5Gi", "10Gi")}
	limit1Mi := newResourceList("", "", "1Mi")
	tests := []struct {
		name string
		pod  *v1.Pod
		// files to write under the state dir (systemd layout) or the log dir, bytes each.
		volumeFiles map[string]int // volume name → bytes written
		logFiles    map[string]int // container name → bytes of logs written
		want        string         // the message; "" for no eviction
		wantSignal  Signal
	}{
		{
			name:        "emptyDir over its sizeLimit",
			pod:         newPod("writer", 0, []v1.Container{newContainer("app", nil, nil)}, []v1.Volume{sizeLimitedVolume("scratch", "1Mi")}),
			volumeFiles: map[string]int{"scratch": 2 << 20},
			want:        `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
			wantSignal:  SignalEmptyDirLimit,
		},
		{
			name:        "emptyDir within its sizeLimit",
			pod:         newPod("writer", 0, []v1.Container{newContainer("app", nil, nil)}, []v1.Volume{sizeLimitedVolume("scratch", "4Mi")}),
			volumeFiles: map[string]int{"scratch": 2 << 20},
		},
		{
			name:        "pod over the sum of its containers' ephemeral-storage limits",
			pod:         newPod("writer", 0, []v1.Container{newContainer("app", nil, limit1Mi)}, emptyDirVolume("scratch")),
			volumeFiles: map[string]int{"scratch": 2 << 20},
			want:        "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ",
			wantSignal:  SignalPodEphemeralLimit,
		},
		{
			name: "container logs over its ephemeral-storage limit",
			pod: newPod("writer", 0, []v1.Container{newContainer("app", nil, limit1Mi), newContainer("quiet", nil, limit1Mi)},
				nil),
			logFiles:   map[string]int{"app": 1536 << 10},
			want:       `Container app exceeded its local ephemeral storage limit "1Mi". `,
			wantSignal: SignalContainerEphemeralLimit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, logs := t.TempDir(), t.TempDir()
			for vol, n := range tt.volumeFiles {
				writeFile(t, filepath.Join(state, "pods", string(tt.pod.UID), "volumes", vol, "data"), n)
			}
			for c, n := range tt.logFiles {
				writeFile(t, filepath.Join(logs, "default_writer_writer", c, "0.log"), n)
			}
			storage, err := NewFSStorage(FSStorageOptions{Dirs: criLogLayout(state, logs)})
			if err != nil {
				t.Fatal(err)
			}
			other := newPod("other", 0, []v1.Container{newContainer("app", nil, limit1Mi)}, []v1.Volume{sizeLimitedVolume("scratch", "1Mi")})
			m, ev, _ := newStorageManager(t, []ActivePod{{Pod: other}, {Pod: tt.pod}}, storage, noPressure, map[string]string{"memory.available": "1Gi"})

			got := m.Synchronize(t.Context())

			if tt.want == "" {
				if len(got) != 0 || len(ev.evicted) != 0 {
					t.Fatalf("evicted %v, want none", got)
				}
				return
			}
			if len(ev.evicted) != 1 || ev.evicted[0].Name != "default/writer" {
				t.Fatalf("evicted %+v, want default/writer only", ev.evicted)
			}
			e := ev.evicted[0]
			if e.Message != tt.want || e.GracePeriod != ImmediateGracePeriod {
				t.Errorf("eviction message %q grace %v, want %q 1s", e.Message, e.GracePeriod, tt.want)
			}
			if rec, _ := m.LastEviction(); rec.Signal != tt.wantSignal {
				t.Errorf("signal %s, want %s", rec.Signal, tt.wantSignal)
			}
		})
	}
}

func TestManagerRanksDiskPressureByMeasuredUsage(t *testing.T) {
	state := t.TempDir()
	small := newPod("small", 0, []v1.Container{newContainer("app", nil, nil)}, emptyDirVolume("data"))
	big := newPod("big", 0, []v1.Container{newContainer("app", nil, nil)}, emptyDirVolume("data"))
	writeFile(t, filepath.Join(state, "pods", "small", "volumes", "data", "f"), 1<<20)
	writeFile(t, filepath.Join(state, "pods", "big", "volumes", "data", "f"), 3<<20)
	storage, err := NewFSStorage(FSStorageOptions{Dirs: systemdLayout(state)})
	if err != nil {
		t.Fatal(err)
	}
	pressure := Observations{SignalNodeFsAvailable: obsOf("1Gi", "100Gi")}
	m, ev, _ := newStorageManager(t, []ActivePod{{Pod: small}, {Pod: big}}, storage, pressure, map[string]string{"nodefs.available": "10%"})

	m.Synchronize(t.Context())

	d := m.LastDecision()
	if len(d.Ranking) != 2 || d.Ranking[0].Name != "default/big" {
		t.Fatalf("ranking %+v, want default/big first", d.Ranking)
	}
	if !strings.Contains(d.Ranking[0].Reason, "ephemeral-storage usage 3") {
		t.Errorf("reason %q does not show the measured usage", d.Ranking[0].Reason)
	}
	if len(ev.evicted) != 1 || ev.evicted[0].Name != "default/big" {
		t.Errorf("evicted %+v, want default/big", ev.evicted)
	}
}

// failingStorage fails for the pods it names.
type failingStorage struct {
	mu   sync.Mutex
	fail map[string]bool
}

func (f *failingStorage) PodStorage(_ context.Context, pod *v1.Pod) (StorageUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[pod.Name] {
		return StorageUsage{}, errors.New("directory /state/pods/x: permission denied")
	}
	return StorageUsage{Total: DiskUsage{Bytes: 5 << 20, Inodes: 3}}, nil
}

func TestManagerPodWithoutStorageStats(t *testing.T) {
	// broken is critical, so it stays through the cycles; fine is evicted in the first.
	broken := newPod("broken", SystemCriticalPriority, []v1.Container{newContainer("app", nil, newResourceList("", "", "1Mi"))}, nil)
	fine := newPod("fine", 0, []v1.Container{newContainer("app", nil, nil)}, nil)
	st := &failingStorage{fail: map[string]bool{"broken": true}}
	pressure := Observations{SignalNodeFsAvailable: obsOf("1Gi", "100Gi")}
	m, ev, logs := newStorageManager(t, []ActivePod{{Pod: fine}, {Pod: broken}}, st, pressure, map[string]string{"nodefs.available": "10%"})

	m.Synchronize(t.Context())
	d := m.LastDecision()
	if len(d.LocalStorage) != 0 {
		t.Errorf("local-storage evictions %+v for a pod whose storage is unknown", d.LocalStorage)
	}
	if len(d.Ranking) != 2 || d.Ranking[0].Name != "default/broken" || !strings.Contains(d.Ranking[0].Reason, "no stats") {
		t.Errorf("ranking %+v, want default/broken first as a pod without stats", d.Ranking)
	}
	if len(d.Ranking) == 2 && !strings.Contains(d.Ranking[1].Reason, "ephemeral-storage usage 5Mi") {
		t.Errorf("reason %q, want the measured 5Mi", d.Ranking[1].Reason)
	}
	if e := ev.get(); len(e) != 1 || e[0].Name != "default/fine" {
		t.Errorf("evicted %+v, want default/fine (broken is critical)", e)
	}
	for range 2 {
		m.measureStorage(t.Context())
		m.Synchronize(t.Context())
	}
	if n := strings.Count(logs.String(), "pod storage not measured"); n != 1 {
		t.Errorf("%d log records of the failure in 3 cycles and 2 passes, want 1:\n%s", n, logs)
	}

	// Cycles do not retry a failed measurement; the background pass (Run's storageLoop) does.
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	m.measureStorage(t.Context())
	m.Synchronize(t.Context())
	if !strings.Contains(logs.String(), "pod storage measured again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
}

func TestManagerWithoutStorageHasNoStorageStats(t *testing.T) {
	m, err := NewManager(ManagerOptions{Pods: &recordingEvictor{}, Evictor: &recordingEvictor{},
		Sources: Sources{CgroupRoot: "testdata/v1/cgroup", Mode: units.ModeHybrid}})
	if err != nil {
		t.Fatal(err)
	}
	u := m.readPodUsage(ActivePod{Pod: newPod("p", 0, nil, nil),
		CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice"})
	if u == nil || !u.NoStorageStats {
		t.Fatalf("usage %+v, want cgroup stats without storage stats", u)
	}
}

func TestManagerStorageLoopWakesOnALimitViolation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		state := t.TempDir()
		pod := newPod("writer", 0, []v1.Container{newContainer("app", nil, nil)}, []v1.Volume{sizeLimitedVolume("scratch", "1Mi")})
		storage, err := NewFSStorage(FSStorageOptions{Dirs: systemdLayout(state)})
		if err != nil {
			t.Fatal(err)
		}
		m, ev, logs := newStorageManager(t, []ActivePod{{Pod: pod}}, storage,
			Observations{SignalMemoryAvailable: obsOf("5Gi", "10Gi")}, map[string]string{"memory.available": "1Gi"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		go m.Run(ctx)
		synctest.Wait()
		if e := ev.get(); len(e) != 0 {
			t.Fatalf("evicted %+v before the volume filled up", e)
		}

		writeFile(t, filepath.Join(state, "pods", "writer", "volumes", "scratch", "data"), 2<<20)
		time.Sleep(DefaultMonitoringInterval)
		synctest.Wait()
		evicted := ev.get()
		if len(evicted) != 1 || evicted[0].Message != `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ` {
			t.Fatalf("evicted %+v, want the writer for its emptyDir", evicted)
		}
		if rec, _ := m.LastEviction(); rec.At.Sub(start) != DefaultMonitoringInterval {
			t.Errorf("evicted %v after start, want at the first storage pass (10s)", rec.At.Sub(start))
		}
		if !strings.Contains(logs.String(), "woken by a local-storage limit violation") {
			t.Errorf("the storage pass did not wake the loop:\n%s", logs)
		}
	})
}
