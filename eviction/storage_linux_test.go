package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// blocks is what one path allocates, read with lstat(2) on its own: the expected values are
// built from the paths a case says must count, not by walking.
func blocks(t testing.TB, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func mkdir(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes size bytes of data (not zeros: some filesystems do not allocate zeros).
func writeFile(t testing.TB, path string, size int) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sum adds the blocks of paths, each once.
func sum(t testing.TB, paths ...string) DiskUsage {
	t.Helper()
	var u DiskUsage
	for _, p := range paths {
		u.Bytes += blocks(t, p)
		u.Inodes++
	}
	return u
}

func TestMeasureDirectoryTree(t *testing.T) {
	tests := []struct {
		name string
		// build makes the tree under root (which may not exist yet) and returns the paths
		// that must count, once each.
		build func(t *testing.T, root string) []string
		// vanish, if set, is removed right after its parent directory's names are read.
		vanish        string
		maxEntries    int
		wantTruncated bool
		check         func(t *testing.T, root string, got DiskUsage)
	}{
		{
			name:  "missing directory uses nothing",
			build: func(t *testing.T, root string) []string { return nil },
		},
		{
			name: "empty directory is its own blocks",
			build: func(t *testing.T, root string) []string {
				mkdir(t, root)
				return []string{root}
			},
		},
		{
			name: "nested directories",
			build: func(t *testing.T, root string) []string {
				writeFile(t, filepath.Join(root, "a", "b", "c", "deep"), 10_000)
				writeFile(t, filepath.Join(root, "a", "mid"), 5_000)
				writeFile(t, filepath.Join(root, "top"), 100)
				return []string{root, root + "/a", root + "/a/b", root + "/a/b/c", root + "/a/b/c/deep", root + "/a/mid", root + "/top"}
			},
			check: func(t *testing.T, _ string, got DiskUsage) {
				if got.Bytes < 15_100 {
					t.Errorf("bytes %d, want at least the 15100 bytes written", got.Bytes)
				}
			},
		},
		{
			name: "sparse file counts its allocated blocks, not its size",
			build: func(t *testing.T, root string) []string {
				mkdir(t, root)
				p := filepath.Join(root, "sparse")
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(1 << 30); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte(strings.Repeat("x", 4096)), 512<<20); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				return []string{root, p}
			},
			check: func(t *testing.T, _ string, got DiskUsage) {
				if got.Bytes >= 1<<20 {
					t.Errorf("bytes %d for a 1 GiB sparse file holding 4 KiB, want under 1 MiB", got.Bytes)
				}
			},
		},
		{
			name: "hard links count once",
			build: func(t *testing.T, root string) []string {
				p := filepath.Join(root, "data")
				writeFile(t, p, 64<<10)
				mkdir(t, filepath.Join(root, "sub"))
				for _, l := range []string{"sub/link1", "link2"} {
					if err := os.Link(p, filepath.Join(root, l)); err != nil {
						t.Fatal(err)
					}
				}
				return []string{root, p, root + "/sub"}
			},
		},
		{
			name: "symlinks are not followed",
			build: func(t *testing.T, root string) []string {
				mkdir(t, root)
				l := filepath.Join(root, "usr")
				if err := os.Symlink("/usr", l); err != nil {
					t.Fatal(err)
				}
				return []string{root, l}
			},
		},
		{
			name: "a root that is a file is that file",
			build: func(t *testing.T, root string) []string {
				writeFile(t, root, 3000)
				return []string{root}
			},
		},
		{
			name: "a file that vanishes mid-walk is not an error",
			build: func(t *testing.T, root string) []string {
				writeFile(t, filepath.Join(root, "gone"), 100_000)
				writeFile(t, filepath.Join(root, "stays"), 100)
				return []string{root, root + "/stays"}
			},
			vanish: "gone",
		},
		{
			name: "a directory that vanishes mid-walk is not an error",
			build: func(t *testing.T, root string) []string {
				writeFile(t, filepath.Join(root, "gone", "inside", "file"), 100_000)
				writeFile(t, filepath.Join(root, "stays"), 100)
				return []string{root, root + "/stays"}
			},
			vanish: "gone",
		},
		{
			name: "stops at the entry bound with a lower bound",
			build: func(t *testing.T, root string) []string {
				for i := range 10 {
					writeFile(t, filepath.Join(root, fmt.Sprintf("f%d", i)), 10)
				}
				return nil // which 3 entries count depends on the directory's order
			},
			maxEntries:    3,
			wantTruncated: true,
			check: func(t *testing.T, _ string, got DiskUsage) {
				if got.Inodes != 4 {
					t.Errorf("inodes %d, want the root and 3 entries", got.Inodes)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "vol")
			counted := tt.build(t, root)
			want := sum(t, counted...)
			s, err := NewFSStorage(FSStorageOptions{
				Dirs:       func(*v1.Pod) PodDirs { return PodDirs{Volumes: map[string]string{"vol": root}} },
				MaxEntries: tt.maxEntries,
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.vanish != "" {
				s.afterReadDir = func(dir string, names []string) {
					if dir == root {
						if err := os.RemoveAll(filepath.Join(root, tt.vanish)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			got, err := s.PodStorage(t.Context(), newPod("p", 0, nil, nil))
			if err != nil {
				t.Fatalf("PodStorage: %v", err)
			}
			if got.Truncated != tt.wantTruncated {
				t.Errorf("truncated %v, want %v", got.Truncated, tt.wantTruncated)
			}
			if got.Volumes["vol"] != got.Total {
				t.Errorf("volume %+v, total %+v: want equal for a single volume", got.Volumes["vol"], got.Total)
			}
			if tt.check != nil {
				tt.check(t, root, got.Total)
			}
			if counted != nil && got.Total != want {
				t.Errorf("usage %+v, want %+v", got.Total, want)
			}
		})
	}
}

func TestPodStorageLayout(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "log", "default_web_uid")
	writeFile(t, filepath.Join(logs, "app", "0.log"), 20_000)
	writeFile(t, filepath.Join(logs, "app", "1.log"), 10_000)
	writeFile(t, filepath.Join(logs, "sidecar", "0.log"), 5_000)
	writeFile(t, filepath.Join(logs, "pod.txt"), 1_000)
	cache := filepath.Join(dir, "volumes", "cache")
	scratch := filepath.Join(dir, "volumes", "scratch")
	writeFile(t, filepath.Join(cache, "blob"), 40_000)
	writeFile(t, filepath.Join(scratch, "tmp"), 2_000)
	// The same file in both volumes: it uses its blocks once, under the first volume.
	if err := os.Link(filepath.Join(cache, "blob"), filepath.Join(scratch, "blob")); err != nil {
		t.Fatal(err)
	}

	s, err := NewFSStorage(FSStorageOptions{
		Dirs: func(*v1.Pod) PodDirs {
			return PodDirs{
				Volumes: map[string]string{"cache": cache, "scratch": scratch, "unused": filepath.Join(dir, "volumes", "unused")},
				Containers: map[string][]string{
					"app": {filepath.Join(logs, "app")}, "sidecar": {filepath.Join(logs, "sidecar") + "/"},
				},
				Other: []string{logs},
			}
		},
		Layers: func(context.Context, *v1.Pod) (map[string]DiskUsage, error) {
			return map[string]DiskUsage{"app": {Bytes: 1 << 20, Inodes: 10}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PodStorage(t.Context(), newPod("web", 0, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	wantVolumes := map[string]DiskUsage{
		"cache":   sum(t, cache, cache+"/blob"),
		"scratch": sum(t, scratch, scratch+"/tmp"),
		"unused":  {},
	}
	appLogs := sum(t, logs+"/app", logs+"/app/0.log", logs+"/app/1.log")
	wantContainers := map[string]DiskUsage{
		"app":     appLogs.Add(DiskUsage{Bytes: 1 << 20, Inodes: 10}),
		"sidecar": sum(t, logs+"/sidecar", logs+"/sidecar/0.log"),
	}
	// The pod's log directory counts without the container directories inside it.
	other := sum(t, logs, logs+"/pod.txt")
	wantTotal := wantVolumes["cache"].Add(wantVolumes["scratch"]).Add(wantContainers["app"]).Add(wantContainers["sidecar"]).Add(other)
	for name, want := range wantVolumes {
		if got.Volumes[name] != want {
			t.Errorf("volume %s: %+v, want %+v", name, got.Volumes[name], want)
		}
	}
	for name, want := range wantContainers {
		if got.Containers[name] != want {
			t.Errorf("container %s: %+v, want %+v", name, got.Containers[name], want)
		}
	}
	if got.Total != wantTotal {
		t.Errorf("total %+v, want %+v", got.Total, wantTotal)
	}
}

func TestPodStorageErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "file"), 10)
	tests := []struct {
		name string
		opts FSStorageOptions
		want string
	}{
		{"relative directory", FSStorageOptions{Dirs: func(*v1.Pod) PodDirs { return PodDirs{Other: []string{"var/log"}} }},
			`pod default/p storage: directory "var/log": not an absolute path`},
		{"a path through a file", FSStorageOptions{Dirs: func(*v1.Pod) PodDirs {
			return PodDirs{Volumes: map[string]string{"v": filepath.Join(dir, "file", "v")}}
		}}, "not a directory"},
		{"layers fail", FSStorageOptions{
			Dirs: func(*v1.Pod) PodDirs { return PodDirs{} },
			Layers: func(context.Context, *v1.Pod) (map[string]DiskUsage, error) {
				return nil, errors.New("cri: unavailable")
			},
		}, "pod default/p writable layers: cri: unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewFSStorage(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.PodStorage(t.Context(), newPod("p", 0, nil, nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PodStorage error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewFSStorage(FSStorageOptions{}); err == nil {
		t.Error("NewFSStorage without Dirs: no error")
	}
	if _, err := NewFSStorage(FSStorageOptions{Dirs: func(*v1.Pod) PodDirs { return PodDirs{} }, MaxEntries: -1}); err == nil {
		t.Error("NewFSStorage with negative MaxEntries: no error")
	}
}

func TestPodStorageReusesRecentMeasurements(t *testing.T) {
	root := filepath.Join(t.TempDir(), "vol")
	writeFile(t, filepath.Join(root, "a"), 10_000)
	now := time.Unix(1000, 0)
	s, err := NewFSStorage(FSStorageOptions{
		Dirs:   func(*v1.Pod) PodDirs { return PodDirs{Volumes: map[string]string{"v": root}} },
		MaxAge: 5 * time.Second,
		Now:    func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("p", 0, nil, nil)
	measure := func() DiskUsage {
		t.Helper()
		u, err := s.PodStorage(t.Context(), pod)
		if err != nil {
			t.Fatal(err)
		}
		return u.Total
	}
	first := measure()
	writeFile(t, filepath.Join(root, "b"), 100_000)
	steps := []struct {
		name    string
		advance time.Duration
		fresh   bool
	}{
		{"within max age: reused", 4 * time.Second, false},
		{"at max age: measured again", time.Second, true},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		got := measure()
		if (got != first) != st.fresh {
			t.Errorf("%s: usage %+v after %+v", st.name, got, first)
		}
	}
}

func BenchmarkMeasureTree10000Files(b *testing.B) {
	root := filepath.Join(b.TempDir(), "vol")
	for d := range 100 {
		for f := range 100 {
			writeFile(b, filepath.Join(root, fmt.Sprintf("d%03d", d), fmt.Sprintf("f%03d", f)), 1024)
		}
	}
	s, err := NewFSStorage(FSStorageOptions{
		Dirs:   func(*v1.Pod) PodDirs { return PodDirs{Volumes: map[string]string{"v": root}} },
		MaxAge: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	pod := newPod("p", 0, nil, nil)
	var u StorageUsage
	for b.Loop() {
		if u, err = s.PodStorage(context.Background(), pod); err != nil {
			b.Fatal(err)
		}
	}
	if u.Total.Inodes != 10_101 {
		b.Fatalf("inodes %d, want 10101", u.Total.Inodes)
	}
}

func TestMeasureDoesNotCrossFilesystems(t *testing.T) {
	// /sys/fs holds mount points of other filesystems (cgroup, bpf, pstore): the walk must
	// count them as nothing and never read inside them. Only reading is involved.
	const root, mount = "/sys/fs", "/sys/fs/cgroup"
	var a, b unix.Stat_t
	if unix.Stat(root, &a) != nil || unix.Stat(mount, &b) != nil || a.Dev == b.Dev {
		t.Skipf("%s is not a mount point inside %s here", mount, root)
	}
	var read []string
	s, err := NewFSStorage(FSStorageOptions{Dirs: func(*v1.Pod) PodDirs { return PodDirs{Other: []string{root}} }})
	if err != nil {
		t.Fatal(err)
	}
	s.afterReadDir = func(dir string, _ []string) { read = append(read, dir) }
	u, err := s.PodStorage(t.Context(), newPod("p", 0, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(read) == 0 || u.Total.Inodes == 0 {
		t.Fatalf("nothing measured under %s: %+v", root, u)
	}
	for _, d := range read {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err == nil && st.Dev != a.Dev {
			t.Errorf("read %s, on another filesystem", d)
		}
		if d == mount || strings.HasPrefix(d, mount+"/") {
			t.Errorf("read %s, inside the mount point %s", d, mount)
		}
	}
}
