package crirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

// criLog decodes the CRI log format ("<RFC3339Nano> <stdout|stderr> <F|P> <message>", one
// record a line; P marks a partial record continued by the next) into plain lines.
type criLog struct {
	rest      []byte    // an incomplete record (no newline yet)
	partial   []byte    // the message so far of a record split by the runtime (tag P)
	partialTS time.Time // the time of its last record
	// emit receives every line with the time of its (last) record.
	emit func(ts time.Time, line []byte) error
}

// Write takes raw bytes of a log file.
func (d *criLog) Write(p []byte) (int, error) {
	data := p
	if len(d.rest) > 0 {
		data = append(d.rest, p...)
		d.rest = nil
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := d.record(data[:i]); err != nil {
			return 0, err
		}
		data = data[i+1:]
	}
	d.rest = append(d.rest[:0], data...)
	return len(p), nil
}

// record decodes one record; a malformed one is skipped, as the kubelet skips it.
func (d *criLog) record(rec []byte) error {
	fields := bytes.SplitN(rec, []byte{' '}, 4)
	if len(fields) < 3 {
		return nil
	}
	ts, err := time.Parse(time.RFC3339Nano, string(fields[0]))
	if err != nil {
		return nil
	}
	if s := string(fields[1]); s != "stdout" && s != "stderr" {
		return nil
	}
	msg := []byte{}
	if len(fields) == 4 {
		msg = fields[3]
	}
	switch string(fields[2]) {
	case "P":
		d.partial = append(d.partial, msg...)
		d.partialTS = ts
		return nil
	case "F":
	default:
		return nil
	}
	line := append(append(d.partial, msg...), '\n')
	d.partial = nil
	return d.emit(ts, line)
}

// flush emits the partial records no full record ended, without a newline: the output a
// container wrote last without ending its line (echo -n), which the runtime records as a
// partial record and the kubelet's ReadLogs passes on as it is (a termination message from
// the log, FallbackToLogsOnError, reads it so).
func (d *criLog) flush() error {
	if len(d.partial) == 0 {
		return nil
	}
	line := d.partial
	d.partial = nil
	return d.emit(d.partialTS, line)
}

// logFiles returns the run numbers (restart count + 1) that have a log file, ascending.
func logFiles(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(base); err == nil && n >= 0 {
			out = append(out, n+1)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Logs writes a container's output, read from its CRI log file
// (LogRoot/<ns>_<name>_<uid>/<container>/<restart count>.log), as plain lines: the current
// instance, or with Previous the one before it. TailLines limits the output to the last lines;
// Follow then streams new lines until ctx ends, the instance has ended (and its file is
// drained) or a newer instance started. Reading needs no runtime: logs stay readable while it
// is down (a Follow then waits for it). A container without such an instance is
// pods.ErrNoLogs.
func (r *Runtime) Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, w io.Writer) error {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if c, _ := lifecycle.ContainerByName(pod, container); c == nil {
		return fmt.Errorf("pod %s/%s: no container %q: %w", pod.Namespace, pod.Name, container, pods.ErrNoLogs)
	}
	podDir := r.podLogDir(pod.Namespace, pod.Name, string(pod.UID))
	dir := filepath.Join(podDir, container)
	runs, err := logFiles(dir)
	if err != nil {
		return fmt.Errorf("pod %s/%s: container %s: logs: %w", pod.Namespace, pod.Name, container, err)
	}
	n := 0
	if len(runs) > 0 {
		n = runs[len(runs)-1]
		if opts.Previous {
			n = 0
			if len(runs) > 1 {
				n = runs[len(runs)-2]
			}
		}
	}
	if n < 1 {
		what := "has not run yet"
		if opts.Previous {
			what = "has no previous instance"
		}
		return fmt.Errorf("pod %s/%s: container %s %s: %w", pod.Namespace, pod.Name, container, what, pods.ErrNoLogs)
	}
	path := filepath.Join(podDir, containerLogPath(container, n))
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pod %s/%s: container %s: logs: %w", pod.Namespace, pod.Name, container, err)
	}
	defer f.Close()

	lw := pods.NewLogWriter(opts, w)
	dec := &criLog{emit: lw.WriteLine}
	if _, err := io.Copy(dec, f); err != nil {
		return fmt.Errorf("logs %s: %w", path, err)
	}
	if !opts.Follow || opts.Previous {
		// The instance's output so far: a line it has not ended is shown as it is.
		if err := dec.flush(); err != nil {
			return err
		}
	}
	if err := lw.Flush(); err != nil {
		return err
	}
	if !opts.Follow || opts.Previous {
		return nil
	}
	return r.follow(ctx, pod, container, n, f, dec)
}

// follow copies what is appended to f until ctx ends, the instance has ended and f is drained,
// or a newer run of the container has a log file.
func (r *Runtime) follow(ctx context.Context, pod *v1.Pod, container string, n int, f *os.File, dec *criLog) error {
	t := r.clock.NewTicker(r.opts.FollowPoll)
	defer t.Stop()
	dir := filepath.Join(r.podLogDir(pod.Namespace, pod.Name, string(pod.UID)), container)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		ended := r.instanceEnded(ctx, pod, container, n)
		if !ended {
			if runs, _ := logFiles(dir); len(runs) > 0 && runs[len(runs)-1] > n {
				ended = true
			}
		}
		if _, err := io.Copy(dec, f); err != nil {
			return fmt.Errorf("logs %s: %w", f.Name(), err)
		}
		if ended {
			return dec.flush()
		}
	}
}

// instanceEnded reports whether run n of the container has exited or is gone. While the
// runtime cannot tell, the instance is taken as running.
func (r *Runtime) instanceEnded(ctx context.Context, pod *v1.Pod, container string, n int) bool {
	sel := managedSelector(string(pod.UID))
	sel[worker.LabelContainerName] = container
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	})
	if err != nil {
		return false
	}
	for _, c := range resp.Containers {
		if int(c.Metadata.GetAttempt())+1 == n {
			return c.State == runtimeapi.ContainerState_CONTAINER_EXITED
		}
	}
	return true
}
