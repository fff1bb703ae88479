package systemdrt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// stateVersion is the format of state.json; version 1 (one record of each container's current
// and previous instance, with the restart back-off) is read and converted.
const stateVersion = 2

// sandbox is one sandbox of a pod: the pod slice it runs in, and whether it is ready.
type sandbox struct {
	ID        string    `json:"id"`
	Attempt   uint32    `json:"attempt"`
	Ready     bool      `json:"ready"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Slice is the pod slice (the sandbox's cgroup parent).
	Slice string `json:"slice,omitempty"`
	// MemoryLimited: the pod has a memory limit of its own (cgroup v1 OOM inference).
	MemoryLimited bool `json:"memoryLimited,omitempty"`
	// ResolvConf is the sandbox's resolver configuration file, mounted at /etc/resolv.conf in
	// its containers; "" when they read the host's (sandboxResolvConf).
	ResolvConf string `json:"resolvConf,omitempty"`
}

// run is one run of a container: one unit.
type run struct {
	// ID is the unit's name.
	ID        string    `json:"id"`
	SandboxID string    `json:"sandboxID"`
	Name      string    `json:"name"`
	Attempt   uint32    `json:"attempt"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Config is the container's configuration (protojson), from which the unit is started;
	// empty for runs adopted from units or converted from version 1.
	Config json.RawMessage `json:"config,omitempty"`
	// Started is set once systemd accepted the unit (or it was found); a run that is not
	// Started has no unit yet.
	Started bool `json:"started,omitempty"`
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
	// Stopping is set before slicelet stops or signals the run, so its end is not mistaken for
	// a crash or an OOM kill.
	Stopping bool `json:"stopping,omitempty"`
	// MemoryLimited: the container or its pod runs under a memory limit (cgroup v1 OOM
	// inference).
	MemoryLimited bool `json:"memoryLimited,omitempty"`
	// StopSignal is the container's stop signal by name; SIGTERM when empty.
	StopSignal string `json:"stopSignal,omitempty"`
	// Grace is the pod's termination grace period.
	Grace time.Duration `json:"grace,omitempty"`

	// active and sub are the unit's state at the last listing ("" when it was not loaded),
	// listed whether there was one; confirmed is the listing sequence number (Runtime.listings)
	// when this process saw systemd accept the unit: a listing numbered at or below it may
	// have been taken before the unit existed. None of them is stored.
	active, sub string
	listed      bool
	confirmed   uint64
}

// config decodes the run's configuration; nil when it has none.
func (r *run) config() (*runtimeapi.ContainerConfig, error) {
	if len(r.Config) == 0 {
		return nil, nil
	}
	cfg := &runtimeapi.ContainerConfig{}
	if err := protojson.Unmarshal(r.Config, cfg); err != nil {
		return nil, fmt.Errorf("container %s: configuration: %w", r.Name, err)
	}
	return cfg, nil
}

// podRecord is what the runtime keeps about one pod, in StateDir/pods/<uid>/state.json: its
// sandboxes and the runs of its containers (at most the current and the previous run of each).
type podRecord struct {
	Version   int        `json:"version"`
	UID       string     `json:"uid"`
	Namespace string     `json:"namespace,omitempty"`
	Name      string     `json:"name,omitempty"`
	Sandboxes []*sandbox `json:"sandboxes"`
	Runs      []*run     `json:"runs"`
}

func newPodRecord(uid string) *podRecord {
	return &podRecord{Version: stateVersion, UID: uid}
}

// sandbox returns the sandbox with that ID, nil when none.
func (p *podRecord) sandbox(id string) *sandbox {
	for _, sb := range p.Sandboxes {
		if sb.ID == id {
			return sb
		}
	}
	return nil
}

// ready returns the ready sandbox (the newest one; only it can be ready), nil when none.
func (p *podRecord) ready() *sandbox {
	for i := len(p.Sandboxes) - 1; i >= 0; i-- {
		if p.Sandboxes[i].Ready {
			return p.Sandboxes[i]
		}
	}
	return nil
}

// run returns the run with that unit name, nil when none.
func (p *podRecord) run(id string) *run {
	for _, r := range p.Runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// sandboxID is the ID of a pod's sandbox: the pod UID for the first, <uid>.<attempt> for later
// ones (a UID has no '.').
func sandboxID(uid string, attempt uint32) string {
	if attempt == 0 {
		return uid
	}
	return fmt.Sprintf("%s.%d", uid, attempt)
}

// sandboxPod is the pod UID of a sandbox ID.
func sandboxPod(id string) string {
	uid, _, _ := strings.Cut(id, ".")
	return uid
}

// podDir is StateDir/pods/<uid>; uid has been checked with ValidateUID, so it is one plain
// path element. The directory is shared with the pod worker (its record and the pod's emptyDir
// volumes); the runtime owns state.json in it.
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
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("pod %s state %s: %w", uid, r.statePath(uid), err)
	}
	rec := newPodRecord(uid)
	switch head.Version {
	case 1:
		err = convertV1(data, rec)
	case stateVersion:
		err = json.Unmarshal(data, rec)
	default:
		return nil, fmt.Errorf("pod %s state %s: version %d, want %d", uid, r.statePath(uid), head.Version, stateVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s state %s: %w", uid, r.statePath(uid), err)
	}
	rec.UID, rec.Version = uid, stateVersion
	return rec, nil
}

// convertV1 reads a version 1 record: one sandbox (the pod's first) and the instances that
// reached systemd; instances recorded but never started, and those container GC removed, are
// dropped (the pod worker starts the former again, under the same unit name).
func convertV1(data []byte, rec *podRecord) error {
	type instance struct {
		N            int       `json:"n"`
		Unit         string    `json:"unit"`
		Created      bool      `json:"created"`
		CreatedAt    time.Time `json:"createdAt"`
		InvocationID string    `json:"invocationID"`
		StartedAt    time.Time `json:"startedAt"`
		Done         bool      `json:"done"`
		FinishedAt   time.Time `json:"finishedAt"`
		ExitCode     int32     `json:"exitCode"`
		Signal       int32     `json:"signal"`
		Reason       string    `json:"reason"`
		Message      string    `json:"message"`
		Stopping     bool      `json:"stopping"`
		GCRemoved    bool      `json:"gcRemoved"`
	}
	var v1 struct {
		Namespace  string    `json:"namespace"`
		Name       string    `json:"name"`
		StartTime  time.Time `json:"startTime"`
		Containers map[string]struct {
			Current  *instance `json:"current"`
			Previous *instance `json:"previous"`
		} `json:"containers"`
	}
	if err := json.Unmarshal(data, &v1); err != nil {
		return err
	}
	rec.Namespace, rec.Name = v1.Namespace, v1.Name
	sb := &sandbox{ID: sandboxID(rec.UID, 0), Ready: true, CreatedAt: v1.StartTime}
	rec.Sandboxes = []*sandbox{sb}
	for name, c := range v1.Containers {
		for _, in := range []*instance{c.Previous, c.Current} {
			if in == nil || !in.Created || in.GCRemoved || in.N < 1 {
				continue
			}
			rec.Runs = append(rec.Runs, &run{
				ID: in.Unit, SandboxID: sb.ID, Name: name, Attempt: uint32(in.N - 1), CreatedAt: in.CreatedAt,
				Started: true, InvocationID: in.InvocationID, StartedAt: in.StartedAt,
				Done: in.Done, FinishedAt: in.FinishedAt, ExitCode: in.ExitCode, Signal: in.Signal,
				Reason: in.Reason, Message: in.Message, Stopping: in.Stopping,
			})
		}
	}
	return nil
}

// saveRecord writes a pod's record atomically (atomicfile): a crash leaves the old or the new
// state.json, never a torn one. Call with the pod's entry locked.
func (r *Runtime) saveRecord(rec *podRecord) error {
	dir := r.podDir(rec.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pod %s state: %w", rec.UID, err)
	}
	if err := atomicfile.WriteJSON(r.statePath(rec.UID), rec); err != nil {
		return fmt.Errorf("pod %s state: %w", rec.UID, err)
	}
	return nil
}
