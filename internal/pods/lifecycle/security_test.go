package lifecycle

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func secPod(mut func(p *v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	if mut != nil {
		mut(p)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestEffectiveSecurityContext(t *testing.T) {
	cases := []struct {
		name string
		pod  *v1.Pod
		want *v1.SecurityContext
	}{
		{"none", secPod(nil), &v1.SecurityContext{}},
		{"pod defaults", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1)), RunAsGroup: ptr(int64(2)), RunAsNonRoot: ptr(true),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, SELinuxOptions: &v1.SELinuxOptions{Type: "t"}}
		}), &v1.SecurityContext{RunAsUser: ptr(int64(1)), RunAsGroup: ptr(int64(2)), RunAsNonRoot: ptr(true),
			SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, SELinuxOptions: &v1.SELinuxOptions{Type: "t"}}},
		{"container overrides", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1)), RunAsNonRoot: ptr(true)}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(0)), RunAsNonRoot: ptr(false), Privileged: ptr(true)}
		}), &v1.SecurityContext{RunAsUser: ptr(int64(0)), RunAsNonRoot: ptr(false), Privileged: ptr(true)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := EffectiveSecurityContext(c.pod, &c.pod.Spec.Containers[0])
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestProfilesFromFieldsAndAnnotations(t *testing.T) {
	local := "profiles/audit.json"
	cases := []struct {
		name        string
		pod         *v1.Pod
		wantSeccomp *v1.SeccompProfile
		wantAA      *v1.AppArmorProfile
	}{
		{"none", secPod(nil), nil, nil},
		{"container field over pod field", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
				AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}), &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}},
		{"annotations: container over pod", secPod(func(p *v1.Pod) {
			p.Annotations = map[string]string{SeccompPodAnnotation: "unconfined", SeccompContainerAnnotationPrefix + "app": "localhost/" + local,
				AppArmorContainerAnnotationPrefix + "app": "localhost/web"}
		}), &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &local},
			&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("web")}},
		{"pod annotation docker/default", secPod(func(p *v1.Pod) {
			p.Annotations = map[string]string{SeccompPodAnnotation: "docker/default"}
		}), &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, nil},
		{"fields win over annotations", secPod(func(p *v1.Pod) {
			p.Annotations = map[string]string{SeccompPodAnnotation: "unconfined"}
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}), &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctr := &c.pod.Spec.Containers[0]
			if got := SeccompProfile(c.pod, ctr); !reflect.DeepEqual(got, c.wantSeccomp) {
				t.Errorf("seccomp %+v, want %+v", got, c.wantSeccomp)
			}
			if got := AppArmorProfile(c.pod, ctr); !reflect.DeepEqual(got, c.wantAA) {
				t.Errorf("apparmor %+v, want %+v", got, c.wantAA)
			}
		})
	}
}

func TestValidateSecurity(t *testing.T) {
	cases := []struct {
		name        string
		pod         *v1.Pod
		hostNetwork bool
		want        []string // substrings of the aggregated error; none = valid
	}{
		{"nothing", secPod(nil), true, nil},
		{"safe sysctls off the host network", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}, {Name: "kernel/shm_rmid_forced", Value: "1"}}}
		}), false, nil},
		{"net sysctl on the host network", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}}}
		}), true, []string{"spec.securityContext.sysctls[0].name: Forbidden: sysctl net.ipv4.tcp_syncookies not allowed with host net enabled"}},
		{"shm sysctl with host IPC", secPod(func(p *v1.Pod) {
			p.Spec.HostIPC = true
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
		}), false, []string{"not allowed with host ipc enabled"}},
		{"unsafe, malformed and repeated sysctls", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax"}, {Name: "Bad Name"}, {Name: "kernel.shm_rmid_forced"}, {Name: "kernel/shm_rmid_forced"}}}
		}), false, []string{"sysctls[0].name: Forbidden: unsafe sysctl kernel.msgmax", `sysctls[1].name: Invalid value: "Bad Name"`, `sysctls[3].name: Duplicate value`}},
		{"hostUsers false, Windows options, Unmasked", secPod(func(p *v1.Pod) {
			p.Spec.HostUsers = ptr(false)
			p.Spec.SecurityContext = &v1.PodSecurityContext{WindowsOptions: &v1.WindowsSecurityContextOptions{}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: ptr(v1.UnmaskedProcMount), WindowsOptions: &v1.WindowsSecurityContextOptions{}}
		}), true, []string{"spec.hostUsers: Forbidden", "spec.securityContext.windowsOptions: Forbidden",
			`spec.containers[0].securityContext.procMount: Unsupported value: "Unmasked"`, "spec.containers[0].securityContext.windowsOptions: Forbidden"}},
		{"profile shapes", secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
				SeccompProfile:  &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("../etc/x.json")},
				AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault, LocalhostProfile: ptr("x")},
			}
		}), true, []string{"spec.securityContext.seccompProfile.localhostProfile: Required value",
			`spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "../etc/x.json"`,
			`spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: "x"`}},
		{"bad annotations", secPod(func(p *v1.Pod) {
			p.Annotations = map[string]string{SeccompPodAnnotation: "strict", AppArmorContainerAnnotationPrefix + "app": "localhost/"}
		}), true, []string{`metadata.annotations[container.apparmor.security.beta.kubernetes.io/app]: Unsupported value: "localhost/"`,
			`metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: Unsupported value: "strict"`}},
		{"no privilege escalation with privileged or CAP_SYS_ADMIN", secPod(func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Privileged: ptr(true),
				Capabilities: &v1.Capabilities{Add: []v1.Capability{"CAP_SYS_ADMIN"}}}
		}), true, []string{"cannot set allowPrivilegeEscalation to false and privileged to true", "cannot set allowPrivilegeEscalation to false and capabilities.Add CAP_SYS_ADMIN"}},
		// The API server refuses only the spelling CAP_SYS_ADMIN (metallb's speaker adds
		// SYS_ADMIN without privilege escalation).
		{"no privilege escalation with SYS_ADMIN", secPod(func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr(false),
				Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_RAW", "SYS_ADMIN"}}}
		}), true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := ValidateSecurity(c.pod, c.hostNetwork)
			if len(c.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("ValidateSecurity = %v, want none", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("ValidateSecurity = nil, want %q", c.want)
			}
			got := errs.ToAggregate().Error()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("ValidateSecurity = %s\n want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	nonRoot := func(user *int64) *v1.Pod {
		return secPod(func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: user}
		})
	}
	cases := []struct {
		name      string
		pod       *v1.Pod
		imageUID  *int64
		imageUser string
		want      string
	}{
		{"not asked", secPod(nil), ptr(int64(0)), "", ""},
		{"runAsUser 0", nonRoot(ptr(int64(0))), nil, "", `container's runAsUser breaks non-root policy (pod: "web_default(u-1)", container: app)`},
		{"runAsUser wins over the image", nonRoot(ptr(int64(1000))), ptr(int64(0)), "", ""},
		{"image root", nonRoot(nil), ptr(int64(0)), "", `container has runAsNonRoot and image will run as root (pod: "web_default(u-1)", container: app)`},
		{"image user by name", nonRoot(nil), nil, "nginx", "container has runAsNonRoot and image has non-numeric user (nginx), cannot verify user is non-root"},
		{"image non-root uid", nonRoot(nil), ptr(int64(101)), "", ""},
		{"nothing known about the image", nonRoot(nil), nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyRunAsNonRoot(c.pod, &c.pod.Spec.Containers[0], c.imageUID, c.imageUser)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}
