package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/units"
)

// slicectlBinary returns a slicectl binary for the GC timers to run: make build's bin/slicectl,
// which TestMain hands into the sandbox (make test builds it first), else one built now from the
// module (possible when the package directory sits in a module the sandbox can see).
func slicectlBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(os.Getenv(systemdtest.FilesEnv), "slicectl")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	out := filepath.Join(t.TempDir(), "slicectl")
	cmd := exec.Command("go", "build", "-o", out, "../../cmd/slicectl")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("no slicectl for the gc timers: bin/slicectl is missing (run make build) and building one failed: %v\n%s", err, b)
	}
	return out
}

// TestIntegrationGCTimers: slicelet (built-in runtime) under a service creates
// slicelet-gc-containers.timer, PartOf its own unit, and removes an image GC timer a previous
// run left (this runtime has no images); the timer fires its oneshot service, which runs
// `slicectl gc containers` against the daemon successfully and puts the result in the journal;
// stopping slicelet takes the timer along. (TestIntegrationDaemonCRI checks the CRI runtime's
// two timers.)
func TestIntegrationGCTimers(t *testing.T) {
	e := newDaemonEnv(t, "[gc.containers]\nperiod = \"1s\"\n")
	// The guest has neither make build's bin/ nor a module to build slicectl from.
	systemdtest.SandboxOnly(t, e.env, "the GC timers are plain systemd timers, independent of the cgroup layout")
	ctx := t.Context()
	slicectl := slicectlBinary(t)
	unit := "slicelet-gc-it.service"
	timers := []string{"slicelet-gc-containers.timer"}
	t.Cleanup(func() {
		for _, u := range append([]string{unit, "slicelet-gc-containers.service", "slicelet-gc-images.service"}, timers...) {
			_ = e.sd.Stop(context.Background(), u)
		}
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = e.sd.Stop(context.Background(), s)
		}
	})
	// A stale image GC timer, as a slicelet that ran the CRI runtime and was killed leaves it.
	if err := e.sd.StartTimer(ctx, "slicelet-gc-images.timer", []units.Property{
		{Name: "Description", Value: "stale"},
		{Name: "TimersMonotonic", Value: []units.TimerMonotonic{{Base: "OnActiveSec", Elapse: time.Hour}}},
	}, "slicelet-gc-images.service", []units.Property{
		{Name: "Description", Value: "stale"}, {Name: "Type", Value: "oneshot"},
		{Name: "ExecStart", Value: units.Exec{Path: "/bin/true"}},
	}); err != nil {
		t.Fatal(err)
	}
	agentService(t, e.sd, unit, e.cfgPath, "PATH="+filepath.Dir(slicectl)+":/usr/sbin:/usr/bin:/sbin:/bin")
	if list, err := e.sd.List(ctx, "slicelet-gc-images.*"); err != nil || len(list) != 0 {
		t.Errorf("stale image GC units after start: %+v, %v; want none (the built-in runtime has no images)", list, err)
	}

	for _, timer := range timers {
		partOf, err := e.sd.Property(ctx, timer, "Unit", "PartOf")
		if err != nil {
			t.Fatalf("%s: %v", timer, err)
		}
		if list, _ := partOf.([]string); !slices.Contains(list, unit) {
			t.Errorf("%s PartOf = %v, want %s", timer, partOf, unit)
		}
	}
	for _, kind := range []string{"containers"} {
		svc := "slicelet-gc-" + kind + ".service"
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := e.sd.Properties(ctx, svc)
			if err == nil && info.ExecMainExitTimestamp.After(info.ExecMainStartTimestamp) && info.Result == "success" {
				break
			}
			if time.Now().After(deadline) {
				out, _ := run("journalctl", "--no-pager", "-n", "60", "-u", svc, "-u", unit, "-u", "slicelet-gc-"+kind+".timer")
				t.Fatalf("%s not run successfully by its timer within 30s: %+v (%v)\n%s", svc, info, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		out, _ := run("journalctl", "--no-pager", "-o", "cat", "-u", svc)
		if want := strings.TrimSuffix(kind, "s") + " gc ("; !strings.Contains(out, want) {
			t.Errorf("journal of %s lacks %q:\n%s", svc, want, out)
		}
	}
	if list, err := e.sd.List(ctx, "slicelet-gc-*.timer"); err != nil || len(list) != 1 {
		t.Errorf("timers listed: %+v, %v", list, err)
	}
	// The daemon's own record of the runs (journal fields of the collector's records).
	out, _ := run("journalctl", "--no-pager", "-o", "cat", "-u", unit)
	if !strings.Contains(out, "container gc finished") || !strings.Contains(out, "gc timer started") {
		t.Errorf("daemon journal lacks the gc records:\n%s", out)
	}

	if err := e.sd.Stop(ctx, unit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "timers stopped with slicelet", func() bool {
		list, err := e.sd.List(ctx, "slicelet-gc-*")
		if err != nil {
			return false
		}
		for _, u := range list {
			if u.ActiveState == "active" || u.ActiveState == "activating" {
				return false
			}
		}
		return true
	})
}
