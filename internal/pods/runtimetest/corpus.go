package runtimetest

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// HostCommands rewrites a pod of the manifest corpus (testdata/corpus) for the built-in systemd
// runtime, which runs host commands and refuses images: every init and regular container loses
// its image and runs a host command instead — /bin/true for an init container that is not a
// sidecar and for the containers of a pod that does not restart them (restartPolicy Never or
// OnFailure), so the pod completes; /bin/sleep infinity otherwise, so it keeps running. Volume
// mounts, which the systemd runtime makes over host paths that must exist, move to
// CorpusMountRoot/<volume>; the caller creates those directories. Everything else (resources,
// security context, volumes, restart policies) stays as written.
func HostCommands(pod *v1.Pod) {
	rewriteContainers(pod, func(c *v1.Container, complete bool) {
		c.Image = ""
		c.Args = nil
		for i := range c.VolumeMounts {
			c.VolumeMounts[i].MountPath = CorpusMountRoot + "/" + c.VolumeMounts[i].Name
		}
		c.Command = []string{"/bin/sleep", "infinity"}
		if complete {
			c.Command = []string{"/bin/true"}
		}
	})
}

// ImageCommands rewrites a pod of the manifest corpus for a CRI runtime with one local busybox
// image and no registry: every init and regular container runs image (never pulled) with a
// busybox shell command that exits at once where HostCommands runs /bin/true and otherwise
// waits until it is stopped. Everything else stays as written.
func ImageCommands(pod *v1.Pod, image string) {
	rewriteContainers(pod, func(c *v1.Container, complete bool) {
		c.Image, c.ImagePullPolicy = image, v1.PullNever
		c.Args = nil
		c.Command = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.5; done"}
		if complete {
			c.Command = []string{"/bin/sh", "-c", "exit 0"}
		}
	})
}

// rewriteContainers calls set on every init and regular container, complete when the container
// is to exit: an init container that is not a sidecar, or any container of a pod that does not
// restart its containers (restartPolicy Never or OnFailure).
func rewriteContainers(pod *v1.Pod, set func(c *v1.Container, complete bool)) {
	done := pod.Spec.RestartPolicy == v1.RestartPolicyNever || pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		set(c, c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways)
	}
	for i := range pod.Spec.Containers {
		set(&pod.Spec.Containers[i], done)
	}
}

// CorpusMountRoot is where HostCommands moves volume mounts.
const CorpusMountRoot = "/run/slicelet-corpus"

// Outcome is one line of testdata/corpus-outcomes.txt: what a runtime does with a manifest.
type Outcome struct {
	// File is the manifest's name in testdata/corpus.
	File string
	// Runtime is "cri" or "systemd".
	Runtime string
	// Result is "runs", or "refused" followed by the refused fields' paths.
	Result string
}

// Runs reports whether the runtime runs the manifest's pods.
func (o Outcome) Runs() bool { return o.Result == "runs" }

// ReadOutcomes reads an outcome table: "<file> <runtime> <result>" lines, "#" comments.
func ReadOutcomes(path string) ([]Outcome, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Outcome
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want <file> <runtime> <result>", path, n)
		}
		out = append(out, Outcome{File: fields[0], Runtime: fields[1], Result: strings.Join(fields[2:], " ")})
	}
	return out, sc.Err()
}
