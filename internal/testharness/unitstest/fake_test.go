package unitstest

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/slicelet/slicelet/units"
)

func desc(d string) units.Property { return units.Property{Name: "Description", Value: d} }

func TestFakeStartContract(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(f *Fake)
		props   []units.Property
		wantErr error
		wantMem any // MemoryLimit after the call, nil if not set
	}{
		{"new", func(*Fake) {}, []units.Property{desc("d"), {Name: "MemoryLimit", Value: uint64(1)}}, nil, uint64(1)},
		{"adopt identical active", func(f *Fake) {
			_ = f.StartSlice(ctx, "a.slice", []units.Property{desc("d"), {Name: "MemoryLimit", Value: uint64(1)}})
		}, []units.Property{desc("d"), {Name: "MemoryLimit", Value: uint64(2)}}, nil, uint64(2)},
		{"active with other description", func(f *Fake) {
			_ = f.StartSlice(ctx, "a.slice", []units.Property{desc("other")})
		}, []units.Property{desc("d")}, units.ErrUnitExists, nil},
		{"failed is replaced", func(f *Fake) {
			_ = f.StartSlice(ctx, "a.slice", []units.Property{desc("other"), {Name: "MemoryLimit", Value: uint64(9)}})
			f.SetState("a.slice", "failed", "failed")
		}, []units.Property{desc("d")}, nil, nil},
		{"deactivating refuses", func(f *Fake) {
			f.SetState("a.slice", "deactivating", "stop")
		}, []units.Property{desc("a.slice")}, units.ErrUnitExists, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(units.ModeHybrid)
			tt.setup(f)
			err := f.StartSlice(ctx, "a.slice", tt.props)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("StartSlice = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			u, ok := f.Unit("a.slice")
			if !ok || u.Status.ActiveState != "active" || u.Status.Description != "d" {
				t.Fatalf("unit = %+v, %v", u, ok)
			}
			if got := u.Props["MemoryLimit"]; got != tt.wantMem {
				t.Errorf("MemoryLimit = %v, want %v", got, tt.wantMem)
			}
		})
	}
}

func TestFakeStopAndSlices(t *testing.T) {
	ctx := context.Background()
	f := New(units.ModeUnified)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.StartSlice(ctx, "kubepods.slice", nil))
	must(f.StartSlice(ctx, "kubepods-burstable.slice", nil))
	must(f.StartSlice(ctx, "kubepods-burstable-pod1.slice", nil))
	must(f.StartService(ctx, "c1.service", []units.Property{{Name: "Slice", Value: "kubepods-burstable-pod1.slice"}}))
	must(f.StartScope(ctx, "s1.scope", []int{42}, []units.Property{{Name: "Slice", Value: "kubepods.slice"}}))
	must(f.StartService(ctx, "other.service", nil))

	info, err := f.Properties(ctx, "c1.service")
	must(err)
	if want := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/c1.service"; info.ControlGroup != want {
		t.Errorf("ControlGroup = %q, want %q", info.ControlGroup, want)
	}
	must(f.Stop(ctx, "kubepods-burstable.slice"))
	if got, want := f.Names(), []string{"kubepods.slice", "other.service", "s1.scope"}; !slices.Equal(got, want) {
		t.Errorf("after stop: units %v, want %v", got, want)
	}
	must(f.Stop(ctx, "kubepods-burstable.slice")) // idempotent
	must(f.ResetFailed(ctx, "never.service"))     // idempotent
	if err := f.SetProperties(ctx, "gone.slice", nil); !errors.Is(err, units.ErrNoSuchUnit) {
		t.Errorf("SetProperties on missing unit = %v, want ErrNoSuchUnit", err)
	}
	if _, err := f.Properties(ctx, "gone.slice"); !errors.Is(err, units.ErrNoSuchUnit) {
		t.Errorf("Properties on missing unit = %v, want ErrNoSuchUnit", err)
	}
	must(f.Kill(ctx, "s1.scope", syscall.SIGTERM, units.KillAll))
	if u, _ := f.Unit("s1.scope"); !slices.Equal(u.Signals, []syscall.Signal{syscall.SIGTERM}) || !slices.Equal(u.PIDs, []int{42}) {
		t.Errorf("scope = %+v", u)
	}
	list, err := f.List(ctx, "kubepods*", "s1.*")
	must(err)
	if len(list) != 2 || list[0].Name != "kubepods.slice" || list[1].Name != "s1.scope" {
		t.Errorf("List = %+v", list)
	}
	esc, _ := units.ServiceName("x", "a-b")
	must(f.StartService(ctx, esc, nil))
	if list, _ := f.List(ctx, esc); len(list) != 1 || list[0].Name != esc {
		t.Errorf("List(%q) = %+v: an escaped name must match itself", esc, list)
	}
	if n := len(f.CallsTo("StartSlice")); n != 3 {
		t.Errorf("%d StartSlice calls recorded, want 3", n)
	}
}

func TestFakeTimerAndInjection(t *testing.T) {
	ctx := context.Background()
	f := New(units.ModeHybrid)
	boom := errors.New("boom")
	f.InjectError("StartTimer", "", boom)
	if err := f.StartTimer(ctx, "gc.timer", nil, "", nil); !errors.Is(err, boom) {
		t.Fatalf("StartTimer = %v, want injected error", err)
	}
	if err := f.StartTimer(ctx, "gc.timer", nil, "other.service", nil); !errors.Is(err, units.ErrInvalidName) {
		t.Fatalf("StartTimer with mismatched service = %v, want ErrInvalidName", err)
	}
	if err := f.StartTimer(ctx, "gc.timer", []units.Property{desc("gc")}, "", []units.Property{{Name: "ExecStart", Value: units.Exec{Path: "/bin/true"}}}); err != nil {
		t.Fatal(err)
	}
	if u, ok := f.Unit("gc.service"); !ok || u.Status.ActiveState != "inactive" {
		t.Errorf("service = %+v, %v", u, ok)
	}
	if v, err := f.Property(ctx, "gc.timer", "Unit", "Description"); err != nil || v != "gc" {
		t.Errorf("Property Description = %v, %v", v, err)
	}
	f.InjectError("", "gc.timer", units.ErrTimeout)
	if err := f.Stop(ctx, "other.slice"); err != nil {
		t.Errorf("injection for gc.timer hit other.slice: %v", err)
	}
	if err := f.Stop(ctx, "gc.timer"); !errors.Is(err, units.ErrTimeout) {
		t.Errorf("Stop = %v, want injected ErrTimeout", err)
	}
}
