package units_test

import (
	"context"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/systemdtest"
	"github.com/slicelet/slicelet/slices"
)

func BenchmarkZZPopulation(b *testing.B) {
	env := systemdtest.Require(b)
	capacity, _ := slices.ReadCapacity("/proc", "/sys", "")
	bn := &podBench{cgroupRoot: env.CgroupRoot, capacity: capacity, n: 2000, batch: 100, rec: &recorder{}}
	e := bn.openSlicelet(b)
	bn.mode = e.sd.Mode()
	e.close()
	fc := bn.openFloor(b)
	ctx := context.Background()
	f, _ := bn.floorPath(fc, bn.pods(bn.n))
	for lo := 0; lo < bn.n; lo += 100 {
		var lat []time.Duration
		w, pid1, self, err := runBatch(ctx, f.create, lo, lo+100, 1, &lat)
		if err != nil {
			b.Fatal(err)
		}
		if lo%500 == 0 {
			b.Logf("create at population %4d: %v/op pid1 %v/op client %v/op", lo, w/100, pid1/100, self/100)
		}
	}
	for lo := bn.n - 100; lo >= 0; lo -= 100 {
		var lat []time.Duration
		w, pid1, self, err := runBatch(ctx, f.destroy, lo, lo+100, 1, &lat)
		if err != nil {
			b.Fatal(err)
		}
		if lo%500 == 0 {
			b.Logf("destroy at population %4d: %v/op pid1 %v/op client %v/op", lo+100, w/100, pid1/100, self/100)
		}
	}
}
