package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/pods"
)

func openStore(t *testing.T, stateDir string) *APIStore {
	t.Helper()
	s, err := OpenAPIStore(stateDir, APIStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAPIStoreRoundTrip(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	a, err := s.Apply([]byte(podYAML("a")), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Namespace != "default" || a.UID == "" || a.Annotations[pods.AnnotationSource] != "api" || a.CreationTimestamp.IsZero() {
		t.Fatalf("applied pod: ns %q uid %q annotations %v created %v", a.Namespace, a.UID, a.Annotations, a.CreationTimestamp)
	}
	if _, err := os.Stat(filepath.Join(state, "pods", "api", "default_a.json")); err != nil {
		t.Fatalf("stored file: %v", err)
	}
	// Same content again: kept, same UID.
	again, err := s.Apply([]byte(podYAML("a")), ApplyOptions{})
	if err != nil || again.UID != a.UID {
		t.Fatalf("re-apply of the same content: uid %q (was %q), err %v", again.UID, a.UID, err)
	}
	// metadata.uid in the manifest is ignored, as the API server does.
	withUID := strings.Replace(podYAML("a"), "  name: a\n", "  name: a\n  uid: 11111111-2222-3333-4444-555555555555\n", 1)
	if again, err = s.Apply([]byte(withUID), ApplyOptions{}); err != nil || again.UID != a.UID {
		t.Fatalf("re-apply with a uid: uid %q (was %q), err %v", again.UID, a.UID, err)
	}
	// Changed content: replaced, new UID.
	changed, err := s.Apply([]byte(podYAML("a", "  restartPolicy: Never\n")), ApplyOptions{})
	if err != nil || changed.UID == a.UID {
		t.Fatalf("apply of changed content: uid %q (was %q), err %v", changed.UID, a.UID, err)
	}
	if _, err := s.Apply([]byte(strings.Replace(podYAML("b"), "  name: b\n", "  name: b\n  namespace: team\n", 1)), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}

	// Reopened (a restart): the same pods with the same UIDs.
	s2 := openStore(t, state)
	got := s2.Snapshot()
	if n := names(got); strings.Join(n, " ") != "default/a@api team/b@api" || len(got.Problems) != 0 {
		t.Fatalf("reopened: pods %v problems %+v", n, got.Problems)
	}
	if got.Pods[0].Pod.UID != changed.UID || got.Pods[0].Source != pods.SourceAPI || got.Pods[0].Origin != pods.SourceAPI {
		t.Fatalf("reopened pod a: %+v uid %s, want uid %s", got.Pods[0], got.Pods[0].Pod.UID, changed.UID)
	}
	if !sameContent(got.Pods[0].Pod, changed, nil) {
		t.Fatalf("reopened pod differs from the applied one")
	}
	if g, err := s2.Get("team", "b"); err != nil || g.Name != "b" {
		t.Fatalf("Get team/b: %v %v", g, err)
	}

	// Delete.
	if err := s2.Delete("default", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Delete("default", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s2.Get("default", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after delete: %v, want ErrNotFound", err)
	}
	if l := openStore(t, state).List(); len(l) != 1 || l[0].Name != "b" {
		t.Fatalf("after delete and reopen: %d pods", len(l))
	}
	// Only the pod files are in the directory: no temporary file left behind.
	entries, _ := os.ReadDir(filepath.Join(state, "pods", "api"))
	if len(entries) != 1 || entries[0].Name() != "team_b.json" {
		t.Fatalf("store directory holds %v", entries)
	}
}

func TestAPIStoreApplyRejects(t *testing.T) {
	tests := []struct {
		name, manifest, want string
	}{
		{"malformed yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "api: document 0: yaml"},
		{"unknown field", podYAML("a", "  nodeNme: x\n"), `unknown field "spec.nodeNme"`},
		{"invalid name", podYAML("A_B"), `api: metadata.name: Invalid value: "A_B-`},
		{"volume name path", podYAML("a", "  volumes:\n  - name: /etc/shadow\n    hostPath: {path: /etc}\n"), `spec.volumes[0].name: Invalid value: "/etc/shadow"`},
		{"env NUL", strings.Replace(podYAML("a"), "    command:", "    env:\n    - name: \"X\\0Y\"\n      value: v\n    command:", 1), `spec.containers[0].env[0].name: Invalid value: "X\x00Y": must not contain NUL bytes`},
		{"two pods", podYAML("a") + "---\n" + podYAML("b"), "2 pods in the manifest"},
		{"too large", podYAML("a") + "# " + strings.Repeat("x", DefaultMaxFileSize) + "\n", "manifest too large"},
		{"alias bomb", aliasBomb(), "api: manifest too large: document 0: more than 1572864 bytes as JSON"},
		{"not a pod", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n", `kind Service is not a Pod`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			s := openStore(t, state)
			if _, err := s.Apply([]byte(podYAML("keep")), ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Apply([]byte(tt.manifest), ApplyOptions{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply error = %v, want ErrInvalid containing %q", err, tt.want)
			}
			if l := s.List(); len(l) != 1 || l[0].Name != "keep" {
				t.Fatalf("a rejected apply disturbed the store: %d pods", len(l))
			}
			entries, _ := os.ReadDir(filepath.Join(state, "pods", "api"))
			if len(entries) != 1 {
				t.Fatalf("a rejected apply left files: %v", entries)
			}
		})
	}
}

func TestAPIStoreMaxPods(t *testing.T) {
	s, err := OpenAPIStore(t.TempDir(), APIStoreOptions{MaxPods: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply([]byte(podYAML("a")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply([]byte(podYAML("b")), ApplyOptions{}); !errors.Is(err, ErrTooManyPods) {
		t.Fatalf("second pod: %v, want ErrTooManyPods", err)
	}
	// Replacing the one pod is fine.
	if _, err := s.Apply([]byte(podYAML("a", "  restartPolicy: Never\n")), ApplyOptions{}); err != nil {
		t.Fatalf("replace at the cap: %v", err)
	}
}

func TestAPIStoreCrashLeftovers(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	good, err := s.Apply([]byte(podYAML("good")), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply([]byte(podYAML("victim")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "pods", "api")
	full, err := os.ReadFile(filepath.Join(dir, "default_good.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A crash mid-write left a half temporary file; a truncated pod file (a filesystem without
	// the rename guarantee, or a hand edit); a file under the wrong name; a stray file.
	writeFiles(t, dir, map[string]string{
		".tmp-default_good.json-123": string(full[:len(full)/2]),
		"default_victim.json":        string(full[:len(full)/3]),
		"default_other.json":         string(full),
		"README":                     "x",
	})

	s2 := openStore(t, state)
	snap := s2.Snapshot()
	if n := names(snap); len(n) != 1 || n[0] != "default/good@api" || snap.Pods[0].Pod.UID != good.UID {
		t.Fatalf("loaded pods %v", n)
	}
	want := map[string]string{
		".tmp-default_good.json-123": "leftover temporary file of an interrupted write, removed",
		"README":                     "unexpected entry",
		"default_other.json":         "holds pod default/good, whose file would be default_good.json",
		"default_victim.json":        "default_victim.json: ",
	}
	if len(snap.Problems) != len(want) {
		t.Fatalf("problems %+v, want %d", snap.Problems, len(want))
	}
	for _, p := range snap.Problems {
		w, ok := want[filepath.Base(p.Origin)]
		if !ok || !strings.Contains(p.Error, w) || !strings.Contains(p.Error, p.Origin) {
			t.Errorf("problem %+v, want one containing %q and its path", p, w)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-default_good.json-123")); !os.IsNotExist(err) {
		t.Errorf("leftover temporary file not removed: %v", err)
	}

	// The broken pod can be deleted (its file goes) or applied again (its file is replaced).
	if err := s2.Delete("default", "victim"); err != nil {
		t.Fatalf("delete of a broken stored pod: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "default_victim.json")); !os.IsNotExist(err) {
		t.Errorf("broken file not removed by Delete: %v", err)
	}
	if _, err := s2.Apply([]byte(podYAML("victim")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	snap = s2.Snapshot()
	for _, p := range snap.Problems {
		if strings.Contains(p.Origin, "victim") {
			t.Errorf("problem of a repaired pod kept: %+v", p)
		}
	}
	if len(snap.Pods) != 2 {
		t.Fatalf("pods after repair: %v", names(snap))
	}
}

func TestAPIStoreConcurrent(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				own := fmt.Sprintf("w%d-%d", w, r%3)
				if _, err := s.Apply([]byte(podYAML(own, fmt.Sprintf("  terminationGracePeriodSeconds: %d\n", r+1))), ApplyOptions{}); err != nil {
					t.Error(err)
					return
				}
				// A name every worker fights over.
				if _, err := s.Apply([]byte(podYAML("shared", fmt.Sprintf("  terminationGracePeriodSeconds: %d\n", w+1))), ApplyOptions{}); err != nil {
					t.Error(err)
					return
				}
				_ = s.List()
				_ = s.Snapshot()
				if r%5 == 4 {
					if err := s.Delete("default", own); err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	mem := s.Snapshot()
	disk := openStore(t, state).Snapshot()
	if len(disk.Problems) != 0 {
		t.Fatalf("problems after concurrent use: %+v", disk.Problems)
	}
	if len(mem.Pods) != len(disk.Pods) {
		t.Fatalf("memory has %d pods, disk %d", len(mem.Pods), len(disk.Pods))
	}
	for i := range mem.Pods {
		if mem.Pods[i].Pod.UID != disk.Pods[i].Pod.UID || !sameContent(mem.Pods[i].Pod, disk.Pods[i].Pod, nil) {
			t.Fatalf("pod %s differs between memory and disk", podKey(mem.Pods[i].Pod))
		}
	}
}

func TestAPIStoreRun(t *testing.T) {
	s := openStore(t, t.TempDir())
	ch := make(chan pods.Snapshot, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx, func(sn pods.Snapshot) { ch <- sn }) }()
	next := func() pods.Snapshot {
		select {
		case sn := <-ch:
			return sn
		case <-time.After(10 * time.Second):
			t.Fatal("no snapshot within 10s")
			return pods.Snapshot{}
		}
	}
	if sn := next(); sn.Source != pods.SourceAPI || len(sn.Pods) != 0 {
		t.Fatalf("first snapshot %+v", sn)
	}
	if _, err := s.Apply([]byte(podYAML("a")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if sn := next(); len(sn.Pods) != 1 {
		t.Fatalf("after apply: %v", names(sn))
	}
	if err := s.Delete("default", "a"); err != nil {
		t.Fatal(err)
	}
	if sn := next(); len(sn.Pods) != 0 {
		t.Fatalf("after delete: %v", names(sn))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAPIStoreApplyOptions: Apply's annotations are set (over the manifest's) but are not
// content, and a dry run answers as Apply would and stores nothing.
func TestAPIStoreApplyOptions(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	by := func(who string) ApplyOptions {
		return ApplyOptions{Annotations: map[string]string{"slicelet.io/applied-by": who}}
	}
	dry := by("uid=7 gid=7 pid=7")
	dry.DryRun = true
	if p, err := s.Apply([]byte(podYAML("a")), dry); err != nil || p.UID == "" || p.Annotations["slicelet.io/applied-by"] != "uid=7 gid=7 pid=7" {
		t.Fatalf("dry run: %v, %v", p, err)
	}
	if _, err := s.Get("default", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dry run stored the pod: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "pods", "api", "default_a.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dry run wrote the file: %v", err)
	}
	forged := strings.Replace(podYAML("a"), "  name: a\n", "  name: a\n  annotations:\n    slicelet.io/applied-by: uid=0 gid=0 pid=1\n", 1)
	a, err := s.Apply([]byte(forged), by("uid=1000 gid=1000 pid=42"))
	if err != nil || a.Annotations["slicelet.io/applied-by"] != "uid=1000 gid=1000 pid=42" {
		t.Fatalf("apply: %v %v", a.Annotations, err)
	}
	// The same manifest from someone else: unchanged, first applier kept.
	again, err := s.Apply([]byte(podYAML("a")), by("uid=0 gid=0 pid=99"))
	if err != nil || again.UID != a.UID || again.Annotations["slicelet.io/applied-by"] != "uid=1000 gid=1000 pid=42" {
		t.Fatalf("re-apply: uid %s (was %s) annotations %v err %v", again.UID, a.UID, again.Annotations, err)
	}
	// A dry run of a change says what would happen (a new UID) and changes nothing.
	dry = by("uid=0 gid=0 pid=99")
	dry.DryRun = true
	if p, err := s.Apply([]byte(podYAML("a", "  restartPolicy: Never\n")), dry); err != nil || p.UID == a.UID {
		t.Fatalf("dry run of a change: uid %s, err %v", p.UID, err)
	}
	if g, _ := s.Get("default", "a"); g.UID != a.UID || g.Spec.RestartPolicy == "Never" {
		t.Fatalf("dry run of a change changed the pod: %s %s", g.UID, g.Spec.RestartPolicy)
	}
}
