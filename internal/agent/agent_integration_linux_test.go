package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// agentModeEnv makes the test binary run the agent with the configuration file it names instead
// of the tests, so a test can run slicelet as a real Type=notify service and SIGKILL it.
const agentModeEnv = "SLICELET_AGENT_TEST_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(agentModeEnv); path != "" {
		os.Exit(runAgentMode(path))
	}
	// make build's slicectl, for the GC timers' services (TestIntegrationGCTimers); the manifest
	// corpus and its outcome table, for TestIntegrationCorpus (in the VM too).
	slicectl, _ := filepath.Abs("../../bin/slicectl")
	testdata, _ := filepath.Abs("../../testdata")
	// make device-plugin-build's sample device plugin, for TestIntegrationDevicePlugin.
	plugin, _ := filepath.Abs("../../build/sample-device-plugin")
	os.Exit(systemdtest.MainWith(m, systemdtest.Options{Files: []string{slicectl, plugin}, Dirs: []string{testdata}}))
}

// daemonEnv is a connection to the instance's systemd and a slicelet configuration in a
// temporary directory, as the daemon tests run slicelet.
type daemonEnv struct {
	env                         systemdtest.Env
	sd                          *units.Manager
	dir, podsDir, sock, cfgPath string
}

// newDaemonEnv connects to systemd and writes the configuration: the state, the manifest
// directory (created) and the API socket in a temporary directory, metrics off, plus extra TOML
// tables.
func newDaemonEnv(t *testing.T, extra string) *daemonEnv {
	t.Helper()
	env := systemdtest.Require(t)
	sd, err := units.Connect(t.Context(), units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	dir := t.TempDir()
	e := &daemonEnv{env: env, sd: sd, dir: dir, podsDir: filepath.Join(dir, "pods.d"), sock: filepath.Join(dir, "api.sock"), cfgPath: filepath.Join(dir, "config.toml")}
	if err := os.MkdirAll(e.podsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("state_dir = %q\n%s\n[pods]\nmanifest_dir = %q\n[api]\nsocket = %q\ngroup = \"root\"\n[metrics]\naddress = \"\"\n",
		filepath.Join(dir, "state"), extra, e.podsDir, e.sock)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
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
	if err := Run(ctx, Options{Config: cfg, Logger: log, evictionBeforeCycle: stallEvictionFromEnv()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// agentService runs this test binary in agent mode as a transient Type=notify service, like
// slicelet.service, and waits until it reported READY=1. env adds NAME=value variables.
func agentService(t *testing.T, sd *units.Manager, unit, configPath string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = sd.StartService(t.Context(), unit, []units.Property{
		{Name: "Description", Value: "slicelet under test"},
		{Name: "Type", Value: "notify"},
		{Name: "ExecStart", Value: []units.Exec{{Path: exe, Args: []string{exe}}}},
		{Name: "Environment", Value: append([]string{agentModeEnv + "=" + configPath, systemdtest.InsideEnv + "=sandbox"}, env...)},
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
	t.Cleanup(func() { sd.Close() }) // after the cleanups below (LIFO), which still need it

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

// TestIntegrationRestartSafety: 20 rounds of SIGKILL to slicelet at random points while pods are
// created and deleted through the manifest directory and the API. Afterwards every wanted pod
// exists exactly once (one slice, one running container), nothing of a deleted pod is left
// (no slice, no container unit, no cgroup), and the API pod survived every restart.
func TestIntegrationRestartSafety(t *testing.T) {
	d := newDaemonEnv(t, "[node]\nmax_pods = 200")
	env, sd, podsDir, sock, cfgPath := d.env, d.sd, d.podsDir, d.sock, d.cfgPath
	ctx := t.Context()
	cg := hierarchy.NewCgroupFS(env.CgroupRoot)

	unit := "slicelet-restart-it.service"
	t.Cleanup(func() { _ = sd.Stop(context.Background(), unit) })
	agentService(t, sd, unit, cfgPath)

	client := api.NewClient(sock)
	apiPod := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: from-api}\nspec:\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n")
	if _, err := client.ApplyPod(ctx, apiPod); err != nil {
		t.Fatal(err)
	}

	// The full run in the sandbox; under the VM's software emulation (≈5× slower) a shorter one
	// that still crosses restarts with pods in flight.
	rounds, wantPods := 20, 50
	if env.Where == "vm" {
		rounds, wantPods = 6, 15
		t.Logf("cgroup v2 VM: %d rounds, %d pods", rounds, wantPods)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	present := map[string]bool{}
	write := func() {
		name := fmt.Sprintf("p%02d", next)
		next++
		m := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n", name)
		p := filepath.Join(podsDir, name+".yaml")
		if err := os.WriteFile(p+".tmp", []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
		present[p] = true
	}
	remove := func() {
		for p := range present {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			delete(present, p)
			return
		}
	}
	for round := range rounds {
		for range 2 + round%2 {
			write()
		}
		if round%3 == 2 {
			remove()
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if err := sd.Kill(ctx, unit, syscall.SIGKILL, units.KillMain); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		waitInactive(t, sd, unit)
		agentService(t, sd, unit, cfgPath)
	}
	if next != wantPods {
		t.Fatalf("created %d pods, want %d", next, wantPods)
	}

	// The wanted pods, by UID, as the daemon derives them.
	want := map[string]string{}
	for p := range present {
		got, err := manifest.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want[string(got[0].UID)] = got[0].Name
	}
	apiGot, err := client.GetPod(ctx, "default", "from-api")
	if err != nil {
		t.Fatalf("API pod after 20 restarts: %v", err)
	}
	want[string(apiGot.UID)] = "from-api"

	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		last = converged(t, sd, cg, want)
		if last == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after 60 s: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// And the API reports each of them once, Running.
	for {
		list, err := client.ListPods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		var problems []string
		for _, p := range list {
			seen[p.Name]++
			if p.Status.Phase != v1.PodRunning {
				problems = append(problems, fmt.Sprintf("pod %s: phase %s (%s)", p.Name, p.Status.Phase, p.Status.Message))
			}
		}
		for _, name := range want {
			if seen[name] != 1 {
				problems = append(problems, fmt.Sprintf("pod %s listed %d times", name, seen[name]))
			}
		}
		if len(list) != len(want) {
			problems = append(problems, fmt.Sprintf("API lists %d pods, want %d", len(list), len(want)))
		}
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("API not converged: %s", strings.Join(problems, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitInactive(t *testing.T, sd *units.Manager, unit string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := sd.Properties(t.Context(), unit)
		if err == nil && (info.ActiveState == "failed" || info.ActiveState == "inactive") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %+v after SIGKILL", unit, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// converged returns "" when systemd holds exactly the wanted pods: one active slice and one
// running container unit each, and no slice, container unit or cgroup of any other pod.
func converged(t *testing.T, sd *units.Manager, cg *hierarchy.CgroupFS, want map[string]string) string {
	t.Helper()
	ctx := t.Context()
	sliceList, err := sd.List(ctx, slices.PodSlicePatterns...)
	if err != nil {
		return err.Error()
	}
	gotSlices := map[string]int{}
	for _, u := range sliceList {
		if u.ActiveState != "active" {
			continue
		}
		_, uid, ok := slices.ParsePodSliceName(u.Name)
		if !ok {
			return "unparsable pod slice " + u.Name
		}
		gotSlices[uid]++
	}
	ctrs, err := sd.List(ctx, "slicelet-*.service")
	if err != nil {
		return err.Error()
	}
	running := map[string]int{}
	for _, u := range ctrs {
		if u.ActiveState == "active" && strings.HasPrefix(u.Description, "container ") {
			// slicelet-<uid_>-<container>-<n>.service
			rest := strings.TrimPrefix(u.Name, "slicelet-")
			uid := strings.ReplaceAll(rest[:strings.Index(rest, "-")], "_", "-")
			running[uid]++
		}
	}
	var problems []string
	for uid, name := range want {
		if gotSlices[uid] != 1 {
			problems = append(problems, fmt.Sprintf("pod %s: %d slices", name, gotSlices[uid]))
		}
		if running[uid] != 1 {
			problems = append(problems, fmt.Sprintf("pod %s: %d running containers", name, running[uid]))
		}
	}
	for uid, n := range gotSlices {
		if _, ok := want[uid]; !ok {
			problems = append(problems, fmt.Sprintf("leaked slice for uid %s (%d)", uid, n))
		}
	}
	for uid, n := range running {
		if _, ok := want[uid]; !ok {
			problems = append(problems, fmt.Sprintf("leaked container for uid %s (%d)", uid, n))
		}
	}
	for _, qos := range []v1.PodQOSClass{v1.PodQOSBestEffort, v1.PodQOSBurstable} {
		parent := "/kubepods.slice/" + slices.QOSSliceName(qos)
		for _, d := range cg.Dirs(parent) {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if _, uid, ok := slices.ParsePodSliceName(e.Name()); ok {
					if _, wanted := want[uid]; !wanted {
						problems = append(problems, "leaked cgroup "+filepath.Join(d, e.Name()))
					}
				}
			}
		}
	}
	return strings.Join(problems, "; ")
}

// TestIntegrationManifestLifecycle: a manifest dropped in the directory runs; editing it
// replaces the pod (new UID, old slice gone); breaking it changes nothing but is reported in
// STATUS=; removing it deletes the pod.
func TestIntegrationManifestLifecycle(t *testing.T) {
	d := newDaemonEnv(t, "")
	sd, podsDir, sock, cfgPath := d.sd, d.podsDir, d.sock, d.cfgPath
	ctx := t.Context()
	unit := "slicelet-manifest-it.service"
	t.Cleanup(func() { _ = sd.Stop(context.Background(), unit) })
	agentService(t, sd, unit, cfgPath)
	client := api.NewClient(sock)

	manifest := func(cmd string) []byte {
		return fmt.Appendf(nil, "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sh, -c, %q]\n", cmd)
	}
	path := filepath.Join(podsDir, "a.yaml")
	put := func(data []byte) {
		t.Helper()
		if err := os.MkdirAll(podsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	running := func() (v1.Pod, bool, string) {
		p, err := client.GetPod(ctx, "default", "a")
		if err != nil {
			return p, false, err.Error()
		}
		return p, p.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %s %s", p.Status.Phase, p.Status.Message)
	}

	put(manifest("sleep 1000"))
	var first v1.Pod
	waitFor("first version running", func() (bool, string) {
		p, ok, s := running()
		first = p
		return ok, s
	})

	put(manifest("sleep 2000"))
	var second v1.Pod
	waitFor("edited version running", func() (bool, string) {
		p, ok, s := running()
		second = p
		return ok && p.UID != first.UID, s + " uid " + string(p.UID)
	})
	waitFor("old slice gone", func() (bool, string) {
		list, _ := sd.List(ctx, "*pod"+strings.ReplaceAll(string(first.UID), "-", "_")+".slice")
		for _, u := range list {
			if u.ActiveState == "active" {
				return false, "still active: " + u.Name
			}
		}
		return true, ""
	})

	put([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [ {name: c, bogusField: 1} ]\n"))
	waitFor("problem reported in STATUS=", func() (bool, string) {
		st, err := sd.Property(ctx, unit, "org.freedesktop.systemd1.Service", "StatusText")
		return err == nil && strings.Contains(fmt.Sprint(st), "1 manifest problems"), fmt.Sprint(st, err)
	})
	if p, ok, s := running(); !ok || p.UID != second.UID {
		t.Fatalf("a broken manifest disturbed the running pod: %s uid %s", s, p.UID)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor("pod deleted", func() (bool, string) {
		_, err := client.GetPod(ctx, "default", "a")
		list, _ := sd.List(ctx, "*pod"+strings.ReplaceAll(string(second.UID), "-", "_")+".slice")
		return err != nil && len(list) == 0, fmt.Sprint(err, list)
	})
}

// TestRunFailureAfterConnecting: a configuration that fails once systemd is connected (cluster
// mode with a kubeconfig that does not exist) is an error naming it, after the connection is
// closed — never a panic on the daemon that was not returned.
func TestRunFailureAfterConnecting(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.kubeconfig")
	e := newDaemonEnv(t, fmt.Sprintf("[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = \"n1\"\n", missing))
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	err = Run(t.Context(), Options{Config: cfg, Logger: log, CgroupRoot: e.env.CgroupRoot})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Run with a missing kubeconfig: %v, want an error naming %s", err, missing)
	}
}
