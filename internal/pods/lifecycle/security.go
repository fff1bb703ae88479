package lifecycle

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations the API server once used for seccomp and AppArmor (pkg/apis/core/types.go). The
// API server copies the seccomp ones into securityContext.seccompProfile when a pod is created
// (pkg/api/pod/util.go, applySeccompVersionSkew); slicelet has no API server and does the same
// here, and reads the AppArmor one as the kubelet still does (pkg/security/apparmor).
const (
	SeccompPodAnnotation              = "seccomp.security.alpha.kubernetes.io/pod"
	SeccompContainerAnnotationPrefix  = "container.seccomp.security.alpha.kubernetes.io/"
	AppArmorContainerAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
)

// DefaultMaskedPaths and DefaultReadonlyPaths are what a container with procMount Default gets
// masked or read-only (pkg/securitycontext/util.go, the kubelet's defaults it sends in the CRI
// config).
var (
	DefaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	DefaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// SafeSysctls are the namespaced sysctls the kubelet allows without --allowed-unsafe-sysctls
// (pkg/kubelet/sysctl/safe_sysctls.go, for a kernel that has them all). slicelet has no way to
// allow unsafe sysctls: every other sysctl is refused.
var SafeSysctls = map[string]bool{
	"kernel.shm_rmid_forced":              true,
	"net.ipv4.ip_local_port_range":        true,
	"net.ipv4.tcp_syncookies":             true,
	"net.ipv4.ping_group_range":           true,
	"net.ipv4.ip_unprivileged_port_start": true,
	"net.ipv4.ip_local_reserved_ports":    true,
	"net.ipv4.tcp_keepalive_time":         true,
	"net.ipv4.tcp_fin_timeout":            true,
	"net.ipv4.tcp_keepalive_intvl":        true,
	"net.ipv4.tcp_keepalive_probes":       true,
	"net.ipv4.tcp_rmem":                   true,
	"net.ipv4.tcp_wmem":                   true,
}

// sysctlName is the API's sysctl name pattern (pkg/apis/core/validation: SysctlContainSlashFmt).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// EffectiveSecurityContext is the container's security context with the pod's settings filled
// in where the container has none (pkg/securitycontext/util.go,
// DetermineEffectiveSecurityContext). Never nil; the pod is not modified.
func EffectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	out := &v1.SecurityContext{}
	if c.SecurityContext != nil {
		out = c.SecurityContext.DeepCopy()
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return out
	}
	if out.SELinuxOptions == nil && psc.SELinuxOptions != nil {
		out.SELinuxOptions = psc.SELinuxOptions.DeepCopy()
	}
	if out.WindowsOptions == nil && psc.WindowsOptions != nil {
		out.WindowsOptions = psc.WindowsOptions.DeepCopy()
	}
	if out.RunAsUser == nil && psc.RunAsUser != nil {
		out.RunAsUser = ptrTo(*psc.RunAsUser)
	}
	if out.RunAsGroup == nil && psc.RunAsGroup != nil {
		out.RunAsGroup = ptrTo(*psc.RunAsGroup)
	}
	if out.RunAsNonRoot == nil && psc.RunAsNonRoot != nil {
		out.RunAsNonRoot = ptrTo(*psc.RunAsNonRoot)
	}
	if out.SeccompProfile == nil && psc.SeccompProfile != nil {
		out.SeccompProfile = psc.SeccompProfile.DeepCopy()
	}
	if out.AppArmorProfile == nil && psc.AppArmorProfile != nil {
		out.AppArmorProfile = psc.AppArmorProfile.DeepCopy()
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// Privileged reports whether the container's securityContext.privileged is true.
func Privileged(c *v1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

// HasPrivilegedContainer reports whether any init or regular container of the pod is
// privileged: its sandbox must then be privileged too (kuberuntime_sandbox.go).
func HasPrivilegedContainer(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if Privileged(&list[i]) {
				return true
			}
		}
	}
	return false
}

// NoNewPrivs is the kubelet's AddNoNewPrivileges (pkg/securitycontext/util.go): no_new_privs
// only when allowPrivilegeEscalation is explicitly false.
func NoNewPrivs(sc *v1.SecurityContext) bool {
	return sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
}

// SeccompProfile is the container's seccomp profile: the container's field, else the pod's,
// else the container's then the pod's annotation (as the API server would have copied them);
// nil means none was asked for (Unconfined: the kubelet's default without SeccompDefault).
func SeccompProfile(pod *v1.Pod, c *v1.Container) *v1.SeccompProfile {
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return c.SecurityContext.SeccompProfile
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.SeccompProfile != nil {
		return pod.Spec.SecurityContext.SeccompProfile
	}
	if v, ok := pod.Annotations[SeccompContainerAnnotationPrefix+c.Name]; ok {
		p, _ := seccompFromAnnotation(v)
		return p
	}
	if v, ok := pod.Annotations[SeccompPodAnnotation]; ok {
		p, _ := seccompFromAnnotation(v)
		return p
	}
	return nil
}

// PodSeccompProfile is the pod's seccomp profile (the sandbox's): the field, else the pod
// annotation; nil for none.
func PodSeccompProfile(pod *v1.Pod) *v1.SeccompProfile {
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.SeccompProfile != nil {
		return pod.Spec.SecurityContext.SeccompProfile
	}
	if v, ok := pod.Annotations[SeccompPodAnnotation]; ok {
		p, _ := seccompFromAnnotation(v)
		return p
	}
	return nil
}

// seccompFromAnnotation converts an annotation value (pkg/api/pod/util.go,
// seccompFieldForAnnotation); ok is false for a value the API does not know.
func seccompFromAnnotation(v string) (*v1.SeccompProfile, bool) {
	switch {
	case v == "runtime/default" || v == "docker/default":
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, true
	case v == "unconfined":
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}, true
	case strings.HasPrefix(v, "localhost/"):
		p := strings.TrimPrefix(v, "localhost/")
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}, true
	}
	return nil, false
}

// AppArmorProfile is the container's AppArmor profile: the container's field, else the pod's,
// else the container's annotation (pkg/security/apparmor/helpers.go, GetProfile); nil for none
// (the runtime's default).
func AppArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.AppArmorProfile != nil {
		return pod.Spec.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[AppArmorContainerAnnotationPrefix+c.Name]; ok {
		p, _ := appArmorFromAnnotation(v)
		return p
	}
	return nil
}

// AppArmorProfileAt is AppArmorProfile with the field path it comes from: the container's
// securityContext (under cp, the container's path), the pod's, or the annotation.
func AppArmorProfileAt(pod *v1.Pod, c *v1.Container, cp *field.Path) (*v1.AppArmorProfile, *field.Path) {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile, cp.Child("securityContext", "appArmorProfile")
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.AppArmorProfile != nil {
		return pod.Spec.SecurityContext.AppArmorProfile, field.NewPath("spec", "securityContext", "appArmorProfile")
	}
	key := AppArmorContainerAnnotationPrefix + c.Name
	return AppArmorProfile(pod, c), field.NewPath("metadata", "annotations").Key(key)
}

// HostAppArmorEnabled reports whether the kernel enforces AppArmor (what the kubelet's
// apparmor.IsEnabled reads): sysRoot/module/apparmor/parameters/enabled says Y.
func HostAppArmorEnabled(sysRoot string) bool {
	b, err := os.ReadFile(filepath.Join(sysRoot, "module", "apparmor", "parameters", "enabled"))
	return err == nil && strings.HasPrefix(string(b), "Y")
}

func appArmorFromAnnotation(v string) (*v1.AppArmorProfile, bool) {
	switch {
	case v == "runtime/default":
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}, true
	case v == "unconfined":
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}, true
	case strings.HasPrefix(v, "localhost/") && len(v) > len("localhost/"):
		p := strings.TrimPrefix(v, "localhost/")
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &p}, true
	}
	return nil, false
}

// ValidateSecurity refuses, for both runtimes, the security settings slicelet cannot honour
// anywhere, and the shapes the API server would refuse (pkg/apis/core/validation): Windows
// options; hostUsers false (no user namespaces); procMount other than Default (Unmasked needs
// hostUsers false); sysctls outside the kubelet's safe set, malformed or repeated, and net.*
// sysctls in the host network namespace or kernel.shm* ones in the host IPC namespace (the
// kubelet's sysctl admission); seccomp and AppArmor profiles of unknown type, Localhost without
// a profile or a profile without Localhost, and unknown annotation values; privileged or
// CAP_SYS_ADMIN together with allowPrivilegeEscalation false. hostNetwork is the network mode
// the pod really gets (the worker may put every pod in the host's network namespace).
func ValidateSecurity(pod *v1.Pod, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		errs = append(errs, field.Forbidden(spec.Child("hostUsers"), "user namespaces are not supported by slicelet: remove hostUsers or set it to true"))
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		p := spec.Child("securityContext")
		if psc.WindowsOptions != nil {
			errs = append(errs, field.Forbidden(p.Child("windowsOptions"), "slicelet runs Linux pods only"))
		}
		errs = append(errs, validateSeccomp(p.Child("seccompProfile"), psc.SeccompProfile)...)
		errs = append(errs, validateAppArmor(p.Child("appArmorProfile"), psc.AppArmorProfile)...)
		errs = append(errs, validateSysctls(p.Child("sysctls"), psc.Sysctls, hostNetwork, pod.Spec.HostIPC)...)
	}
	for _, key := range slices.Sorted(maps.Keys(pod.Annotations)) {
		v := pod.Annotations[key]
		p := field.NewPath("metadata", "annotations").Key(key)
		switch {
		case key == SeccompPodAnnotation || strings.HasPrefix(key, SeccompContainerAnnotationPrefix):
			if prof, ok := seccompFromAnnotation(v); !ok {
				errs = append(errs, field.NotSupported(p, v, []string{"runtime/default", "docker/default", "unconfined", "localhost/<path>"}))
			} else {
				errs = append(errs, validateSeccomp(p, prof)...)
			}
		case strings.HasPrefix(key, AppArmorContainerAnnotationPrefix):
			if _, ok := appArmorFromAnnotation(v); !ok {
				errs = append(errs, field.NotSupported(p, v, []string{"runtime/default", "unconfined", "localhost/<profile>"}))
			}
		}
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.cs {
			errs = append(errs, validateContainerSecurity(spec.Child(list.name).Index(i).Child("securityContext"), list.cs[i].SecurityContext)...)
		}
	}
	return errs
}

func validateContainerSecurity(p *field.Path, sc *v1.SecurityContext) field.ErrorList {
	var errs field.ErrorList
	if sc == nil {
		return nil
	}
	if sc.WindowsOptions != nil {
		errs = append(errs, field.Forbidden(p.Child("windowsOptions"), "slicelet runs Linux pods only"))
	}
	if sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount {
		errs = append(errs, field.NotSupported(p.Child("procMount"), string(*sc.ProcMount), []string{string(v1.DefaultProcMount)}))
	}
	errs = append(errs, validateSeccomp(p.Child("seccompProfile"), sc.SeccompProfile)...)
	errs = append(errs, validateAppArmor(p.Child("appArmorProfile"), sc.AppArmorProfile)...)
	if NoNewPrivs(sc) {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(p, "privileged", "cannot set allowPrivilegeEscalation to false and privileged to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				// Only this spelling: the API server compares the string (ValidateSecurityContext),
				// so SYS_ADMIN with allowPrivilegeEscalation false is a valid pod.
				if c == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(p, "CAP_SYS_ADMIN", "cannot set allowPrivilegeEscalation to false and capabilities.Add CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return errs
}

// validateSeccomp checks a profile's shape (pkg/apis/core/validation, validateSeccompProfileField):
// Localhost needs a relative path without "..", the other types take none.
func validateSeccomp(p *field.Path, sp *v1.SeccompProfile) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" {
			return append(errs, field.Required(p.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		}
		if lp := *sp.LocalhostProfile; filepath.IsAbs(lp) || hasDotDot(lp) {
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), lp, "must be a relative path without '..'"))
		}
	case v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
		if sp.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), string(sp.Type), []string{string(v1.SeccompProfileTypeLocalhost), string(v1.SeccompProfileTypeRuntimeDefault), string(v1.SeccompProfileTypeUnconfined)}))
	}
	return errs
}

// validateAppArmor checks a profile's shape (validateAppArmorProfileField).
func validateAppArmor(p *field.Path, ap *v1.AppArmorProfile) field.ErrorList {
	if ap == nil {
		return nil
	}
	var errs field.ErrorList
	switch ap.Type {
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile == nil || strings.TrimSpace(*ap.LocalhostProfile) == "" {
			errs = append(errs, field.Required(p.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		}
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), *ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), string(ap.Type), []string{string(v1.AppArmorProfileTypeLocalhost), string(v1.AppArmorProfileTypeRuntimeDefault), string(v1.AppArmorProfileTypeUnconfined)}))
	}
	return errs
}

// validateSysctls checks names and the kubelet's sysctl admission (pkg/kubelet/sysctl).
func validateSysctls(p *field.Path, sysctls []v1.Sysctl, hostNetwork, hostIPC bool) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range sysctls {
		sp := p.Index(i).Child("name")
		// The API accepts '/' as separator; the kernel's name uses '.'.
		name := strings.ReplaceAll(s.Name, "/", ".")
		switch {
		case len(s.Name) > 253 || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(sp, s.Name, "must be a sysctl name such as net.ipv4.tcp_syncookies"))
			continue
		case seen[name]:
			errs = append(errs, field.Duplicate(sp, s.Name))
			continue
		}
		seen[name] = true
		switch {
		case !SafeSysctls[name]:
			errs = append(errs, field.Forbidden(sp, "unsafe sysctl "+s.Name+" is not allowed: slicelet allows only the kubelet's safe sysctls"))
		case strings.HasPrefix(name, "net.") && hostNetwork:
			errs = append(errs, field.Forbidden(sp, "sysctl "+s.Name+" not allowed with host net enabled (slicelet runs this pod in the host's network namespace)"))
		case strings.HasPrefix(name, "kernel.shm") && hostIPC:
			errs = append(errs, field.Forbidden(sp, "sysctl "+s.Name+" not allowed with host ipc enabled"))
		}
	}
	return errs
}

// hasDotDot reports whether a slash-separated path has a ".." element.
func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// VerifyRunAsNonRoot is the kubelet's check before a container is created
// (pkg/kubelet/kuberuntime/security_context_others.go, verifyRunAsNonRoot): with an effective
// runAsNonRoot, a runAsUser of 0 breaks the policy; without a runAsUser, the image's user
// (imageUID, or imageUser when the image names a user) must be known not to be root.
func VerifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, imageUID *int64, imageUser string) error {
	esc := EffectiveSecurityContext(pod, c)
	if esc.RunAsNonRoot == nil || !*esc.RunAsNonRoot {
		return nil
	}
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if esc.RunAsUser != nil {
		if *esc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podName, c.Name)
		}
		return nil
	}
	switch {
	case imageUID != nil && *imageUID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podName, c.Name)
	case imageUID == nil && imageUser != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", imageUser, podName, c.Name)
	}
	return nil
}
