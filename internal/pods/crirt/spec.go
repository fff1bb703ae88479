package crirt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// Labels and annotations on sandboxes and containers: the kubelet's names, so that crictl and
// tools that know the kubelet read them, plus slicelet's own mark.
const (
	// LabelPodUID is the pod's UID (sandboxes and containers).
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelPodName is the pod's name.
	LabelPodName = "io.kubernetes.pod.name"
	// LabelPodNamespace is the pod's namespace.
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	// LabelContainerName is the container's name in its pod (containers only).
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManaged marks what slicelet created; everything else in the runtime is left alone.
	LabelManaged = "slicelet.io/managed"
	// AnnotationRestartCount is the container's restart count (= CRI attempt).
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
	// AnnotationGracePeriod is the pod's terminationGracePeriodSeconds.
	AnnotationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
)

// podLogDir is the pod's log directory: LogRoot/<namespace>_<name>_<uid>.
func (r *Runtime) podLogDir(pod *v1.Pod) string {
	return filepath.Join(r.opts.LogRoot, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// containerLogPath is the log file of a container's run n (n from 1) relative to the pod's log
// directory: <container>/<restart count>.log.
func containerLogPath(container string, n int) string {
	return filepath.Join(container, strconv.Itoa(n-1)+".log")
}

func podLabels(pod *v1.Pod) map[string]string {
	return map[string]string{
		LabelPodUID:       string(pod.UID),
		LabelPodName:      pod.Name,
		LabelPodNamespace: pod.Namespace,
		LabelManaged:      "true",
	}
}

// namespaces are the pod's namespace modes, as the kubelet sets them: the container's own PID
// namespace unless shareProcessNamespace (POD) or hostPID (NODE); host network per hostNetwork
// or the runtime's HostNetwork option.
func (r *Runtime) namespaces(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork || r.hostNetwork() {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// sandboxConfig is the pod's sandbox: cgroup parent = the pod slice (systemd cgroup driver), the
// pod's log directory, the kubelet's labels.
func (r *Runtime) sandboxConfig(pod *v1.Pod, slice string, attempt uint32) *runtimeapi.PodSandboxConfig {
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	for k, v := range podLabels(pod) {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	ns := r.namespaces(pod)
	hostname := ""
	if ns.Network != runtimeapi.NamespaceMode_NODE {
		// A host-network sandbox must have no hostname of its own (containerd refuses one).
		hostname = pod.Name
		if pod.Spec.Hostname != "" {
			hostname = pod.Spec.Hostname
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = psc.SupplementalGroups
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     hostname,
		LogDirectory: r.podLogDir(pod),
		Labels:       labels,
		Annotations:  annotations,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: slice, SecurityContext: sc},
	}
}

// containerResources converts the kubelet's container cgroup values
// (lifecycle.ContainerResources, kuberuntime calculateLinuxResources) into CRI resources, with
// the kubelet's OOM score.
func (r *Runtime) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	rc := lifecycle.ContainerResources(c, *r.opts.Resources)
	out := &runtimeapi.LinuxContainerResources{OomScoreAdj: int64(slices.ContainerOOMScoreAdj(pod, c, r.opts.MemoryCapacity))}
	if rc.CPUShares != nil {
		out.CpuShares = int64(*rc.CPUShares)
	}
	if rc.CPUQuota != nil {
		out.CpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		out.CpuPeriod = int64(*rc.CPUPeriod)
	}
	if rc.Memory != nil {
		out.MemoryLimitInBytes = *rc.Memory
	}
	return out
}

// containerConfig is run n of container c.
func (r *Runtime) containerConfig(pod *v1.Pod, c *v1.Container, n int, imageRef string, vols map[string]string) (*runtimeapi.ContainerConfig, error) {
	env, command, args := lifecycle.ExpandContainer(c)
	var envs []*runtimeapi.KeyValue
	for _, e := range env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	var mounts []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		host, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("container %s: volume mount %q: no such volume", c.Name, m.Name)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly})
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: r.namespaces(pod)}
	if u := lifecycle.RunAsUser(pod, c); u != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *u}
	}
	if g := lifecycle.RunAsGroup(pod, c); g != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *g}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SupplementalGroups = psc.SupplementalGroups
	}
	if csc := c.SecurityContext; csc != nil {
		sc.Privileged = csc.Privileged != nil && *csc.Privileged
		sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
	}
	grace := int64(lifecycle.DefaultGracePeriod / time.Second)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	labels := podLabels(pod)
	labels[LabelContainerName] = c.Name
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(n - 1)},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    command,
		Args:       args,
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Mounts:     mounts,
		Labels:     labels,
		Annotations: map[string]string{
			AnnotationRestartCount: strconv.Itoa(n - 1),
			AnnotationGracePeriod:  strconv.FormatInt(grace, 10),
		},
		LogPath: containerLogPath(c.Name, n),
		Linux:   &runtimeapi.LinuxContainerConfig{Resources: r.containerResources(pod, c), SecurityContext: sc},
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		cfg.StopSignal = runtimeapi.Signal(runtimeapi.Signal_value["SIGNAL_"+string(*c.Lifecycle.StopSignal)])
	}
	return cfg, nil
}

// pullPolicy is the container's imagePullPolicy with the API's default: Always for an image
// without a tag or tagged latest (and no digest), else IfNotPresent.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if strings.Contains(img, "@") {
		return v1.PullIfNotPresent
	}
	last := img[strings.LastIndex(img, "/")+1:]
	if i := strings.LastIndex(last, ":"); i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// emptyDirPath is where an emptyDir volume lives: StateDir/pods/<uid>/volumes/<name>.
func (r *Runtime) emptyDirPath(uid, name string) string {
	return filepath.Join(r.podDir(uid), "volumes", name)
}

// prepareVolumes creates the pod's emptyDir directories (StateDir/pods/<uid>/volumes/<name>)
// and the hostPath directories and files of the *OrCreate types, and returns every volume's
// host path.
func (r *Runtime) prepareVolumes(pod *v1.Pod) (map[string]string, error) {
	vols, err := lifecycle.PrepareVolumes(pod, func(v *v1.Volume) (string, error) {
		dir := r.emptyDirPath(string(pod.UID), v.Name)
		return dir, os.MkdirAll(dir, 0o750)
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return vols, nil
}

// Validate reports what this runtime cannot run, with field paths and values: containers
// without an image, ephemeral containers, volume types other than emptyDir and hostPath, env
// values from sources, subPath mounts, unknown pull policies and stop signals.
func (r *Runtime) Validate(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if pod.UID != "" {
		if err := slices.ValidateUID(string(pod.UID)); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "uid"), string(pod.UID), err.Error()))
		}
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "ephemeral containers are not supported by the cri runtime"))
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}
	volumes := map[string]bool{}
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case v.EmptyDir != nil:
		case v.HostPath != nil:
			if !filepath.IsAbs(v.HostPath.Path) {
				errs = append(errs, field.Invalid(p.Child("hostPath", "path"), v.HostPath.Path, "must be an absolute path"))
			}
		default:
			errs = append(errs, field.NotSupported(p, v.Name, []string{"emptyDir", "hostPath"}))
		}
		volumes[v.Name] = true
	}
	check := func(p *field.Path, c *v1.Container) {
		if c.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), "the cri runtime runs images"))
		}
		switch c.ImagePullPolicy {
		case "", v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
		}
		for i, e := range c.Env {
			if e.ValueFrom != nil {
				errs = append(errs, field.Forbidden(p.Child("env").Index(i).Child("valueFrom"), "env values from sources are not supported"))
			}
		}
		if len(c.EnvFrom) > 0 {
			errs = append(errs, field.Forbidden(p.Child("envFrom"), "env values from sources are not supported"))
		}
		for i, m := range c.VolumeMounts {
			mp := p.Child("volumeMounts").Index(i)
			if !volumes[m.Name] {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(mp.Child("subPath"), "subPath mounts are not supported"))
			}
			if !filepath.IsAbs(m.MountPath) {
				errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
			}
		}
		if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
			if _, ok := runtimeapi.Signal_value["SIGNAL_"+string(*c.Lifecycle.StopSignal)]; !ok {
				errs = append(errs, field.Invalid(p.Child("lifecycle", "stopSignal"), string(*c.Lifecycle.StopSignal), "unknown signal"))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		check(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		check(spec.Child("containers").Index(i), &pod.Spec.Containers[i])
	}
	return errs
}

// errNoSlice is returned by SyncPod without a pod slice.
var errNoSlice = errors.New("no pod slice")
