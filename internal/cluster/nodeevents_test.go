package cluster

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestConditionEvents(t *testing.T) {
	conds := func(mem, ready v1.ConditionStatus) []v1.NodeCondition {
		return []v1.NodeCondition{
			{Type: v1.NodeMemoryPressure, Status: mem},
			{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse},
			{Type: v1.NodePIDPressure, Status: v1.ConditionFalse},
			{Type: v1.NodeReady, Status: ready},
			{Type: "APIPodStoreProblem", Status: v1.ConditionFalse},
		}
	}
	seen := map[v1.NodeConditionType]v1.ConditionStatus{}
	for _, step := range []struct {
		name  string
		conds []v1.NodeCondition
		want  []string
	}{
		{"first status: every kubelet condition, none of slicelet's own", conds(v1.ConditionFalse, v1.ConditionTrue),
			[]string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
		{"unchanged: none", conds(v1.ConditionFalse, v1.ConditionTrue), nil},
		{"memory pressure", conds(v1.ConditionTrue, v1.ConditionTrue), []string{"NodeHasInsufficientMemory"}},
		{"not ready and the pressure gone", conds(v1.ConditionFalse, v1.ConditionFalse), []string{"NodeHasSufficientMemory", "NodeNotReady"}},
		{"ready unknown is still not ready, an event for the change", conds(v1.ConditionFalse, v1.ConditionUnknown), []string{"NodeNotReady"}},
	} {
		if got := ConditionEvents(seen, step.conds); !slices.Equal(got, step.want) {
			t.Errorf("%s: %v, want %v", step.name, got, step.want)
		}
	}
}
