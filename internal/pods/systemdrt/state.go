package systemdrt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// stateVersion is the format of state.json.
const stateVersion = 1

// instance is one run of a container: one unit.
type instance struct {
	N    int    `json:"n"`
	Unit string `json:"unit"`
	// Created is set once systemd accepted the unit (or it was found); an instance that is not
	// Created and has no unit was recorded but never started, and is started again under the
	// same name.
	Created bool `json:"created,omitempty"`
	// CreatedAt is when systemd accepted the unit; zero in records written before it existed
	// and for adopted units (container GC then ages the instance from StartedAt).
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// InvocationID is systemd's ID of this run of the unit, which tells its journal entries
	// from those of an earlier unit of the same name (a pod re-created with the same UID).
	InvocationID string `json:"invocationID,omitempty"`
	// StartedAt is when the main process started, zero while unknown.
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Done is set when the final state below has been recorded.
	Done       bool      `json:"done,omitempty"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	ExitCode   int32     `json:"exitCode,omitempty"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	// Stopping is set before slicelet stops or signals the instance, so its end is not
	// mistaken for a crash or an OOM kill.
	Stopping bool `json:"stopping,omitempty"`
	// GCRemoved is set when container GC removed this dead instance (RemoveContainer): its
	// unit was reset and it is no longer listed. The instance stays in the record because the
	// restart count, the back-off and the last termination state are computed from it, and the
	// record never holds more than two instances per container anyway.
	GCRemoved bool `json:"gcRemoved,omitempty"`
}

// containerRecord is what the runtime keeps about one container of a pod.
type containerRecord struct {
	// Current is the latest instance, running or dead; Previous the one before it.
	Current  *instance `json:"current,omitempty"`
	Previous *instance `json:"previous,omitempty"`
	// Backoff is the kubelet's per-container back-off entry (flowcontrol.Backoff): the current
	// delay and the exit time it was last advanced for.
	Backoff        time.Duration `json:"backoff,omitempty"`
	BackoffUpdated time.Time     `json:"backoffUpdated,omitzero"`
}

// podRecord is the state of one pod, stored in StateDir/pods/<uid>/state.json.
type podRecord struct {
	Version   int       `json:"version"`
	UID       string    `json:"uid"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	StartTime time.Time `json:"startTime,omitzero"`
	// Initialized is set once every regular init container has succeeded; the kubelet never
	// runs them again for the same pod.
	Initialized bool                        `json:"initialized,omitempty"`
	Containers  map[string]*containerRecord `json:"containers"`

	// mu guards the instances while containers are started or stopped concurrently, and
	// serializes saves.
	mu sync.Mutex
}

// locked runs f with the record locked.
func (p *podRecord) locked(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

func newPodRecord(uid string) *podRecord {
	return &podRecord{Version: stateVersion, UID: uid, Containers: map[string]*containerRecord{}}
}

// container returns the record of name, creating it.
func (p *podRecord) container(name string) *containerRecord {
	c := p.Containers[name]
	if c == nil {
		c = &containerRecord{}
		p.Containers[name] = c
	}
	return c
}

// podDir is StateDir/pods/<uid>; uid has been checked with ValidateUID, so it is one plain
// path element.
func (r *Runtime) podDir(uid string) string {
	return filepath.Join(r.opts.StateDir, "pods", uid)
}

func (r *Runtime) statePath(uid string) string {
	return filepath.Join(r.podDir(uid), "state.json")
}

// loadRecord reads a pod's record; a missing file is (nil, nil).
func (r *Runtime) loadRecord(uid string) (*podRecord, error) {
	data, err := os.ReadFile(r.statePath(uid))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s state: %w", uid, err)
	}
	rec := newPodRecord(uid)
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("pod %s state %s: %w", uid, r.statePath(uid), err)
	}
	if rec.Version != stateVersion {
		return nil, fmt.Errorf("pod %s state %s: version %d, want %d", uid, r.statePath(uid), rec.Version, stateVersion)
	}
	if rec.Containers == nil {
		rec.Containers = map[string]*containerRecord{}
	}
	rec.UID = uid
	return rec, nil
}

// saveRecord writes a pod's record atomically (atomicfile): a crash leaves the old or the new
// state.json, never a torn one.
func (r *Runtime) saveRecord(rec *podRecord) error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	dir := r.podDir(rec.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pod %s state: %w", rec.UID, err)
	}
	if err := atomicfile.WriteJSON(r.statePath(rec.UID), rec); err != nil {
		return fmt.Errorf("pod %s state: %w", rec.UID, err)
	}
	return nil
}
