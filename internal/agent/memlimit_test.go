package agent

import "testing"

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxPods int32
		cluster bool
		want    int64
	}{
		{name: "stand-alone, 110 pods", maxPods: 110, want: 20<<20 + 110*20<<10},
		{name: "cluster mode, 110 pods", maxPods: 110, cluster: true, want: 28<<20 + 110*20<<10},
		{name: "stand-alone, 1000 pods", maxPods: 1000, want: 20<<20 + 1000*20<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryLimit(tc.maxPods, tc.cluster); got != tc.want {
				t.Errorf("memoryLimit(%d, %t) = %d, want %d", tc.maxPods, tc.cluster, got, tc.want)
			}
		})
	}
}
