package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods"
)

// defaultContainerAnnotation names the container `logs` shows when -c is not given (kubectl's).
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// logsCmd: logs NAME [CONTAINER] with kubectl's -c, -f, -p, --tail, --since, --since-time,
// --timestamps, --all-containers and --prefix.
func (c *cli) logsCmd(pos []string, lo logsOptions) error {
	container, opts, tail := lo.container, lo.opts, lo.tail
	switch {
	case lo.since < 0:
		return usageErr("logs: --since %s: must be positive", lo.since)
	case lo.since > 0 && lo.sinceTime != "":
		return usageErr("logs: --since and --since-time exclude each other")
	case lo.since > 0:
		opts.SinceTime = time.Now().Add(-lo.since)
	case lo.sinceTime != "":
		t, err := time.Parse(time.RFC3339Nano, lo.sinceTime)
		if err != nil {
			return usageErr("logs: --since-time %q: want an RFC 3339 time such as 2026-11-28T09:30:00Z", lo.sinceTime)
		}
		opts.SinceTime = t
	}
	switch {
	case lo.allContainers && (container != "" || len(pos) == 2):
		return usageErr("logs: --all-containers shows every container; it cannot be combined with a container name")
	case len(pos) == 0:
		return usageErr("logs: pod NAME is required")
	case len(pos) > 2:
		return usageErr("logs: unexpected argument %q", pos[2])
	case len(pos) == 2 && container != "":
		return usageErr("logs: container given twice (%q and -c %q)", pos[1], container)
	case len(pos) == 2:
		container = pos[1]
	}
	names, err := podNames(pos[:1])
	if err != nil {
		return err
	}
	name := names[0]
	switch {
	case tail == 0:
		return usageErr("logs: --tail 0 would print nothing; give N ≥ 1, or leave --tail out for every line")
	case tail > 0:
		opts.TailLines = tail
	case tail < -1:
		return usageErr("logs: --tail %d: must be a positive number of lines", tail)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if lo.allContainers {
		pod, err := cl.GetPod(c.ctx, c.global.namespace, name)
		if err != nil {
			return err
		}
		return c.allContainerLogs(cl, &pod, opts, lo.prefix)
	}
	if container == "" {
		pod, err := cl.GetPod(c.ctx, c.global.namespace, name)
		if err != nil {
			return err
		}
		var note string
		container, note = defaultContainer(&pod)
		if note != "" {
			fmt.Fprintln(c.stderr, note)
		}
	}
	var out io.Writer = c.stdout
	if lo.prefix {
		pw := &prefixWriter{w: c.stdout, prefix: logPrefix(name, container)}
		defer pw.flush()
		out = pw
	}
	return cl.Logs(c.ctx, c.global.namespace, name, container, opts, out)
}

// allContainerLogs is logs --all-containers: the init containers, then the others, one after
// the other; with -f all at once, line by line. A container that has not run is left out, as
// kubectl leaves it out.
func (c *cli) allContainerLogs(cl *api.Client, pod *v1.Pod, opts pods.LogOptions, prefix bool) error {
	var names []string
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ct := range list {
			names = append(names, ct.Name)
		}
	}
	var mu sync.Mutex
	one := func(container string) error {
		var pw *prefixWriter
		if prefix {
			pw = &prefixWriter{w: c.stdout, prefix: logPrefix(pod.Name, container), mu: &mu}
		} else {
			pw = &prefixWriter{w: c.stdout, mu: &mu}
		}
		defer pw.flush()
		err := cl.Logs(c.ctx, pod.Namespace, pod.Name, container, opts, pw)
		if errors.Is(err, api.ErrNotFound) {
			return nil // no output yet (the daemon answers 404 for a container without logs)
		}
		return err
	}
	if !opts.Follow {
		for _, n := range names {
			if err := one(n); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make(chan error, len(names))
	for _, n := range names {
		go func() { errs <- one(n) }()
	}
	var first error
	for range names {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// logPrefix is kubectl logs --prefix's: [pod/NAME/CONTAINER].
func logPrefix(pod, container string) string {
	return fmt.Sprintf("[pod/%s/%s] ", pod, container)
}

// prefixWriter writes whole lines, each with the prefix, under mu when it is set (several
// containers followed at once); flush writes a last line without a newline.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     *sync.Mutex
	rest   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	data := append(p.rest, b...)
	p.rest = nil
	var out []byte
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, p.prefix...), data[:i+1]...)
		data = data[i+1:]
	}
	p.rest = append(p.rest, data...)
	if len(out) > 0 {
		if err := p.write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func (p *prefixWriter) write(b []byte) error {
	if p.mu != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	_, err := p.w.Write(b)
	return err
}

func (p *prefixWriter) flush() {
	if len(p.rest) > 0 {
		_ = p.write(append([]byte(p.prefix), p.rest...))
		p.rest = nil
	}
}

// defaultContainer picks the container to show, as kubectl does: the one the
// kubectl.kubernetes.io/default-container annotation names, else the first regular container. When
// the pod has more than one container it also returns a note saying which was chosen.
func defaultContainer(p *v1.Pod) (string, string) {
	var all []string
	for _, c := range p.Spec.InitContainers {
		all = append(all, c.Name+" (init)")
	}
	for _, c := range p.Spec.Containers {
		all = append(all, c.Name)
	}
	name := ""
	if a := p.Annotations[defaultContainerAnnotation]; a != "" {
		name = a
	} else if len(p.Spec.Containers) > 0 {
		name = p.Spec.Containers[0].Name
	}
	if len(all) <= 1 {
		return name, ""
	}
	return name, fmt.Sprintf("Defaulted container %q out of: %s", name, strings.Join(all, ", "))
}
