package eviction

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func sortItems(res v1.ResourceName, stats []PodStats, cmps ...cmpFunc) []string {
	items := makeRankItems(res, stats, nil)
	orderedBy(items, cmps...)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.pod.Name
	}
	return out
}

// TestOrderedBy is the kubelet's TestOrderedBy* cases (pkg/kubelet/eviction/helpers_test.go),
// each comparator chain as upstream.
func TestOrderedBy(t *testing.T) {
	none := newResourceList("", "", "")
	vol := emptyDirVolume("local-volume")

	// TestOrderedByExceedsRequestMemory
	below := newPod("below-requests", -1, []v1.Container{newContainer("below-requests", newResourceList("", "200Mi", ""), none)}, nil)
	exceeds := newPod("exceeds-requests", 1, []v1.Container{newContainer("exceeds-requests", newResourceList("", "100Mi", ""), none)}, nil)
	// TestOrderedByExceedsRequestDisk
	belowDisk := newPod("below-requests", -1, []v1.Container{newContainer("below-requests", newResourceList("", "", "200Mi"), none)}, nil)
	exceedsDisk := newPod("exceeds-requests", 1, []v1.Container{newContainer("exceeds-requests", newResourceList("", "", "100Mi"), none)}, nil)
	// TestOrderedByPriority
	low := newPod("low-priority", -134, []v1.Container{newContainer("low-priority", none, none)}, nil)
	medium := newPod("medium-priority", 1, []v1.Container{newContainer("medium-priority", newResourceList("100m", "100Mi", ""), newResourceList("200m", "200Mi", ""))}, nil)
	high := newPod("high-priority", 12534, []v1.Container{newContainer("high-priority", newResourceList("200m", "200Mi", ""), newResourceList("200m", "200Mi", ""))}, nil)

	// TestOrderedbyDisk
	diskPod := func(name, req, lim string) *v1.Pod {
		return newPod(name, defaultPriority, []v1.Container{newContainer(name, newResourceList("", "", req), newResourceList("", "", lim))}, vol)
	}
	d1, d2 := diskPod("best-effort-high", "", ""), diskPod("best-effort-low", "", "")
	d3, d4 := diskPod("burstable-high", "100Mi", "400Mi"), diskPod("burstable-low", "100Mi", "400Mi")
	d5, d6 := diskPod("guaranteed-high", "400Mi", "400Mi"), diskPod("guaranteed-low", "400Mi", "400Mi")

	// TestOrderedByPriorityDisk and TestOrderedByPriorityMemory share names and shapes.
	prioPods := func(res func(string) v1.ResourceList, volumes []v1.Volume) []*v1.Pod {
		spec := []struct {
			name string
			prio int32
			req  string
		}{
			{"above-requests-low-priority-high-usage", lowPriority, ""},
			{"above-requests-low-priority-low-usage", lowPriority, ""},
			{"above-requests-high-priority-high-usage", highPriority, "100Mi"},
			{"above-requests-high-priority-low-usage", highPriority, "100Mi"},
			{"below-requests-low-priority-high-usage", lowPriority, "1Gi"},
			{"below-requests-low-priority-low-usage", lowPriority, "1Gi"},
			{"below-requests-high-priority-high-usage", highPriority, "1Gi"},
			{"below-requests-high-priority-low-usage", highPriority, "1Gi"},
		}
		var out []*v1.Pod
		for _, s := range spec {
			out = append(out, newPod(s.name, s.prio, []v1.Container{newContainer(s.name, res(s.req), none)}, volumes))
		}
		return out
	}
	pd := prioPods(func(r string) v1.ResourceList { return newResourceList("", "", r) }, vol)
	pm := prioPods(func(r string) v1.ResourceList { return newResourceList("", r, "") }, nil)

	// TestOrderedByPriorityInodes / TestOrderedbyInodes
	inodePod := func(name string, prio int32) *v1.Pod {
		return newPod(name, prio, []v1.Container{newContainer(name, none, none)}, vol)
	}
	iLow, iMed, iHigh := inodePod("low", defaultPriority), inodePod("medium", defaultPriority), inodePod("high", defaultPriority)
	pi1, pi2 := inodePod("low-priority-high-usage", lowPriority), inodePod("low-priority-low-usage", lowPriority)
	pi3, pi4 := inodePod("high-priority-high-usage", highPriority), inodePod("high-priority-low-usage", highPriority)

	// TestOrderedByMemory
	memPod := func(name, req, lim string) *v1.Pod {
		return newPod(name, defaultPriority, []v1.Container{newContainer(name, newResourceList("", req, ""), newResourceList("", lim, ""))}, nil)
	}
	m1, m2 := memPod("best-effort-high", "", ""), memPod("best-effort-low", "", "")
	m3, m4 := memPod("burstable-high", "100Mi", "1Gi"), memPod("burstable-low", "100Mi", "1Gi")
	m5, m6 := memPod("guaranteed-high", "1Gi", "1Gi"), memPod("guaranteed-low", "1Gi", "1Gi")

	// TestOrderedByPriorityProcess
	pp1, pp2 := newPod("low-priority-high-usage", lowPriority, nil, nil), newPod("low-priority-low-usage", lowPriority, nil, nil)
	pp3, pp4 := newPod("high-priority-high-usage", highPriority, nil, nil), newPod("high-priority-low-usage", highPriority, nil, nil)

	tests := []struct {
		name  string
		res   v1.ResourceName
		stats []PodStats
		cmps  []cmpFunc
		want  []*v1.Pod
	}{
		{name: "H TestOrderedByExceedsRequestMemory", res: v1.ResourceMemory,
			stats: []PodStats{memStats(below, "199Mi"), memStats(exceeds, "101Mi")},
			cmps:  []cmpFunc{exceedRequests}, want: []*v1.Pod{exceeds, below}},
		{name: "H TestOrderedByExceedsRequestDisk", res: v1.ResourceEphemeralStorage,
			stats: []PodStats{diskStats(belowDisk, "100Mi", "99Mi", "0"), diskStats(exceedsDisk, "90Mi", "11Mi", "0")},
			cmps:  []cmpFunc{exceedRequests}, want: []*v1.Pod{exceedsDisk, belowDisk}},
		{name: "H TestOrderedByPriority", res: v1.ResourceMemory,
			stats: []PodStats{{Pod: high}, {Pod: medium}, {Pod: low}},
			cmps:  []cmpFunc{byPriority}, want: []*v1.Pod{low, medium, high}},
		{name: "H TestOrderedbyDisk", res: v1.ResourceEphemeralStorage,
			stats: []PodStats{
				diskStats(d1, "50Mi", "100Mi", "150Mi"), diskStats(d2, "25Mi", "25Mi", "50Mi"),
				diskStats(d3, "150Mi", "150Mi", "50Mi"), diskStats(d4, "25Mi", "35Mi", "50Mi"),
				diskStats(d5, "225Mi", "100Mi", "50Mi"), diskStats(d6, "25Mi", "45Mi", "50Mi")},
			cmps: []cmpFunc{byUsageOverRequest}, want: []*v1.Pod{d1, d3, d2, d4, d5, d6}},
		{name: "H TestOrderedbyInodes", res: ResourceInodes,
			stats: []PodStats{inodeStats(iLow, 50000, 100000, 50000), inodeStats(iMed, 100000, 150000, 50000), inodeStats(iHigh, 200000, 150000, 50000)},
			cmps:  []cmpFunc{byUsageOverRequest}, want: []*v1.Pod{iHigh, iMed, iLow}},
		{name: "H TestOrderedByPriorityDisk", res: v1.ResourceEphemeralStorage,
			stats: []PodStats{
				diskStats(pd[7], "100Mi", "60Mi", "40Mi"), diskStats(pd[6], "250Mi", "500Mi", "50Mi"),
				diskStats(pd[5], "50Mi", "100Mi", "50Mi"), diskStats(pd[4], "500Mi", "200Mi", "100Mi"),
				diskStats(pd[3], "90Mi", "50Mi", "10Mi"), diskStats(pd[2], "200Mi", "150Mi", "250Mi"),
				diskStats(pd[1], "10Mi", "10Mi", "30Mi"), diskStats(pd[0], "200Mi", "100Mi", "200Mi")},
			cmps: []cmpFunc{exceedRequests, byPriority, byUsageOverRequest}, want: pd},
		{name: "H TestOrderedByPriorityInodes", res: ResourceInodes,
			stats: []PodStats{inodeStats(pi4, 10000, 40000, 100000), inodeStats(pi3, 150000, 150000, 50000),
				inodeStats(pi2, 60000, 30000, 10000), inodeStats(pi1, 50000, 100000, 250000)},
			cmps: []cmpFunc{byPriority, byUsageOverRequest}, want: []*v1.Pod{pi1, pi2, pi3, pi4}},
		{name: "H TestOrderedByMemory", res: v1.ResourceMemory,
			stats: []PodStats{memStats(m1, "500Mi"), memStats(m2, "300Mi"), memStats(m3, "800Mi"),
				memStats(m4, "300Mi"), memStats(m5, "800Mi"), memStats(m6, "200Mi")},
			cmps: []cmpFunc{byUsageOverRequest}, want: []*v1.Pod{m3, m1, m2, m4, m5, m6}},
		{name: "H TestOrderedByPriorityMemory", res: v1.ResourceMemory,
			stats: []PodStats{
				memStats(pm[7], "200Mi"), memStats(pm[6], "800Mi"), memStats(pm[5], "200Mi"), memStats(pm[4], "800Mi"),
				memStats(pm[3], "150Mi"), memStats(pm[2], "600Mi"), memStats(pm[1], "50Mi"), memStats(pm[0], "500Mi")},
			cmps: []cmpFunc{exceedRequests, byPriority, byUsageOverRequest}, want: pm},
		{name: "H TestOrderedByPriorityProcess", res: ResourcePIDs,
			stats: []PodStats{procStats(pp4, 5), procStats(pp3, 20), procStats(pp2, 6), procStats(pp1, 20)},
			cmps:  []cmpFunc{byPriority, byProcesses}, want: []*v1.Pod{pp1, pp2, pp3, pp4}},
		{name: "H no stats sort first under memory", res: v1.ResourceMemory,
			stats: []PodStats{memStats(m5, "800Mi"), {Pod: m6}},
			cmps:  []cmpFunc{exceedRequests, byPriority, byUsageOverRequest}, want: []*v1.Pod{m6, m5}},
		{name: "H ties keep input order (stable sort)", res: v1.ResourceMemory,
			stats: []PodStats{memStats(m2, "300Mi"), memStats(m1, "300Mi")},
			cmps:  []cmpFunc{exceedRequests, byPriority, byUsageOverRequest}, want: []*v1.Pod{m2, m1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sortItems(tt.res, tt.stats, tt.cmps...)
			if want := names(tt.want); !slices.Equal(got, want) {
				t.Errorf("order\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestRank checks the full rank functions per signal, with the reason for each place and
// priority class resolution.
func TestRank(t *testing.T) {
	none := newResourceList("", "", "")
	be := newPod("best-effort", defaultPriority, []v1.Container{newContainer("c", none, none)}, nil)
	burst := newPod("burstable", defaultPriority, []v1.Container{newContainer("c", newResourceList("", "100Mi", "100Mi"), none)}, nil)
	guar := newPod("guaranteed", defaultPriority, []v1.Container{newContainer("c", newResourceList("100m", "1Gi", ""), newResourceList("100m", "1Gi", ""))}, nil)
	critical := newPod("node-critical", 0, []v1.Container{newContainer("c", none, none)}, nil)
	critical.Spec.Priority = nil
	critical.Spec.PriorityClassName = "system-node-critical"
	batch := newPod("batch", 0, []v1.Container{newContainer("c", none, none)}, nil)
	batch.Spec.Priority = nil
	batch.Spec.PriorityClassName = "batch-low"
	classes := map[string]int32{"batch-low": -10}
	stats := []PodStats{
		memStats(guar, "900Mi"),
		{Pod: burst, Usage: &PodUsage{Memory: *q("300Mi"), Processes: 30, EphemeralStorage: *q("300Mi")}},
		{Pod: be, Usage: &PodUsage{Memory: *q("50Mi"), Processes: 3, EphemeralStorage: *q("10Mi")}},
		{Pod: critical, Usage: &PodUsage{Memory: *q("2Gi"), Processes: 100}},
		{Pod: batch},
	}
	type row struct{ name, reason string }
	tests := []struct {
		name   string
		signal Signal
		want   []row
	}{
		{"memory.available", SignalMemoryAvailable, []row{
			{"batch", "no stats; priority -10"},
			{"burstable", "working set 300Mi exceeds memory request 100Mi; priority 0; usage above request by 200Mi"},
			{"best-effort", "working set 50Mi exceeds memory request 0; priority 0; usage above request by 50Mi"},
			{"node-critical", "working set 2Gi exceeds memory request 0; priority 2000001000; usage above request by 2Gi; critical: never evicted"},
			{"guaranteed", "working set 900Mi within memory request 1Gi; priority 0; usage below request by 124Mi"},
		}},
		{"pid.available", SignalPIDAvailable, []row{
			{"batch", "priority -10; no stats"},
			{"burstable", "priority 0; 30 processes"},
			{"best-effort", "priority 0; 3 processes"},
			{"guaranteed", "priority 0; 0 processes"},
			{"node-critical", "priority 2000001000; 100 processes; critical: never evicted"},
		}},
		{"nodefs.available", SignalNodeFsAvailable, []row{
			{"batch", "no stats; priority -10"},
			{"burstable", "ephemeral-storage usage 300Mi exceeds request 100Mi; priority 0; usage above request by 200Mi"},
			{"best-effort", "ephemeral-storage usage 10Mi exceeds request 0; priority 0; usage above request by 10Mi"},
			{"guaranteed", "ephemeral-storage usage 0 within request 0; priority 0; usage equal to request"},
			{"node-critical", "ephemeral-storage usage 0 within request 0; priority 2000001000; usage equal to request; critical: never evicted"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Rank(tt.signal, stats, classes)
			if !ok {
				t.Fatal("no rank function")
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d candidates, want %d", len(got), len(tt.want))
			}
			for i, c := range got {
				if c.Pod.Name != tt.want[i].name || c.Reason != tt.want[i].reason {
					t.Errorf("[%d] = %s (%q), want %s (%q)", i, c.Pod.Name, c.Reason, tt.want[i].name, tt.want[i].reason)
				}
			}
		})
	}
	if _, ok := Rank("made.up", stats, nil); ok {
		t.Error("Rank accepted an unknown signal")
	}
}

// TestPodPriority covers spec.priority, the built-in classes and configured classes.
func TestPodPriority(t *testing.T) {
	withClass := func(name string) *v1.Pod {
		p := newPod("p", 0, nil, nil)
		p.Spec.Priority = nil
		p.Spec.PriorityClassName = name
		return p
	}
	classes := map[string]int32{"high": 1000, "huge": 2_000_000_000}
	tests := []struct {
		name     string
		pod      *v1.Pod
		want     int32
		critical bool
	}{
		{"spec.priority wins", newPod("p", 7, nil, nil), 7, false},
		{"no priority", withClass(""), 0, false},
		{"system-node-critical", withClass("system-node-critical"), 2000001000, true},
		{"system-cluster-critical", withClass("system-cluster-critical"), 2000000000, true},
		{"configured class", withClass("high"), 1000, false},
		{"configured class at the critical bound", withClass("huge"), 2000000000, true},
		{"unknown class", withClass("nope"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodPriority(tt.pod, classes); got != tt.want {
				t.Errorf("PodPriority = %d, want %d", got, tt.want)
			}
			if got := IsCritical(tt.pod, classes); got != tt.critical {
				t.Errorf("IsCritical = %v, want %v", got, tt.critical)
			}
		})
	}
}
