package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/units"
)

// TestIntegrationRestartNoStatusRegression: with a few dozen pods running, slicelet is
// restarted (stopped cleanly, then killed): from its READY on, every listing of the API shows
// every pod Running with the same container, never Pending, and nothing is restarted.
func TestIntegrationRestartNoStatusRegression(t *testing.T) {
	d := newDaemonEnv(t, "[node]\nmax_pods = 100")
	ctx := t.Context()
	n := 36
	if d.env.Where == "vm" {
		n = 12 // the VM's software emulation is ≈5× slower
	}
	for i := range n {
		name := fmt.Sprintf("keep-%02d", i)
		m := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n", name)
		if err := os.WriteFile(filepath.Join(d.podsDir, name+".yaml"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unit := "slicelet-adopt-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)

	// containers maps pod name → container ID once all run.
	var containers map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := client.ListPods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		containers = map[string]string{}
		for _, p := range list {
			if p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				containers[p.Name] = p.Status.ContainerStatuses[0].ContainerID
			}
		}
		if len(containers) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods running after 60 s", len(containers), n)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// check polls the API for a while after READY: every listing has every pod, Running,
	// with its container of before the restart.
	check := func(what string) {
		t.Helper()
		polls := 0
		end := time.Now().Add(3 * time.Second)
		for time.Now().Before(end) {
			list, err := client.ListPods(ctx)
			if err != nil {
				t.Fatalf("%s: poll %d: %v", what, polls, err)
			}
			var problems []string
			for _, p := range list {
				switch {
				case p.Status.Phase != v1.PodRunning:
					problems = append(problems, fmt.Sprintf("%s %s (%s)", p.Name, p.Status.Phase, p.Status.Reason))
				case len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID != containers[p.Name]:
					problems = append(problems, fmt.Sprintf("%s: container %+v, want %s", p.Name, p.Status.ContainerStatuses, containers[p.Name]))
				case p.Status.ContainerStatuses[0].RestartCount != 0:
					problems = append(problems, fmt.Sprintf("%s restarted", p.Name))
				}
			}
			if len(list) != n {
				problems = append(problems, fmt.Sprintf("%d pods listed, want %d", len(list), n))
			}
			if len(problems) > 0 {
				t.Fatalf("%s: poll %d after READY: %s", what, polls, strings.Join(problems, "; "))
			}
			polls++
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: %d polls after READY, all %d pods Running every time", what, polls, n)
	}

	// A clean restart (systemctl restart), then a crash.
	if err := d.sd.Stop(ctx, unit); err != nil { // waits until it is gone
		t.Fatal(err)
	}
	agentService(t, d.sd, unit, d.cfgPath)
	check("after a clean restart")
	if err := d.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillMain); err != nil {
		t.Fatal(err)
	}
	waitInactive(t, d.sd, unit)
	agentService(t, d.sd, unit, d.cfgPath)
	check("after SIGKILL and a restart")
}
