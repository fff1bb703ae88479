package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/systemdtest"
	"github.com/slicelet/slicelet/units"
)

// agentModeEnv makes the test binary run the agent with the configuration file it names instead
// of the tests, so a test can run slicelet as a real Type=notify service and SIGKILL it.
const agentModeEnv = "SLICELET_AGENT_TEST_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(agentModeEnv); path != "" {
		os.Exit(runAgentMode(path))
	}
	os.Exit(systemdtest.Main(m))
}

func runAgentMode(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := Run(ctx, Options{Config: cfg, Logger: log}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// agentService runs this test binary in agent mode as a transient Type=notify service, like
// slicelet.service, and waits until it reported READY=1.
func agentService(t *testing.T, sd *units.Manager, unit, configPath string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = sd.StartService(t.Context(), unit, []units.Property{
		{Name: "Description", Value: "slicelet under test"},
		{Name: "Type", Value: "notify"},
		{Name: "ExecStart", Value: []units.Exec{{Path: exe, Args: []string{exe}}}},
		{Name: "Environment", Value: []string{agentModeEnv + "=" + configPath, systemdtest.InsideEnv + "=sandbox"}},
		{Name: "WatchdogUSec", Value: uint64(30 * time.Second / time.Microsecond)},
	})
	if err != nil {
		out, _ := run("journalctl", "--no-pager", "-u", unit, "-n", "50")
		t.Fatalf("start %s: %v\n%s", unit, err, out)
	}
}

// TestIntegrationDaemonBuildsAndAdoptsHierarchy: slicelet run as a service builds the node
// and QoS slices, reports READY=1 and a STATUS= line, and after SIGKILL and a restart adopts the
// slices it left instead of failing or duplicating them.
func TestIntegrationDaemonBuildsAndAdoptsHierarchy(t *testing.T) {
	env := systemdtest.Require(t)
	ctx := t.Context()
	sd, err := units.Connect(ctx, units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, `state_dir = %q
[node]
system_reserved = { cpu = "100m", memory = "256Mi" }
kube_reserved = { cpu = "100m", memory = "256Mi" }
[pods]
manifest_dir = %q
[api]
socket = %q
group = "root"
[metrics]
address = ""
`, filepath.Join(dir, "state"), filepath.Join(dir, "pods.d"), filepath.Join(dir, "api.sock")), 0o644); err != nil {
		t.Fatal(err)
	}
	unit := "slicelet-agent-it.service"
	t.Cleanup(func() {
		_ = sd.Stop(context.Background(), unit)
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = sd.Stop(context.Background(), s)
		}
	})
	agentService(t, sd, unit, cfgPath)

	check := func(when string) {
		t.Helper()
		list, err := sd.List(ctx, "kubepods*.slice")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range list {
			if u.ActiveState == "active" {
				names = append(names, u.Name)
			}
		}
		if got := strings.Join(names, " "); got != "kubepods-besteffort.slice kubepods-burstable.slice kubepods.slice" {
			t.Errorf("%s: active kubepods slices = %q", when, got)
		}
		status, err := sd.Property(ctx, unit, "org.freedesktop.systemd1.Service", "StatusText")
		if err != nil || !strings.Contains(fmt.Sprint(status), "pods running") && strings.Contains(fmt.Sprint(status), "allocatable") {
			t.Errorf("%s: STATUS= %q (%v)", when, status, err)
		}
		info, err := sd.Properties(ctx, unit)
		if err != nil || info.ActiveState != "active" {
			t.Errorf("%s: service %+v (%v)", when, info, err)
		}
	}
	check("first start")

	if err := sd.Kill(ctx, unit, syscall.SIGKILL, units.KillMain); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := sd.Properties(ctx, unit)
		if err == nil && (info.ActiveState == "failed" || info.ActiveState == "inactive") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service still %+v after SIGKILL", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The slices belong to systemd: they outlive slicelet.
	if list, _ := sd.List(ctx, "kubepods.slice"); len(list) != 1 || list[0].ActiveState != "active" {
		t.Errorf("kubepods.slice after SIGKILL: %+v", list)
	}
	agentService(t, sd, unit, cfgPath)
	check("after SIGKILL and restart")
	out, _ := run("journalctl", "--no-pager", "-o", "cat", "-u", unit)
	if strings.Contains(out, "already exists") {
		t.Errorf("restart hit unit-exists errors:\n%s", out)
	}
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
