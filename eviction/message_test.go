package eviction

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEvictionMessage holds the kubelet's evictionMessage strings (pkg/kubelet/eviction/helpers.go), trailing spaces included, modelled on
// TestEvictonMessageWithResourceResize and the message formats of helpers.go.
func TestEvictionMessage(t *testing.T) {
	none := newResourceList("", "", "")
	testpod := newPod("testpod", 1, []v1.Container{newContainer("testcontainer", newResourceList("", "100Mi", "1Gi"), none)}, nil)
	withInit := newPod("withinit", 1, []v1.Container{newContainer("app", newResourceList("", "100Mi", ""), none)}, nil)
	withInit.Spec.InitContainers = []v1.Container{newContainer("setup", newResourceList("", "10Mi", ""), none)}
	podLevel := newPod("podlevel", 1, []v1.Container{newContainer("app", none, none)}, nil)
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: newResourceList("", "200Mi", "")}

	memHard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	memPct := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	fsHard := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("10Gi")}}
	obs := Observations{
		SignalMemoryAvailable: obsOf("524288000", "8Gi"),
		SignalNodeFsAvailable: obsOf("5Gi", "100Gi"),
	}
	used := func(s string) *resource.Quantity { return q(s) }

	tests := []struct {
		name       string
		res        v1.ResourceName
		pod        *v1.Pod
		usage      *PodUsage
		thresholds []Threshold
		obs        Observations
		want       string
		wantAnn    map[string]string
	}{
		{name: "P node low, threshold met, no stats: no annotations", res: v1.ResourceMemory, pod: testpod,
			thresholds: []Threshold{memHard}, obs: obs,
			want: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. ", wantAnn: map[string]string{}},
		{name: "P no threshold for the resource: only the first sentence", res: v1.ResourceMemory, pod: testpod,
			thresholds: []Threshold{fsHard}, obs: obs,
			want: "The node was low on resource: memory. ", wantAnn: map[string]string{}},
		{name: "P container above its request (TestEvictonMessageWithResourceResize shape)", res: v1.ResourceMemory, pod: testpod,
			usage:      &PodUsage{Memory: *q("150Mi"), Containers: []ContainerUsage{{Name: "testcontainer", Memory: used("157286400")}}},
			thresholds: []Threshold{memHard}, obs: obs,
			want: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. " +
				"Container testcontainer was using 150Mi, request is 100Mi, has larger consumption of memory. ",
			wantAnn: map[string]string{"offending_containers": "testcontainer", "offending_containers_usage": "150Mi", "starved_resource": "memory"}},
		{name: "P container below its request: stats but no offender", res: v1.ResourceMemory, pod: testpod,
			usage:      &PodUsage{Memory: *q("50Mi"), Containers: []ContainerUsage{{Name: "testcontainer", Memory: used("50Mi")}}},
			thresholds: []Threshold{memHard}, obs: obs,
			want:    "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. ",
			wantAnn: map[string]string{"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"}},
		{name: "P init container counts too", res: v1.ResourceMemory, pod: withInit,
			usage: &PodUsage{Memory: *q("300Mi"), Containers: []ContainerUsage{
				{Name: "app", Memory: used("200Mi")}, {Name: "setup", Memory: used("20Mi")}}},
			thresholds: []Threshold{memHard}, obs: obs,
			want: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. " +
				"Container app was using 200Mi, request is 100Mi, has larger consumption of memory. " +
				"Container setup was using 20Mi, request is 10Mi, has larger consumption of memory. ",
			wantAnn: map[string]string{"offending_containers": "app,setup", "offending_containers_usage": "200Mi,20Mi", "starved_resource": "memory"}},
		{name: "P pod-level request exceeded", res: v1.ResourceMemory, pod: podLevel,
			usage: &PodUsage{Memory: *q("300Mi")}, thresholds: []Threshold{memHard}, obs: obs,
			want: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. " +
				"Pod podlevel was using 300Mi, request is 200Mi, has larger consumption of memory. ",
			wantAnn: map[string]string{"offending_pod": "podlevel", "offending_pod_usage": "300Mi",
				"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"}},
		{name: "P percentage threshold prints the float32 quantity", res: v1.ResourceMemory, pod: testpod,
			thresholds: []Threshold{memPct}, obs: Observations{SignalMemoryAvailable: obsOf("104857600", "1000Mi")},
			want: "The node was low on resource: memory. Threshold quantity: 104857601, available: 100Mi. ", wantAnn: map[string]string{}},
		{name: "P ephemeral-storage container above its request", res: v1.ResourceEphemeralStorage, pod: testpod,
			usage:      &PodUsage{EphemeralStorage: *q("2Gi"), Containers: []ContainerUsage{{Name: "testcontainer", EphemeralStorage: used("2Gi")}}},
			thresholds: []Threshold{memHard, fsHard}, obs: obs,
			want: "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. " +
				"Container testcontainer was using 2Gi, request is 1Gi, has larger consumption of ephemeral-storage. ",
			wantAnn: map[string]string{"offending_containers": "testcontainer", "offending_containers_usage": "2Gi", "starved_resource": "ephemeral-storage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ann := evictionMessage(tt.res, tt.pod, tt.usage, tt.thresholds, tt.obs)
			if got != tt.want {
				t.Errorf("message\n got %q\nwant %q", got, tt.want)
			}
			if !maps.Equal(ann, tt.wantAnn) {
				t.Errorf("annotations = %v, want %v", ann, tt.wantAnn)
			}
		})
	}
}

// TestLocalStorageEvictions: the three rules of the kubelet's localStorageEviction
// (pkg/kubelet/eviction/eviction_manager.go) with their exact messages, first rule wins,
// critical pods and pods without stats never evicted.
func TestLocalStorageEvictions(t *testing.T) {
	none := newResourceList("", "", "")
	sizeLimited := func(name string) *v1.Pod {
		p := newPod(name, 0, []v1.Container{newContainer("c", none, newResourceList("", "", "1Gi"))}, nil)
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: q("100Mi")}}}}
		return p
	}
	podLimit := newPod("pod-limit", 0, []v1.Container{
		newContainer("a", none, newResourceList("", "", "100Mi")),
		newContainer("b", none, newResourceList("", "", "200Mi")),
		newContainer("c", none, none)}, nil)
	containerLimit := newPod("container-limit", 0, []v1.Container{newContainer("a", none, newResourceList("", "", "100Mi"))}, nil)
	critical := sizeLimited("critical")
	critical.Spec.Priority = nil
	critical.Spec.PriorityClassName = "system-cluster-critical"

	tests := []struct {
		name string
		pods []PodStats
		want []Eviction
	}{
		{"P emptyDir above sizeLimit", []PodStats{{Pod: sizeLimited("ed"), Usage: &PodUsage{Volumes: map[string]resource.Quantity{"scratch": *q("101Mi")}}}},
			[]Eviction{{Name: "default/ed", Signal: SignalEmptyDirLimit, GracePeriod: ImmediateGracePeriod,
				Message: `Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". `}}},
		{"P emptyDir at sizeLimit is fine", []PodStats{{Pod: sizeLimited("ed"), Usage: &PodUsage{Volumes: map[string]resource.Quantity{"scratch": *q("100Mi")}}}}, nil},
		{"P emptyDir wins over the pod limit", []PodStats{{Pod: sizeLimited("ed"), Usage: &PodUsage{EphemeralStorage: *q("5Gi"),
			Volumes: map[string]resource.Quantity{"scratch": *q("200Mi")}}}},
			[]Eviction{{Name: "default/ed", Signal: SignalEmptyDirLimit, GracePeriod: ImmediateGracePeriod,
				Message: `Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". `}}},
		{"P pod above the sum of container limits", []PodStats{{Pod: podLimit, Usage: &PodUsage{EphemeralStorage: *q("301Mi")}}},
			[]Eviction{{Name: "default/pod-limit", Signal: SignalPodEphemeralLimit, GracePeriod: ImmediateGracePeriod,
				Message: "Pod ephemeral local storage usage exceeds the total limit of containers 300Mi. "}}},
		{"P container above its limit", []PodStats{{Pod: containerLimit, Usage: &PodUsage{EphemeralStorage: *q("50Mi"),
			Containers: []ContainerUsage{{Name: "a", EphemeralStorage: q("150Mi")}}}}},
			[]Eviction{{Name: "default/container-limit", Signal: SignalContainerEphemeralLimit, GracePeriod: ImmediateGracePeriod,
				Message: `Container a exceeded its local ephemeral storage limit "100Mi". `}}},
		{"P critical pod and pod without stats are never evicted", []PodStats{
			{Pod: critical, Usage: &PodUsage{Volumes: map[string]resource.Quantity{"scratch": *q("1Gi")}}},
			{Pod: podLimit}}, nil},
		{"P several pods in one round", []PodStats{
			{Pod: podLimit, Usage: &PodUsage{EphemeralStorage: *q("1Gi")}},
			{Pod: containerLimit, Usage: &PodUsage{Containers: []ContainerUsage{{Name: "a", EphemeralStorage: q("1Gi")}}}}},
			[]Eviction{
				{Name: "default/pod-limit", Signal: SignalPodEphemeralLimit, GracePeriod: ImmediateGracePeriod,
					Message: "Pod ephemeral local storage usage exceeds the total limit of containers 300Mi. "},
				{Name: "default/container-limit", Signal: SignalContainerEphemeralLimit, GracePeriod: ImmediateGracePeriod,
					Message: `Container a exceeded its local ephemeral storage limit "100Mi". `}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LocalStorageEvictions(tt.pods, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d evictions %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Name != w.Name || g.Signal != w.Signal || g.GracePeriod != w.GracePeriod || g.Message != w.Message {
					t.Errorf("[%d] = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
