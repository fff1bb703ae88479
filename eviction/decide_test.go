package eviction

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// step is one synchronize of a fake-clock scenario: advance the clock, observe, decide.
type step struct {
	name      string
	advance   time.Duration
	available string // memory.available; capacity is 10Gi
	pressure  bool   // MemoryPressure expected
	evict     string // pod expected to be evicted, "" for none
	grace     time.Duration
	message   string // expected message when evict != ""
}

func runMemoryScenario(t *testing.T, cfg Config, pods []PodStats, steps []step) {
	t.Helper()
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	var state State
	for i, s := range steps {
		now = now.Add(s.advance)
		obs := Observations{SignalMemoryAvailable: {Available: resource.MustParse(s.available), Capacity: resource.MustParse("10Gi"), Time: now}}
		var d Decision
		d, state = Decide(state, cfg, obs, pods, now)
		prefix := fmt.Sprintf("step %d (%s)", i, s.name)
		if got := HasCondition(d.NodeConditions, v1.NodeMemoryPressure); got != s.pressure {
			t.Errorf("%s: MemoryPressure = %v, want %v", prefix, got, s.pressure)
		}
		if !slices.Equal(d.NodeConditions, state.NodeConditions) {
			t.Errorf("%s: decision conditions %v, state %v", prefix, d.NodeConditions, state.NodeConditions)
		}
		switch {
		case s.evict == "" && d.Evict != nil:
			t.Errorf("%s: evicted %s, want no eviction", prefix, d.Evict.Name)
		case s.evict != "" && d.Evict == nil:
			t.Errorf("%s: no eviction, want %s", prefix, s.evict)
		case s.evict != "":
			if d.Evict.Pod.Name != s.evict {
				t.Errorf("%s: evicted %s, want %s", prefix, d.Evict.Pod.Name, s.evict)
			}
			if d.Evict.GracePeriod != s.grace {
				t.Errorf("%s: grace %v, want %v", prefix, d.Evict.GracePeriod, s.grace)
			}
			if s.message != "" && d.Evict.Message != s.message {
				t.Errorf("%s: message\n got %q\nwant %q", prefix, d.Evict.Message, s.message)
			}
			if d.Reclaim != v1.ResourceMemory || len(d.NodeReclaim) != 0 {
				t.Errorf("%s: reclaim %q with %v, want memory without node-level reclaim", prefix, d.Reclaim, d.NodeReclaim)
			}
		}
	}
}

// memoryPressurePods are the pods of the kubelet's TestMemoryPressure.
func memoryPressurePods() []PodStats {
	pod := func(name string, prio int32, req, lim v1.ResourceList, ws string) PodStats {
		return memStats(newPod(name, prio, []v1.Container{newContainer(name, req, lim)}, nil), ws)
	}
	return []PodStats{
		pod("guaranteed-low-priority-high-usage", lowPriority, newResourceList("100m", "1Gi", ""), newResourceList("100m", "1Gi", ""), "900Mi"),
		pod("burstable-below-requests", defaultPriority, newResourceList("100m", "100Mi", ""), newResourceList("200m", "1Gi", ""), "50Mi"),
		pod("burstable-above-requests", defaultPriority, newResourceList("100m", "100Mi", ""), newResourceList("200m", "1Gi", ""), "400Mi"),
		pod("best-effort-high-priority-high-usage", highPriority, newResourceList("", "", ""), newResourceList("", "", ""), "400Mi"),
		pod("best-effort-low-priority-low-usage", lowPriority, newResourceList("", "", ""), newResourceList("", "", ""), "100Mi"),
	}
}

// TestMemoryPressure is the kubelet's TestMemoryPressure (eviction_manager_test.go) as a
// G-style fake-clock scenario: a soft threshold with a grace period sets MemoryPressure at
// once but evicts only after the grace period, with MaxPodGracePeriod; a hard threshold
// evicts at once with 1 s; the condition stays true for the transition period after the
// pressure is gone.
func TestMemoryPressure(t *testing.T) {
	cfg := Config{
		MaxPodGracePeriod:        5 * time.Second,
		PressureTransitionPeriod: 5 * time.Minute,
		Thresholds: []Threshold{
			{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}},
			{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("2Gi")}, GracePeriod: 2 * time.Minute},
		},
	}
	victim := "best-effort-low-priority-low-usage"
	runMemoryScenario(t, cfg, memoryPressurePods(), []step{
		{name: "no pressure", available: "2Gi"},
		{name: "soft threshold met: condition at once, no eviction yet", advance: time.Minute, available: "1500Mi", pressure: true},
		{name: "grace period passed: soft eviction", advance: 3 * time.Minute, available: "1500Mi", pressure: true, evict: victim, grace: 5 * time.Second,
			message: "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. "},
		{name: "pressure gone long ago", advance: 20 * time.Minute, available: "3Gi"},
		{name: "hard threshold: immediate eviction", advance: time.Minute, available: "500Mi", pressure: true, evict: victim, grace: time.Second,
			message: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. "},
		{name: "relief within the transition period keeps the condition", advance: time.Minute, available: "2Gi", pressure: true},
		{name: "transition period over", advance: 5 * time.Minute, available: "3Gi"},
	})
}

// TestMinReclaim is the kubelet's TestMinReclaim: once a threshold with a minimum reclaim
// fires, it stays met until available >= threshold + minimum reclaim.
func TestMinReclaim(t *testing.T) {
	cfg := Config{
		PressureTransitionPeriod: 5 * time.Minute,
		Thresholds: []Threshold{{Signal: SignalMemoryAvailable, Operator: OpLessThan,
			Value: ThresholdValue{Quantity: q("1Gi")}, MinReclaim: &ThresholdValue{Quantity: q("500Mi")}}},
	}
	victim := "best-effort-low-priority-low-usage"
	runMemoryScenario(t, cfg, memoryPressurePods(), []step{
		{name: "no pressure", available: "2Gi"},
		{name: "pressure: evict", advance: time.Minute, available: "500Mi", pressure: true, evict: victim, grace: time.Second},
		{name: "above threshold, below threshold+minReclaim: evict again", advance: time.Minute, available: "1.2Gi", pressure: true, evict: victim, grace: time.Second},
		{name: "reclaimed: condition stays for the transition period", advance: time.Minute, available: "2Gi", pressure: true},
		{name: "transition period over", advance: 5 * time.Minute, available: "2Gi"},
	})
}

// TestDecide covers the other branches of one step.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	none := newResourceList("", "", "")
	critical := newPod("critical", 0, []v1.Container{newContainer("c", none, none)}, nil)
	critical.Spec.Priority = nil
	critical.Spec.PriorityClassName = "system-node-critical"
	normal := newPod("normal", 0, []v1.Container{newContainer("c", newResourceList("", "100Mi", "100Mi"), none)}, nil)
	limited := newPod("limited", 0, []v1.Container{newContainer("c", none, newResourceList("", "", "10Mi"))}, nil)
	hardMem := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("100Mi")}}
	hardFs := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	hardPID := Threshold{Signal: SignalPIDAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("100")}}
	memLow := Observation{Available: *q("50Mi"), Capacity: *q("1Gi"), Time: now}
	fsLow := Observation{Available: *q("5Gi"), Capacity: *q("100Gi"), Time: now}

	tests := []struct {
		name          string
		cfg           Config
		state         State
		obs           Observations
		pods          []PodStats
		wantConds     []v1.NodeConditionType
		wantReclaim   v1.ResourceName
		wantSteps     []ReclaimStep
		wantEvict     string
		wantLocal     int
		wantUnobs     []Signal
		wantRankFirst string
	}{
		{name: "critical pod ranked first is skipped", cfg: Config{Thresholds: []Threshold{hardMem}},
			obs:       Observations{SignalMemoryAvailable: memLow},
			pods:      []PodStats{memStats(critical, "900Mi"), memStats(normal, "50Mi")},
			wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}, wantReclaim: v1.ResourceMemory,
			wantRankFirst: "critical", wantEvict: "normal"},
		{name: "only critical pods: nothing to evict", cfg: Config{Thresholds: []Threshold{hardMem}},
			obs: Observations{SignalMemoryAvailable: memLow}, pods: []PodStats{memStats(critical, "900Mi")},
			wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}, wantReclaim: v1.ResourceMemory, wantRankFirst: "critical"},
		{name: "disk pressure: container GC then image GC first", cfg: Config{Thresholds: []Threshold{hardFs}},
			obs: Observations{SignalNodeFsAvailable: fsLow}, pods: []PodStats{{Pod: normal, Usage: &PodUsage{EphemeralStorage: *q("1Gi")}}},
			wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}, wantReclaim: v1.ResourceEphemeralStorage,
			wantSteps: []ReclaimStep{ReclaimContainers, ReclaimImages}, wantEvict: "normal", wantRankFirst: "normal"},
		{name: "memory acted on before disk and pids", cfg: Config{Thresholds: []Threshold{hardPID, hardFs, hardMem}},
			obs: Observations{SignalNodeFsAvailable: fsLow, SignalMemoryAvailable: memLow,
				SignalPIDAvailable: {Available: *q("10"), Capacity: *q("32768"), Time: now}},
			pods:        []PodStats{memStats(normal, "50Mi")},
			wantConds:   []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure},
			wantReclaim: v1.ResourceMemory, wantEvict: "normal", wantRankFirst: "normal"},
		{name: "unobserved signal is reported, not met", cfg: Config{Thresholds: []Threshold{hardMem, hardFs}},
			obs:       Observations{SignalMemoryAvailable: {Available: *q("1Gi"), Capacity: *q("2Gi"), Time: now}},
			wantUnobs: []Signal{SignalNodeFsAvailable}},
		{name: "stale observation: conditions set, no action", cfg: Config{Thresholds: []Threshold{hardMem}},
			state: State{LastObservations: Observations{SignalMemoryAvailable: {Time: now}}},
			obs:   Observations{SignalMemoryAvailable: memLow}, pods: []PodStats{memStats(normal, "50Mi")},
			wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		{name: "local-storage limit eviction wins over thresholds",
			cfg: Config{Thresholds: []Threshold{hardMem}, LocalStorageCapacityIsolation: true},
			obs: Observations{SignalMemoryAvailable: memLow},
			pods: []PodStats{memStats(normal, "50Mi"),
				{Pod: limited, Usage: &PodUsage{EphemeralStorage: *q("20Mi")}}},
			wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}, wantLocal: 1},
		{name: "no thresholds and no isolation: nothing", cfg: Config{},
			state: State{NodeConditions: []v1.NodeConditionType{v1.NodeDiskPressure}},
			obs:   Observations{SignalMemoryAvailable: memLow}, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
		{name: "threshold met, no pods: resource but no ranking", cfg: Config{Thresholds: []Threshold{hardMem}},
			obs: Observations{SignalMemoryAvailable: memLow}, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure},
			wantReclaim: v1.ResourceMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, next := Decide(tt.state, tt.cfg, tt.obs, tt.pods, now)
			if !slices.Equal(d.NodeConditions, tt.wantConds) && (len(d.NodeConditions) != 0 || len(tt.wantConds) != 0) {
				t.Errorf("conditions %v, want %v", d.NodeConditions, tt.wantConds)
			}
			if d.Reclaim != tt.wantReclaim {
				t.Errorf("reclaim %q, want %q", d.Reclaim, tt.wantReclaim)
			}
			if !slices.Equal(d.NodeReclaim, tt.wantSteps) {
				t.Errorf("node reclaim %v, want %v", d.NodeReclaim, tt.wantSteps)
			}
			if !slices.Equal(d.Unobserved, tt.wantUnobs) {
				t.Errorf("unobserved %v, want %v", d.Unobserved, tt.wantUnobs)
			}
			if len(d.LocalStorage) != tt.wantLocal {
				t.Errorf("local storage evictions %v, want %d", d.LocalStorage, tt.wantLocal)
			}
			gotEvict := ""
			if d.Evict != nil {
				gotEvict = d.Evict.Pod.Name
			}
			if gotEvict != tt.wantEvict {
				t.Errorf("evict %q, want %q", gotEvict, tt.wantEvict)
			}
			gotFirst := ""
			if len(d.Ranking) > 0 {
				gotFirst = d.Ranking[0].Pod.Name
			}
			if gotFirst != tt.wantRankFirst {
				t.Errorf("first ranked %q, want %q", gotFirst, tt.wantRankFirst)
			}
			if next.LastObservations == nil && len(tt.cfg.Thresholds) > 0 {
				t.Error("next state has no last observations")
			}
		})
	}
}

// TestDecideDoesNotModifyState checks Decide is pure: the state given stays as it was.
func TestDecideDoesNotModifyState(t *testing.T) {
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	old := now.Add(-time.Minute)
	state := State{
		ThresholdsMet:            []Threshold{hard},
		FirstObservedAt:          []ObservedThreshold{{hard, old}},
		ConditionsLastObservedAt: map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: old},
		LastObservations:         Observations{SignalMemoryAvailable: {Time: old}},
		NodeConditions:           []v1.NodeConditionType{v1.NodeMemoryPressure},
	}
	obs := Observations{SignalMemoryAvailable: {Available: *q("2Gi"), Capacity: *q("8Gi"), Time: now}}
	Decide(state, Config{Thresholds: []Threshold{hard}}, obs, nil, now)
	if !state.ConditionsLastObservedAt[v1.NodeMemoryPressure].Equal(old) || !state.LastObservations[SignalMemoryAvailable].Time.Equal(old) ||
		len(state.FirstObservedAt) != 1 || len(state.NodeConditions) != 1 {
		t.Errorf("state was modified: %+v", state)
	}
}

// TestReclaimedEnough: node-level reclaim suffices only when no threshold is met with its
// minimum reclaim added.
func TestReclaimedEnough(t *testing.T) {
	cfg := Config{Thresholds: []Threshold{{Signal: SignalNodeFsAvailable, Operator: OpLessThan,
		Value: ThresholdValue{Quantity: q("10Gi")}, MinReclaim: &ThresholdValue{Quantity: q("5Gi")}}}}
	tests := []struct {
		name      string
		available string
		want      bool
	}{
		{"still below the threshold", "9Gi", false},
		{"above the threshold, below threshold+minReclaim", "12Gi", false},
		{"at threshold+minReclaim", "15Gi", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := Observations{SignalNodeFsAvailable: {Available: *q(tt.available), Capacity: *q("100Gi")}}
			if got := ReclaimedEnough(cfg, obs); got != tt.want {
				t.Errorf("ReclaimedEnough = %v, want %v", got, tt.want)
			}
		})
	}
}

// BenchmarkDecide1000Pods is one decision under memory pressure with 1000 pods of mixed QoS
// and priority (ranking, message and state bookkeeping included).
func BenchmarkDecide1000Pods(b *testing.B) {
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	pods := make([]PodStats, 1000)
	for i := range pods {
		var req v1.ResourceList
		switch i % 3 {
		case 0:
			req = newResourceList("100m", "100Mi", "")
		case 1:
			req = newResourceList("", "", "")
		default:
			req = newResourceList("500m", "1Gi", "1Gi")
		}
		p := newPod(fmt.Sprintf("pod-%04d", i), int32(i%7), []v1.Container{newContainer("c", req, req)}, nil)
		pods[i] = PodStats{Pod: p, Usage: &PodUsage{Memory: *resource.NewQuantity(int64(i%500)<<20, resource.BinarySI), Processes: int64(i % 50),
			Containers: []ContainerUsage{{Name: "c", Memory: resource.NewQuantity(int64(i%500)<<20, resource.BinarySI)}}}}
	}
	thresholds, err := ParseThresholdConfig([]string{"pods"}, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "30s"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Thresholds: thresholds, LocalStorageCapacityIsolation: true}
	obs := Observations{
		SignalMemoryAvailable:            {Available: *q("50Mi"), Capacity: *q("64Gi"), Time: now},
		SignalAllocatableMemoryAvailable: {Available: *q("2Gi"), Capacity: *q("60Gi"), Time: now},
		SignalNodeFsAvailable:            {Available: *q("50Gi"), Capacity: *q("100Gi"), Time: now},
	}
	b.ReportAllocs()
	for b.Loop() {
		d, _ := Decide(State{}, cfg, obs, pods, now)
		if d.Evict == nil {
			b.Fatal("no eviction")
		}
	}
}

// TestPIDPressure is the kubelet's TestPIDPressure: 2000 PIDs, hard pid.available<1200, soft
// <1500 with grace 2m; rankPIDPressure picks the lowest priority, then the most processes.
func TestPIDPressure(t *testing.T) {
	cfg := Config{
		MaxPodGracePeriod:        5 * time.Second,
		PressureTransitionPeriod: 5 * time.Minute,
		Thresholds: []Threshold{
			{Signal: SignalPIDAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1200")}},
			{Signal: SignalPIDAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1500")}, GracePeriod: 2 * time.Minute},
		},
	}
	pods := []PodStats{
		procStats(newPod("high-priority-high-usage", highPriority, nil, nil), 900),
		procStats(newPod("default-priority-low-usage", defaultPriority, nil, nil), 100),
		procStats(newPod("default-priority-medium-usage", defaultPriority, nil, nil), 400),
		procStats(newPod("low-priority-high-usage", lowPriority, nil, nil), 600),
		procStats(newPod("low-priority-low-usage", lowPriority, nil, nil), 50),
	}
	victim := "low-priority-high-usage"
	steps := []struct {
		name     string
		advance  time.Duration
		used     int64
		pressure bool
		evict    string
		grace    time.Duration
	}{
		{"no pressure", 0, 300, false, "", 0},
		{"soft threshold: condition, no eviction yet", time.Minute, 700, true, "", 0},
		{"grace period passed", 3 * time.Minute, 700, true, victim, 5 * time.Second},
		{"pressure removed", 20 * time.Minute, 300, false, "", 0},
		{"hard threshold", time.Minute, 1200, true, victim, time.Second},
		{"relief within the transition period", time.Minute, 300, true, "", 0},
		{"transition period over", 5 * time.Minute, 300, false, "", 0},
	}
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	var state State
	for i, s := range steps {
		now = now.Add(s.advance)
		obs := Observations{SignalPIDAvailable: {Available: *resource.NewQuantity(2000-s.used, resource.DecimalSI), Capacity: *q("2000"), Time: now}}
		var d Decision
		d, state = Decide(state, cfg, obs, pods, now)
		if got := HasCondition(d.NodeConditions, v1.NodePIDPressure); got != s.pressure {
			t.Errorf("step %d (%s): PIDPressure = %v, want %v", i, s.name, got, s.pressure)
		}
		got := ""
		if d.Evict != nil {
			got = d.Evict.Pod.Name
			if d.Evict.GracePeriod != s.grace {
				t.Errorf("step %d (%s): grace %v, want %v", i, s.name, d.Evict.GracePeriod, s.grace)
			}
			if d.Reclaim != ResourcePIDs {
				t.Errorf("step %d (%s): reclaim %q", i, s.name, d.Reclaim)
			}
		}
		if got != s.evict {
			t.Errorf("step %d (%s): evicted %q, want %q", i, s.name, got, s.evict)
		}
	}
}
