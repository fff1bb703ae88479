package eviction

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// thr builds an expected threshold; value and minReclaim are a quantity string,
// a percentage written as a float32 fraction via pct(), or "" for none.
func thr(signal Signal, value any, grace time.Duration, minReclaim any) Threshold {
	t := Threshold{Signal: signal, Operator: OpLessThan, Value: tv(value), GracePeriod: grace}
	if minReclaim != nil {
		v := tv(minReclaim)
		t.MinReclaim = &v
	}
	return t
}

type pct float32

func tv(v any) ThresholdValue {
	switch v := v.(type) {
	case string:
		q := resource.MustParse(v)
		return ThresholdValue{Quantity: &q}
	case pct:
		return ThresholdValue{Percentage: float32(v)}
	}
	panic(fmt.Sprintf("bad test value %T", v))
}

// key renders a threshold comparably (quantities by value, percentages exactly).
func key(t Threshold) string {
	val := func(v ThresholdValue) string {
		if v.Quantity != nil {
			return fmt.Sprintf("q%d", v.Quantity.Value())
		}
		return fmt.Sprintf("p%08x", math.Float32bits(v.Percentage))
	}
	mr := "-"
	if t.MinReclaim != nil {
		mr = val(*t.MinReclaim)
	}
	return fmt.Sprintf("%s %s %s %s %s", t.Signal, t.Operator, val(t.Value), t.GracePeriod, mr)
}

func keys(ts []Threshold) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, key(t))
	}
	slices.Sort(out)
	return out
}

// TestParseThresholdConfig follows the kubelet's TestParseThresholdConfig
// (pkg/kubelet/eviction/helpers_test.go).
func TestParseThresholdConfig(t *testing.T) {
	type m = map[string]string
	tests := []struct {
		name        string
		alloc       []string
		hard, soft  m
		grace, min  m
		want        []Threshold
		wantErrs    []string // substrings, one per joined error, in order
		wantSetting []Setting
	}{
		{
			name: "no values",
			want: nil,
		},
		{
			name:  "all memory eviction values",
			alloc: []string{"pods"},
			hard:  m{"memory.available": "150Mi"},
			soft:  m{"memory.available": "300Mi"},
			grace: m{"memory.available": "30s"},
			min:   m{"memory.available": "0"},
			want: []Threshold{
				thr(SignalAllocatableMemoryAvailable, "150Mi", 0, "0"),
				thr(SignalMemoryAvailable, "150Mi", 0, "0"),
				thr(SignalMemoryAvailable, "300Mi", 30*time.Second, "0"),
			},
		},
		{
			name:  "percentage memory values",
			hard:  m{"memory.available": "10%"},
			soft:  m{"memory.available": "30%"},
			grace: m{"memory.available": "30s"},
			min:   m{"memory.available": "5%"},
			want: []Threshold{
				thr(SignalMemoryAvailable, pct(float32(0.1)), 0, pct(float32(0.05))),
				thr(SignalMemoryAvailable, pct(float32(0.3)), 30*time.Second, pct(float32(0.05))),
			},
		},
		{
			name:  "disk values with fractional percentages",
			hard:  m{"imagefs.available": "15%", "nodefs.available": "10.5%"},
			soft:  m{"imagefs.available": "30%", "nodefs.available": "20.5%"},
			grace: m{"imagefs.available": "30s", "nodefs.available": "30s"},
			min:   m{"imagefs.available": "10%", "nodefs.available": "5%"},
			want: []Threshold{
				thr(SignalImageFsAvailable, pct(float32(0.15)), 0, pct(float32(0.1))),
				thr(SignalNodeFsAvailable, pct(float32(0.105)), 0, pct(float32(0.05))),
				thr(SignalImageFsAvailable, pct(float32(0.3)), 30*time.Second, pct(float32(0.1))),
				thr(SignalNodeFsAvailable, pct(float32(0.205)), 30*time.Second, pct(float32(0.05))),
			},
		},
		{
			name: "disable via 0% and 100%",
			hard: m{"memory.available": "0%"},
			soft: m{"memory.available": "100%"},
			want: nil,
		},
		{
			name:        "invalid signal",
			hard:        m{"mem.available": "150Mi"},
			wantErrs:    []string{"unsupported eviction signal mem.available"},
			wantSetting: []Setting{SettingHard},
		},
		{
			name:        "negative quantity",
			hard:        m{"memory.available": "-150Mi"},
			wantErrs:    []string{"eviction threshold memory.available must be positive: -150Mi"},
			wantSetting: []Setting{SettingHard},
		},
		{
			name:        "negative percentage",
			hard:        m{"memory.available": "-15%"},
			wantErrs:    []string{"eviction percentage threshold memory.available must be >= 0%: -15%"},
			wantSetting: []Setting{SettingHard},
		},
		{
			name:        "percentage above 100",
			hard:        m{"memory.available": "150%"},
			wantErrs:    []string{"eviction percentage threshold memory.available must be <= 100%: 150%"},
			wantSetting: []Setting{SettingHard},
		},
		{
			name:        "soft without grace period",
			soft:        m{"memory.available": "150Mi"},
			wantErrs:    []string{"grace period must be specified for the soft eviction threshold memory.available"},
			wantSetting: []Setting{SettingSoft},
		},
		{
			name:        "negative grace period",
			soft:        m{"memory.available": "150Mi"},
			grace:       m{"memory.available": "-30s"},
			wantErrs:    []string{"invalid eviction grace period specified for memory.available: -30s, must be a positive value"},
			wantSetting: []Setting{SettingSoftGracePeriod},
		},
		{
			name:        "negative minimum reclaim",
			hard:        m{"memory.available": "150Mi"},
			min:         m{"memory.available": "-300Mi"},
			wantErrs:    []string{"negative eviction minimum reclaim specified for memory.available: -300Mi"},
			wantSetting: []Setting{SettingMinimumReclaim},
		},
		{
			name:        "0% minimum reclaim is an error, unlike 0% thresholds",
			hard:        m{"memory.available": "150Mi"},
			min:         m{"memory.available": "0%"},
			wantErrs:    []string{"eviction percentage minimum reclaim memory.available must be positive: 0%"},
			wantSetting: []Setting{SettingMinimumReclaim},
		},
		{
			name:        "zero quantity threshold",
			hard:        m{"nodefs.available": "0"},
			wantErrs:    []string{"eviction threshold nodefs.available must be positive: 0"},
			wantSetting: []Setting{SettingHard},
		},
		{
			name:        "unparsable quantity and percentage",
			hard:        m{"memory.available": "lots", "nodefs.available": "ten%"},
			wantErrs:    []string{`eviction quantity memory.available: invalid quantity "lots"`, `eviction percentage nodefs.available: invalid percentage "ten%"`},
			wantSetting: []Setting{SettingHard, SettingHard},
		},
		{
			name:  "every problem is reported, in setting then signal order",
			hard:  m{"nodefs.available": "-1", "bogus": "1Gi"},
			soft:  m{"memory.available": "1Gi", "imagefs.available": "20%"},
			grace: m{"imagefs.available": "soon", "pids": "1m"},
			min:   m{"memory.available": "-1"},
			wantErrs: []string{
				"unsupported eviction signal bogus",
				"eviction threshold nodefs.available must be positive: -1",
				`eviction grace period imagefs.available: invalid duration "soon"`,
				"unsupported eviction signal pids",
				"negative eviction minimum reclaim specified for memory.available: -1",
				"grace period must be specified for the soft eviction threshold memory.available",
			},
			wantSetting: []Setting{SettingHard, SettingHard, SettingSoftGracePeriod, SettingSoftGracePeriod, SettingMinimumReclaim, SettingSoft},
		},
		{
			name:  "soft grace 0s behaves as hard and gets an allocatable copy",
			alloc: []string{"pods", "system-reserved"},
			soft:  m{"memory.available": "1Gi"},
			grace: m{"memory.available": "0s"},
			want: []Threshold{
				thr(SignalMemoryAvailable, "1Gi", 0, nil),
				thr(SignalAllocatableMemoryAvailable, "1Gi", 0, nil),
			},
		},
		{
			name:  "no allocatable copy without pods enforcement",
			alloc: []string{"none"},
			hard:  m{"memory.available": "100Mi", "pid.available": "1000"},
			want: []Threshold{
				thr(SignalMemoryAvailable, "100Mi", 0, nil),
				thr(SignalPIDAvailable, "1000", 0, nil),
			},
		},
		{
			name:  "kubelet defaults",
			hard:  m{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"},
			alloc: []string{"pods"},
			want: []Threshold{
				thr(SignalMemoryAvailable, "100Mi", 0, nil),
				thr(SignalNodeFsAvailable, pct(float32(0.1)), 0, nil),
				thr(SignalNodeFsInodesFree, pct(float32(0.05)), 0, nil),
				thr(SignalImageFsAvailable, pct(float32(0.15)), 0, nil),
				thr(SignalAllocatableMemoryAvailable, "100Mi", 0, nil),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholdConfig(tc.alloc, tc.hard, tc.soft, tc.grace, tc.min)
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("got no error, want %q", tc.wantErrs)
				}
				if got != nil {
					t.Errorf("got thresholds %v alongside an error", got)
				}
				joined, ok := err.(interface{ Unwrap() []error })
				if !ok {
					t.Fatalf("error %T is not a join", err)
				}
				errs := joined.Unwrap()
				if len(errs) != len(tc.wantErrs) {
					t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.wantErrs), err)
				}
				for i, e := range errs {
					if !strings.Contains(e.Error(), tc.wantErrs[i]) {
						t.Errorf("error %d = %q, want it to contain %q", i, e, tc.wantErrs[i])
					}
					var te *ThresholdError
					if !errors.As(e, &te) {
						t.Errorf("error %d is %T, want *ThresholdError", i, e)
						continue
					}
					if te.Setting != tc.wantSetting[i] {
						t.Errorf("error %d setting = %q, want %q", i, te.Setting, tc.wantSetting[i])
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if g, w := keys(got), keys(tc.want); !slices.Equal(g, w) {
				t.Errorf("thresholds:\n got %q\nwant %q", g, w)
			}
		})
	}
}

func TestParseThresholdConfigUnsupportedSignalIsWrapped(t *testing.T) {
	_, err := ParseThresholdConfig(nil, map[string]string{"cpu.available": "1"}, nil, nil, nil)
	if !errors.Is(err, ErrUnsupportedSignal) {
		t.Fatalf("error %v does not wrap ErrUnsupportedSignal", err)
	}
}

func TestParseThresholdConfigFloat32Percentage(t *testing.T) {
	got, err := ParseThresholdConfig(nil, map[string]string{"nodefs.available": "10.5%"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := got[0].Value.Percentage
	if p != float32(0.105) {
		t.Errorf("percentage = %v, want float32(0.105)", p)
	}
	// The float32 is not the float64 0.105: it is 0.10499999672…
	if float64(p) == 0.105 || float64(p) > 0.105 {
		t.Errorf("float64(percentage) = %.12f, want the float32 rounding below 0.105", float64(p))
	}
}

func TestGetThresholdQuantity(t *testing.T) {
	tests := []struct {
		name     string
		value    ThresholdValue
		capacity string
		want     int64
	}{
		{name: "F exactness 10% of 1000Mi is 104857601", value: tv(pct(float32(0.1))), capacity: "1000Mi", want: 104857601},
		{name: "5% of 100Gi", value: tv(pct(float32(0.05))), capacity: "100Gi", want: int64(float64(100<<30) * float64(float32(0.05)))},
		{name: "15% of 1000", value: tv(pct(float32(0.15))), capacity: "1000", want: 150},
		{name: "quantity ignores capacity", value: tv("100Mi"), capacity: "1Gi", want: 100 << 20},
		{name: "zero capacity", value: tv(pct(float32(0.1))), capacity: "0", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			capacity := resource.MustParse(tc.capacity)
			got := GetThresholdQuantity(tc.value, &capacity)
			if got.Value() != tc.want {
				t.Errorf("GetThresholdQuantity = %d, want %d", got.Value(), tc.want)
			}
		})
	}
}

func TestGetThresholdQuantityCopies(t *testing.T) {
	q := resource.MustParse("100Mi")
	capacity := resource.MustParse("1Gi")
	got := GetThresholdQuantity(ThresholdValue{Quantity: &q}, &capacity)
	got.Add(resource.MustParse("1Mi"))
	if q.Value() != 100<<20 {
		t.Errorf("GetThresholdQuantity returned an alias: the threshold changed to %s", q.String())
	}
}

func TestSignals(t *testing.T) {
	if n := len(Signals()); n != 9 {
		t.Errorf("len(Signals()) = %d, want 9", n)
	}
	for _, s := range Signals() {
		if !ValidSignal(s) {
			t.Errorf("ValidSignal(%q) = false", s)
		}
	}
	if ValidSignal("cpu.available") {
		t.Error(`ValidSignal("cpu.available") = true`)
	}
}
