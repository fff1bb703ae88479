package eviction

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/units"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// signalGolden is what a golden file holds: the observations of a fixture tree, what could
// not be observed and why, and the pod usage read from the pod slices.
type signalGolden struct {
	Observations map[Signal]goldenObs `json:"observations"`
	Unavailable  []string             `json:"unavailable"`
	Pods         map[string]string    `json:"pods"`
}

type goldenObs struct {
	Available string `json:"available"`
	Capacity  string `json:"capacity"`
	AvailV    int64  `json:"availableValue"`
	CapV      int64  `json:"capacityValue"`
}

// TestSignalsGolden reads the cgroup v1 (hybrid) and v2 fixture trees in testdata and
// compares every observation with a golden file (go test -run TestSignalsGolden -update
// rewrites them). The expected numbers, worked out by hand from the fixture files:
//   - v1 memory: usage_in_bytes 6Gi − total_inactive_file 1Gi = working set 5Gi; MemTotal
//     16384000 kB = 16777216000 → available 11408506880, capacity 16777216000;
//   - v2 memory: the root has no memory.current, usage = anon 4Gi + file 2Gi = 6Gi, minus
//     inactive_file 1Gi → the same 5Gi working set;
//   - allocatable: limit 12Gi − (4Gi − 512Mi) = 8.5Gi of 12Gi;
//   - pids: min(pid_max, threads-max) − the total of /proc/loadavg;
//   - pods: working set 300Mi − 50Mi = 250Mi with 12 tasks; the v1 BestEffort pod has
//     inactive_file above usage (working set clamped to 0) and no pids controller, so its 3
//     processes are counted from cgroup.procs of the whole subtree.
func TestSignalsGolden(t *testing.T) {
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	podPaths := []string{
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod5678.slice",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podgone.slice",
	}
	tests := []struct {
		name     string
		tree     string
		mode     units.Mode
		kubepods string
	}{
		{"v1", "v1", units.ModeHybrid, "/kubepods.slice"},
		{"v2", "v2", units.ModeUnified, "/kubepods.slice"},
		{"v1-unlimited-kubepods", "v1", units.ModeHybrid, "/unlimited.slice"},
		{"v2-unlimited-kubepods", "v2", units.ModeUnified, "/unlimited.slice"},
		{"missing-tree", "none", units.ModeUnified, "/kubepods.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join("testdata", tt.tree)
			src := Sources{CgroupRoot: filepath.Join(root, "cgroup"), ProcRoot: filepath.Join(root, "proc"), Mode: tt.mode, KubepodsCgroup: tt.kubepods}
			obs, missing := src.Observe(now)
			got := signalGolden{Observations: map[Signal]goldenObs{}, Unavailable: []string{}, Pods: map[string]string{}}
			for s, o := range obs {
				if !o.Time.Equal(now) {
					t.Errorf("%s: time %v, want %v", s, o.Time, now)
				}
				got.Observations[s] = goldenObs{o.Available.String(), o.Capacity.String(), o.Available.Value(), o.Capacity.Value()}
			}
			for _, m := range missing {
				if !errors.Is(m.Err, ErrUnavailable) {
					t.Errorf("%s: error %v does not wrap ErrUnavailable", m.Signal, m.Err)
				}
				got.Unavailable = append(got.Unavailable, strings.ReplaceAll(m.String(), root, "<root>"))
			}
			for _, p := range podPaths {
				u, err := ReadPodUsage(src.CgroupRoot, tt.mode, p)
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("pod %s: error %v does not wrap ErrUnavailable", p, err)
					}
					got.Pods[p] = "unavailable: " + strings.ReplaceAll(err.Error(), root, "<root>")
					continue
				}
				got.Pods[p] = "memory " + u.Memory.String() + ", processes " + itoa(u.Processes)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(got); err != nil {
				t.Fatal(err)
			}
			data := buf.Bytes()
			golden := filepath.Join("testdata", tt.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("golden file (run with -update to create): %v", err)
			}
			if string(data) != string(want) {
				t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", golden, data, want)
			}
		})
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestReadFs checks statfs of a real directory against the kernel's own numbers and that a
// missing path is "unavailable", not an error.
func TestReadFs(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	b, in, err := ReadFs(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if b.Capacity.Value() <= 0 || b.Available.Cmp(b.Capacity) > 0 || b.Available.Sign() < 0 {
		t.Errorf("bytes: available %s of %s", b.Available.String(), b.Capacity.String())
	}
	if in != nil && (in.Capacity.Value() <= 0 || in.Available.Cmp(in.Capacity) > 0) {
		t.Errorf("inodes: available %s of %s", in.Available.String(), in.Capacity.String())
	}
	if !b.Time.Equal(now) {
		t.Errorf("time %v", b.Time)
	}
	if _, _, err := ReadFs(filepath.Join(dir, "missing"), now); !errors.Is(err, ErrUnavailable) {
		t.Errorf("missing path: %v, want ErrUnavailable", err)
	}
	obs, missing := Sources{CgroupRoot: "testdata/v2/cgroup", ProcRoot: "testdata/v2/proc", Mode: units.ModeUnified, NodeFsPath: dir}.Observe(now)
	for _, s := range []Signal{SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable} {
		o, ok := obs[s]
		if !ok || o.Capacity.Cmp(b.Capacity) != 0 {
			t.Errorf("%s = %+v, want the nodefs capacity %s (single filesystem)", s, o, b.Capacity.String())
		}
	}
	for _, m := range missing {
		if m.Signal != SignalNodeFsInodesFree && m.Signal != SignalImageFsInodesFree {
			t.Errorf("unexpected unavailable signal %v", m)
		}
	}
}

// TestObserveImageFsOfRuntime: the CRI runtime names its image filesystem at each observation;
// imagefs.* and containerfs.* come from it, and while the runtime cannot say, they are not
// observed (with the reason) instead of borrowing nodefs.
func TestObserveImageFsOfRuntime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	node, image := t.TempDir(), t.TempDir()
	base := Sources{CgroupRoot: "testdata/v2/cgroup", ProcRoot: "testdata/v2/proc", Mode: units.ModeUnified, NodeFsPath: node}
	down := errors.New("cri runtime unix:///run/containerd/containerd.sock: unavailable")
	for _, tc := range []struct {
		name     string
		of       func() (string, error)
		observed bool
	}{
		{"runtime reports its image store", func() (string, error) { return image, nil }, true},
		{"runtime down", func() (string, error) { return "", down }, false},
		{"runtime reports nothing: single filesystem", func() (string, error) { return "", nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			src.ImageFsPathOf = tc.of
			obs, missing := src.Observe(now)
			if _, ok := obs[SignalNodeFsAvailable]; !ok {
				t.Error("nodefs.available not observed")
			}
			for _, sig := range []Signal{SignalImageFsAvailable, SignalContainerFsAvailable} {
				if _, ok := obs[sig]; ok != tc.observed {
					t.Errorf("%s observed = %v, want %v", sig, ok, tc.observed)
				}
			}
			if !tc.observed {
				found := false
				for _, m := range missing {
					if m.Signal == SignalImageFsAvailable && errors.Is(m.Err, down) {
						found = true
					}
				}
				if !found {
					t.Errorf("imagefs.available not reported unavailable with the runtime's error: %+v", missing)
				}
			}
		})
	}
}

// TestReadErrors: a malformed file is a real error naming the file, not "unavailable".
func TestReadErrors(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup", "memory.stat"), []byte("anon lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCgroupMemory(filepath.Join(root, "cgroup"), units.ModeUnified, "/")
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "memory.stat") {
		t.Errorf("malformed memory.stat: %v", err)
	}
	if _, err := ReadCgroupMemory(root, units.ModeUnknown, "/"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown mode: %v", err)
	}
}
