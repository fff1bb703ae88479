package main

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// defaultContainerAnnotation names the container `logs` shows when -c is not given (kubectl's).
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// logsCmd: logs NAME [CONTAINER] [-c CONTAINER] [-f] [--previous] [--tail N].
func (c *cli) logsCmd(pos []string, lo logsOptions) error {
	container, opts, tail := lo.container, lo.opts, lo.tail
	switch {
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
	return cl.Logs(c.ctx, c.global.namespace, name, container, opts, c.stdout)
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
