package slices

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHugePageLimits(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ResourceList
		want map[int64]int64
	}{
		{"hugepages-<size> keys sum per page size, other keys ignored", v1.ResourceList{
			"hugepages-2Mi":      resource.MustParse("128"),
			"hugepages-2097152":  resource.MustParse("256"),
			"hugepages-4Mi":      resource.MustParse("512"),
			"4Mi":                resource.MustParse("1024"),
			v1.ResourceCPU:       resource.MustParse("1"),
			"hugepages-bad-size": resource.MustParse("1"),
		}, map[int64]int64{2097152: 384, 4194304: 512}},
		{"a key without the hugepages- prefix is no hugepage", v1.ResourceList{"2Mi": resource.MustParse("128")}, map[int64]int64{}},
		{"nil list", nil, map[int64]int64{}},
		{"zero page size dropped", v1.ResourceList{"hugepages-0": resource.MustParse("1Gi")}, map[int64]int64{}},
		{"1Gi pages", v1.ResourceList{"hugepages-1Gi": resource.MustParse("2Gi")}, map[int64]int64{gi: 2 * gi}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HugePageLimits(tt.in)
			if got == nil || !maps.Equal(got, tt.want) {
				t.Errorf("HugePageLimits = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHugePageUnitSize(t *testing.T) {
	tests := []struct {
		name    string
		in      int64
		want    string
		wantErr bool
	}{
		{"64KB", 64 << 10, "64KB", false},
		{"2MB", 2 << 20, "2MB", false},
		{"1GB", 1 << 30, "1GB", false},
		{"512B", 512, "512B", false},
		{"16GB", 16 << 30, "16GB", false},
		{"1025KB not nameable", 1025 << 10, "", true},
		{"zero", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HugePageUnitSize(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("HugePageUnitSize(%d) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
