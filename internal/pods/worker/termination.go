package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// terminationLogPath is the host file of one run's termination message:
// StateDir/pods/<uid>/containers/<name>/termination-log-<attempt> (the kubelet's
// <pod dir>/containers/<name>/<random id>; the attempt is unique to the run here).
func (w *Worker) terminationLogPath(uid, name string, attempt uint32) string {
	return filepath.Join(w.podDir(uid), "containers", name, fmt.Sprintf("termination-log-%d", attempt))
}

// terminationLogMount creates the run's termination message file, empty and mode 0666 whatever
// the umask (any user of the container may write it), and mounts it at the container's
// terminationMessagePath, as kuberuntime's makeMounts (kuberuntime_container.go); nil for a
// container without a path, and for a runtime without images (systemdrt: its containers are
// host commands in the host's file system, where a bind mount's missing destination, such as
// /dev/termination-log, would be created on the host).
func (w *Worker) terminationLogMount(pod *v1.Pod, c *v1.Container, attempt uint32) (*runtimeapi.Mount, error) {
	if c.TerminationMessagePath == "" || w.opts.Images == nil {
		return nil, nil
	}
	path := w.terminationLogPath(string(pod.UID), c.Name, attempt)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: path}, nil
}

// withTerminationMessages adds to the message of every container of pod that exited its
// termination message (lifecycle.TerminationMessage: the file, or the log's end with
// FallbackToLogsOnError), read once per container and kept while the worker keeps its status.
func (w *Worker) withTerminationMessages(ctx context.Context, pod *v1.Pod, statuses []ContainerStatus) {
	for i := range statuses {
		st := &statuses[i]
		c, _ := lifecycle.ContainerByName(pod, st.Name)
		if st.State != StateExited || c == nil {
			continue
		}
		w.mu.Lock()
		msg, ok := w.termination[st.ID]
		w.mu.Unlock()
		if !ok {
			msg = w.readTerminationMessage(ctx, pod, c, st)
			w.mu.Lock()
			if _, cached := w.status[st.ID]; cached {
				w.termination[st.ID] = msg
			}
			w.mu.Unlock()
		}
		st.Message = lifecycle.WithTerminationMessage(st.Message, msg)
	}
}

// readTerminationMessage is the termination message of the exited run st of container c.
func (w *Worker) readTerminationMessage(ctx context.Context, pod *v1.Pod, c *v1.Container, st *ContainerStatus) string {
	data, exists, err := readAtMost(w.terminationLogPath(string(pod.UID), c.Name, st.Attempt), lifecycle.MaxTerminationMessageLength)
	if err != nil {
		return fmt.Sprintf("Error on reading termination log %s: %v", w.terminationLogPath(string(pod.UID), c.Name, st.Attempt), err)
	}
	msg, fromLogs := lifecycle.TerminationMessage(c, st.ExitCode, st.Reason, data, exists)
	if !fromLogs {
		return msg
	}
	var buf bytes.Buffer
	if err := w.rt.Logs(ctx, pod, c.Name, pods.LogOptions{TailLines: lifecycle.MaxTerminationMessageLogLines}, &buf); err != nil && !errors.Is(err, pods.ErrNoLogs) {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return lifecycle.LastLogString(buf.Bytes())
}

// readAtMost reads at most limit bytes of a file; exists is false when it is missing.
func readAtMost(path string, limit int64) (data []byte, exists bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, limit))
	return data, true, err
}
