package worker

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPullPolicyDefault(t *testing.T) {
	cases := map[string]v1.PullPolicy{
		"busybox":                         v1.PullAlways,
		"busybox:latest":                  v1.PullAlways,
		"busybox:1.36":                    v1.PullIfNotPresent,
		"registry:5000/busybox":           v1.PullAlways,
		"registry:5000/busybox:1":         v1.PullIfNotPresent,
		"busybox@sha256:0123456789abcdef": v1.PullIfNotPresent,
	}
	for img, want := range cases {
		t.Run(img, func(t *testing.T) {
			if got := PullPolicy(&v1.Container{Image: img}); got != want {
				t.Errorf("PullPolicy(%s) = %s, want %s", img, got, want)
			}
		})
	}
}

// mustSandboxConfig is w.SandboxConfig(pod, "s.slice", 0) without an error.
func mustSandboxConfig(t *testing.T, w *Worker, pod *v1.Pod) *runtimeapi.PodSandboxConfig {
	t.Helper()
	cfg, err := w.SandboxConfig(pod, "s.slice", 0)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPodNetwork: with HostNetwork false, a pod without spec.hostNetwork gets its own network
// namespace and its hostname; one with spec.hostNetwork keeps the host's.
func TestPodNetwork(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	w.opts.HostNetwork = false
	cases := []struct {
		name     string
		host     bool
		mode     runtimeapi.NamespaceMode
		hostname string
	}{
		{"own network", false, runtimeapi.NamespaceMode_POD, "web"},
		{"spec.hostNetwork", true, runtimeapi.NamespaceMode_NODE, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("u1", "", "main")
			pod.Spec.HostNetwork = c.host
			cfg := mustSandboxConfig(t, w, pod)
			if cfg.Linux.SecurityContext.NamespaceOptions.Network != c.mode || cfg.Hostname != c.hostname {
				t.Errorf("network %v hostname %q, want %v %q", cfg.Linux.SecurityContext.NamespaceOptions.Network, cfg.Hostname, c.mode, c.hostname)
			}
		})
	}
}

// TestSandboxPrivileged: the sandbox is privileged when a container is, as the kubelet makes it
// (containerd refuses a privileged container in an unprivileged sandbox).
func TestSandboxPrivileged(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	yes := true
	cases := []struct {
		name string
		mod  func(*v1.Pod)
		want bool
	}{
		{"no security context", func(*v1.Pod) {}, false},
		{"privileged container", func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes} }, true},
		{"privileged init container", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{Privileged: &yes}}}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("u1", "", "main")
			c.mod(pod)
			if got := mustSandboxConfig(t, w, pod).Linux.SecurityContext.Privileged; got != c.want {
				t.Errorf("sandbox privileged = %v, want %v", got, c.want)
			}
		})
	}
}

// TestSecurityContextConfig: the CRI security contexts carry what the kubelet puts there
// (kuberuntime security_context.go and kuberuntime_sandbox.go).
func TestSecurityContextConfig(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	w.opts.SeccompProfileRoot = "/var/lib/slicelet/seccomp"
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	local := "audit.json"
	strict := v1.SupplementalGroupsPolicyStrict
	pod := testPod("u1", "", "main", "side")
	pod.Spec.HostPID, pod.Spec.HostIPC = true, false
	pod.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: i64(1000), RunAsGroup: i64(2000), FSGroup: i64(3000), SupplementalGroups: []int64{4000},
		SupplementalGroupsPolicy: &strict, SELinuxOptions: &v1.SELinuxOptions{Type: "spc_t", Level: "s0:c1"},
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		Sysctls:        []v1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}},
	}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		RunAsUser: i64(0), Privileged: &yes, ReadOnlyRootFilesystem: &yes,
		Capabilities:    &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"MKNOD"}},
		SeccompProfile:  &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &local},
		AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &local},
	}
	pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: &no}

	sb := mustSandboxConfig(t, w, pod)
	ssc := sb.Linux.SecurityContext
	if !ssc.Privileged {
		t.Error("sandbox of a pod with a privileged container is not privileged")
	}
	if ssc.RunAsUser.GetValue() != 1000 || ssc.RunAsGroup.GetValue() != 2000 || !reflect.DeepEqual(ssc.SupplementalGroups, []int64{3000, 4000}) ||
		ssc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("sandbox ids %+v", ssc)
	}
	if !reflect.DeepEqual(ssc.SelinuxOptions, &runtimeapi.SELinuxOption{Type: "spc_t", Level: "s0:c1"}) {
		t.Errorf("sandbox SELinux %v", ssc.SelinuxOptions)
	}
	if ssc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("sandbox seccomp %v", ssc.Seccomp)
	}
	if ns := ssc.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_NODE || ns.Ipc != runtimeapi.NamespaceMode_POD {
		t.Errorf("sandbox namespaces %v", ns)
	}
	if !reflect.DeepEqual(sb.Linux.Sysctls, map[string]string{"kernel.shm_rmid_forced": "1"}) {
		t.Errorf("sysctls %v", sb.Linux.Sysctls)
	}

	cfg, err := w.ContainerConfig(pod, &pod.Spec.Containers[0], 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Linux.SecurityContext
	if sc.RunAsUser.GetValue() != 0 || sc.RunAsGroup.GetValue() != 2000 || !sc.Privileged || !sc.ReadonlyRootfs || sc.NoNewPrivs {
		t.Errorf("main %+v", sc)
	}
	if !reflect.DeepEqual(sc.Capabilities, &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"MKNOD"}}) {
		t.Errorf("capabilities %v", sc.Capabilities)
	}
	if sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.Seccomp.LocalhostRef != "/var/lib/slicelet/seccomp/audit.json" {
		t.Errorf("seccomp %v", sc.Seccomp)
	}
	if sc.Apparmor.GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.Apparmor.LocalhostRef != "audit.json" {
		t.Errorf("apparmor %v", sc.Apparmor)
	}
	if !reflect.DeepEqual(sc.SelinuxOptions, &runtimeapi.SELinuxOption{Type: "spc_t", Level: "s0:c1"}) {
		t.Errorf("container SELinux (the pod's) %v", sc.SelinuxOptions)
	}
	if len(sc.MaskedPaths) == 0 || len(sc.ReadonlyPaths) == 0 {
		t.Errorf("masked %v read-only %v", sc.MaskedPaths, sc.ReadonlyPaths)
	}

	cfg, err = w.ContainerConfig(pod, &pod.Spec.Containers[1], 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc = cfg.Linux.SecurityContext
	if sc.RunAsUser.GetValue() != 1000 || !sc.NoNewPrivs || sc.Privileged || sc.Capabilities != nil || sc.Apparmor != nil ||
		sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("side %+v", sc)
	}

	// Without any profile: Unconfined seccomp, the runtime's AppArmor default.
	plain := testPod("u2", "", "main")
	cfg, err = w.ContainerConfig(plain, &plain.Spec.Containers[0], 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc := cfg.Linux.SecurityContext; sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_Unconfined || sc.Apparmor != nil || sc.RunAsUser != nil {
		t.Errorf("plain %+v", sc)
	}
}

// TestContainerConfigResources: the CRI resources a container gets, as kuberuntime computes them.
func TestContainerConfigResources(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	w.opts.HostPageSizes = []int64{2 << 20, 1 << 30}
	pod := testPod("u1", "", "main")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("4Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi"), "hugepages-2Mi": resource.MustParse("4Mi")},
	}
	cfg, err := w.ContainerConfig(pod, &pod.Spec.Containers[0], 0, "img", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Linux.Resources
	// Burstable, 1Gi of 8Gi: oom_score_adj 1000 - 1000/8 = 875. One hugetlb limit per host
	// page size, ascending, 0 for the size the container does not ask for.
	want := &runtimeapi.LinuxContainerResources{
		CpuShares: 512, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 2 << 30, OomScoreAdj: 875,
		HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4 << 20}, {PageSize: "1GB", Limit: 0}},
	}
	if !proto.Equal(r, want) {
		t.Errorf("resources\n%v\nwant\n%v", r, want)
	}
}
