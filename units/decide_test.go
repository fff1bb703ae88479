package units

import (
	"slices"
	"strings"
	"testing"
)

func TestDecideExisting(t *testing.T) {
	st := func(name, active, desc string) existingUnit {
		return existingUnit{name: name, status: UnitStatus{Name: name, Description: desc, LoadState: "loaded", ActiveState: active}}
	}
	tests := []struct {
		name     string
		found    []existingUnit
		adopt    bool
		reset    []string
		conflict string // substring
	}{
		{"gone meanwhile", nil, false, nil, ""},
		{"active and ours", []existingUnit{st("a.timer", "active", "mine")}, true, nil, ""},
		{"reloading and ours", []existingUnit{st("a.timer", "reloading", "mine")}, true, nil, ""},
		{"active, not ours", []existingUnit{st("a.timer", "active", "theirs")}, false, nil, `exists with description "theirs", not "mine"`},
		{"failed", []existingUnit{st("a.timer", "failed", "theirs")}, false, []string{"a.timer"}, ""},
		{"inactive", []existingUnit{st("a.timer", "inactive", "mine")}, false, []string{"a.timer"}, ""},
		{"activating", []existingUnit{st("a.timer", "activating", "mine")}, false, nil, `"a.timer" exists and is activating`},
		{"deactivating", []existingUnit{st("a.timer", "deactivating", "mine")}, false, nil, "is deactivating"},
		{"aux failed only", []existingUnit{st("a.service", "failed", "x")}, false, []string{"a.service"}, ""},
		{"both stale", []existingUnit{st("a.timer", "failed", "mine"), st("a.service", "inactive", "x")}, false, []string{"a.timer", "a.service"}, ""},
		{"aux running", []existingUnit{st("a.timer", "failed", "mine"), st("a.service", "active", "x")}, false, nil, `"a.service" exists and is active`},
		{"main ours, aux running", []existingUnit{st("a.timer", "active", "mine"), st("a.service", "active", "x")}, true, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideExisting("a.timer", "mine", tt.found)
			if d.adopt != tt.adopt || !slices.Equal(d.reset, tt.reset) {
				t.Errorf("decision = %+v, want adopt=%v reset=%v", d, tt.adopt, tt.reset)
			}
			if (tt.conflict == "") != (d.conflict == "") || !strings.Contains(d.conflict, tt.conflict) {
				t.Errorf("conflict = %q, want %q", d.conflict, tt.conflict)
			}
		})
	}
}

// TestDecideExistingKubeletSlice: a slice the kubelet created (its systemd cgroup driver's
// Description) is adopted, a timer with that Description or another slice's is not.
func TestDecideExistingKubeletSlice(t *testing.T) {
	const slice = "kubepods-besteffort-pod0123.slice"
	st := func(name, desc string) []existingUnit {
		return []existingUnit{{name: name, status: UnitStatus{Name: name, Description: desc, LoadState: "loaded", ActiveState: "active"}}}
	}
	tests := []struct {
		name, unit, desc string
		adopt            bool
	}{
		{"the kubelet's pod slice", slice, "libcontainer container " + slice, true},
		{"another slice's description", slice, "libcontainer container kubepods.slice", false},
		{"not a slice", "a.timer", "libcontainer container a.timer", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideExisting(tt.unit, "pod default/web (BestEffort)", st(tt.unit, tt.desc))
			if d.adopt != tt.adopt || d.adopt == (d.conflict != "") {
				t.Errorf("decision = %+v, want adopt=%v", d, tt.adopt)
			}
		})
	}
}
