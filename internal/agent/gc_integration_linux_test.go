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

	"github.com/slicelet/slicelet/internal/systemdtest"
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

// TestIntegrationGCTimers: slicelet under a service creates slicelet-gc-containers.timer and
// slicelet-gc-images.timer, PartOf its own unit; they fire their oneshot services, which run
// `slicectl gc …` against the daemon successfully and put the result in the journal; stopping
// slicelet takes the timers along.
func TestIntegrationGCTimers(t *testing.T) {
	e := newDaemonEnv(t, "[gc.containers]\nperiod = \"1s\"\n[gc.images]\nperiod = \"2s\"\n")
	// The guest has neither make build's bin/ nor a module to build slicectl from.
	systemdtest.SandboxOnly(t, e.env, "the GC timers are plain systemd timers, independent of the cgroup layout")
	ctx := t.Context()
	slicectl := slicectlBinary(t)
	unit := "slicelet-gc-it.service"
	timers := []string{"slicelet-gc-containers.timer", "slicelet-gc-images.timer"}
	t.Cleanup(func() {
		for _, u := range append([]string{unit, "slicelet-gc-containers.service", "slicelet-gc-images.service"}, timers...) {
			_ = e.sd.Stop(context.Background(), u)
		}
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = e.sd.Stop(context.Background(), s)
		}
	})
	agentService(t, e.sd, unit, e.cfgPath, "PATH="+filepath.Dir(slicectl)+":/usr/sbin:/usr/bin:/sbin:/bin")

	for _, timer := range timers {
		partOf, err := e.sd.Property(ctx, timer, "Unit", "PartOf")
		if err != nil {
			t.Fatalf("%s: %v", timer, err)
		}
		if list, _ := partOf.([]string); !slices.Contains(list, unit) {
			t.Errorf("%s PartOf = %v, want %s", timer, partOf, unit)
		}
	}
	for _, kind := range []string{"containers", "images"} {
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
	if list, err := e.sd.List(ctx, "slicelet-gc-*.timer"); err != nil || len(list) != 2 {
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
