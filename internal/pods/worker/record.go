package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// recordVersion is the format of worker.json.
const recordVersion = 1

// recordFile is the worker's record of a pod in StateDir/pods/<uid>.
const recordFile = "worker.json"

// lastInstance is the last run of a container the worker saw end: kept so that the restart
// count, the last termination state and the restart policy's verdict survive the removal of
// the container by container GC (and a restart of slicelet), as the kubelet keeps them in its
// pod status.
type lastInstance struct {
	ID         string    `json:"id"`
	SandboxID  string    `json:"sandboxID,omitempty"`
	Attempt    uint32    `json:"attempt"`
	ImageRef   string    `json:"imageRef,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	ExitCode   int32     `json:"exitCode,omitempty"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
}

// containerRecord is the worker's bookkeeping of one container of a pod.
type containerRecord struct {
	// Backoff and BackoffUpdated are the kubelet's restart back-off entry
	// (flowcontrol.Backoff): the current delay and the exit time it was last advanced for.
	Backoff        time.Duration `json:"backoff,omitempty"`
	BackoffUpdated time.Time     `json:"backoffUpdated,omitzero"`
	// BackoffAttempt is the run (CRI attempt) the entry was advanced to start: a later run
	// was started by another agent (the node changed agent and back), whose restarts the
	// entry missed. 0 in records written before it was kept.
	BackoffAttempt uint32 `json:"backoffAttempt,omitempty"`
	// Last is the latest run seen ended.
	Last *lastInstance `json:"last,omitempty"`
	// ResourcesOf is the run whose cgroup configuration is Resources (resourcesKey): what it
	// was created with, or resized to in place.
	ResourcesOf string `json:"resourcesOf,omitempty"`
	Resources   string `json:"resources,omitempty"`
	// ImageOf is the run that was created from the spec's image Image.
	ImageOf string `json:"imageOf,omitempty"`
	Image   string `json:"image,omitempty"`
	// RestartOf is the run stopped because the container's definition changed: it is started
	// again whatever the restart policy.
	RestartOf string `json:"restartOf,omitempty"`
}

// podRecord is StateDir/pods/<uid>/worker.json.
type podRecord struct {
	Version int `json:"version"`
	// InitializedIn is the sandbox in which every regular init container succeeded: they
	// never run again in it, only in a new sandbox.
	InitializedIn string                      `json:"initializedIn,omitempty"`
	Containers    map[string]*containerRecord `json:"containers"`
}

func newPodRecord() *podRecord {
	return &podRecord{Version: recordVersion, Containers: map[string]*containerRecord{}}
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

// podDir is StateDir/pods/<uid>; uid passed slices.ValidateUID, so it is one path element.
func (w *Worker) podDir(uid string) string {
	return filepath.Join(w.opts.StateDir, "pods", uid)
}

// loadRecord reads a pod's record; a missing file is a new record.
func (w *Worker) loadRecord(uid string) (*podRecord, error) {
	path := filepath.Join(w.podDir(uid), recordFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newPodRecord(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s state: %w", uid, err)
	}
	rec := newPodRecord()
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("pod %s state %s: %w", uid, path, err)
	}
	if rec.Version != recordVersion {
		return nil, fmt.Errorf("pod %s state %s: version %d, want %d", uid, path, rec.Version, recordVersion)
	}
	if rec.Containers == nil {
		rec.Containers = map[string]*containerRecord{}
	}
	return rec, nil
}

// saveRecord writes a pod's record atomically (atomicfile). Call with the entry's recMu held.
func (w *Worker) saveRecord(uid string, rec *podRecord) error {
	dir := w.podDir(uid)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pod %s state: %w", uid, err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, recordFile), rec); err != nil {
		return fmt.Errorf("pod %s state: %w", uid, err)
	}
	return nil
}
