package slices

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/units"
)

func BenchmarkPodResources(b *testing.B) {
	pod := withInit(podOf(c("a", "100m/100Mi", "200m/200Mi"), c("b", "1/1Gi", "2/2Gi")), sidecar("s", "50m/50Mi", "100m/100Mi"))
	opts := DefaultOptions()
	for b.Loop() {
		_ = SliceProperties(PodResources(pod, opts), units.ModeUnified)
	}
}

// BenchmarkQOSConfigs is one QoS reconcile over a full node (110 pods, the kubelet's default
// max-pods).
func BenchmarkQOSConfigs(b *testing.B) {
	pods := make([]*v1.Pod, 0, 110)
	for i := range 110 {
		var p *v1.Pod
		switch i % 3 {
		case 0:
			p = podOf(c("g", "1/128Mi", "1/128Mi"))
		case 1:
			p = podOf(c("b", "1/128Mi", "2/256Mi"))
		default:
			p = podOf(c("be", "—", "—"))
		}
		p.UID = typesUID("uid-" + strconv.Itoa(i))
		pods = append(pods, p)
	}
	opts := QOSOptions{EnforceMemoryQoS: true, MemoryReservationPolicy: MemoryReservationTiered, HugePageSizes: []int64{2 * mi}}
	for b.Loop() {
		_ = QOSConfigs(pods, opts)
	}
}
