package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/units"
)

func TestGCTimerPlan(t *testing.T) {
	cfg := config.Default()
	cfg.API.Socket = "/run/slicelet/api.sock"
	for _, tc := range []struct {
		name, owner string
		partOf      bool
	}{
		{"under slicelet.service", "slicelet.service", true},
		{"run by hand in a session scope", "session-3.scope", false},
		{"owner unknown", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := gcTimerPlan(cfg, "/usr/bin/slicectl", tc.owner, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan) != 2 || plan[0].Timer != "slicelet-gc-containers.timer" || plan[0].Service != "slicelet-gc-containers.service" ||
				plan[1].Timer != "slicelet-gc-images.timer" || plan[1].Period != 5*time.Minute || plan[0].Period != time.Minute {
				t.Fatalf("plan = %+v", plan)
			}
			for _, tm := range plan {
				if err := units.ValidateName(tm.Timer); err != nil {
					t.Error(err)
				}
				exec := propValue(tm.ServiceProps, "ExecStart").(units.Exec)
				if got := strings.Join(exec.Args, " "); got != "/usr/bin/slicectl gc "+tm.Kind+" --socket /run/slicelet/api.sock" {
					t.Errorf("%s ExecStart = %q", tm.Service, got)
				}
				mono := propValue(tm.TimerProps, "TimersMonotonic").([]units.TimerMonotonic)
				if len(mono) != 2 || mono[0].Elapse != tm.Period || mono[1].Base != "OnUnitActiveSec" {
					t.Errorf("%s TimersMonotonic = %+v", tm.Timer, mono)
				}
				for _, props := range [][]units.Property{tm.TimerProps, tm.ServiceProps} {
					partOf, _ := propValue(props, "PartOf").([]string)
					if got := len(partOf) == 1 && partOf[0] == tc.owner; got != tc.partOf {
						t.Errorf("%s PartOf = %v, want tied to the owner: %v", tm.Timer, partOf, tc.partOf)
					}
				}
			}
		})
	}
	if _, err := gcTimerPlan(cfg, "slicectl", "", true); err == nil {
		t.Error("a relative slicectl path was accepted")
	}
	// The built-in runtime has no images: no image GC timer firing only to be skipped.
	plan, err := gcTimerPlan(cfg, "/usr/bin/slicectl", "slicelet.service", false)
	if err != nil || len(plan) != 1 || plan[0].Kind != gcContainers {
		t.Errorf("plan without images = %+v, %v; want the container GC timer only", plan, err)
	}
}

func propValue(props []units.Property, name string) any {
	for _, p := range props {
		if p.Name == name {
			return p.Value
		}
	}
	return nil
}

// fakeCollector returns the results and errors it is given, in order.
type fakeCollector struct {
	errs  []error
	calls []string
}

func (f *fakeCollector) next(call string) error {
	f.calls = append(f.calls, call)
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func errPtr(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

func (f *fakeCollector) CollectImages(_ context.Context, dryRun bool) (gc.ImageResult, error) {
	err := f.next("images")
	return gc.ImageResult{Kind: gc.KindImages, DryRun: dryRun, Removed: []string{"sha256:a"}, FreedBytes: 10, Error: errPtr(err)}, err
}

func (f *fakeCollector) DeleteUnusedImages(context.Context) (gc.ImageResult, error) {
	err := f.next("unused-images")
	return gc.ImageResult{Kind: gc.KindUnusedImages, Error: errPtr(err)}, err
}

func (f *fakeCollector) CollectContainers(_ context.Context, dryRun bool) (gc.ContainerResult, error) {
	err := f.next("containers")
	return gc.ContainerResult{Kind: gc.KindContainers, DryRun: dryRun, Error: errPtr(err)}, err
}

func (f *fakeCollector) DeleteAllUnusedContainers(context.Context) (gc.ContainerResult, error) {
	err := f.next("all-unused-containers")
	return gc.ContainerResult{Kind: gc.KindAllUnusedContainers, Error: errPtr(err)}, err
}

func conditionOf(cs []v1.NodeCondition, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// TestGCServiceConditions: the node condition turns true at the third failure in a row and
// false at the next success; dry runs do not count.
func TestGCServiceConditions(t *testing.T) {
	boom := errors.New("runtime: connection refused")
	f := &fakeCollector{errs: []error{boom, boom, nil, boom, boom, boom, nil}}
	tracker := health.New(health.Options{})
	s := newGCService(f, nil, tracker)
	ctx := context.Background()
	steps := []struct {
		dryRun bool
		want   v1.ConditionStatus // of ImageGCFailing after the step; "" = no condition yet
	}{
		{true, ""},
		{false, v1.ConditionFalse}, // 1 failure
		{false, v1.ConditionFalse}, // 2
		{false, v1.ConditionFalse}, // success resets
		{false, v1.ConditionFalse}, // 1
		{false, v1.ConditionFalse}, // 2
		{false, v1.ConditionTrue},  // 3: condition
		{false, v1.ConditionFalse}, // recovered
	}
	for i, st := range steps {
		if st.dryRun {
			// A dry run consumes nothing from the fake's error list.
			s.col = &fakeCollector{}
		} else {
			s.col = f
		}
		_, _ = s.Images(ctx, st.dryRun) // the errors are the fake's, on purpose
		c := conditionOf(nodeConditions(tracker.State()), conditionImageGCFailing)
		switch {
		case st.want == "" && c != nil:
			t.Errorf("step %d: condition %+v before any real run", i, c)
		case st.want != "" && (c == nil || c.Status != st.want):
			t.Errorf("step %d: condition %+v, want status %s", i, c, st.want)
		}
		if c != nil && c.Status == v1.ConditionTrue && !strings.Contains(c.Message, "connection refused") {
			t.Errorf("step %d: message %q lacks the last error", i, c.Message)
		}
	}
	if c := conditionOf(nodeConditions(tracker.State()), conditionContainerGCFailing); c != nil {
		t.Errorf("container condition %+v without a container collection", c)
	}
}

// TestGCServiceReclaim: eviction's steps run in order, all of them, errors joined.
func TestGCServiceReclaim(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeCollector{errs: []error{boom, nil}}
	s := newGCService(f, nil, health.New(health.Options{}))
	err := s.Reclaim(context.Background(), []eviction.ReclaimStep{eviction.ReclaimContainers, eviction.ReclaimImages})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), string(eviction.ReclaimContainers)) {
		t.Errorf("Reclaim = %v, want the container step's error", err)
	}
	if got := strings.Join(f.calls, ","); got != "all-unused-containers,unused-images" {
		t.Errorf("calls = %s", got)
	}
	if err := s.Reclaim(context.Background(), []eviction.ReclaimStep{"DeleteEverything"}); err == nil {
		t.Error("an unknown step was accepted")
	}
}

// TestDetectLoop: detection runs every period; the health tracker logs a failure once, when
// it begins, and the recovery.
func TestDetectLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls int
		errs := []error{nil, errors.New("runtime down"), errors.New("runtime down"), nil}
		var logged strings.Builder
		log := slog.New(slog.NewTextHandler(&logged, nil))
		done := make(chan struct{})
		go func() {
			defer close(done)
			detectLoop(ctx, clock.RealClock{}, 5*time.Minute, func(context.Context) error {
				err := errs[calls%len(errs)]
				calls++
				return err
			}, health.New(health.Options{Logger: log}))
		}()
		time.Sleep(4*time.Minute + 59*time.Second)
		synctest.Wait()
		if calls != 0 {
			t.Fatalf("detected %d times before the first period", calls)
		}
		time.Sleep(4*5*time.Minute - 4*time.Minute - 59*time.Second + time.Second)
		synctest.Wait()
		cancel()
		<-done
		if calls != 4 {
			t.Errorf("detected %d times in 20 minutes, want 4", calls)
		}
		if n := strings.Count(logged.String(), "image detection unhealthy"); n != 1 {
			t.Errorf("failure logged %d times, want once:\n%s", n, logged.String())
		}
		if !strings.Contains(logged.String(), "image detection healthy again") {
			t.Errorf("recovery not logged:\n%s", logged.String())
		}
	})
}
