package slices

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerOOMScoreAdj(t *testing.T) {
	const capacity = 16 * gi
	critical := podOf(c("a", "1/1Gi", "—"))
	critical.Spec.PriorityClassName = SystemNodeCritical
	clusterCritical := podOf(c("a", "1/1Gi", "—"))
	clusterCritical.Spec.PriorityClassName = "system-cluster-critical"
	podLevel := withPodLevel(podOf(c("a", "—/1Gi", "—"), c("b", "—", "—")), "—/4Gi", "—")
	withSidecars := withInit(podOf(c("a", "—/4Gi", "—"), c("b", "—/2Gi", "—")),
		sidecar("small", "—/256Mi", "—"), sidecar("big", "—/8Gi", "—"), c("init", "—/256Mi", "—"))

	// Pod-level 4Gi: a 1Gi and sidecar 256Mi claim 1.25Gi, the remaining 2.75Gi is split over
	// both (1.375Gi each).
	podLevelSidecar := withPodLevel(withInit(podOf(c("a", "—/1Gi", "—")), sidecar("s", "—/256Mi", "—")), "—/4Gi", "—")

	tests := []struct {
		name      string
		pod       *v1.Pod
		container string
		capacity  int64
		want      int
	}{
		{"node critical", critical, "a", capacity, -997},
		{"cluster critical is just burstable", clusterCritical, "a", capacity, 938},
		{"guaranteed", podOf(c("a", "1/1Gi", "1/1Gi")), "a", capacity, -997},
		{"besteffort", podOf(c("a", "—", "—")), "a", capacity, 1000},
		{"burstable 1Gi of 16Gi", podOf(c("a", "1/1Gi", "—")), "a", capacity, 938},
		{"burstable half", podOf(c("a", "1/8Gi", "—")), "a", capacity, 500},
		{"burstable no memory request is 999", podOf(c("a", "1/—", "—")), "a", capacity, 999},
		{"burstable whole node clamps to 3", podOf(c("a", "1/16Gi", "—")), "a", capacity, 3},
		{"burstable beyond node clamps to 3", podOf(c("a", "1/32Gi", "—")), "a", capacity, 3},
		{"pod-level share added (1Gi + 1.5Gi)", podLevel, "a", capacity, 844},
		{"pod-level share only (1.5Gi)", podLevel, "b", capacity, 907},
		{"regular a", withSidecars, "a", capacity, 750},
		{"regular b", withSidecars, "b", capacity, 875},
		{"small sidecar capped at smallest regular", withSidecars, "small", capacity, 875},
		{"big sidecar keeps its own lower score", withSidecars, "big", capacity, 500},
		{"plain init container uses own request", withSidecars, "init", capacity, 985},
		{"pod-level regular (1Gi + 1.375Gi)", podLevelSidecar, "a", capacity, 852},
		{"pod-level sidecar capped with share added", podLevelSidecar, "s", capacity, 852},
		{"unknown capacity", podOf(c("a", "1/1Gi", "—")), "a", 0, 999},
		// Pod-level 1Gi below the containers' 8Gi: no negative share (8Gi of 16Gi).
		{"pod-level request below the containers' adds nothing", withPodLevel(podOf(c("a", "—/8Gi", "—")), "—/1Gi", "—"), "a", capacity, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctr := findContainer(tt.pod, tt.container)
			if got := ContainerOOMScoreAdj(tt.pod, ctr, tt.capacity); got != tt.want {
				t.Errorf("ContainerOOMScoreAdj(%s) = %d, want %d", tt.container, got, tt.want)
			}
		})
	}
}

func findContainer(p *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	panic("no container " + name)
}
