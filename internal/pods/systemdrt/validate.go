package systemdrt

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/execlimits"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// useCRI is the advice for everything only a container runtime can do.
const useCRI = `set runtime.type = "cri" in the slicelet configuration to run it with containerd`

// noBidirectional is why the systemd runtime refuses Bidirectional mount propagation.
const noBidirectional = "mounts made in a systemd service's mount namespace do not reach the host (systemd makes the namespace a slave of the host's: the host's mounts reach the service, HostToContainer, not the other way); " + useCRI

// noReadOnlyDevice is why the systemd runtime refuses the raw block volume of a read-only
// claim: a device is bound into a service at its devicePath (as a device plugin's), and a
// read-only bind mount does not make a device node read-only (only the device cgroup the
// CRI runtime gives each container, "r", does).
const noReadOnlyDevice = "the raw block volume of a read-only claim cannot be kept read-only: the systemd runtime binds the device node into the service, and a read-only bind mount does not stop writes to a device (a container runtime's device cgroup does); " + useCRI

// readOnlyClaim reports whether the pod's volume name is a read-only persistentVolumeClaim.
func readOnlyClaim(pod *v1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ReadOnly
		}
	}
	return false
}

// Validate reports what the systemd runtime cannot run, each problem with its field path and
// value (slices.ValidatePod has checked names, quantities and the container count before):
// images, containers without an absolute or PATH-resolvable command, env entries that are not
// literal or that systemd cannot carry (NUL and other control characters, names that are not
// shell identifiers), volume types other than emptyDir and hostPath, mount paths and host
// paths that are relative or contain "..", subPath mounts, ephemeral
// containers, stdin and tty (nothing can attach), and runAsNonRoot without a non-root runAsUser. Whether a command exists on the
// host is checked here for admission and again at each start: a binary removed while the pod
// runs fails that container (StartError), not the whole pod.
func (r *Runtime) Validate(pod *v1.Pod) field.ErrorList { return r.validate(pod, true) }

// ValidatePod is Validate without a runtime, for explaining a pod offline: what the systemd
// runtime would refuse; with host, commands and mount points are looked up on this host's
// filesystem, as the daemon does before admission.
func ValidatePod(pod *v1.Pod, host bool) field.ErrorList {
	r := &Runtime{opts: withHostDefaults(Options{Executable: isExecutable, MountPoint: statPath})}
	return r.validate(pod, host)
}

// validate is Validate; without host it skips what depends on the host's files.
func (r *Runtime) validate(pod *v1.Pod, host bool) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if pod.UID != "" {
		// Unit names are built from the UID; ValidatePod checks it too, but a bad UID here
		// must never reach a unit name.
		if err := checkNamePart("pod uid", string(pod.UID)); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "uid"), string(pod.UID), err.Error()))
		}
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "ephemeral containers are not supported by the systemd runtime"))
	}
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		errs = append(errs, field.Forbidden(spec.Child("runtimeClassName"), "the systemd runtime has no runtime handlers; "+useCRI))
	}
	if len(pod.Spec.HostAliases) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("hostAliases"), "the systemd runtime runs host commands, which read the host's /etc/hosts; "+useCRI))
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}
	if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		errs = append(errs, field.Forbidden(spec.Child("shareProcessNamespace"), "the systemd runtime cannot share a process namespace between containers (systemd 252 has no private PID namespace); "+useCRI))
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		p := spec.Child("securityContext")
		errs = append(errs, validateIDs(p, sc.RunAsUser, sc.RunAsGroup)...)
		if sc.SELinuxOptions != nil {
			errs = append(errs, field.Forbidden(p.Child("seLinuxOptions"), "the systemd runtime does not set SELinux labels; "+useCRI))
		}
		if len(sc.Sysctls) > 0 {
			errs = append(errs, field.Forbidden(p.Child("sysctls"), "the systemd runtime runs containers in the host's namespaces, where a sysctl would change the whole host; "+useCRI))
		}
		if sc.SupplementalGroupsPolicy != nil && *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyMerge {
			errs = append(errs, field.NotSupported(p.Child("supplementalGroupsPolicy"), string(*sc.SupplementalGroupsPolicy), []string{string(v1.SupplementalGroupsPolicyMerge)}))
		}
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, execlimits.ID(spec.Child("securityContext", "supplementalGroups").Index(i), g, "group")...)
		}
		if sc.FSGroup != nil {
			errs = append(errs, execlimits.ID(spec.Child("securityContext", "fsGroup"), *sc.FSGroup, "group")...)
		}
	}

	volumes, verrs := validateVolumes(spec.Child("volumes"), pod.Spec.Volumes)
	errs = append(errs, verrs...)

	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		errs = append(errs, r.validateContainer(pod, spec.Child("initContainers").Index(i), c, volumes, true, host)...)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		errs = append(errs, r.validateContainer(pod, spec.Child("containers").Index(i), c, volumes, false, host)...)
	}
	return uniqueErrors(errs)
}

// uniqueErrors drops repeats: a pod-level setting refused for each container it applies to is
// reported once.
func uniqueErrors(errs field.ErrorList) field.ErrorList {
	seen := sets.New[string]()
	out := errs[:0]
	for _, e := range errs {
		if !seen.Has(e.Error()) {
			seen.Insert(e.Error())
			out = append(out, e)
		}
	}
	return out
}

// validateIDs checks runAsUser and runAsGroup: systemd takes them as numeric User=/Group=
// (execlimits.ID).
func validateIDs(p *field.Path, user, group *int64) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, execlimits.ID(p.Child("runAsUser"), *user, "user")...)
	}
	if group != nil {
		errs = append(errs, execlimits.ID(p.Child("runAsGroup"), *group, "group")...)
	}
	return errs
}

func (r *Runtime) validateContainer(pod *v1.Pod, p *field.Path, c *v1.Container, volumes map[string]bool, init, host bool) field.ErrorList {
	var errs field.ErrorList
	if err := checkNamePart("container name", c.Name); err != nil {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, err.Error()))
	} else if pod.UID != "" {
		// The longest instance number a restarting container can reach.
		if unit, err := UnitName(string(pod.UID), c.Name, 1<<31-1); err != nil {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, err.Error()))
		} else {
			errs = append(errs, execlimits.UnitName(p.Child("name"), c.Name, unit)...)
		}
	}
	if c.Image != "" {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image,
			"the systemd runtime runs commands from the host filesystem and cannot run images; remove image and give an absolute command, or "+useCRI))
	}
	errs = append(errs, r.validateCommand(p, c, host)...)
	errs = append(errs, validateStreams(p, c)...)
	if c.WorkingDir != "" {
		if msg := checkAbsPath(c.WorkingDir); msg != "" {
			errs = append(errs, field.Invalid(p.Child("workingDir"), c.WorkingDir, msg))
		} else {
			errs = append(errs, execlimits.Path(p.Child("workingDir"), c.WorkingDir)...)
		}
	}
	errs = append(errs, validateEnv(p, c)...)
	// What execve(2) and systemd's unit files take, after $(VAR) expansion.
	errs = append(errs, execlimits.Container(p, c)...)
	errs = append(errs, validateMounts(p.Child("volumeMounts"), c.VolumeMounts, volumes)...)
	for i, d := range c.VolumeDevices {
		if readOnlyClaim(pod, d.Name) {
			errs = append(errs, field.Forbidden(p.Child("volumeDevices").Index(i), noReadOnlyDevice))
		}
	}
	if host {
		for i, m := range c.VolumeMounts {
			if checkAbsPath(m.MountPath) != "" || m.MountPath == "/" {
				continue // reported above
			}
			if err := r.opts.MountPoint(m.MountPath); err != nil {
				errs = append(errs, field.Invalid(p.Child("volumeMounts").Index(i).Child("mountPath"), m.MountPath,
					"the systemd runtime mounts volumes over host paths and systemd does not create a missing one: create it on the host or mount at an existing path ("+err.Error()+")"))
			}
		}
	}
	if lc := c.Lifecycle; lc != nil {
		if lc.StopSignal != nil {
			if _, ok := signalNumber(string(*lc.StopSignal)); !ok {
				errs = append(errs, field.NotSupported(p.Child("lifecycle", "stopSignal"), string(*lc.StopSignal), signalNames()))
			}
		}
	}
	if c.RestartPolicy != nil {
		switch {
		case !init:
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"), "only init containers can have a restartPolicy (Always makes them sidecars)"))
		case *c.RestartPolicy != v1.ContainerRestartPolicyAlways:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), string(*c.RestartPolicy), []string{string(v1.ContainerRestartPolicyAlways)}))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		errs = append(errs, validateIDs(sp, sc.RunAsUser, sc.RunAsGroup)...)
		if sc.SELinuxOptions != nil {
			errs = append(errs, field.Forbidden(sp.Child("seLinuxOptions"), "the systemd runtime does not set SELinux labels; "+useCRI))
		}
		if caps := sc.Capabilities; caps != nil {
			for _, l := range []struct {
				name string
				caps []v1.Capability
			}{{"add", caps.Add}, {"drop", caps.Drop}} {
				for i, c := range l.caps {
					if msg := capabilityProblem(string(c)); msg != "" {
						errs = append(errs, field.Invalid(sp.Child("capabilities", l.name).Index(i), string(c), msg))
					}
				}
			}
		}
	}
	if ap, at := lifecycle.AppArmorProfileAt(pod, c, p); ap != nil {
		errs = append(errs, r.validateAppArmor(at, ap)...)
	}
	// Without runAsUser the command runs as DefaultUID, not root: only an explicit root breaks
	// runAsNonRoot (the kubelet's verifyRunAsNonRoot, with DefaultUID as the image's user).
	defaultUID := DefaultUID
	if err := lifecycle.VerifyRunAsNonRoot(pod, c, &defaultUID, ""); err != nil {
		errs = append(errs, field.Invalid(p.Child("securityContext", "runAsNonRoot"), true, err.Error()))
	}
	if host {
		if sp := lifecycle.SeccompProfile(pod, c); sp != nil && sp.Type == v1.SeccompProfileTypeLocalhost && sp.LocalhostProfile != nil && r.opts.SeccompProfileRoot != "" {
			path := filepath.Join(r.opts.SeccompProfileRoot, *sp.LocalhostProfile)
			if _, err := seccompProperties(&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}, 0, readProfile); err != nil {
				errs = append(errs, field.Invalid(p.Child("securityContext", "seccompProfile", "localhostProfile"), *sp.LocalhostProfile, err.Error()))
			}
		}
	}
	return errs
}

// validateStreams refuses stdin, stdinOnce and tty: they exist for a client to attach to the
// container (kubectl attach, kubectl run -it), and the systemd runtime has no streaming server.
// A service's standard input is /dev/null, which would give the process an end of file at once
// where a runtime that can attach keeps it waiting for its client.
func validateStreams(p *field.Path, c *v1.Container) field.ErrorList {
	const why = "the systemd runtime cannot attach a client to a container (it has no streaming server), so a container's "
	var errs field.ErrorList
	if c.Stdin {
		errs = append(errs, field.Forbidden(p.Child("stdin"), why+"standard input could only ever be empty; "+useCRI))
	}
	if c.StdinOnce {
		errs = append(errs, field.Forbidden(p.Child("stdinOnce"), why+"standard input could only ever be empty; "+useCRI))
	}
	if c.TTY {
		errs = append(errs, field.Forbidden(p.Child("tty"), why+"terminal would have no one at the other end; "+useCRI))
	}
	return errs
}

// capabilityProblem says what is wrong with a capability name, or "".
func capabilityProblem(c string) string {
	if strings.EqualFold(c, "ALL") {
		return ""
	}
	if _, ok := capabilityBit(c); ok {
		return ""
	}
	if _, ok := capabilityBit(strings.TrimPrefix(strings.ToUpper(c), "CAP_")); ok {
		return "write the capability without the CAP_ prefix, as container runtimes expect"
	}
	return "unknown capability"
}

// validateAppArmor refuses what the systemd runtime cannot apply: RuntimeDefault (it has no
// default profile) and any profile on a host without AppArmor (the kubelet's AppArmor
// admission).
func (r *Runtime) validateAppArmor(p *field.Path, ap *v1.AppArmorProfile) field.ErrorList {
	if ap == nil {
		return nil
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return field.ErrorList{field.Forbidden(p, "the systemd runtime has no default AppArmor profile; use Localhost with a profile loaded on this host, or "+useCRI)}
	case v1.AppArmorProfileTypeLocalhost:
		if !r.opts.AppArmor() {
			return field.ErrorList{field.Forbidden(p, "cannot enforce AppArmor: AppArmor is not enabled on the host")}
		}
	}
	return nil
}

// validateCommand checks command and args: a command is required (there is no image
// entrypoint), its first word is absolute or a bare name found in the container's PATH, and no
// word contains a NUL byte (D-Bus strings cannot carry one).
func (r *Runtime) validateCommand(p *field.Path, c *v1.Container, host bool) field.ErrorList {
	var errs field.ErrorList
	if len(c.Command) == 0 {
		return append(errs, field.Required(p.Child("command"), "the systemd runtime has no image entrypoint: give the command to run, e.g. [\"/bin/sleep\", \"infinity\"]"))
	}
	for i, w := range c.Command {
		if strings.IndexByte(w, 0) >= 0 {
			errs = append(errs, field.Invalid(p.Child("command").Index(i), w, "must not contain NUL bytes"))
		}
	}
	for i, w := range c.Args {
		if strings.IndexByte(w, 0) >= 0 {
			errs = append(errs, field.Invalid(p.Child("args").Index(i), w, "must not contain NUL bytes"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if msg := commandProblem(c.Command[0]); msg != "" {
		errs = append(errs, field.Invalid(p.Child("command").Index(0), c.Command[0], msg))
	} else if host {
		var env []*runtimeapi.KeyValue
		for _, e := range c.Env {
			if e.Name == "PATH" && e.ValueFrom == nil {
				env = append(env, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
			}
		}
		if _, err := r.resolveCommand(c.Command, env); err != nil {
			errs = append(errs, field.Invalid(p.Child("command").Index(0), c.Command[0], err.Error()))
		}
	}
	return errs
}

// checkAbsPath returns why p is not a clean absolute path without "..", or "".
func checkAbsPath(p string) string {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain NUL bytes"
	case !filepath.IsAbs(p):
		return "must be an absolute path"
	case hasDotDot(p):
		return "must not contain '..'"
	case filepath.Clean(p) != p:
		return "must be a clean path (no '.', '//' or trailing '/'); write " + filepath.Clean(p)
	}
	return ""
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// validateEnv checks env names and literal values (values from sources are the pod worker's
// to check and resolve). systemd takes Environment= entries as NAME=value with NAME a
// shell identifier and a value of valid UTF-8 without control characters other than tab and
// newline (env_assignment_is_valid).
func validateEnv(p *field.Path, c *v1.Container) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i := range c.Env {
		e := &c.Env[i]
		ep := p.Child("env").Index(i)
		if msg := envNameProblem(e.Name); msg != "" {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, msg))
		} else if seen.Has(e.Name) {
			errs = append(errs, field.Duplicate(ep.Child("name"), e.Name))
		}
		seen.Insert(e.Name)
		if msg := envValueProblem(e.Value); msg != "" {
			errs = append(errs, field.Invalid(ep.Child("value"), e.Value, msg))
		}
	}
	return errs
}

func envNameProblem(name string) string {
	if name == "" {
		return "must not be empty"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		if c == 0 {
			return "must not contain NUL bytes"
		}
		return fmt.Sprintf("character %q at %d: systemd takes only letters, digits and '_' in environment variable names, not starting with a digit", c, i)
	}
	return ""
}

func envValueProblem(v string) string {
	if !utf8.ValidString(v) {
		return "must be valid UTF-8"
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == 0:
			return "must not contain NUL bytes"
		case c == '\t' || c == '\n':
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("control character %q at %d: systemd accepts only tab and newline", c, i)
		}
	}
	return ""
}

// validateVolumes checks the pod's volumes and returns the set of valid names.
func validateVolumes(p *field.Path, vols []v1.Volume) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range vols {
		v := &vols[i]
		vp := p.Index(i)
		nameOK := true
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
			nameOK = false
		}
		if names[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		switch {
		case v.EmptyDir != nil:
			if v.EmptyDir.Medium != v1.StorageMediumDefault {
				errs = append(errs, field.NotSupported(vp.Child("emptyDir", "medium"), string(v.EmptyDir.Medium), []string{""}))
			}
		case v.ConfigMap != nil, v.Secret != nil, v.Projected != nil, v.DownwardAPI != nil:
			// Written by the pod worker into a directory of its own, bind-mounted read-only.
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil, v.CSI != nil:
			// A claim's volume or an inline CSI volume: the pod worker sets it up through the
			// API server and the CSI driver (cluster mode; the pod sources refuse them
			// elsewhere) and bind-mounts it.
		case v.HostPath != nil:
			hp := vp.Child("hostPath")
			if msg := checkAbsPath(v.HostPath.Path); msg != "" {
				errs = append(errs, field.Invalid(hp.Child("path"), v.HostPath.Path, msg))
			} else {
				errs = append(errs, execlimits.Path(hp.Child("path"), v.HostPath.Path)...)
			}
			if t := v.HostPath.Type; t != nil && !supportedHostPathType[*t] {
				errs = append(errs, field.NotSupported(hp.Child("type"), string(*t), hostPathTypeNames()))
			}
		default:
			errs = append(errs, field.Invalid(vp, v.Name, "only emptyDir, hostPath, configMap, secret, projected, downwardAPI, persistentVolumeClaim, ephemeral and csi volumes are supported by the systemd runtime"))
		}
		if nameOK {
			names[v.Name] = true
		}
	}
	return names, errs
}

// supportedHostPathType are the hostPath types SyncPod checks or creates.
var supportedHostPathType = map[v1.HostPathType]bool{
	v1.HostPathUnset: true, v1.HostPathDirectory: true, v1.HostPathDirectoryOrCreate: true,
	v1.HostPathFile: true, v1.HostPathFileOrCreate: true, v1.HostPathSocket: true,
	v1.HostPathCharDev: true, v1.HostPathBlockDev: true,
}

// validateMounts checks volumeMounts: a known volume, a clean absolute mount path other than
// "/", no duplicates, no subPath.
func validateMounts(p *field.Path, mounts []v1.VolumeMount, volumes map[string]bool) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i := range mounts {
		m := &mounts[i]
		mp := p.Index(i)
		if !volumes[m.Name] {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		switch msg := checkAbsPath(m.MountPath); {
		case msg != "":
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, msg))
		case m.MountPath == "/":
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "cannot mount over the root directory"))
		case paths.Has(m.MountPath):
			errs = append(errs, field.Duplicate(mp.Child("mountPath"), m.MountPath))
		default:
			errs = append(errs, execlimits.Path(mp.Child("mountPath"), m.MountPath)...)
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, field.Forbidden(mp.Child("subPath"), "subPath is not supported by the systemd runtime"))
		}
		if m.SubPathExpr != "" {
			errs = append(errs, field.Forbidden(mp.Child("subPathExpr"), "subPathExpr is not supported by the systemd runtime"))
		}
		if m.MountPropagation != nil && *m.MountPropagation == v1.MountPropagationBidirectional {
			errs = append(errs, field.Forbidden(mp.Child("mountPropagation"), noBidirectional))
		}
	}
	return errs
}

// hostPathTypeNames lists the supported hostPath types for error messages.
func hostPathTypeNames() []string {
	out := make([]string, 0, len(supportedHostPathType))
	for t := range supportedHostPathType {
		out = append(out, string(t))
	}
	sort.Strings(out)
	return out
}
