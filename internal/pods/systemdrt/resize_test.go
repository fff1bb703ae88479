package systemdrt

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

// TestResizeSetsTheUnitsProperties: an in-place resize sets the run's cgroup properties on
// its unit; the run goes on (no new unit).
func TestResizeSetsTheUnitsProperties(t *testing.T) {
	rt, sd := newTestRuntime(t, units.ModeUnified)
	pod := testPod("rz-1", "", cmd("a", "1"))
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	mustSync(t, rt, pod)
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
	mustSync(t, rt, resized)
	unit, _ := UnitName("rz-1", "a", 1)
	u, ok := sd.Unit(unit)
	if !ok {
		t.Fatalf("unit %s gone", unit)
	}
	if got := u.Props["MemoryMax"]; got != uint64(128<<20) {
		t.Errorf("MemoryMax = %v, want %d", got, 128<<20)
	}
	if got := starts(sd); len(got) != 1 {
		t.Errorf("units started %v, want the one run", got)
	}
}
