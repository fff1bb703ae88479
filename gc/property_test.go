package gc

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPlanImageGCProperties checks, over random inputs, what must hold for every plan: every
// image is removed or kept exactly once; nothing in use, pinned or the sandbox image is removed;
// FreedBytes is the sum of the removals; space removals respect MinAge and LRU order.
func TestPlanImageGCProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := r.IntN(30)
		images := make([]Image, n)
		for i := range images {
			images[i] = Image{
				ID:            fmt.Sprint("i", i),
				SizeBytes:     r.Int64N(1000),
				FirstDetected: t0.Add(-time.Duration(r.IntN(300)) * time.Minute),
				Pinned:        r.IntN(10) == 0,
			}
			if r.IntN(3) > 0 {
				images[i].LastUsed = t0.Add(-time.Duration(r.IntN(300)) * time.Minute)
			}
			if r.IntN(8) == 0 {
				images[i].Names = []string{"pause:1"}
			}
		}
		var containers []Container
		inUse := map[string]bool{}
		for i := range n / 3 {
			id := fmt.Sprint("i", r.IntN(n))
			inUse[id] = true
			containers = append(containers, Container{ID: fmt.Sprint("c", i), PodUID: "p", Name: "x", ImageID: id, State: StateExited})
		}
		low := r.IntN(101)
		policy := ImagePolicy{HighThresholdPercent: low + r.IntN(101-low), LowThresholdPercent: low, MinAge: time.Duration(r.IntN(120)) * time.Minute}
		if r.IntN(2) == 0 {
			policy.MaxAge = policy.MinAge + time.Duration(1+r.IntN(200))*time.Minute
		}
		capacity := r.Int64N(20000)
		fs := ImageFs{CapacityBytes: capacity, AvailableBytes: r.Int64N(capacity + 100)}
		p := PlanImageGC(fs, images, containers, "pause:1", policy, t0, t0.Add(-time.Duration(r.IntN(400))*time.Minute))
		if p.Err != nil && p.Err != ErrInvalidCapacity {
			if _, ok := p.Err.(*FreeSpaceError); !ok {
				t.Fatalf("iter %d: unexpected error %v", iter, p.Err)
			}
		}
		seen := map[string]int{}
		byID := map[string]Image{}
		for _, img := range images {
			byID[img.ID] = img
		}
		var sum int64
		var prev *Image
		for _, rm := range p.Remove {
			seen[rm.ID]++
			img := byID[rm.ID]
			sum += img.SizeBytes
			if inUse[rm.ID] || img.Pinned || len(img.Names) > 0 {
				t.Fatalf("iter %d: removed protected image %+v", iter, img)
			}
			if rm.Reason == ReasonSpace {
				if t0.Sub(img.FirstDetected) < policy.MinAge {
					t.Fatalf("iter %d: removed %s younger than MinAge", iter, rm.ID)
				}
				if prev != nil && img.LastUsed.Before(prev.LastUsed) {
					t.Fatalf("iter %d: space removals out of LRU order", iter)
				}
				prev = &img
			}
		}
		for _, k := range p.Kept {
			seen[k.ID]++
		}
		for _, img := range images {
			if seen[img.ID] != 1 {
				t.Fatalf("iter %d: image %s accounted %d times", iter, img.ID, seen[img.ID])
			}
		}
		if sum != p.FreedBytes {
			t.Fatalf("iter %d: FreedBytes %d, sum of removals %d", iter, p.FreedBytes, sum)
		}
	}
}

// TestPlanContainerGCProperties: running and young containers are never removed, nothing is
// removed twice, and after the plan the limits hold for what remains evictable.
func TestPlanContainerGCProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	states := []string{StateRunning, StateExited, StateCreated, StateUnknown}
	for iter := range 2000 {
		n := r.IntN(40)
		cs := make([]Container, n)
		for i := range cs {
			cs[i] = Container{
				ID:        fmt.Sprint("c", i),
				PodUID:    fmt.Sprint("p", r.IntN(5)),
				Name:      fmt.Sprint("n", r.IntN(3)),
				State:     states[r.IntN(len(states))],
				CreatedAt: t0.Add(-time.Duration(r.IntN(120)) * time.Minute),
			}
		}
		policy := ContainerPolicy{MinAge: time.Duration(r.IntN(60)) * time.Minute, MaxPerPodContainer: r.IntN(5) - 1, MaxContainers: r.IntN(12) - 1}
		deleted := map[string]bool{"p0": r.IntN(2) == 0}
		p := PlanContainerGC(cs, deleted, policy, t0, true, false, nil)
		if p.Err != nil {
			t.Fatalf("iter %d: %v", iter, p.Err)
		}
		removed := map[string]bool{}
		for _, rm := range p.Remove {
			if removed[rm.ID] {
				t.Fatalf("iter %d: %s removed twice", iter, rm.ID)
			}
			removed[rm.ID] = true
		}
		perUnit := map[evictUnit]int{}
		total := 0
		for _, c := range cs {
			evictable := c.State != StateRunning && !c.CreatedAt.After(t0.Add(-policy.MinAge))
			if removed[c.ID] && !evictable {
				t.Fatalf("iter %d: removed non-evictable %+v", iter, c)
			}
			if evictable && !removed[c.ID] {
				if deleted[c.PodUID] {
					t.Fatalf("iter %d: kept %s of a deleted pod", iter, c.ID)
				}
				perUnit[evictUnit{c.PodUID, c.Name}]++
				total++
			}
		}
		for u, k := range perUnit {
			if policy.MaxPerPodContainer >= 0 && k > policy.MaxPerPodContainer {
				t.Fatalf("iter %d: unit %v keeps %d > %d", iter, u, k, policy.MaxPerPodContainer)
			}
		}
		if policy.MaxContainers >= 0 && total > policy.MaxContainers {
			t.Fatalf("iter %d: %d dead containers remain > %d", iter, total, policy.MaxContainers)
		}
	}
}
