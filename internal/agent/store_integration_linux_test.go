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
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/source"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// TestIntegrationStoredPodsSurviveDamage: the largest API pod (1.5 MiB of '<' in its
// containers' arguments, six times that in HTML-escaped JSON) is running again after a SIGKILL and a
// restart; a pod whose record is damaged while slicelet is down keeps running, unmanaged, is
// listed Unknown with the problem and the node condition APIPodStoreProblem is true, until a
// delete through the API resolves it (then its units go).
func TestIntegrationStoredPodsSurviveDamage(t *testing.T) {
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "the API pod store and its damage do not depend on the cgroup layout")
	d := newDaemonEnv(t, "")
	ctx := t.Context()
	cg := hierarchy.NewCgroupFS(d.env.CgroupRoot)
	unit := "slicelet-store-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)

	// podOf is a pod whose container carries n bytes of '<', half in its arguments, half in its
	// environment, at most 100 000 a string: each of its ExecStart= and Environment= lines stays
	// under systemd's LONG_LINE_MAX and all under execve's limit (the API caps annotations at
	// 256 KiB, so they cannot carry it).
	podOf := func(name string, n int) []byte {
		chunks := func(n int) []string {
			var out []string
			for n > 0 {
				k := min(n, 100000)
				out = append(out, strings.Repeat("<", k))
				n -= k
			}
			return out
		}
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n")
		b.WriteString("  - name: c\n    command: [/bin/sh, -c, exec sleep infinity]\n    args:\n    - sh\n")
		for _, a := range chunks(n / 2) {
			fmt.Fprintf(&b, "    - \"%s\"\n", a)
		}
		b.WriteString("    env:\n    - {name: E, value: e}\n")
		for i, v := range chunks(n - n/2) {
			fmt.Fprintf(&b, "    - {name: E%d, value: \"%s\"}\n", i, v)
		}
		return []byte(b.String())
	}
	big, err := client.ApplyPod(ctx, podOf("big", 3<<19-8192))
	if err != nil {
		t.Fatal(err)
	}
	victim, err := client.ApplyPod(ctx, podOf("victim", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{string(big.Pod.UID): "big", string(victim.Pod.UID): "victim"}
	waitConverged(t, d, cg, want)

	if err := d.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillMain); err != nil {
		t.Fatal(err)
	}
	waitInactive(t, d.sd, unit)
	record := filepath.Join(d.dir, "state", source.APIStoreDir, "default_victim.json")
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	agentService(t, d.sd, unit, d.cfgPath)

	// Both pods' units run: the big one managed, the victim held.
	waitConverged(t, d, cg, want)
	p, err := client.GetPod(ctx, "default", "victim")
	if err != nil || p.Status.Phase != v1.PodUnknown || p.Status.Reason != pods.ReasonUnreadable || !strings.Contains(p.Status.Message, "api-aside") {
		t.Fatalf("held pod: %v %+v", err, p.Status)
	}
	if got, err := client.GetPod(ctx, "default", "big"); err != nil || got.UID != big.Pod.UID {
		t.Fatalf("the largest pod after a restart: %v (uid %s, want %s)", err, got.UID, big.Pod.UID)
	}
	node, err := client.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := conditionOf(node.Node.Status.Conditions, conditionAPIPodStoreProblem); c == nil || c.Status != v1.ConditionTrue {
		t.Fatalf("node condition %s = %+v, want True", conditionAPIPodStoreProblem, c)
	}

	// A delete resolves it: the held pod's units are orphans now.
	if err := client.DeletePod(ctx, "default", "victim"); err != nil {
		t.Fatal(err)
	}
	delete(want, string(victim.Pod.UID))
	waitConverged(t, d, cg, want)
	if _, err := client.GetPod(ctx, "default", "victim"); err == nil {
		t.Error("deleted held pod still listed")
	}
}

// waitConverged waits until systemd holds exactly the wanted pods (converged).
func waitConverged(t *testing.T, d *daemonEnv, cg *hierarchy.CgroupFS, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		last := converged(t, d.sd, cg, want)
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after 60 s: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestIntegrationApplyRacesAndClashes: nine concurrent applies of one new name through the
// API answer "created" exactly once; a manifest file for the name of a running API pod is
// refused naming both sources, and the API pod keeps running.
func TestIntegrationApplyRacesAndClashes(t *testing.T) {
	d := newDaemonEnv(t, "")
	ctx := t.Context()
	cg := hierarchy.NewCgroupFS(d.env.CgroupRoot)
	unit := "slicelet-race-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)
	manifest := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: race}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n")
	type result struct {
		res api.ApplyResult
		err error
	}
	results := make(chan result, 9)
	for range 9 {
		go func() {
			res, err := client.ApplyPod(ctx, manifest)
			results <- result{res, err}
		}()
	}
	actions := map[string]int{}
	var uid string
	for range 9 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		actions[r.res.Action]++
		uid = string(r.res.Pod.UID)
	}
	if actions[api.ActionCreated] != 1 || actions[api.ActionUnchanged] != 8 {
		t.Fatalf("actions %v, want one created and eight unchanged", actions)
	}

	file := filepath.Join(d.podsDir, "race.yaml")
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		node, err := client.Node(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := ""
		for _, w := range node.Health {
			if w.Code == "manifests" && strings.Contains(w.Message, file) && strings.Contains(w.Message, "(api source)") {
				found = w.Message
			}
		}
		if found != "" {
			t.Logf("refused: %s", found)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clash is not reported naming both sources: %+v", node.Health)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitConverged(t, d, cg, map[string]string{uid: "race"})
	if p, err := client.GetPod(ctx, "default", "race"); err != nil || string(p.UID) != uid || p.Annotations[pods.AnnotationSource] != pods.SourceAPI {
		t.Fatalf("the API pod after the clash: %v %s %v", err, p.UID, p.Annotations)
	}
}
