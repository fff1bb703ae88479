package slices

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestComputePodQOS(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"requests equal limits: Guaranteed", podOf(c("a", "100m/100Mi", "100m/100Mi")), v1.PodQOSGuaranteed},
		{"every container with equal requests and limits: Guaranteed", podOf(c("a", "100m/100Mi", "100m/100Mi"), c("b", "100m/100Mi", "100m/100Mi")), v1.PodQOSGuaranteed},
		{"no requests or limits: BestEffort", podOf(c("a", "—", "—"), c("b", "—", "—")), v1.PodQOSBestEffort},
		{"one container with requests: Burstable", podOf(c("a", "—", "—"), c("b", "1/—", "2/—")), v1.PodQOSBurstable},
		{"one container Guaranteed, one empty: Burstable", podOf(c("a", "—", "—"), c("b", "10m/100Mi", "10m/100Mi")), v1.PodQOSBurstable},
		{"memory only: Burstable", podOf(c("a", "—/100Mi", "—/100Mi")), v1.PodQOSBurstable},
		{"requests without limits: Burstable", podOf(c("a", "100m/100Mi", "—")), v1.PodQOSBurstable},
		{"one container with limits above requests: Burstable", podOf(c("a", "1/100Mi", "2/100Mi"), c("b", "100m/100Mi", "100m/100Mi")), v1.PodQOSBurstable},
		{"zero requests with limits: Burstable", podOf(c("a", "0/0", "100m/200Mi")), v1.PodQOSBurstable},
		{"hugepages do not count: BestEffort", podOf(c("a", "0/0,hugepages-2Mi=1Gi", "0/0,hugepages-2Mi=1Gi")), v1.PodQOSBestEffort},
		{"init container resources count: Burstable", withInit(podOf(c("a", "—", "—")), c("init", "10m/100Mi", "100m/200Mi")), v1.PodQOSBurstable},
		{"pod-level requests equal limits: Guaranteed", withPodLevel(podOf(c("a", "—", "—")), "10m/100Mi", "10m/100Mi"), v1.PodQOSGuaranteed},
		{"pod-level resources decide over the containers': Guaranteed", withPodLevel(podOf(c("a", "3m/10Mi", "5m/20Mi")), "10m/100Mi", "10m/100Mi"), v1.PodQOSGuaranteed},
		{"pod-level limits above requests: Burstable", withPodLevel(podOf(c("a", "5m/10Mi", "5m/10Mi")), "10m/10Mi", "20m/50Mi"), v1.PodQOSBurstable},
		{"pod-level requests without limits: Burstable", withPodLevel(podOf(c("a", "5m/10Mi", "—")), "10m/10Mi", "—"), v1.PodQOSBurstable},
		// Edge cases of the kubelet's ComputePodQOS (pkg/apis/core/v1/helper/qos/qos.go).
		{"explicit zero requests", podOf(c("a", "0/0", "—")), v1.PodQOSBestEffort},
		{"limits only, undefaulted: GetPodQOS never defaults (every source decodes with the API defaults, internal/manifest, which make it Guaranteed)", podOf(c("a", "—", "1/1Gi")), v1.PodQOSBurstable},
		{"limits only as decoded (requests defaulted from limits): Guaranteed", podOf(c("a", "1/1Gi", "1/1Gi")), v1.PodQOSGuaranteed},
		{"ephemeral-storage ignored", podOf(c("a", "—/—,ephemeral-storage=1Gi", "—/—,ephemeral-storage=1Gi")), v1.PodQOSBestEffort},
		{"guaranteed with sidecar", withInit(podOf(c("a", "1/1Gi", "1/1Gi")), sidecar("s", "1/1Gi", "1/1Gi")), v1.PodQOSGuaranteed},
		{"sidecar without limits", withInit(podOf(c("a", "1/1Gi", "1/1Gi")), sidecar("s", "—", "—")), v1.PodQOSBurstable},
		{"pod-level limits only", withPodLevel(podOf(c("a", "—", "—")), "—", "1/1Gi"), v1.PodQOSBurstable},
		{"pod-level cpu only", withPodLevel(podOf(c("a", "1/1Gi", "1/1Gi")), "1/—", "1/—"), v1.PodQOSBurstable},
		{"pod-level hugepages only", withPodLevel(podOf(c("a", "1/1Gi", "1/1Gi")), "—/—,hugepages-2Mi=2Mi", "—"), v1.PodQOSBestEffort},
		{"empty spec.resources: the containers decide", emptyPodLevel(podOf(c("a", "1/1Gi", "1/1Gi"))), v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ComputePodQOS(tt.pod); got != tt.want {
				t.Errorf("ComputePodQOS = %s, want %s", got, tt.want)
			}
			if got := QOSClass(tt.pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

// emptyPodLevel gives pod a spec.resources with nothing in it.
func emptyPodLevel(pod *v1.Pod) *v1.Pod {
	pod.Spec.Resources = &v1.ResourceRequirements{}
	return pod
}

func TestQOSClassPrefersStatus(t *testing.T) {
	p := podOf(c("a", "1/1Gi", "2/2Gi"))
	p.Status.QOSClass = v1.PodQOSGuaranteed
	if got := QOSClass(p); got != v1.PodQOSGuaranteed {
		t.Errorf("QOSClass = %s, want status value Guaranteed", got)
	}
	if got := ComputePodQOS(p); got != v1.PodQOSBurstable {
		t.Errorf("ComputePodQOS = %s, want Burstable", got)
	}
}
