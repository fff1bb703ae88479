package crirt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// backoffVersion is the format of backoff.json.
const backoffVersion = 1

// backoffEntry is one container's restart back-off (flowcontrol.Backoff's entry).
type backoffEntry struct {
	Delay   time.Duration `json:"delay"`
	Updated time.Time     `json:"updated"`
}

// backoffFile is StateDir/pods/<uid>/backoff.json.
type backoffFile struct {
	Version    int                     `json:"version"`
	Containers map[string]backoffEntry `json:"containers"`
}

// podEntry is the in-memory side of one pod.
type podEntry struct {
	mu      sync.Mutex // serializes SyncPod, KillPod, Forget of the pod
	loaded  bool
	backoff map[string]backoffEntry
	waits   map[string]*waitErr
	// initializedIn is the sandbox in which every regular init container succeeded: the
	// kubelet never runs them again in that sandbox, only in a new one.
	initializedIn string

	// guarded by Runtime.mu:
	nextSync time.Time
	seen     map[string]runtimeapi.ContainerState // container ID → state at the last sync
}

// entry returns the pod's entry, creating it.
func (r *Runtime) entry(uid string) *podEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.pods[uid]
	if e == nil {
		e = &podEntry{backoff: map[string]backoffEntry{}, waits: map[string]*waitErr{}}
		r.pods[uid] = e
	}
	return e
}

// podDir is StateDir/pods/<uid>; uid passed slices.ValidateUID, so it is one path element.
func (r *Runtime) podDir(uid string) string {
	return filepath.Join(r.opts.StateDir, "pods", uid)
}

// loadBackoff reads the pod's back-off once. Call with e.mu held.
func (r *Runtime) loadBackoff(e *podEntry, uid string) error {
	if e.loaded {
		return nil
	}
	path := filepath.Join(r.podDir(uid), "backoff.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		e.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("pod %s state: %w", uid, err)
	}
	var f backoffFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("pod %s state %s: %w", uid, path, err)
	}
	if f.Version != backoffVersion {
		return fmt.Errorf("pod %s state %s: version %d, want %d", uid, path, f.Version, backoffVersion)
	}
	for k, v := range f.Containers {
		e.backoff[k] = v
	}
	e.loaded = true
	return nil
}

// saveBackoff writes the pod's back-off atomically (atomicfile). Call with e.mu held.
func (r *Runtime) saveBackoff(e *podEntry, uid string) error {
	dir := r.podDir(uid)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pod %s state: %w", uid, err)
	}
	f := backoffFile{Version: backoffVersion, Containers: e.backoff}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "backoff.json"), f); err != nil {
		return fmt.Errorf("pod %s state: %w", uid, err)
	}
	return nil
}
