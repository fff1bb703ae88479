package eviction_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/internal/pods/admission"
)

func pod(name string, requests v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox",
			Resources: v1.ResourceRequirements{Requests: requests, Limits: requests}}}},
	}
}

// TestSoftThresholdConditionsAndAdmission is the kubelet's TestMemoryPressure timeline
// (pkg/kubelet/eviction/eviction_manager_test.go): soft
// memory.available<2Gi with grace 2m, transition period 5m, max pod grace 0; at t0 1.5Gi
// available → MemoryPressure at t0 (conditions ignore the grace period), no eviction, a
// BestEffort pod rejected at admission, a Burstable pod admitted. It continues the timeline
// (a G-style fake clock): eviction only after the grace period, with grace 0; the condition
// false only once the transition period has passed since it was last observed.
func TestSoftThresholdConditionsAndAdmission(t *testing.T) {
	thresholds, err := eviction.ParseThresholdConfig(nil, nil,
		map[string]string{"memory.available": "2Gi"}, map[string]string{"memory.available": "2m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := eviction.Config{Thresholds: thresholds, PressureTransitionPeriod: 5 * time.Minute, MaxPodGracePeriod: 0}
	hog := pod("hog", nil)
	steady := pod("steady", v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("1")})
	pods := []eviction.PodStats{
		{Pod: steady, Usage: &eviction.PodUsage{Memory: resource.MustParse("900Mi")}},
		{Pod: hog, Usage: &eviction.PodUsage{Memory: resource.MustParse("3Gi")}},
	}
	bestEffort := pod("new-besteffort", nil)
	burstable := pod("new-burstable", v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")})
	burstable.Spec.Containers[0].Resources.Limits = nil
	allocatable := admission.WithMaxPods(v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}, 110)

	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	steps := []struct {
		name      string
		at        time.Duration
		available string
		pressure  bool
		evict     string
	}{
		{"t0: a soft threshold sets the condition at once, no eviction", 0, "1.5Gi", true, ""},
		{"t0+1m: within grace, no eviction", time.Minute, "1.5Gi", true, ""},
		{"t0+2m: grace elapsed, evict the hog", 2 * time.Minute, "1.5Gi", true, "hog"},
		{"t0+3m: relieved, condition held by the transition period", 3 * time.Minute, "4Gi", true, ""},
		{"t0+6m59s: still within 5m of the last observation (t0+2m)", 6*time.Minute + 59*time.Second, "4Gi", true, ""},
		{"t0+7m: transition period over, condition false", 7 * time.Minute, "4Gi", false, ""},
	}
	var state eviction.State
	for _, s := range steps {
		now := t0.Add(s.at)
		obs := eviction.Observations{eviction.SignalMemoryAvailable: {
			Available: resource.MustParse(s.available), Capacity: resource.MustParse("16Gi"), Time: now}}
		var d eviction.Decision
		d, state = eviction.Decide(state, cfg, obs, pods, now)
		if got := eviction.HasCondition(d.NodeConditions, v1.NodeMemoryPressure); got != s.pressure {
			t.Errorf("%s: MemoryPressure = %v, want %v", s.name, got, s.pressure)
		}
		got := ""
		if d.Evict != nil {
			got = d.Evict.Pod.Name
			if d.Evict.GracePeriod != 0 {
				t.Errorf("%s: grace %v, want MaxPodGracePeriod 0", s.name, d.Evict.GracePeriod)
			}
		}
		if got != s.evict {
			t.Errorf("%s: evicted %q, want %q", s.name, got, s.evict)
		}
		node := admission.NodeState{Allocatable: allocatable, Conditions: d.NodeConditions, OS: "linux"}
		be := admission.Admit(bestEffort, node)
		bu := admission.Admit(burstable, node)
		if be.Admit == s.pressure {
			t.Errorf("%s: BestEffort admitted = %v under pressure %v (%s)", s.name, be.Admit, s.pressure, be.Message)
		}
		if s.pressure && (be.Reason != "Evicted" || be.Message != "The node had condition: [MemoryPressure]. ") {
			t.Errorf("%s: BestEffort rejection %q %q", s.name, be.Reason, be.Message)
		}
		if !bu.Admit {
			t.Errorf("%s: Burstable rejected: %s", s.name, bu.Message)
		}
	}
}
