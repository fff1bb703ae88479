package eviction

import (
	"testing"
	"time"
)

// TestUpdateContainerFsThresholds is the kubelet's TestAddContainerFsThresholds
// (pkg/kubelet/eviction/helpers_test.go), ported: containerfs copies nodefs for a
// single filesystem and for split images/layers, imagefs for a dedicated image filesystem,
// and configured containerfs thresholds are overridden with a warning.
func TestUpdateContainerFsThresholds(t *testing.T) {
	grace := time.Duration(1)
	thr := func(sig Signal, value, minReclaim string, g time.Duration) Threshold {
		return Threshold{Signal: sig, Operator: OpLessThan, Value: ThresholdValue{Quantity: q(value)}, GracePeriod: g, MinReclaim: &ThresholdValue{Quantity: q(minReclaim)}}
	}
	base := []Threshold{
		thr(SignalNodeFsAvailable, "100Mi", "1Gi", 0),
		thr(SignalNodeFsAvailable, "200Mi", "1Gi", grace),
		thr(SignalNodeFsInodesFree, "200Mi", "2Gi", grace),
		thr(SignalNodeFsInodesFree, "100Mi", "1Gi", 0),
		thr(SignalImageFsAvailable, "150Mi", "1.5Gi", 0),
		thr(SignalImageFsAvailable, "300Mi", "3Gi", grace),
		thr(SignalImageFsInodesFree, "150Mi", "2Gi", grace),
		thr(SignalImageFsInodesFree, "300Mi", "2Gi", 0),
	}
	withContainerFs := append(append([]Threshold(nil), base...),
		thr(SignalContainerFsAvailable, "500Mi", "5Gi", 0), thr(SignalContainerFsAvailable, "500Mi", "5Gi", grace),
		thr(SignalContainerFsInodesFree, "500Mi", "5Gi", grace), thr(SignalContainerFsInodesFree, "500Mi", "5Gi", 0))
	nodefsCopies := [4]Threshold{
		thr(SignalContainerFsAvailable, "100Mi", "1Gi", 0), thr(SignalContainerFsAvailable, "200Mi", "1Gi", grace),
		thr(SignalContainerFsInodesFree, "100Mi", "1Gi", 0), thr(SignalContainerFsInodesFree, "200Mi", "2Gi", grace),
	}
	imagefsCopies := [4]Threshold{
		thr(SignalContainerFsAvailable, "150Mi", "1.5Gi", 0), thr(SignalContainerFsAvailable, "300Mi", "3Gi", grace),
		thr(SignalContainerFsInodesFree, "300Mi", "2Gi", 0), thr(SignalContainerFsInodesFree, "150Mi", "2Gi", grace),
	}
	tests := []struct {
		name           string
		imageFs, split bool
		in             []Threshold
		want           [4]Threshold // hard avail, soft avail, hard inodes, soft inodes
		wantErr        bool
	}{
		{"single filesystem", false, false, base, nodefsCopies, false},
		{"image filesystem", true, false, base, imagefsCopies, false},
		{"container and image are separate", true, true, base, nodefsCopies, false},
		{"single filesystem; existing containerfs thresholds", false, false, withContainerFs, nodefsCopies, true},
		{"image filesystem; expect error", true, false, withContainerFs, imagefsCopies, true},
		{"container and image are separate; expect error", true, true, withContainerFs, nodefsCopies, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UpdateContainerFsThresholds(tt.in, tt.imageFs, tt.split)
			if (err != nil) != tt.wantErr {
				t.Errorf("error %v, want error %v", err, tt.wantErr)
			}
			var found [4]*Threshold
			for i := range got {
				g := got[i]
				idx := -1
				switch {
				case g.Signal == SignalContainerFsAvailable && g.IsHard():
					idx = 0
				case g.Signal == SignalContainerFsAvailable:
					idx = 1
				case g.Signal == SignalContainerFsInodesFree && g.IsHard():
					idx = 2
				case g.Signal == SignalContainerFsInodesFree:
					idx = 3
				}
				if idx < 0 {
					continue
				}
				if found[idx] != nil {
					t.Fatalf("two %s thresholds of one kind: %v and %v", g.Signal, *found[idx], g)
				}
				found[idx] = &got[i]
			}
			for i, w := range tt.want {
				if found[i] == nil || !sameThreshold(*found[i], w) {
					t.Errorf("containerfs threshold %d = %v, want %v", i, found[i], w)
				}
			}
			if len(got) != len(base)+4 {
				t.Errorf("%d thresholds, want %d", len(got), len(base)+4)
			}
		})
	}
	// The empty copy of an absent source can never be met.
	got, _ := UpdateContainerFsThresholds(nil, false, false)
	if met := thresholdsMet(got, Observations{SignalContainerFsAvailable: obsOf("0", "100Gi"), SignalContainerFsInodesFree: obsOf("0", "1000")}, true); len(met) != 0 {
		t.Errorf("empty containerfs thresholds met: %v", met)
	}
}
