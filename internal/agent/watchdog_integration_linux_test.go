package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/units"
)

// stallEvictionEnv names a marker file. In agent mode, an eviction cycle that finds the file
// removes it and blocks forever: the loop stops completing cycles, the watchdog withholds its
// pings and systemd restarts slicelet. Removing the marker makes only the first run stall.
const stallEvictionEnv = "SLICELET_AGENT_TEST_STALL_EVICTION"

// stallEvictionFromEnv is the agent mode's eviction hook (nil when stallEvictionEnv is unset).
func stallEvictionFromEnv() func() {
	marker := os.Getenv(stallEvictionEnv)
	if marker == "" {
		return nil
	}
	return func() {
		if err := os.Remove(marker); err != nil {
			return // no marker: a normal cycle
		}
		fmt.Fprintln(os.Stderr, "test hook: stalling the eviction loop")
		select {} // the hung loop; systemd's watchdog ends the process
	}
}

// TestIntegrationWatchdogRestartsStalledLoop: slicelet runs as a Type=notify service with
// WatchdogSec=3s and Restart=on-failure, a manifest pod running. Its eviction loop is stalled
// deliberately; systemd kills it for the missed watchdog (result "watchdog") and restarts it, the
// pod's container unit keeps running throughout (same invocation, same main PID), and the new
// slicelet adopts the pod (the API lists it once, Running, with the same UID).
func TestIntegrationWatchdogRestartsStalledLoop(t *testing.T) {
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "systemd's watchdog and the adoption after it do not depend on the cgroup layout")
	// A 1 s monitoring interval keeps the loop's health bound (3 intervals + grace + cleanup
	// wait) as short as it gets.
	d := newDaemonEnv(t, "[eviction]\nmonitoring_interval = \"1s\"")
	sd, dir, podsDir, sock, cfgPath := d.sd, d.dir, d.podsDir, d.sock, d.cfgPath
	ctx := t.Context()
	marker := filepath.Join(dir, "stall")
	unit := "slicelet-watchdog-it.service"
	t.Cleanup(func() { _ = sd.Stop(context.Background(), unit) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = sd.StartService(ctx, unit, []units.Property{
		{Name: "Description", Value: "slicelet under test (watchdog)"},
		{Name: "Type", Value: "notify"},
		{Name: "ExecStart", Value: []units.Exec{{Path: exe, Args: []string{exe}}}},
		{Name: "Environment", Value: []string{agentModeEnv + "=" + cfgPath, systemdtest.InsideEnv + "=sandbox", stallEvictionEnv + "=" + marker}},
		{Name: "WatchdogUSec", Value: uint64(3 * time.Second / time.Microsecond)},
		{Name: "Restart", Value: "on-failure"},
		{Name: "RestartUSec", Value: uint64(200 * time.Millisecond / time.Microsecond)},
	})
	if err != nil {
		out, _ := run("journalctl", "--no-pager", "-u", unit, "-n", "50")
		t.Fatalf("start %s: %v\n%s", unit, err, out)
	}
	client := api.NewClient(sock)

	poll := func(limit time.Duration, what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				out, _ := run("journalctl", "--no-pager", "-o", "cat", "-u", unit, "-n", "40")
				t.Fatalf("%s: %s\n%s", what, state, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	nRestarts := func() uint32 {
		v, err := sd.Property(ctx, unit, "Service", "NRestarts")
		if err != nil {
			t.Fatalf("NRestarts: %v", err)
		}
		n, ok := v.(uint32)
		if !ok {
			t.Fatalf("NRestarts is %T %v", v, v)
		}
		return n
	}

	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: steady}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sleep, \"1000\"]\n"
	if err := os.WriteFile(filepath.Join(podsDir, "steady.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	poll(30*time.Second, "pod running", func() (bool, string) {
		p, err := client.GetPod(ctx, "default", "steady")
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %s %s", p.Status.Phase, p.Status.Message)
	})
	container := func() units.UnitInfo {
		t.Helper()
		list, err := sd.List(ctx, "slicelet-"+strings.ReplaceAll(string(pod.UID), "-", "_")+"-*.service")
		if err != nil || len(list) != 1 {
			t.Fatalf("container units of %s: %+v (%v)", pod.UID, list, err)
		}
		info, err := sd.Properties(ctx, list[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	before := container()
	if before.ActiveState != "active" || before.MainPID == 0 || before.InvocationID == "" {
		t.Fatalf("container before the stall: %+v", before)
	}
	mainBefore, err := sd.Properties(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	restartsBefore := nRestarts()

	// Stall the loop. Expect the restart within the health bound (3×1 s + 1 s + the 30 s cleanup
	// wait) plus WatchdogSec, with slack.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll(90*time.Second, "systemd restarted slicelet", func() (bool, string) {
		n := nRestarts()
		return n > restartsBefore, fmt.Sprintf("NRestarts %d", n)
	})
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the restart happened without the stall hook running")
	}
	// Result= is reset when the new run starts; systemd's own journal line keeps it.
	poll(10*time.Second, "systemd logged the watchdog result", func() (bool, string) {
		out, _ := run("journalctl", "--no-pager", "-o", "cat", "-u", unit)
		return strings.Contains(out, "Watchdog timeout") && strings.Contains(out, "result 'watchdog'"), "no watchdog lines"
	})
	poll(30*time.Second, "restarted slicelet ready", func() (bool, string) {
		info, err := sd.Properties(ctx, unit)
		return err == nil && info.ActiveState == "active" && info.SubState == "running" && info.MainPID != mainBefore.MainPID,
			fmt.Sprintf("%+v %v", info, err)
	})

	after := container()
	if after.ActiveState != "active" || after.MainPID != before.MainPID || after.InvocationID != before.InvocationID {
		t.Errorf("container unit disturbed by the restart:\nbefore %+v\nafter  %+v", before, after)
	}
	poll(30*time.Second, "restarted slicelet adopted the pod", func() (bool, string) {
		list, err := client.ListPods(ctx)
		if err != nil {
			return false, err.Error()
		}
		var found []string
		for _, p := range list {
			if p.Name == "steady" {
				found = append(found, fmt.Sprintf("%s/%s", p.UID, p.Status.Phase))
			}
		}
		return len(found) == 1 && found[0] == fmt.Sprintf("%s/%s", pod.UID, v1.PodRunning), fmt.Sprint(found)
	})
	if n := nRestarts(); n != restartsBefore+1 {
		t.Errorf("NRestarts = %d, want %d (one watchdog restart)", n, restartsBefore+1)
	}
}
