package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// countingMetrics records RuntimeOperation calls.
type countingMetrics struct{ ops []string }

func (c *countingMetrics) RuntimeOperation(op string, _ time.Duration, failed bool) {
	if failed {
		op += " failed"
	}
	c.ops = append(c.ops, op)
}

// stubRuntime answers two calls; the rest of Runtime is not called.
type stubRuntime struct{ Runtime }

func (stubRuntime) StartContainer(context.Context, string) error { return errors.New("start failed") }
func (stubRuntime) ListContainers(context.Context, string) ([]Container, error) {
	return []Container{{ID: "c1"}}, nil
}

// TestObservedRuntime: each call of the runtime is counted with the kubelet's operation type,
// a failed one as failed, and the call's result passes through.
func TestObservedRuntime(t *testing.T) {
	m := &countingMetrics{}
	r := observedRuntime{Runtime: stubRuntime{}, m: m, clock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	if err := r.StartContainer(t.Context(), "c1"); err == nil {
		t.Error("StartContainer's error lost")
	}
	if cs, err := r.ListContainers(t.Context(), "u"); err != nil || len(cs) != 1 {
		t.Errorf("ListContainers: %v %v", cs, err)
	}
	if got := m.ops; len(got) != 2 || got[0] != "start_container failed" || got[1] != "list_containers" {
		t.Errorf("counted %v", got)
	}
}
