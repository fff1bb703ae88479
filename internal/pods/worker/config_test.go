package worker

import (
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
			cfg := w.SandboxConfig(pod, "s.slice", 0)
			if cfg.Linux.SecurityContext.NamespaceOptions.Network != c.mode || cfg.Hostname != c.hostname {
				t.Errorf("network %v hostname %q, want %v %q", cfg.Linux.SecurityContext.NamespaceOptions.Network, cfg.Hostname, c.mode, c.hostname)
			}
		})
	}
}

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
