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
		{"C1", podOf(c("a", "100m/100Mi", "100m/100Mi")), v1.PodQOSGuaranteed},
		{"C2", podOf(c("a", "100m/100Mi", "100m/100Mi"), c("b", "100m/100Mi", "100m/100Mi")), v1.PodQOSGuaranteed},
		{"C3", podOf(c("a", "—", "—"), c("b", "—", "—")), v1.PodQOSBestEffort},
		{"C4", podOf(c("a", "—", "—"), c("b", "1/—", "2/—")), v1.PodQOSBurstable},
		{"C5", podOf(c("a", "—", "—"), c("b", "10m/100Mi", "10m/100Mi")), v1.PodQOSBurstable},
		{"C6", podOf(c("a", "—/100Mi", "—/100Mi")), v1.PodQOSBurstable},
		{"C7", podOf(c("a", "100m/100Mi", "—")), v1.PodQOSBurstable},
		{"C8", podOf(c("a", "1/100Mi", "2/100Mi"), c("b", "100m/100Mi", "100m/100Mi")), v1.PodQOSBurstable},
		{"C9", podOf(c("a", "0/0", "100m/200Mi")), v1.PodQOSBurstable},
		{"C10", podOf(c("a", "0/0,hugepages-2Mi=1Gi", "0/0,hugepages-2Mi=1Gi")), v1.PodQOSBestEffort},
		{"C11", withInit(podOf(c("a", "—", "—")), c("init", "10m/100Mi", "100m/200Mi")), v1.PodQOSBurstable},
		{"C12", withPodLevel(podOf(c("a", "—", "—")), "10m/100Mi", "10m/100Mi"), v1.PodQOSGuaranteed},
		{"C13", withPodLevel(podOf(c("a", "3m/10Mi", "5m/20Mi")), "10m/100Mi", "10m/100Mi"), v1.PodQOSGuaranteed},
		{"C14", withPodLevel(podOf(c("a", "5m/10Mi", "5m/10Mi")), "10m/10Mi", "20m/50Mi"), v1.PodQOSBurstable},
		{"C15", withPodLevel(podOf(c("a", "5m/10Mi", "—")), "10m/10Mi", "—"), v1.PodQOSBurstable},
		// Edge cases of spec §2.
		{"explicit zero requests", podOf(c("a", "0/0", "—")), v1.PodQOSBestEffort},
		{"limits only is not defaulted", podOf(c("a", "—", "1/1Gi")), v1.PodQOSBurstable},
		{"ephemeral-storage ignored", podOf(c("a", "—/—,ephemeral-storage=1Gi", "—/—,ephemeral-storage=1Gi")), v1.PodQOSBestEffort},
		{"guaranteed with sidecar", withInit(podOf(c("a", "1/1Gi", "1/1Gi")), sidecar("s", "1/1Gi", "1/1Gi")), v1.PodQOSGuaranteed},
		{"sidecar without limits", withInit(podOf(c("a", "1/1Gi", "1/1Gi")), sidecar("s", "—", "—")), v1.PodQOSBurstable},
		{"pod-level limits only", withPodLevel(podOf(c("a", "—", "—")), "—", "1/1Gi"), v1.PodQOSBurstable},
		{"pod-level cpu only", withPodLevel(podOf(c("a", "1/1Gi", "1/1Gi")), "1/—", "1/—"), v1.PodQOSBurstable},
		{"pod-level hugepages only", withPodLevel(podOf(c("a", "1/1Gi", "1/1Gi")), "—/—,hugepages-2Mi=2Mi", "—"), v1.PodQOSBestEffort},
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
