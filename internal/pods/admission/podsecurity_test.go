package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func mustPodSecurity(t *testing.T, level, version string) PodSecurity {
	t.Helper()
	p, err := ParsePodSecurity(level, version)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// restrictedPod is a pod that passes restricted:latest (the shape the Pod Security Standards
// documentation gives).
func restrictedPod() *v1.Pod {
	p := pod("web")
	p.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
	}
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &v1.Capabilities{Drop: []v1.Capability{"ALL"}},
	}
	return p
}

// TestCheckPodSecurity: the messages are the API server's, word for word, as `kubectl apply`
// prints them after `pods "NAME" is forbidden: ` (k8s.io/pod-security-admission/admission and
// the checks' ForbiddenReason/ForbiddenDetail in its policy package).
func TestCheckPodSecurity(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		level   [2]string
		wantMsg string // "" = admitted
	}{
		{name: "privileged admits everything", level: [2]string{"privileged", "latest"},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostPID = true, true
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
			})},
		{name: "zero value is privileged", pod: with(pod("p"), func(p *v1.Pod) { p.Spec.HostIPC = true })},
		{name: "baseline admits a plain pod", pod: pod("p"), level: [2]string{"baseline", "latest"}},
		{name: "baseline: host network", level: [2]string{"baseline", "latest"},
			pod:     with(pod("p"), func(p *v1.Pod) { p.Spec.HostNetwork = true }),
			wantMsg: `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`},
		{name: "baseline: every host namespace, privileged, hostPath, hostPort, capabilities", level: [2]string{"baseline", "latest"},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
				p.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
				c := &p.Spec.Containers[0]
				c.Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
				c.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true),
					Capabilities: &v1.Capabilities{Add: []v1.Capability{"SYS_ADMIN", "NET_RAW"}}}
			}),
			// The checks run in the order of their IDs (capabilities_baseline, hostNamespaces,
			// hostPathVolumes, hostPorts, privileged); NET_RAW is outside baseline's list too.
			wantMsg: `violates PodSecurity "baseline:latest": non-default capabilities (container "a" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add), ` +
				`host namespaces (hostNetwork=true, hostPID=true, hostIPC=true), hostPath volumes (volume "root"), hostPort (container "a" uses hostPort 8080), ` +
				`privileged (container "a" must not set securityContext.privileged=true)`},
		{name: "baseline: pinned version names it", level: [2]string{"baseline", "v1.30"},
			pod:     with(pod("p"), func(p *v1.Pod) { p.Spec.HostPID = true }),
			wantMsg: `violates PodSecurity "baseline:v1.30": host namespaces (hostPID=true)`},
		{name: "baseline: init containers are checked too", level: [2]string{"baseline", "latest"},
			pod: with(pod("p"), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "setup", SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}}}
			}),
			wantMsg: `violates PodSecurity "baseline:latest": privileged (container "setup" must not set securityContext.privileged=true)`},
		{name: "restricted: a plain pod fails four checks", level: [2]string{"restricted", "latest"}, pod: pod("p"),
			wantMsg: `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "a" must set securityContext.allowPrivilegeEscalation=false), ` +
				`unrestricted capabilities (container "a" must set securityContext.capabilities.drop=["ALL"]), ` +
				`runAsNonRoot != true (pod or container "a" must set securityContext.runAsNonRoot=true), ` +
				`seccompProfile (pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`},
		{name: "restricted admits the documented shape", level: [2]string{"restricted", "latest"}, pod: restrictedPod()},
		{name: "restricted: runAsUser 0", level: [2]string{"restricted", "latest"},
			pod:     with(restrictedPod(), func(p *v1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To(int64(0)) }),
			wantMsg: `violates PodSecurity "restricted:latest": runAsUser=0 (pod must not set runAsUser=0)`},
		{name: "restricted includes baseline", level: [2]string{"restricted", "latest"},
			pod:     with(restrictedPod(), func(p *v1.Pod) { p.Spec.HostNetwork = true }),
			wantMsg: `violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var level PodSecurity
			if tt.level[0] != "" {
				level = mustPodSecurity(t, tt.level[0], tt.level[1])
			}
			d := CheckPodSecurity(tt.pod, level)
			if tt.wantMsg == "" {
				if !d.Admit {
					t.Fatalf("refused: %s: %s", d.Reason, d.Message)
				}
				return
			}
			if d.Admit || d.Reason != ReasonForbidden || d.Message != tt.wantMsg {
				t.Errorf("got admit=%v reason=%q\n  message %s\n     want %s", d.Admit, d.Reason, d.Message, tt.wantMsg)
			}
		})
	}
}

func TestParsePodSecurity(t *testing.T) {
	tests := []struct {
		level, version      string
		wantString, wantErr string
		allowsRoot          bool
	}{
		{level: "privileged", version: "latest", wantString: "privileged:latest", allowsRoot: true},
		{level: "baseline", version: "v1.29", wantString: "baseline:v1.29", allowsRoot: true},
		{level: "restricted", version: "latest", wantString: "restricted:latest"},
		{level: "Baseline", version: "latest", wantErr: `pod security level "Baseline": must be one of privileged, baseline, restricted`},
		{level: "baseline", version: "1.29", wantErr: `pod security version "1.29": must be "latest" or "v1.x"`},
	}
	for _, tt := range tests {
		p, err := ParsePodSecurity(tt.level, tt.version)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s/%s: error %v, want %s", tt.level, tt.version, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p.String() != tt.wantString || p.AllowsRoot() != tt.allowsRoot {
			t.Errorf("%s/%s: got %q allowsRoot=%v err=%v", tt.level, tt.version, p.String(), p.AllowsRoot(), err)
		}
	}
	if (PodSecurity{}).String() != "privileged:latest" || !(PodSecurity{}).AllowsRoot() {
		t.Errorf("zero PodSecurity: %q", PodSecurity{}.String())
	}
}
