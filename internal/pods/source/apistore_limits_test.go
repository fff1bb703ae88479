package source

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// podWithArgs is a pod whose container's arguments hold n bytes of '<' (six bytes each in
// HTML-escaped JSON, one in the store's records), in arguments of at most 100 000 bytes (under
// the kernel's per-string limit; annotations could not carry it: the API caps them at 256 KiB).
func podWithArgs(name string, n int) string {
	var args strings.Builder
	for n > 0 {
		k := min(n, 100000)
		args.WriteString("    - \"" + strings.Repeat("<", k) + "\"\n")
		n -= k
	}
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" +
		"spec:\n  containers:\n  - name: main\n    command: [/bin/echo]\n    args:\n" + args.String()
}

// TestAPIStoreLargestPodSurvivesRestart: the largest pod Apply accepts loads again (one bound,
// MaxRecordBytes, for both); one byte more is refused at Apply, naming the limit.
func TestAPIStoreLargestPodSurvivesRestart(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	// The largest arguments manifest.CheckBounds lets through, found by bisection.
	lo, hi := 0, manifest.MaxDocumentJSONBytes
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if manifest.CheckBounds([]byte(podWithArgs("big", mid))) == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	applied, err := s.Apply([]byte(podWithArgs("big", lo)), ApplyOptions{Annotations: map[string]string{"slicelet.io/applied-by": strings.Repeat("u", 200)}})
	if err != nil {
		t.Fatalf("Apply of the largest pod: %v", err)
	}
	if _, err := s.Apply([]byte(podWithArgs("bigger", lo+1)), ApplyOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "1.5 MiB") {
		t.Fatalf("Apply one byte over: %v, want ErrInvalid naming the 1.5 MiB limit", err)
	}
	fi, err := os.Stat(filepath.Join(state, APIStoreDir, "default_big.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("largest arguments %d bytes, record %d bytes (limit %d)", lo, fi.Size(), MaxRecordBytes)
	if fi.Size() > int64(manifest.MaxDocumentJSONBytes)+1024 {
		t.Errorf("record is %d bytes: not compact JSON without HTML escaping", fi.Size())
	}
	s2 := openStore(t, state)
	got, err := s2.Get("default", "big")
	if err != nil {
		t.Fatalf("the largest pod did not survive a restart: %v (problems %+v)", err, s2.Snapshot().Problems)
	}
	if got.UID != applied.UID || !reflect.DeepEqual(got.Spec.Containers[0].Args, applied.Spec.Containers[0].Args) {
		t.Errorf("reloaded pod differs: uid %s, want %s", got.UID, applied.UID)
	}
}

// TestAPIStoreLongNames: the longest namespace and name have a file name within NAME_MAX (with
// the temporary file's around it), stored and loaded again. The longest name is 253 characters
// with the node's suffix ("-n" on node "n"), as the kubelet validates a static pod.
func TestAPIStoreLongNames(t *testing.T) {
	manifest.SetNodeName("n")
	t.Cleanup(func() { manifest.SetNodeName("") })
	state := t.TempDir()
	s := openStore(t, state)
	ns := strings.Repeat("n", 63)
	name := strings.Repeat("a", 120) + "." + strings.Repeat("b", 130)
	manifest := strings.Replace(podYAML(name), "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1)
	if _, err := s.Apply([]byte(manifest), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("a", 120) + "." + strings.Repeat("c", 130) // same beginning
	if _, err := s.Apply([]byte(strings.Replace(podYAML(other), "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1)), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(state, APIStoreDir))
	if len(entries) != 2 {
		t.Fatalf("store holds %v", entries)
	}
	for _, e := range entries {
		if l := len(e.Name()); l > maxFileNameBytes {
			t.Errorf("file name %s is %d bytes", e.Name(), l)
		}
	}
	s2 := openStore(t, state)
	if _, err := s2.Get(ns, name); err != nil {
		t.Fatalf("long name after restart: %v (%+v)", err, s2.Snapshot().Problems)
	}
	if len(s2.List()) != 2 || len(s2.Snapshot().Problems) != 0 {
		t.Fatalf("after restart: %d pods, problems %+v", len(s2.List()), s2.Snapshot().Problems)
	}
}

// TestAPIStoreUnloadableRecordHeld: a record that does not load is set aside and reported as a
// held problem (its pod must keep running) at this and every later start, until an apply or
// delete of its pod resolves it.
func TestAPIStoreUnloadableRecordHeld(t *testing.T) {
	for _, resolve := range []string{"apply", "delete"} {
		t.Run(resolve, func(t *testing.T) {
			state := t.TempDir()
			s := openStore(t, state)
			if _, err := s.Apply([]byte(podYAML("victim")), ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			record := filepath.Join(state, APIStoreDir, "default_victim.json")
			data, _ := os.ReadFile(record)
			writeFiles(t, filepath.Dir(record), map[string]string{"default_victim.json": string(data[:len(data)/2])})

			aside := filepath.Join(state, APIAsideDir, "default_victim.json")
			for start := range 2 {
				snap := openStore(t, state).Snapshot()
				if len(snap.Pods) != 0 || len(snap.Problems) != 1 {
					t.Fatalf("start %d: pods %v, problems %+v", start, names(snap), snap.Problems)
				}
				p := snap.Problems[0]
				if !p.Hold || p.Pod != "default/victim" || p.Origin != aside || !strings.Contains(p.Error, "keeps running") {
					t.Fatalf("start %d: problem %+v, want held default/victim at %s", start, p, aside)
				}
			}
			if _, err := os.Stat(record); !os.IsNotExist(err) {
				t.Errorf("the unloadable record is still in the store: %v", err)
			}
			s = openStore(t, state)
			switch resolve {
			case "apply":
				if _, err := s.Apply([]byte(podYAML("victim")), ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
			case "delete":
				if err := s.Delete("default", "victim"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(aside); !os.IsNotExist(err) {
				t.Errorf("the record set aside outlived the %s: %v", resolve, err)
			}
			for _, snap := range []pods.Snapshot{s.Snapshot(), openStore(t, state).Snapshot()} {
				if len(snap.Problems) != 0 {
					t.Errorf("problems after the %s: %+v", resolve, snap.Problems)
				}
			}
		})
	}
}

// TestAPIStoreStorageErrorNotInvalid: a pod that cannot be written is a storage error carrying
// the errno and the path, not ErrInvalid (the API answers 5xx, not 422), and nothing changes.
func TestAPIStoreStorageErrorNotInvalid(t *testing.T) {
	state := t.TempDir()
	s := openStore(t, state)
	if err := os.RemoveAll(filepath.Join(state, APIStoreDir)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply([]byte(podYAML("a")), ApplyOptions{})
	if err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), filepath.Join(state, APIStoreDir)) {
		t.Fatalf("Apply into a vanished store = %v, want ENOENT naming the store, not ErrInvalid", err)
	}
	if len(s.List()) != 0 {
		t.Errorf("a pod that was not written is listed")
	}
}

// TestAPIStoreConcurrentCreateOnce: of nine concurrent applies of one new name exactly one
// creates the pod; the others find it (unchanged, same content), and all return its UID.
func TestAPIStoreConcurrentCreateOnce(t *testing.T) {
	s := openStore(t, t.TempDir())
	type result struct {
		action, uid string
		err         error
	}
	results := make(chan result, 9)
	start := make(chan struct{})
	for range 9 {
		go func() {
			<-start
			pod, action, err := s.ApplyAction([]byte(podYAML("race")), ApplyOptions{})
			r := result{action: action, err: err}
			if pod != nil {
				r.uid = string(pod.UID)
			}
			results <- r
		}()
	}
	close(start)
	count := map[string]int{}
	uids := map[string]bool{}
	for range 9 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		count[r.action]++
		uids[r.uid] = true
	}
	if count[Created] != 1 || count[Unchanged] != 8 || len(uids) != 1 {
		t.Fatalf("actions %v, %d UIDs; want one created, eight unchanged, one UID", count, len(uids))
	}
}
