package systemdrt

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

func TestValidate(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeHybrid)
	emptyDir := func(name string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	}
	hostPath := func(name, path string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}}
	}
	withContainer := func(mut func(c *v1.Container)) *v1.Pod {
		c := cmd("app", "infinity")
		mut(&c)
		p := testPod("val-1", "", c)
		p.Spec.Volumes = []v1.Volume{emptyDir("data")}
		return p
	}
	withPod := func(mut func(p *v1.Pod)) *v1.Pod {
		p := testPod("val-1", "", cmd("app", "infinity"))
		mut(p)
		return p
	}
	withVolumes := func(vols ...v1.Volume) *v1.Pod {
		p := testPod("val-1", "", cmd("app", "infinity"))
		p.Spec.Volumes = vols
		return p
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want []string // substrings of the aggregated error, in order of appearance; none = valid
	}{
		{"valid", withContainer(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			c.Env = []v1.EnvVar{{Name: "A_1", Value: "tab\tand\nnewline ok"}}
		}), nil},
		{"bare command in PATH", withContainer(func(c *v1.Container) { c.Command = []string{"sleep", "1"} }), nil},
		{"image", withContainer(func(c *v1.Container) { c.Image = "nginx:1.27" }),
			[]string{`spec.containers[0].image: Invalid value: "nginx:1.27"`, `runtime.type = "cri"`}},
		{"stdin and tty (nothing can attach)", withContainer(func(c *v1.Container) { c.Stdin, c.StdinOnce, c.TTY = true, true, true }),
			[]string{"spec.containers[0].stdin: Forbidden: the systemd runtime cannot attach", "spec.containers[0].stdinOnce: Forbidden", "spec.containers[0].tty: Forbidden", `runtime.type = "cri"`}},
		{"no command", withContainer(func(c *v1.Container) { c.Command = nil; c.Args = []string{"x"} }),
			[]string{"spec.containers[0].command: Required value"}},
		{"relative command", withContainer(func(c *v1.Container) { c.Command = []string{"./run.sh"} }),
			[]string{`spec.containers[0].command[0]: Invalid value: "./run.sh": must be an absolute path`}},
		{"missing command", withContainer(func(c *v1.Container) { c.Command = []string{"no-such-tool"} }),
			[]string{`spec.containers[0].command[0]: Invalid value: "no-such-tool": no executable of that name in PATH`}},
		{"missing absolute command", withContainer(func(c *v1.Container) { c.Command = []string{"/opt/none"} }),
			[]string{`command[0]: Invalid value: "/opt/none": not runnable on this host`}},
		{"NUL in arg", withContainer(func(c *v1.Container) { c.Args = []string{"a\x00b"} }),
			[]string{"spec.containers[0].args[0]", "must not contain NUL bytes"}},
		{"NUL in env value", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "X", Value: "a\x00b"}} }),
			[]string{"spec.containers[0].env[0].value", "must not contain NUL bytes"}},
		{"NUL in env name", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "X\x00Y", Value: "v"}} }),
			[]string{"spec.containers[0].env[0].name", "must not contain NUL bytes"}},
		{"control character in env value", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "X", Value: "\x1b[31m"}} }),
			[]string{"spec.containers[0].env[0].value", "control character"}},
		{"env name with dot", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "a.b", Value: "v"}} }),
			[]string{`spec.containers[0].env[0].name: Invalid value: "a.b"`, "systemd takes only letters"}},
		{"env name starting with digit", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "1A", Value: "v"}} }),
			[]string{`env[0].name: Invalid value: "1A"`}},
		{"duplicate env", withContainer(func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A"}, {Name: "A"}} }),
			[]string{`env[1].name: Duplicate value: "A"`}},
		{"valueFrom", withContainer(func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		}), nil},
		{"envFrom", withContainer(func(c *v1.Container) {
			c.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}
		}), nil},
		{"relative workingDir", withContainer(func(c *v1.Container) { c.WorkingDir = "srv" }),
			[]string{`spec.containers[0].workingDir: Invalid value: "srv": must be an absolute path`}},
		{"mount of unknown volume", withContainer(func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}} }),
			[]string{`spec.containers[0].volumeMounts[0].name: Not found: "nope"`}},
		{"relative mountPath", withContainer(func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "data"}} }),
			[]string{`volumeMounts[0].mountPath: Invalid value: "data": must be an absolute path`}},
		{"mountPath with ..", withContainer(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/srv/../etc"}}
		}), []string{`volumeMounts[0].mountPath: Invalid value: "/srv/../etc": must not contain '..'`}},
		{"mount over root", withContainer(func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/"}} }),
			[]string{"cannot mount over the root directory"}},
		{"unclean mountPath", withContainer(func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/srv//x/"}} }),
			[]string{"must be a clean path", "write /srv/x"}},
		{"subPath", withContainer(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "../../etc"}}
		}), []string{"volumeMounts[0].subPath: Forbidden"}},
		{"volume name with ..", withVolumes(emptyDir("..")), []string{`spec.volumes[0].name: Invalid value: ".."`}},
		{"volume name absolute", withVolumes(emptyDir("/etc/passwd")), []string{`spec.volumes[0].name: Invalid value: "/etc/passwd"`}},
		{"volume name with slash", withVolumes(emptyDir("a/../../b")), []string{`spec.volumes[0].name: Invalid value: "a/../../b"`}},
		{"hostPath relative", withVolumes(hostPath("h", "var/log")), []string{`spec.volumes[0].hostPath.path: Invalid value: "var/log": must be an absolute path`}},
		{"hostPath with ..", withVolumes(hostPath("h", "/var/../etc")), []string{`spec.volumes[0].hostPath.path: Invalid value: "/var/../etc": must not contain '..'`}},
		{"secret volume", withVolumes(v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}),
			nil},
		{"nfs volume", withVolumes(v1.Volume{Name: "n", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}}),
			[]string{"spec.volumes[0]: Invalid value: \"n\": only emptyDir, hostPath, configMap"}},
		{"memory emptyDir", withVolumes(v1.Volume{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}),
			[]string{"spec.volumes[0].emptyDir.medium: Unsupported value: \"Memory\""}},
		{"probe", withContainer(func(c *v1.Container) { c.LivenessProbe = &v1.Probe{} }),
			[]string{"spec.containers[0].livenessProbe: Required value: must specify a handler type"}},
		{"preStop hook", withContainer(func(c *v1.Container) { c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{}} }),
			[]string{"spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"}},
		{"unknown stop signal", withContainer(func(c *v1.Container) { c.Lifecycle = &v1.Lifecycle{StopSignal: ptr(v1.Signal("SIGNOPE"))} }),
			[]string{`spec.containers[0].lifecycle.stopSignal: Unsupported value: "SIGNOPE"`}},
		{"runAsNonRoot without user: runs as nobody", withContainer(func(c *v1.Container) { c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr(true)} }),
			nil},
		{"runAsNonRoot with root", withPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(0))}
		}), []string{"spec.containers[0].securityContext.runAsNonRoot: Invalid value: true: container's runAsUser breaks non-root policy"}},
		{"everything the systemd runtime maps", withPod(func(p *v1.Pod) {
			p.Spec.HostPID, p.Spec.HostIPC = true, true
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsNonRoot: ptr(true), FSGroup: ptr(int64(2000)),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
				Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
				AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true), ProcMount: ptr(v1.DefaultProcMount),
				AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined},
			}
		}), nil},
		{"selinux", withPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Type: "spc_t"}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0"}}
		}), []string{"spec.securityContext.seLinuxOptions: Forbidden", "spec.containers[0].securityContext.seLinuxOptions: Forbidden"}},
		{"safe sysctl", withPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
		}), []string{"spec.securityContext.sysctls: Forbidden: the systemd runtime runs containers in the host's namespaces"}},
		{"pod-level AppArmor profile, reported once", withPod(func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, cmd("two", "infinity"))
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("web")}}
		}), []string{"spec.securityContext.appArmorProfile: Forbidden: cannot enforce AppArmor: AppArmor is not enabled on the host"}},
		{"shared process namespace", withPod(func(p *v1.Pod) { p.Spec.ShareProcessNamespace = ptr(true) }),
			[]string{"spec.shareProcessNamespace: Forbidden"}},
		{"mount propagation: HostToContainer is systemd's, Bidirectional cannot be", withContainer(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", MountPropagation: ptr(v1.MountPropagationHostToContainer)},
				{Name: "data", MountPath: "/data2", MountPropagation: ptr(v1.MountPropagationBidirectional)}}
		}), []string{"spec.containers[0].volumeMounts[1].mountPropagation: Forbidden: mounts made in a systemd service's mount namespace do not reach the host"}},
		{"raw block volumes: bound as devices, a read-only claim's refused", withPod(func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes,
				v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}},
				v1.Volume{Name: "ro", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "ro", ReadOnly: true}}})
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}, {Name: "ro", DevicePath: "/dev/xvdb"}}
		}), []string{"spec.containers[0].volumeDevices[1]: Forbidden: the raw block volume of a read-only claim cannot be kept read-only"}},
		{"host aliases", withPod(func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"a"}}} }),
			[]string{"spec.hostAliases: Forbidden"}},
		{"runtime class", withPod(func(p *v1.Pod) { p.Spec.RuntimeClassName = new("kata") }),
			[]string{"spec.runtimeClassName: Forbidden"}},
		{"strict supplemental groups", withPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: ptr(v1.SupplementalGroupsPolicyStrict)}
		}), []string{`spec.securityContext.supplementalGroupsPolicy: Unsupported value: "Strict"`}},
		{"unknown and prefixed capabilities", withContainer(func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"CAP_NET_ADMIN"}, Drop: []v1.Capability{"FLY"}}}
		}), []string{`spec.containers[0].securityContext.capabilities.add[0]: Invalid value: "CAP_NET_ADMIN": write the capability without the CAP_ prefix`,
			`spec.containers[0].securityContext.capabilities.drop[0]: Invalid value: "FLY": unknown capability`}},
		{"AppArmor runtime default", withContainer(func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}), []string{"spec.containers[0].securityContext.appArmorProfile: Forbidden: the systemd runtime has no default AppArmor profile"}},
		{"AppArmor localhost annotation without AppArmor", withPod(func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "localhost/web"}
		}), []string{`metadata.annotations[container.apparmor.security.beta.kubernetes.io/app]: Forbidden: cannot enforce AppArmor: AppArmor is not enabled on the host`}},
		{"missing Localhost seccomp profile", withContainer(func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("nope.json")}}
		}), []string{"spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: \"nope.json\": seccomp profile"}},
		{"what neither runtime can do", withPod(func(p *v1.Pod) {
			p.Spec.HostUsers = ptr(false)
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{WindowsOptions: &v1.WindowsSecurityContextOptions{}, ProcMount: ptr(v1.UnmaskedProcMount)}
		}), []string{"spec.hostUsers: Forbidden", "spec.containers[0].securityContext.windowsOptions: Forbidden",
			`spec.containers[0].securityContext.procMount: Unsupported value: "Unmasked"`}},
		{"negative user", withContainer(func(c *v1.Container) { c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(-1))} }),
			[]string{"spec.containers[0].securityContext.runAsUser: Invalid value: -1"}},
		{"restartPolicy on a regular container", withContainer(func(c *v1.Container) { c.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways) }),
			[]string{"spec.containers[0].restartPolicy: Forbidden"}},
		{"mount path missing on the host", withContainer(func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/missing/dir"}} }),
			[]string{`spec.containers[0].volumeMounts[0].mountPath: Invalid value: "/missing/dir": the systemd runtime mounts volumes over host paths`}},
		{"container name with underscore", withContainer(func(c *v1.Container) { c.Name = "a_b" }),
			[]string{`spec.containers[0].name: Invalid value: "a_b"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := rt.Validate(c.pod)
			if len(c.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("Validate = %v, want no errors", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("Validate = nil, want %q", c.want)
			}
			got := errs.ToAggregate().Error()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("Validate = %s\n want it to contain %q", got, w)
				}
			}
		})
	}
}

// TestValidateManyContainers: 10 000 containers are refused by slices.ValidatePod, which runs
// before the runtime sees a pod.
func TestValidateManyContainers(t *testing.T) {
	pod := testPod("many-1", "")
	for i := range 10000 {
		pod.Spec.Containers = append(pod.Spec.Containers, cmd(fmt.Sprintf("c%d", i), "1"))
	}
	errs := slices.ValidatePod(pod)
	if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), "spec.containers: Too many: 10000: must have at most 256 items") {
		t.Errorf("ValidatePod = %v", got)
	}
}

// TestValidatePodLevelOnce: a pod-level setting refused for each of its containers is one error.
func TestValidatePodLevelOnce(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeHybrid)
	p := testPod("val-2", "", cmd("one", "infinity"), cmd("two", "infinity"))
	p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
	errs := rt.Validate(p)
	if len(errs) != 1 || errs[0].Field != "spec.securityContext.appArmorProfile" {
		t.Errorf("Validate = %v, want one error on spec.securityContext.appArmorProfile", errs)
	}
}
