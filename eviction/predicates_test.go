package eviction

import (
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// thresholdSetEqual compares without regard to order, the way the kubelet's tests do
// (thresholdList.Equal: hasThreshold both ways).
func thresholdSetEqual(a, b []Threshold) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !hasThreshold(b, t) {
			return false
		}
	}
	return true
}

var (
	hardMemory1Gi = Threshold{
		Signal: SignalMemoryAvailable, Operator: OpLessThan,
		Value:      ThresholdValue{Quantity: q("1Gi")},
		MinReclaim: &ThresholdValue{Quantity: q("500Mi")},
	}
	pctMemory = Threshold{
		Signal: SignalMemoryAvailable, Operator: OpLessThan,
		Value:      ThresholdValue{Percentage: 0.2},
		MinReclaim: &ThresholdValue{Percentage: 0.05},
	}
	pctNodeFs = Threshold{
		Signal: SignalNodeFsAvailable, Operator: OpLessThan,
		Value: ThresholdValue{Percentage: 0.3},
	}
)

// TestThresholdsMet is the kubelet's TestThresholdsMet and TestPercentageThresholdsMet
// (pkg/kubelet/eviction/helpers_test.go), ported,
// plus the float32 exactness boundary of percentage thresholds (the kubelet parses them as
// float32).
func TestThresholdsMet(t *testing.T) {
	pct := []Threshold{pctMemory, pctNodeFs}
	tenPct := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	tests := []struct {
		name       string
		enforce    bool
		thresholds []Threshold
		obs        Observations
		want       []Threshold
		unobserved []Signal
	}{
		{name: "F TestThresholdsMet empty", thresholds: nil, obs: Observations{}, want: nil},
		{name: "F TestThresholdsMet threshold-met-memory", thresholds: []Threshold{hardMemory1Gi},
			obs: Observations{SignalMemoryAvailable: obsOf("500Mi", "")}, want: []Threshold{hardMemory1Gi}},
		{name: "F TestThresholdsMet threshold-not-met", thresholds: []Threshold{hardMemory1Gi},
			obs: Observations{SignalMemoryAvailable: obsOf("2Gi", "")}, want: nil},
		{name: "F TestThresholdsMet threshold-met-with-min-reclaim", enforce: true, thresholds: []Threshold{hardMemory1Gi},
			obs: Observations{SignalMemoryAvailable: obsOf("1.05Gi", "")}, want: []Threshold{hardMemory1Gi}},
		{name: "F TestThresholdsMet threshold-not-met-with-min-reclaim", enforce: true, thresholds: []Threshold{hardMemory1Gi},
			obs: Observations{SignalMemoryAvailable: obsOf("2Gi", "")}, want: nil},
		{name: "F TestPercentageThresholdsMet BothMet", thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("100Mi", "1000Mi"), SignalNodeFsAvailable: obsOf("100Gi", "1000Gi")}, want: pct},
		{name: "F TestPercentageThresholdsMet NoneMet", thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("300Mi", "1000Mi"), SignalNodeFsAvailable: obsOf("400Gi", "1000Gi")}, want: nil},
		{name: "F TestPercentageThresholdsMet DiskMet", thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("300Mi", "1000Mi"), SignalNodeFsAvailable: obsOf("100Gi", "1000Gi")}, want: []Threshold{pctNodeFs}},
		{name: "F TestPercentageThresholdsMet MemoryMet", thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("100Mi", "1000Mi"), SignalNodeFsAvailable: obsOf("400Gi", "1000Gi")}, want: []Threshold{pctMemory}},
		{name: "F TestPercentageThresholdsMet MemoryMetWithMinReclaim", enforce: true, thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("225Mi", "1000Mi")}, want: []Threshold{pctMemory}, unobserved: []Signal{SignalNodeFsAvailable}},
		{name: "F TestPercentageThresholdsMet MemoryNotMetWithMinReclaim", enforce: true, thresholds: pct, obs: Observations{
			SignalMemoryAvailable: obsOf("300Mi", "1000Mi")}, want: nil, unobserved: []Signal{SignalNodeFsAvailable}},
		{name: "F exactness: 10% of 1000Mi is 104857601, so exactly 104857600 available is met", thresholds: []Threshold{tenPct},
			obs: Observations{SignalMemoryAvailable: obsOf("104857600", "1000Mi")}, want: []Threshold{tenPct}},
		{name: "F exactness: 104857601 available is not met (strict >)", thresholds: []Threshold{tenPct},
			obs: Observations{SignalMemoryAvailable: obsOf("104857601", "1000Mi")}, want: nil},
		{name: "F quantity equal to available is not met", thresholds: []Threshold{hardMemory1Gi},
			obs: Observations{SignalMemoryAvailable: obsOf("1Gi", "")}, want: nil},
		{name: "F missing observation is skipped and reported", thresholds: []Threshold{hardMemory1Gi, pctNodeFs},
			obs: Observations{SignalMemoryAvailable: obsOf("500Mi", "")}, want: []Threshold{hardMemory1Gi}, unobserved: []Signal{SignalNodeFsAvailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unobserved := ThresholdsMet(tt.thresholds, tt.obs, tt.enforce)
			if !thresholdSetEqual(got, tt.want) {
				t.Errorf("met = %v, want %v", got, tt.want)
			}
			if !slices.Equal(unobserved, tt.unobserved) {
				t.Errorf("unobserved = %v, want %v", unobserved, tt.unobserved)
			}
		})
	}
}

// TestThresholdsUpdatedStats is the kubelet's TestThresholdsUpdatedStats.
func TestThresholdsUpdatedStats(t *testing.T) {
	th := Threshold{Signal: SignalMemoryAvailable}
	t0 := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	tests := []struct {
		name      string
		obs, last Observations
		want      []Threshold
	}{
		{"empty", Observations{}, Observations{}, nil},
		{"no-time", Observations{SignalMemoryAvailable: {}}, Observations{}, []Threshold{th}},
		{"no-last-observation", Observations{SignalMemoryAvailable: {Time: t0}}, Observations{}, []Threshold{th}},
		{"time-machine", Observations{SignalMemoryAvailable: {Time: t0}}, Observations{SignalMemoryAvailable: {Time: t1}}, nil},
		{"same-observation", Observations{SignalMemoryAvailable: {Time: t0}}, Observations{SignalMemoryAvailable: {Time: t0}}, nil},
		{"new-observation", Observations{SignalMemoryAvailable: {Time: t1}}, Observations{SignalMemoryAvailable: {Time: t0}}, []Threshold{th}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []Threshold
			if len(tt.obs) > 0 {
				in = []Threshold{th}
			}
			if got := thresholdsUpdatedStats(in, tt.obs, tt.last); !thresholdSetEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestThresholdsFirstObservedAt is the kubelet's TestThresholdsFirstObservedAt, plus the
// drop of thresholds no longer met.
func TestThresholdsFirstObservedAt(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-time.Minute)
	tests := []struct {
		name string
		met  []Threshold
		last []ObservedThreshold
		want []ObservedThreshold
	}{
		{"empty", nil, nil, []ObservedThreshold{}},
		{"no-previous-observation", []Threshold{hard}, nil, []ObservedThreshold{{hard, now}}},
		{"previous-observation", []Threshold{hard}, []ObservedThreshold{{hard, old}}, []ObservedThreshold{{hard, old}}},
		{"re-parsed threshold keeps its time", []Threshold{{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1024Mi")}}},
			[]ObservedThreshold{{hard, old}}, []ObservedThreshold{{Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1024Mi")}}, old}}},
		{"no longer met is dropped", nil, []ObservedThreshold{{hard, old}}, []ObservedThreshold{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := thresholdsFirstObservedAt(tt.met, tt.last, now)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if !sameThreshold(got[i].Threshold, tt.want[i].Threshold) || !got[i].At.Equal(tt.want[i].At) {
					t.Errorf("[%d] = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestThresholdsMetGracePeriod is the kubelet's TestThresholdsMetGracePeriod.
func TestThresholdsMetGracePeriod(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	soft := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("2Gi")}, GracePeriod: time.Minute}
	old := now.Add(-2 * time.Minute)
	tests := []struct {
		name string
		at   []ObservedThreshold
		want []Threshold
	}{
		{"empty", nil, nil},
		{"hard-threshold-met", []ObservedThreshold{{hard, now}}, []Threshold{hard}},
		{"soft-threshold-not-met", []ObservedThreshold{{soft, now}}, nil},
		{"soft-threshold-met", []ObservedThreshold{{soft, old}}, []Threshold{soft}},
		{"soft-threshold-met-exactly-at-grace", []ObservedThreshold{{soft, now.Add(-time.Minute)}}, []Threshold{soft}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := thresholdsMetGracePeriod(tt.at, now); !thresholdSetEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNodeConditions is the kubelet's TestNodeConditions plus one row per condition.
func TestNodeConditions(t *testing.T) {
	tests := []struct {
		name string
		in   []Threshold
		want []v1.NodeConditionType
	}{
		{"empty-list", nil, []v1.NodeConditionType{}},
		{"memory.available", []Threshold{{Signal: SignalMemoryAvailable}}, []v1.NodeConditionType{v1.NodeMemoryPressure}},
		{"all three, deduplicated, fixed order", []Threshold{{Signal: SignalPIDAvailable}, {Signal: SignalImageFsInodesFree},
			{Signal: SignalAllocatableMemoryAvailable}, {Signal: SignalNodeFsAvailable}, {Signal: SignalMemoryAvailable}},
			[]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeConditions(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNodeConditionsLastObservedAt is the kubelet's TestNodeConditionsLastObservedAt.
func TestNodeConditionsLastObservedAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-time.Minute)
	tests := []struct {
		name  string
		conds []v1.NodeConditionType
		last  map[v1.NodeConditionType]time.Time
		want  map[v1.NodeConditionType]time.Time
	}{
		{"no-previous-observation", []v1.NodeConditionType{v1.NodeMemoryPressure}, nil,
			map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: now}},
		{"previous-observation", []v1.NodeConditionType{v1.NodeMemoryPressure}, map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: old},
			map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: now}},
		{"old-observation", nil, map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: old},
			map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: old}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeConditionsLastObservedAt(tt.conds, tt.last, now); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNodeConditionsObservedSince is the kubelet's TestNodeConditionsObservedSince, plus
// the boundary (now − at == period drops the condition: the test is <).
func TestNodeConditionsObservedSince(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: now.Add(-time.Minute)}
	tests := []struct {
		name   string
		period time.Duration
		want   []v1.NodeConditionType
	}{
		{"in-period", 2 * time.Minute, []v1.NodeConditionType{v1.NodeMemoryPressure}},
		{"out-of-period", 30 * time.Second, []v1.NodeConditionType{}},
		{"exactly-at-period", time.Minute, []v1.NodeConditionType{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeConditionsObservedSince(at, tt.period, now); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMergeThresholds checks deduplication ignores the minimum reclaim.
func TestMergeThresholds(t *testing.T) {
	a := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	aWithReclaim := a
	aWithReclaim.MinReclaim = &ThresholdValue{Quantity: q("100Mi")}
	b := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	soft := a
	soft.GracePeriod = time.Minute
	tests := []struct {
		name string
		x, y []Threshold
		want int
	}{
		{"disjoint", []Threshold{a}, []Threshold{b}, 2},
		{"same value, min reclaim ignored", []Threshold{a}, []Threshold{aWithReclaim}, 1},
		{"grace period differs", []Threshold{a}, []Threshold{soft}, 2},
		{"1024Mi equals 1Gi", []Threshold{a}, []Threshold{{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1024Mi")}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mergeThresholds(tt.x, tt.y); len(got) != tt.want {
				t.Errorf("got %d thresholds (%v), want %d", len(got), got, tt.want)
			}
		})
	}
}

// TestCompareThresholdValue is the kubelet's TestCompareThresholdValue.
func TestCompareThresholdValue(t *testing.T) {
	tests := []struct {
		name  string
		a, b  ThresholdValue
		equal bool
	}{
		{"same quantity", ThresholdValue{Quantity: q("123")}, ThresholdValue{Quantity: q("123")}, true},
		{"different quantity", ThresholdValue{Quantity: q("123")}, ThresholdValue{Quantity: q("456")}, false},
		{"quantity vs percentage", ThresholdValue{Quantity: q("123")}, ThresholdValue{Percentage: 0.1}, false},
		{"same percentage", ThresholdValue{Percentage: 0.1}, ThresholdValue{Percentage: 0.1}, true},
		{"different percentage", ThresholdValue{Percentage: 0.2}, ThresholdValue{Percentage: 0.1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if compareThresholdValue(tt.a, tt.b) != tt.equal || compareThresholdValue(tt.b, tt.a) != tt.equal {
				t.Errorf("compareThresholdValue = %v, want %v", !tt.equal, tt.equal)
			}
		})
	}
}

// TestSortByEvictionPriority is the kubelet's TestSortByEvictionPriority plus the tie rule
// (stable: ties keep input order) and signals without a resource last.
func TestSortByEvictionPriority(t *testing.T) {
	sig := func(ts []Threshold) []Signal {
		out := make([]Signal, len(ts))
		for i, t := range ts {
			out[i] = t.Signal
		}
		return out
	}
	tests := []struct {
		name string
		in   []Signal
		want []Signal
	}{
		{"empty threshold list", nil, []Signal{}},
		{"memory first", []Signal{SignalNodeFsAvailable, SignalPIDAvailable, SignalMemoryAvailable},
			[]Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalPIDAvailable}},
		{"allocatable memory first", []Signal{SignalNodeFsAvailable, SignalPIDAvailable, SignalAllocatableMemoryAvailable},
			[]Signal{SignalAllocatableMemoryAvailable, SignalNodeFsAvailable, SignalPIDAvailable}},
		{"ties keep input order", []Signal{SignalPIDAvailable, SignalImageFsAvailable, SignalAllocatableMemoryAvailable, SignalNodeFsInodesFree, SignalMemoryAvailable},
			[]Signal{SignalAllocatableMemoryAvailable, SignalMemoryAvailable, SignalPIDAvailable, SignalImageFsAvailable, SignalNodeFsInodesFree}},
		{"signal without resource last", []Signal{"made.up", SignalPIDAvailable}, []Signal{SignalPIDAvailable, "made.up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([]Threshold, len(tt.in))
			for i, s := range tt.in {
				in[i] = Threshold{Signal: s}
			}
			got := sig(sortByEvictionPriority(in))
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, _, ok := getReclaimableThreshold([]Threshold{{Signal: "made.up"}}); ok {
		t.Error("getReclaimableThreshold found a resource for an unknown signal")
	}
}
