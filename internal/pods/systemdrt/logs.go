package systemdrt

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// followDrain is how long Logs keeps following after the instance ended, so that the journal's
// last lines (written asynchronously by journald) still arrive.
const followDrain = 500 * time.Millisecond

// Logs writes a container's output from the journal (journalctl --output=cat
// _SYSTEMD_UNIT=<unit>): the current instance, or with Previous the one before it. TailLines
// limits the output to the last lines; Follow streams until ctx ends or the instance has
// ended. A container without such an instance is pods.ErrNoLogs.
func (r *Runtime) Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, w io.Writer) error {
	uid := string(pod.UID)
	if err := slices.ValidateUID(uid); err != nil {
		return err
	}
	if c, _ := containerByName(pod, container); c == nil {
		return fmt.Errorf("pod %s/%s: no container %q: %w", pod.Namespace, pod.Name, container, pods.ErrNoLogs)
	}
	n, invocation, err := r.instanceFor(ctx, uid, container, opts.Previous)
	if err != nil {
		return err
	}
	if n < 1 {
		what := "has not run yet"
		if opts.Previous {
			what = "has no previous instance"
		}
		return fmt.Errorf("pod %s/%s: container %s %s: %w", pod.Namespace, pod.Name, container, what, pods.ErrNoLogs)
	}
	unit, err := UnitName(uid, container, n)
	if err != nil {
		return err
	}
	args := []string{"--no-pager", "--quiet", "--output=cat", "--all"}
	switch {
	case opts.TailLines > 0:
		args = append(args, "--lines="+strconv.Itoa(opts.TailLines))
	case opts.Follow:
		args = append(args, "--lines=all")
	}
	follow := opts.Follow && !opts.Previous
	if follow {
		args = append(args, "--follow")
	}
	args = append(args, "_SYSTEMD_UNIT="+unit)
	if invocation != "" {
		// Only this run: a pod re-created with the same UID reuses the unit name.
		args = append(args, "_SYSTEMD_INVOCATION_ID="+invocation)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.opts.Journalctl, args...)
	cmd.Stdout = w
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("logs of %s: %w", unit, err)
	}
	done := make(chan struct{})
	if follow {
		go func() {
			// Stop following once the instance has ended (and journald had time to write its
			// last lines).
			if ended, _ := r.waitEnded(cctx, unit, 365*24*time.Hour); ended {
				t := time.NewTimer(followDrain)
				defer t.Stop()
				select {
				case <-t.C:
					cancel()
				case <-done:
				}
			}
		}()
	}
	err = cmd.Wait()
	close(done)
	if follow && cctx.Err() != nil && ctx.Err() == nil {
		return nil // ended with the instance
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("logs of %s: journalctl: %w: %s", unit, err, stderr.String())
	}
	return nil
}

// instanceFor returns the instance whose logs are wanted (the current one, or the one before)
// and its invocation ID when known. Units are consulted when the record is missing (state dir
// lost).
func (r *Runtime) instanceFor(ctx context.Context, uid, container string, previous bool) (int, string, error) {
	e := r.entry(uid)
	e.mu.Lock()
	rec, err := r.record(e, uid)
	n, invocation, known := 0, "", false
	if err == nil {
		if cr := rec.Containers[container]; cr != nil && cr.Current != nil {
			known = true
			want := cr.Current
			if !want.Created && !want.Done {
				want = cr.Previous // recorded, never started
			}
			if want != nil && previous {
				if p := cr.Previous; p != nil && p.N == want.N-1 {
					invocation = p.InvocationID
				}
				n = want.N - 1
			} else if want != nil {
				n, invocation = want.N, want.InvocationID
			}
		}
	}
	e.mu.Unlock()
	if err != nil {
		return 0, "", err
	}
	if !known {
		list, err := r.sd.List(ctx, podPattern(uid))
		if err != nil {
			return 0, "", fmt.Errorf("pod %s: container units: %w", uid, err)
		}
		for _, u := range list {
			if id, ok := parseUnit(u.Name); ok && id.UID == uid && id.Container == container && id.N > n {
				n = id.N
			}
		}
		if previous {
			n--
		}
	}
	return n, invocation, nil
}

// limitedBuffer keeps the first 4 KiB written to it (journalctl's error message).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	return strings.ReplaceAll(strings.TrimSpace(string(l.b)), "\n", "; ")
}
