package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	stdslices "slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/dump"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// Labels and annotations on sandboxes and containers: the kubelet's names
// (pkg/kubelet/types/labels.go, pkg/kubelet/kuberuntime/labels.go), so that crictl and tools
// that know the kubelet read them, plus slicelet's own mark.
const (
	// LabelPodUID is the pod's UID (sandboxes and containers).
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelPodName is the pod's name.
	LabelPodName = "io.kubernetes.pod.name"
	// LabelPodNamespace is the pod's namespace.
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	// LabelContainerName is the container's name in its pod (containers only).
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManaged marks what slicelet created; everything else in a runtime is left alone.
	LabelManaged = "slicelet.io/managed"
	// AnnotationRestartCount is the container's restart count (= CRI attempt).
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
	// AnnotationGracePeriod is the pod's terminationGracePeriodSeconds.
	AnnotationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	// AnnotationDeletionGracePeriod is the pod's metadata.deletionGracePeriodSeconds, when set.
	AnnotationDeletionGracePeriod = "io.kubernetes.pod.deletionGracePeriod"
	// AnnotationContainerHash is the kubelet's hash of the container (ContainerHash, in hex):
	// the kubelet restarts a container whose hash is not the one its spec gives.
	AnnotationContainerHash = "io.kubernetes.container.hash"
	// AnnotationTerminationMessagePath and AnnotationTerminationMessagePolicy are the
	// container's terminationMessagePath and terminationMessagePolicy.
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	// AnnotationPreStopHandler is the container's preStop handler, as JSON, when it has one.
	AnnotationPreStopHandler = "io.kubernetes.container.preStopHandler"
	// AnnotationPorts is the container's ports, as JSON, when it has any.
	AnnotationPorts = "io.kubernetes.container.ports"
)

// ContainerHash is the kubelet's hash of a container (pkg/kubelet/container HashContainer, since
// Kubernetes 1.31): FNV-32a over k8s.io/utils/dump.ForHash of the JSON of its name and image
// (pkg/util/hash DeepHashObject). A container created by either agent carries it, so the other
// sees the container as its spec's and keeps it running.
func ContainerHash(c *v1.Container) uint64 {
	j, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image}) // cannot fail
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(j))
	return uint64(h.Sum32())
}

// ContainerAnnotations are the annotations of run attempt of container c, the kubelet's
// (pkg/kubelet/kuberuntime/labels.go, newContainerAnnotations): the container's hash, its
// restart count, termination message path and policy, the pod's deletion and termination grace
// periods when set, the preStop handler and the ports as JSON when there are any. The kubelet
// reads them back to adopt a container (restart count, hash) and to stop one whose pod it no
// longer knows (grace period, preStop hook); slicelet writes and reads the same.
func ContainerAnnotations(pod *v1.Pod, c *v1.Container, attempt uint32) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(ContainerHash(c), 16),
		AnnotationRestartCount:             strconv.FormatUint(uint64(attempt), 10),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		a[AnnotationDeletionGracePeriod] = strconv.FormatInt(*g, 10)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[AnnotationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if j, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(j)
		}
	}
	if len(c.Ports) > 0 {
		if j, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationPorts] = string(j)
		}
	}
	return a
}

// podLabels are the labels of the pod's sandbox and containers.
func podLabels(pod *v1.Pod) map[string]string {
	return map[string]string{
		LabelPodUID:       string(pod.UID),
		LabelPodName:      pod.Name,
		LabelPodNamespace: pod.Namespace,
		LabelManaged:      "true",
	}
}

// ContainerLabels are the labels of container c's runs: the kubelet's (kuberuntime
// newContainerLabels: the pod's name, namespace and UID, the container's name) and
// LabelManaged.
func ContainerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	labels := podLabels(pod)
	labels[LabelContainerName] = c.Name
	return labels
}

// GracePeriod reads AnnotationGracePeriod; ok is false when it is missing or malformed.
func GracePeriod(annotations map[string]string) (time.Duration, bool) {
	g, err := strconv.ParseInt(annotations[AnnotationGracePeriod], 10, 64)
	if err != nil || g < 0 {
		return 0, false
	}
	return time.Duration(g) * time.Second, true
}

// namespaces are the pod's namespace modes, as the kubelet sets them: the container's own PID
// namespace unless shareProcessNamespace (POD) or hostPID (NODE); host network per hostNetwork
// or Options.HostNetwork.
func (w *Worker) namespaces(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork || w.opts.HostNetwork {
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

// SandboxConfig is the pod's sandbox (kuberuntime generatePodSandboxConfig): cgroup parent =
// the pod slice (systemd cgroup driver), the pod's resources (calculateSandboxResources), the
// kubelet's labels, its resolver configuration (podDNS), hostname (sandboxHostname) and port
// mappings. The log directory is the runtime's to fill in. An error (the host's resolver
// configuration unreadable, an FQDN too long for a hostname) fails the sandbox, as the
// kubelet's.
func (w *Worker) SandboxConfig(pod *v1.Pod, slice string, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
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
	ns := w.namespaces(pod)
	hostname := ""
	if ns.Network != runtimeapi.NamespaceMode_NODE {
		// A host-network sandbox must have no hostname of its own (containerd refuses one).
		var err error
		if hostname, err = w.sandboxHostname(pod); err != nil {
			return nil, err
		}
	}
	dns, err := w.podDNS(pod)
	if err != nil {
		return nil, err
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions:   ns,
		SupplementalGroups: supplementalGroups(pod),
		// A pod with a privileged container gets a privileged sandbox (kuberuntime_sandbox.go).
		Privileged: lifecycle.HasPrivilegedContainer(pod),
		Seccomp:    w.seccompProfile(lifecycle.PodSeccompProfile(pod)),
	}
	var sysctls map[string]string
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
		sc.SelinuxOptions = seLinuxOptions(psc.SELinuxOptions)
		for _, s := range psc.Sysctls {
			if sysctls == nil {
				sysctls = map[string]string{}
			}
			// The kernel's names use '.'; the API also takes '/' (kuberuntime_sandbox.go).
			sysctls[strings.ReplaceAll(s.Name, "/", ".")] = s.Value
		}
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     hostname,
		DnsConfig:    dns,
		PortMappings: portMappings(pod),
		Labels:       labels,
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: slice, SecurityContext: sc, Sysctls: sysctls,
			Resources: criResources(slices.PodResources(pod, w.opts.Resources)),
		},
	}, nil
}

// supplementalGroups are the pod's fsGroup followed by its supplementalGroups, as the kubelet
// adds them to every container (pkg/kubelet/kuberuntime/security_context.go).
func supplementalGroups(pod *v1.Pod) []int64 {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return nil
	}
	var out []int64
	if psc.FSGroup != nil {
		out = append(out, *psc.FSGroup)
	}
	return append(out, psc.SupplementalGroups...)
}

// supplementalGroupsPolicy is the pod's supplementalGroupsPolicy in CRI terms (Merge when unset).
func supplementalGroupsPolicy(psc *v1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// containerSecurity is the container's CRI security context, as the kubelet determines it
// (pkg/kubelet/kuberuntime/security_context.go, determineEffectiveSecurityContext): the
// effective pod+container context, the pod's namespaces, fsGroup and supplementalGroups,
// no_new_privs per allowPrivilegeEscalation, the seccomp and AppArmor profiles, and the
// default masked and read-only /proc and /sys paths (procMount Default is the only one
// admitted).
func (w *Worker) containerSecurity(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	esc := lifecycle.EffectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions:         w.namespaces(pod),
		SupplementalGroups:       supplementalGroups(pod),
		SupplementalGroupsPolicy: supplementalGroupsPolicy(pod.Spec.SecurityContext),
		Privileged:               esc.Privileged != nil && *esc.Privileged,
		ReadonlyRootfs:           esc.ReadOnlyRootFilesystem != nil && *esc.ReadOnlyRootFilesystem,
		NoNewPrivs:               lifecycle.NoNewPrivs(esc),
		Seccomp:                  w.seccompProfile(lifecycle.SeccompProfile(pod, c)),
		Apparmor:                 appArmorProfile(lifecycle.AppArmorProfile(pod, c)),
		MaskedPaths:              append([]string(nil), lifecycle.DefaultMaskedPaths...),
		ReadonlyPaths:            append([]string(nil), lifecycle.DefaultReadonlyPaths...),
	}
	sc.SelinuxOptions = seLinuxOptions(esc.SELinuxOptions)
	if esc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *esc.RunAsUser}
	}
	if esc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *esc.RunAsGroup}
	}
	if caps := esc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	return sc
}

// seLinuxOptions converts SELinux options (kuberuntime security_context.go,
// convertToRuntimeSELinuxOption); nil stays nil.
func seLinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// seccompProfile is a seccomp profile in CRI terms (kuberuntime helpers.go,
// getSeccompProfile): nil (none asked for) is Unconfined, the kubelet's default without
// SeccompDefault; a Localhost profile is a file under Options.SeccompProfileRoot.
func (w *Worker) seccompProfile(sp *v1.SeccompProfile) *runtimeapi.SecurityProfile {
	if sp == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile != nil {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(w.opts.SeccompProfileRoot, *sp.LocalhostProfile)}
		}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// appArmorProfile is an AppArmor profile in CRI terms (kuberuntime helpers.go,
// getAppArmorProfile); nil leaves the runtime's default.
func appArmorProfile(ap *v1.AppArmorProfile) *runtimeapi.SecurityProfile {
	if ap == nil {
		return nil
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile != nil {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *ap.LocalhostProfile}
		}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// criResources converts cgroup values into CRI resources; unset values stay 0 (unset).
func criResources(rc slices.ResourceConfig) *runtimeapi.LinuxContainerResources {
	out := &runtimeapi.LinuxContainerResources{}
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

// containerResources are the container's cgroup values (lifecycle.ContainerResources,
// kuberuntime calculateLinuxResources) as CRI resources, with the kubelet's OOM score and
// hugetlb limits (lifecycle.ContainerHugePageLimits, one per host page size, ascending).
func (w *Worker) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	rc := lifecycle.ContainerResources(pod, c, w.opts.Resources)
	out := criResources(rc)
	out.Unified = rc.Unified
	out.OomScoreAdj = int64(slices.ContainerOOMScoreAdj(pod, c, w.opts.MemoryCapacity))
	limits := lifecycle.ContainerHugePageLimits(pod, c, w.opts.HostPageSizes)
	for _, size := range stdslices.Sorted(maps.Keys(limits)) {
		name, err := slices.HugePageUnitSize(size)
		if err != nil {
			continue
		}
		out.HugepageLimits = append(out.HugepageLimits, &runtimeapi.HugepageLimit{PageSize: name, Limit: uint64(limits[size])})
	}
	return out
}

// ContainerConfig is the run with restart count attempt of container c (kuberuntime
// generateContainerConfig): env resolved (containerEnv; a missing ConfigMap, Secret or key is
// an error wrapping configError), command and args expanded, the volumes' host paths
// mounted, the security context, resources, labels and annotations. The log path is the
// runtime's to fill in.
func (w *Worker) ContainerConfig(pod *v1.Pod, c *v1.Container, attempt uint32, imageRef string, vols map[string]string) (*runtimeapi.ContainerConfig, error) {
	env, command, args, err := w.containerEnv(pod, c)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
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
		// A sub-path that cannot be used holds the container back with
		// CreateContainerConfigError, as the kubelet's makeMounts errors do.
		sub, err := lifecycle.SubPath(&m, env)
		if err != nil {
			return nil, configError{fmt.Errorf("container %s: volume mount %q: %w", c.Name, m.Name, err)}
		}
		if sub != "" {
			if host, err = subPathHost(host, sub); err != nil {
				return nil, configError{fmt.Errorf("failed to create subPath directory for volumeMount %q of container %q: %w", m.Name, c.Name, err)}
			}
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || readOnlyVolume(pod, m.Name),
			Propagation: mountPropagation(m.MountPropagation)})
	}
	// Raw block volumes: the host path is the pod's link to the device (the kubelet's
	// makeBlockVolumes), read-only ("r") when the claim is, else "mrw".
	var devices []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		host, ok := vols[d.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to pass into container %q", d.Name, c.Name)
		}
		perm := "mrw"
		if readOnlyVolume(pod, d.Name) {
			perm = "r"
		}
		devices = append(devices, &runtimeapi.Device{ContainerPath: d.DevicePath, HostPath: host, Permissions: perm})
	}
	if hm, err := w.etcHostsMount(pod, c); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	} else if hm != nil {
		mounts = append(mounts, hm)
	}
	if tm, err := w.terminationLogMount(pod, c, attempt); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	} else if tm != nil {
		mounts = append(mounts, tm)
	}
	sc := w.containerSecurity(pod, c)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    command,
		Args:       args,
		WorkingDir: c.WorkingDir,
		// kuberuntime's generateContainerConfig passes them as they are: the runtime keeps
		// the container's standard input open (closed after the first attached client with
		// StdinOnce) and runs it on a terminal with Tty, for kubectl attach and run -it.
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Envs:        envs,
		Devices:     devices,
		Mounts:      mounts,
		Labels:      ContainerLabels(pod, c),
		Annotations: ContainerAnnotations(pod, c, attempt),
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: w.containerResources(pod, c), SecurityContext: sc},
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		cfg.StopSignal = runtimeapi.Signal(runtimeapi.Signal_value["SIGNAL_"+string(*c.Lifecycle.StopSignal)])
	}
	return cfg, nil
}

// applyDevices adds what container c's devices give its run to cfg (the kubelet's
// GenerateRunContainerOptions with the device manager's options): their env before the
// container's (the container's own win), their mounts before the volumes', their device nodes
// and CDI devices, their annotations where slicelet sets none. An error is a configError.
func (w *Worker) applyDevices(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	if w.opts.Devices == nil {
		return nil
	}
	d, err := w.opts.Devices.RunOptions(ctx, pod, c)
	if err != nil {
		return configError{fmt.Errorf("container %s: devices: %w", c.Name, err)}
	}
	if d == nil {
		return nil
	}
	envs := make([]*runtimeapi.KeyValue, 0, len(d.Envs)+len(cfg.Envs))
	for _, e := range d.Envs {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	cfg.Envs = append(envs, cfg.Envs...)
	mounts := make([]*runtimeapi.Mount, 0, len(d.Mounts)+len(cfg.Mounts))
	for _, m := range d.Mounts {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
	}
	cfg.Mounts = append(mounts, cfg.Mounts...)
	for _, n := range d.Devices {
		cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: n.ContainerPath, HostPath: n.HostPath, Permissions: n.Permissions})
	}
	for _, n := range d.CDIDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: n})
	}
	for k, v := range d.Annotations {
		if _, ok := cfg.Annotations[k]; !ok {
			if cfg.Annotations == nil {
				cfg.Annotations = map[string]string{}
			}
			cfg.Annotations[k] = v
		}
	}
	return nil
}
