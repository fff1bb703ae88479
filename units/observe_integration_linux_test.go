package units

import (
	"errors"
	"testing"
)

// TestIntegrationObserve checks against the sandbox's systemd that Options.Observe sees each
// operation once, with its result: a slice's start job, a property change, a stop job, and a
// property change on a unit that is gone (no_such_unit).
func TestIntegrationObserve(t *testing.T) {
	var rec recorder
	e := newIntegration(t, Options{Observe: rec.observe})
	const name = "it-observe.slice"
	e.stopAtEnd(t, name)
	if err := e.m.StartSlice(e.ctx, name, []Property{{Name: "Description", Value: "observe test"}}); err != nil {
		t.Fatalf("StartSlice: %v", err)
	}
	if err := e.m.SetProperties(e.ctx, name, []Property{{Name: "TasksMax", Value: uint64(100)}}); err != nil {
		t.Fatalf("SetProperties: %v", err)
	}
	if err := e.m.Stop(e.ctx, name); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := e.m.Properties(e.ctx, name); !errors.Is(err, ErrNoSuchUnit) {
		t.Fatalf("Properties after Stop: %v, want ErrNoSuchUnit", err)
	}
	want := []struct{ op, result string }{
		{opStart, ResultSuccess},
		{opSetProps, ResultSuccess},
		{opStop, ResultSuccess},
		{opGet, ResultNoSuchUnit},
	}
	got := rec.calls()
	if len(got) != len(want) {
		t.Fatalf("observed %d operations, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		o := got[i]
		if o.op != w.op || o.unit != name || ResultOf(o.err) != w.result || o.d < 0 {
			// >= 0, not > 0: the cgroup v2 VM's clock ticks in 4 ms steps (TCG, no TSC), so a
			// call that needs no job (get-properties) can measure 0.
			t.Errorf("operation %d: observed (%q, %q, %v, %v), want (%q, %q, >=0, %s)", i, o.op, o.unit, o.d, o.err, w.op, name, w.result)
		}
		t.Logf("%s %s: %s in %v", o.op, o.unit, ResultOf(o.err), o.d)
	}
}
