package source

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// podYAML is a small valid pod manifest.
func podYAML(name string, extra ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: main\n    command: [/bin/sleep, infinity]\n", name)
	for _, e := range extra {
		s += e
	}
	return s
}

// writeFiles writes name → content into dir; content "DIR" makes a subdirectory, "FIFO" a FIFO.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		var err error
		switch content {
		case "DIR":
			err = os.Mkdir(p, 0o755)
		case "FIFO":
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// names lists "namespace/name@origin-base" of a snapshot's pods.
func names(s pods.Snapshot) []string {
	var out []string
	for _, d := range s.Pods {
		out = append(out, podKey(d.Pod)+"@"+filepath.Base(d.Origin))
	}
	return out
}

func TestManifestDirScan(t *testing.T) {
	manyContainers := podYAML("many")
	for i := range 10_000 {
		manyContainers += fmt.Sprintf("  - name: c%d\n", i)
	}
	type problem struct{ file, contains string }
	tests := []struct {
		name      string
		files     map[string]string
		maxSize   int64
		maxPods   int
		wantPods  []string
		wantProbs []problem
	}{
		{name: "one pod", files: map[string]string{"a.yaml": podYAML("a")}, wantPods: []string{"default/a@a.yaml"}},
		{
			name:     "yaml yml json and multi-document",
			files:    map[string]string{"a.yml": podYAML("a") + "---\n# only a comment\n---\n" + podYAML("b"), "c.json": `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c","namespace":"kube-system"},"spec":{"containers":[{"name":"x"}]}}`, "d.yaml": podYAML("d")},
			wantPods: []string{"default/a@a.yml", "default/b@a.yml", "kube-system/c@c.json", "default/d@d.yaml"},
		},
		{
			name: "ignored names and entries",
			files: map[string]string{
				"a.yaml": podYAML("a"), ".hidden.yaml": podYAML("h"), "a.yaml~": podYAML("t"), ".a.yaml.swp": "junk",
				"notes.txt": "junk", "sub.yaml": "DIR", "pipe.yaml": "FIFO", "#a.yaml#": podYAML("e"),
			},
			wantPods: []string{"default/a@a.yaml"},
		},
		{
			name:      "malformed yaml",
			files:     map[string]string{"bad.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "ok.yaml": podYAML("ok")},
			wantPods:  []string{"default/ok@ok.yaml"},
			wantProbs: []problem{{"bad.yaml", "bad.yaml: "}},
		},
		{
			// ~300 KB expanding to ~2 GB: refused before it is decoded.
			name:      "alias bomb",
			files:     map[string]string{"bomb.yaml": aliasBomb(), "ok.yaml": podYAML("ok")},
			wantPods:  []string{"default/ok@ok.yaml"},
			wantProbs: []problem{{"bomb.yaml", "bomb.yaml: manifest too large: document 0: more than 1572864 bytes as JSON (1.5 MiB, etcd's object limit)"}},
		},
		{
			name:      "unknown field",
			files:     map[string]string{"u.yaml": podYAML("u", "  restartPolcy: Always\n")},
			wantProbs: []problem{{"u.yaml", `unknown field "spec.restartPolcy"`}},
		},
		{
			name:      "invalid pod names field and value",
			files:     map[string]string{"v.yaml": podYAML("v") + "  - name: Bad_Name\n"},
			wantProbs: []problem{{"v.yaml", `v.yaml: spec.containers[1].name: Invalid value: "Bad_Name"`}},
		},
		{
			name:      "absolute path as volume name",
			files:     map[string]string{"v.yaml": podYAML("v", "  volumes:\n  - name: /etc\n    emptyDir: {}\n")},
			wantProbs: []problem{{"v.yaml", `v.yaml: spec.volumes[0].name: Invalid value: "/etc"`}},
		},
		{
			name:      "dot-dot volume name",
			files:     map[string]string{"v.yaml": podYAML("v", "  volumes:\n  - name: ../../etc\n    emptyDir: {}\n")},
			wantProbs: []problem{{"v.yaml", `spec.volumes[0].name: Invalid value: "../../etc"`}},
		},
		{
			name:      "mount of an undeclared volume",
			files:     map[string]string{"v.yaml": strings.Replace(podYAML("v"), "    command:", "    volumeMounts:\n    - name: data\n      mountPath: /data\n    command:", 1)},
			wantProbs: []problem{{"v.yaml", `spec.containers[0].volumeMounts[0].name: Not found: "data"`}},
		},
		{
			name:      "env with NUL byte",
			files:     map[string]string{"e.yaml": strings.Replace(podYAML("e"), "    command:", "    env:\n    - name: X\n      value: \"a\\0b\"\n    command:", 1)},
			wantProbs: []problem{{"e.yaml", `e.yaml: spec.containers[0].env[0].value: Invalid value: "a\x00b": must not contain NUL bytes`}},
		},
		{
			name:      "10000 containers",
			files:     map[string]string{"m.yaml": manyContainers},
			wantProbs: []problem{{"m.yaml", "m.yaml: spec.containers: Too many: 10001: must have at most 256 items"}},
		},
		{
			name:      "file too large",
			files:     map[string]string{"big.yaml": podYAML("big") + "# " + strings.Repeat("x", 2000) + "\n", "ok.yaml": podYAML("ok")},
			maxSize:   1000,
			wantPods:  []string{"default/ok@ok.yaml"},
			wantProbs: []problem{{"big.yaml", "file too large"}},
		},
		{
			name:      "one bad document spoils the file",
			files:     map[string]string{"m.yaml": podYAML("a") + "---\n" + podYAML("b", "  bogus: 1\n")},
			wantProbs: []problem{{"m.yaml", "m.yaml: document 1: "}},
		},
		{
			name:      "duplicate across files: lexical order wins",
			files:     map[string]string{"b.yaml": podYAML("x"), "a.yaml": podYAML("x") + "  restartPolicy: Never\n"},
			wantPods:  []string{"default/x@a.yaml"},
			wantProbs: []problem{{"b.yaml", "pod default/x: duplicate name: already defined by "}},
		},
		{
			name:      "duplicate documents in one file",
			files:     map[string]string{"a.yaml": podYAML("x") + "---\n" + podYAML("why") + "---\n" + podYAML("x") + "  restartPolicy: Never\n"},
			wantPods:  []string{"default/x@a.yaml", "default/why@a.yaml"},
			wantProbs: []problem{{"a.yaml", "a.yaml: document 2: pod default/x: duplicate name: already defined by "}},
		},
		{
			name: "duplicate explicit uid",
			files: map[string]string{
				"a.yaml": strings.Replace(podYAML("a"), "  name: a\n", "  name: a\n  uid: same-uid\n", 1),
				"b.yaml": strings.Replace(podYAML("b"), "  name: b\n", "  name: b\n  uid: same-uid\n", 1),
			},
			wantPods:  []string{"default/a@a.yaml"},
			wantProbs: []problem{{"b.yaml", `b.yaml: pod default/b: metadata.uid: Duplicate value: "same-uid": already used by `}},
		},
		{
			name:     "same name in another namespace is no duplicate",
			files:    map[string]string{"a.yaml": podYAML("x"), "b.yaml": strings.Replace(podYAML("x"), "  name: x\n", "  name: x\n  namespace: other\n", 1)},
			wantPods: []string{"default/x@a.yaml", "other/x@b.yaml"},
		},
		{
			name:      "pod cap",
			files:     map[string]string{"a.yaml": podYAML("a") + "---\n" + podYAML("b") + "---\n" + podYAML("c")},
			maxPods:   2,
			wantPods:  []string{"default/a@a.yaml", "default/b@a.yaml"},
			wantProbs: []problem{{"a.yaml", "document 2: pod default/c: too many pods"}},
		},
		{
			name:      "empty file",
			files:     map[string]string{"e.yaml": ""},
			wantProbs: []problem{{"e.yaml", "no pod in the file"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			m, err := NewManifestDir(ManifestDirOptions{Dir: dir, MaxFileSize: tt.maxSize, MaxPods: tt.maxPods})
			if err != nil {
				t.Fatal(err)
			}
			s := m.Scan()
			if got := names(s); strings.Join(got, " ") != strings.Join(tt.wantPods, " ") {
				t.Errorf("pods = %v, want %v", got, tt.wantPods)
			}
			if len(s.Problems) != len(tt.wantProbs) {
				t.Fatalf("problems = %+v, want %d", s.Problems, len(tt.wantProbs))
			}
			for i, want := range tt.wantProbs {
				p := s.Problems[i]
				if p.Origin != filepath.Join(dir, want.file) || !strings.Contains(p.Error, want.contains) {
					t.Errorf("problem %d = %+v, want origin %s and error containing %q", i, p, want.file, want.contains)
				}
				if !strings.Contains(p.Error, filepath.Join(dir, want.file)) {
					t.Errorf("problem %d does not name its file: %q", i, p.Error)
				}
			}
		})
	}
}

func TestManifestDirStaticPodSemantics(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a")})
	m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Scan()
	if len(s.Pods) != 1 {
		t.Fatalf("pods = %v", names(s))
	}
	d := s.Pods[0]
	// The UID slicectl explain -f gives the same file.
	parsed, err := manifest.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantUID := string(parsed[0].UID)
	if string(d.Pod.UID) != wantUID || d.Source != pods.SourceFile || d.Origin != path ||
		d.Pod.Annotations[pods.AnnotationSource] != "file" || d.Pod.Annotations[pods.AnnotationOrigin] != path {
		t.Fatalf("desired = %+v uid %s annotations %v, want uid %s", d, d.Pod.UID, d.Pod.Annotations, wantUID)
	}
	uid1 := d.Pod.UID

	// Broken: nothing changes but the problem.
	writeFiles(t, dir, map[string]string{"a.yaml": "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: [{name: main, imag: x}]}\n"})
	s = m.Scan()
	if len(s.Pods) != 1 || s.Pods[0].Pod.UID != uid1 || len(s.Problems) != 1 || s.Problems[0].Origin != path {
		t.Fatalf("after breaking: pods %v problems %+v", names(s), s.Problems)
	}
	// Fixed with new content: replaced (new UID), problem gone.
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a", "  restartPolicy: Never\n")})
	s = m.Scan()
	if len(s.Pods) != 1 || s.Pods[0].Pod.UID == uid1 || len(s.Problems) != 0 {
		t.Fatalf("after fixing: pods %v uid %s problems %+v", names(s), s.Pods[0].Pod.UID, s.Problems)
	}
	// Back to the first content: the first UID again (content-derived).
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a")})
	if s = m.Scan(); s.Pods[0].Pod.UID != uid1 {
		t.Fatalf("same content, uid %s, want %s", s.Pods[0].Pod.UID, uid1)
	}
	// An unreadable file is a problem and keeps the pods (skipped as root, who reads anyway).
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		if s = m.Scan(); len(s.Pods) != 1 || len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Error, "permission denied") {
			t.Fatalf("unreadable: pods %v problems %+v", names(s), s.Problems)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if s = m.Scan(); len(s.Pods) != 1 || len(s.Problems) != 0 {
			t.Fatalf("readable again: pods %v problems %+v", names(s), s.Problems)
		}
	}
	// Removed: the pod goes.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if s = m.Scan(); len(s.Pods) != 0 || len(s.Problems) != 0 {
		t.Fatalf("after removing: pods %v problems %+v", names(s), s.Problems)
	}
}

func TestManifestDirDirectoryStates(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods.d")
	m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Scan(); len(s.Pods)+len(s.Problems) != 0 {
		t.Fatalf("missing directory: %+v", s)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a")})
	if s := m.Scan(); len(s.Pods) != 1 {
		t.Fatalf("created directory: %+v", s)
	}
	// Not a directory any more: a problem, pods kept.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"pods.d": "not a dir"})
	if s := m.Scan(); len(s.Pods) != 1 || len(s.Problems) != 1 || s.Problems[0].Origin != dir {
		t.Fatalf("directory replaced by a file: pods %v problems %+v", names(s), s.Problems)
	}
	// Gone: every pod goes.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if s := m.Scan(); len(s.Pods)+len(s.Problems) != 0 {
		t.Fatalf("removed directory: %+v", s)
	}
}

func TestReadManifestSymlinks(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"real.yaml": podYAML("real"), "sub": "DIR"})
	if err := os.Symlink(filepath.Join(other, "real.yaml"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "sub"), filepath.Join(dir, "dirlink.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "missing.yaml"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	m, err := NewManifestDir(ManifestDirOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Scan()
	if got := names(s); len(got) != 1 || got[0] != "default/real@link.yaml" || len(s.Problems) != 0 {
		t.Fatalf("pods %v problems %+v", got, s.Problems)
	}
}

func TestManifestDirLastGoodAcrossRestarts(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	open := func() *ManifestDir {
		t.Helper()
		m, err := NewManifestDir(ManifestDirOptions{Dir: dir, StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a"), "b.yaml": podYAML("b")})
	s := open().Scan()
	if len(s.Pods) != 2 {
		t.Fatalf("first run: %v", names(s))
	}
	uidA := s.Pods[0].Pod.UID

	// While slicelet is down, a.yaml is broken and b.yaml removed.
	writeFiles(t, dir, map[string]string{"a.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containerz: []}\n"})
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	m := open()
	s = m.Scan()
	if got := names(s); len(got) != 1 || got[0] != "default/a@a.yaml" || s.Pods[0].Pod.UID != uidA {
		t.Fatalf("after restart with a broken file: pods %v (uid %v, want %s)", got, s.Pods, uidA)
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Error, `unknown field "spec.containerz"`) {
		t.Fatalf("problems %+v", s.Problems)
	}
	if entries, _ := os.ReadDir(filepath.Join(state, LastGoodDir)); len(entries) != 1 {
		t.Fatalf("kept manifests: %d, want 1 (b.yaml's dropped)", len(entries))
	}

	// Fixed with new content: replaced; the kept copy follows.
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a", "  restartPolicy: Never\n")})
	s = m.Scan()
	if len(s.Pods) != 1 || s.Pods[0].Pod.UID == uidA || len(s.Problems) != 0 {
		t.Fatalf("after fixing: %v %+v", names(s), s.Problems)
	}
	uidA = s.Pods[0].Pod.UID
	writeFiles(t, dir, map[string]string{"a.yaml": "{"})
	if s = open().Scan(); len(s.Pods) != 1 || s.Pods[0].Pod.UID != uidA {
		t.Fatalf("restart after the fix: %v", names(s))
	}

	// A corrupt record is dropped, never a failure.
	writeFiles(t, filepath.Join(state, LastGoodDir), map[string]string{"junk.json": "{", ".tmp-x-1": "x"})
	m = open()
	if entries, _ := os.ReadDir(filepath.Join(state, LastGoodDir)); len(entries) != 1 {
		t.Fatalf("records after dropping junk: %d, want 1", len(entries))
	}
	// Removing the file removes the pod and its record.
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if s = m.Scan(); len(s.Pods) != 0 {
		t.Fatalf("after removing: %v", names(s))
	}
	if entries, _ := os.ReadDir(filepath.Join(state, LastGoodDir)); len(entries) != 0 {
		t.Fatalf("records after removing the file: %d", len(entries))
	}
}

// aliasBomb is a ~300 KB pod manifest whose aliases expand to about 2 GB of JSON.
func aliasBomb() string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations: {a: &s \"" + strings.Repeat("x", 100<<10) + "\"}\n" +
		"spec:\n  containers:\n  - name: c\n    args: [*s" + strings.Repeat(",*s", 20000) + "]\n"
}

// On a named node (cluster mode) a manifest's pods are named as the kubelet names static pods,
// "<name>-<node>" with the node lower-cased, and keep the UID they have without the name: the
// kubelet hashes the pod before naming it. Stand-alone they keep the manifest's name.
func TestManifestDirStaticPodNames(t *testing.T) {
	tests := []struct {
		name, node string
		want       []string
	}{
		{"stand-alone keeps the name", "", []string{"default/a@a.yaml", "kube-system/b@b.yaml"}},
		{"cluster node", "node-1", []string{"default/a-node-1@a.yaml", "kube-system/b-node-1@b.yaml"}},
		{"node name lower-cased", "Node-1", []string{"default/a-node-1@a.yaml", "kube-system/b-node-1@b.yaml"}},
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("a"), "b.yaml": strings.Replace(podYAML("b"), "name: b\n", "name: b\n  namespace: kube-system\n", 1)})
	uids := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManifestDir(ManifestDirOptions{Dir: dir, NodeName: tc.node})
			if err != nil {
				t.Fatal(err)
			}
			s := m.Scan()
			if got := names(s); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("pods %v, want %v (problems %+v)", got, tc.want, s.Problems)
			}
			for _, d := range s.Pods {
				origin := filepath.Base(d.Origin)
				if was, ok := uids[origin]; ok && was != string(d.Pod.UID) {
					t.Errorf("%s: uid %s, was %s under another name", origin, d.Pod.UID, was)
				}
				uids[origin] = string(d.Pod.UID)
			}
		})
	}
}
