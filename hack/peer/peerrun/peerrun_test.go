package peerrun

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/config"
)

// TestAgentConfigs: the two agents' configurations decode (the kubelet's strictly as a
// KubeletConfiguration, slicelet's with its own loader) to the same node settings.
func TestAgentConfigs(t *testing.T) {
	c := DefaultNodeConfig()
	var k kubeletconfigv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict([]byte(kubeletConfig(c, "/m", "unix:///c.sock")), &k); err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	s, err := config.Parse("config.toml", []byte(sliceletConfig(c, "/m", "unix:///c.sock", "pause:1", "/d")))
	if err != nil {
		t.Fatalf("slicelet config: %v", err)
	}
	for _, tc := range []struct {
		name              string
		kubelet, slicelet map[string]string
	}{
		{"systemReserved", k.SystemReserved, resourceStrings(s.Node.SystemReserved)},
		{"kubeReserved", k.KubeReserved, resourceStrings(s.Node.KubeReserved)},
		{"evictionHard", k.EvictionHard, s.Eviction.Hard},
	} {
		if !maps.Equal(tc.kubelet, tc.slicelet) {
			t.Errorf("%s: kubelet %v, slicelet %v", tc.name, tc.kubelet, tc.slicelet)
		}
	}
	if *k.PodPidsLimit != s.Cgroups.PodPidsLimit || int(k.MaxPods) != int(s.Node.MaxPods) {
		t.Errorf("pids limit %d / %d, max pods %d / %d", *k.PodPidsLimit, s.Cgroups.PodPidsLimit, k.MaxPods, s.Node.MaxPods)
	}
	if k.StaticPodPath != s.Pods.ManifestDir || k.ContainerRuntimeEndpoint != s.Runtime.Endpoint || s.Runtime.Type != "cri" {
		t.Errorf("manifests %q / %q, endpoint %q / %q (%s)", k.StaticPodPath, s.Pods.ManifestDir, k.ContainerRuntimeEndpoint, s.Runtime.Endpoint, s.Runtime.Type)
	}
	// Pods without hostNetwork on containerd's CNI network under both agents.
	if s.Runtime.Network != config.NetworkCNI {
		t.Errorf("slicelet runtime.network %q, want %q", s.Runtime.Network, config.NetworkCNI)
	}
	// Loopback only.
	if k.Address != "127.0.0.1" || k.HealthzBindAddress != "127.0.0.1" || k.ReadOnlyPort != 0 || s.Metrics.Address != "" {
		t.Errorf("kubelet address %q, healthz %q, read-only port %d; slicelet metrics %q", k.Address, k.HealthzBindAddress, k.ReadOnlyPort, s.Metrics.Address)
	}
}

func TestQOSOfSlice(t *testing.T) {
	for _, tc := range []struct{ rel, want string }{
		{"kubepods.slice/kubepods-pod1_2.slice", "Guaranteed"},
		{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice", "Burstable"},
		{"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice", "BestEffort"},
		{"", ""},
	} {
		if got := qosOfSlice(tc.rel); got != tc.want {
			t.Errorf("qosOfSlice(%q) = %q, want %q", tc.rel, got, tc.want)
		}
	}
}

// TestHierarchyV1 reads a v1 layout as the sandbox has it: "cpu" and "cpuacct" mounted apart,
// "cpu,cpuacct" and hugetlb empty decoy directories.
func TestHierarchyV1(t *testing.T) {
	root := t.TempDir()
	mounted := []string{"cpu", "cpuacct", "memory", "pids"}
	for _, d := range append(mounted, "cpu,cpuacct", "hugetlb") {
		if err := os.MkdirAll(filepath.Join(root, d, "kubepods.slice"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range mounted {
		if err := os.WriteFile(filepath.Join(root, d, "cgroup.procs"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(d, f, v string) {
		if err := os.WriteFile(filepath.Join(root, d, "kubepods.slice", f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu", "cpu.shares", "1894")
	write("cpu,cpuacct", "cpu.shares", "2") // a decoy: never read
	write("memory", "memory.limit_in_bytes", "1073741824")
	write("pids", "pids.max", "max")
	h, err := newHierarchy(root, false)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := h.read("kubepods.slice")
	want := Values{"cpu.shares": "1894", "memory.limit_in_bytes": "1073741824", "pids.max": "max"}
	if !ok || !maps.Equal(got, want) {
		t.Errorf("read = %v, %v; want %v", got, ok, want)
	}
	if _, ok := h.read("kubepods.slice/missing.slice"); ok {
		t.Error("a missing cgroup reads as present")
	}
}

// resourceStrings renders a resource list as name → quantity string.
func resourceStrings(rl map[corev1.ResourceName]resource.Quantity) map[string]string {
	out := map[string]string{}
	for n, q := range rl {
		out[string(n)] = q.String()
	}
	return out
}

// TestStuck: a pod is stuck when a container (init or regular) waits with a reason only a
// change on the node ends; creating, back-off and running containers are not.
func TestStuck(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	cases := []struct {
		name string
		st   corev1.PodStatus
		want bool
	}{
		{"no statuses", corev1.PodStatus{}, false},
		{"running", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running}}, false},
		{"creating", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating")}}, false},
		{"crash loop", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("CrashLoopBackOff")}}, false},
		{"missing ConfigMap", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running, waiting("CreateContainerConfigError")}}, true},
		{"init container never pulled", corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{waiting("ErrImageNeverPull")},
			ContainerStatuses: []corev1.ContainerStatus{waiting("PodInitializing")}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := stuck(c.st); got != c.want {
				t.Errorf("stuck = %v, want %v", got, c.want)
			}
		})
	}
}
