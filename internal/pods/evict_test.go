package pods

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestEvictPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newTestController(maxPods(10), SourceFile, SourceAPI)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		snap := Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "hog", "uid-hog"), desired(SourceFile, "ok", "uid-ok")}}
		c.Update(snap)
		c.Update(Snapshot{Source: SourceAPI})
		synctest.Wait()
		if got := len(c.ActivePods()); got != 2 {
			t.Fatalf("ActivePods before eviction = %d pods, want 2", got)
		}

		hog, _ := c.Pod("default", "hog")
		msg := "The node was low on resource: memory. "
		if err := c.EvictPod(ctx, &hog, time.Second, msg, map[string]string{"starved_resource": "memory"}); err != nil {
			t.Fatalf("EvictPod: %v", err)
		}
		if fmt.Sprint(rt.killed, s.destroyed, rt.forgot) != "[uid-hog] [uid-hog] [uid-hog]" {
			t.Errorf("eviction: killed %v destroyed %v forgot %v, want the hog stopped, its slice destroyed and forgotten", rt.killed, s.destroyed, rt.forgot)
		}
		synced := rt.syncs("uid-hog")
		time.Sleep(2 * steadyResync)
		synctest.Wait()
		if rt.syncs("uid-hog") != synced {
			t.Errorf("evicted pod synced again (%d → %d): it must not restart", synced, rt.syncs("uid-hog"))
		}

		got, ok := c.Pod("default", "hog")
		if !ok {
			t.Fatal("evicted pod no longer listed; it must stay as Failed/Evicted")
		}
		if got.Status.Phase != v1.PodFailed || got.Status.Reason != ReasonEvicted || got.Status.Message != msg {
			t.Errorf("evicted status = %s/%s/%q, want Failed/Evicted/%q", got.Status.Phase, got.Status.Reason, got.Status.Message, msg)
		}
		hasDisruption := false
		for _, cond := range got.Status.Conditions {
			hasDisruption = hasDisruption || (cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue && cond.Reason == ReasonTerminationByKubelet)
		}
		if !hasDisruption {
			t.Errorf("evicted pod conditions %+v lack DisruptionTarget", got.Status.Conditions)
		}
		if got.Annotations[AnnotationEvictionPrefix+"starved_resource"] != "memory" {
			t.Errorf("evicted pod annotations %v lack the eviction's", got.Annotations)
		}
		if act := c.ActivePods(); len(act) != 1 || act[0].Pod.Name != "ok" {
			t.Errorf("ActivePods after eviction = %v, want only ok", act)
		}
		if err := c.EvictPod(ctx, &hog, time.Second, msg, nil); !errors.Is(err, ErrNotEvictable) {
			t.Errorf("second EvictPod = %v, want ErrNotEvictable", err)
		}

		// The manifest goes away: the evicted pod is forgotten without another stop.
		c.Update(Snapshot{Source: SourceFile, Pods: snap.Pods[1:]})
		synctest.Wait()
		if _, ok := c.Pod("default", "hog"); ok {
			t.Error("evicted pod still listed after its manifest was removed")
		}
		if len(rt.killed) != 1 {
			t.Errorf("pods killed %v, want only the eviction's stop", rt.killed)
		}
	})
}

func TestEvictedStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   v1.PodStatus
	}{
		{"running pod", v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, ContainerID: "containerd://c1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}},
		{"pending pod", v1.PodStatus{Phase: v1.PodPending}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := evictedStatus(tt.in, "m", now)
			if s.Phase != v1.PodFailed || s.Reason != ReasonEvicted || s.Message != "m" {
				t.Errorf("status = %s/%s/%q", s.Phase, s.Reason, s.Message)
			}
			for _, c := range s.Conditions {
				if c.Type == v1.PodReady && c.Status != v1.ConditionFalse {
					t.Errorf("Ready = %s, want False", c.Status)
				}
			}
			for _, cs := range s.ContainerStatuses {
				if cs.State.Running != nil || cs.Ready {
					t.Errorf("container %s still running/ready after eviction", cs.Name)
				}
				if term := cs.State.Terminated; term == nil || term.ExitCode != 137 || term.Reason != "Error" || term.Message != "" || term.ContainerID != cs.ContainerID {
					t.Errorf("container %s terminated %+v, want the runtime's report of a killed container (137, Error, its ID)", cs.Name, term)
				}
			}
			if tt.in.Phase == v1.PodRunning && tt.in.ContainerStatuses[0].State.Running == nil {
				t.Error("input modified")
			}
		})
	}
}

// TestEvictionDurable: the eviction is on disk before the pod is stopped; a controller started
// afterwards (slicelet restarted) shows the pod evicted and never starts it, stops units of it
// left running (killed between the record and the stop), and drops the record once no source
// wants the pod.
func TestEvictionDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), EvictionsDir)
	records := NewEvictionRecords(dir)
	newController := func() (*Controller, *fakeSlices, *fakeRuntime) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		return NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile, SourceAPI}, Evictions: records}), s, rt
	}
	snap := Snapshot{Source: SourceAPI, Pods: []Desired{desired(SourceAPI, "hog", "uid-hog")}}
	msg := "The node was low on resource: memory. "
	synctest.Test(t, func(t *testing.T) {
		c, _, rt := newController()
		recorded := false
		rt.onKill = func(uid string) {
			loaded, _ := records.Load()
			recorded = loaded[uid].Message == msg
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(snap)
		c.Update(Snapshot{Source: SourceFile})
		synctest.Wait()
		hog, _ := c.Pod("default", "hog")
		if err := c.EvictPod(ctx, &hog, time.Second, msg, map[string]string{"starved_resource": "memory"}); err != nil {
			t.Fatal(err)
		}
		if !recorded {
			t.Fatal("the pod was stopped before its eviction was on disk")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c, s, rt := newController()
		rt.present = []string{"uid-hog"} // left running by a crash between record and stop
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(snap)
		c.Update(Snapshot{Source: SourceFile})
		time.Sleep(2 * steadyResync)
		synctest.Wait()
		if s.ensured["uid-hog"] != 0 || rt.syncs("uid-hog") != 0 {
			t.Fatalf("an evicted pod started again after a restart: slices %v syncs %v", s.ensured, rt.synced)
		}
		if fmt.Sprint(rt.killed) != "[uid-hog]" {
			t.Errorf("left-over units of the evicted pod: killed %v, want uid-hog", rt.killed)
		}
		got, _ := c.Pod("default", "hog")
		if got.Status.Phase != v1.PodFailed || got.Status.Reason != ReasonEvicted || got.Status.Message != msg || got.Annotations[AnnotationEvictionPrefix+"starved_resource"] != "memory" {
			t.Errorf("after a restart: %s/%s/%q %v, want Failed/Evicted", got.Status.Phase, got.Status.Reason, got.Status.Message, got.Annotations)
		}
		c.Update(Snapshot{Source: SourceAPI}) // deleted through the API
		synctest.Wait()
		if loaded, err := records.Load(); err != nil || len(loaded) != 0 {
			t.Errorf("records after the pod was deleted: %v %v", loaded, err)
		}
	})
}
