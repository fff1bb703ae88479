package runtimetest

import (
	"bufio"
	"fmt"
	"os"
	"sort"
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
		handlersSucceed(c, []string{"/bin/true"})
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
		handlersSucceed(c, []string{"/bin/sh", "-c", "exit 0"})
	})
}

// handlersSucceed makes every probe and lifecycle hook of c run ok, a command that succeeds:
// the corpus's handlers test programs its images have (nginx, a health endpoint), not the
// command that replaces them. Probes and hooks themselves are tested by the runtime suite.
func handlersSucceed(c *v1.Container, ok []string) {
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			p.ProbeHandler = v1.ProbeHandler{Exec: &v1.ExecAction{Command: ok}}
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				*h = v1.LifecycleHandler{Exec: &v1.ExecAction{Command: ok}}
			}
		}
	}
}

// ReferencedObjects returns, as manifest documents, a ConfigMap or Secret for every one the pod
// references (env, envFrom, configMap, secret and projected volumes), each holding the keys the
// pod names (or one key when it names none), so the corpus's pods find what they read.
func ReferencedObjects(pod *v1.Pod) []string {
	type object struct{ kind, name string }
	keys := map[object]map[string]bool{}
	add := func(kind, name string, key ...string) {
		o := object{kind, name}
		if keys[o] == nil {
			keys[o] = map[string]bool{}
		}
		for _, k := range key {
			keys[o][k] = true
		}
	}
	items := func(kind, name string, list []v1.KeyToPath) {
		add(kind, name)
		for _, it := range list {
			add(kind, name, it.Key)
		}
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
			case e.ValueFrom.ConfigMapKeyRef != nil:
				add("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			case e.ValueFrom.SecretKeyRef != nil:
				add("Secret", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			items("ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items)
		case v.Secret != nil:
			items("Secret", v.Secret.SecretName, v.Secret.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					items("ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items)
				}
				if src.Secret != nil {
					items("Secret", src.Secret.Name, src.Secret.Items)
				}
			}
		}
	}
	var docs []string
	for o, ks := range keys {
		if len(ks) == 0 {
			ks["key"] = true
		}
		field := "data"
		if o.kind == "Secret" {
			field = "stringData"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\n%s:\n", o.kind, o.name, pod.Namespace, field)
		for k := range ks {
			fmt.Fprintf(&b, "  %q: value\n", k)
		}
		docs = append(docs, b.String())
	}
	sort.Strings(docs)
	return docs
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
