package agent

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// lockedBuffer is a bytes.Buffer for a process's output read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIntegrationSlicectlAsKubectl drives make build's slicectl against a real slicelet the way a
// kubectl user would: apply from the standard input, get -w seeing Pending then Running, a
// server dry run that stores nothing, logs with --since/--since-time/--timestamps/--tail,
// completion of a pod name, the pod's events (events, describe) and delete -f - --grace-period
// waiting until the pod is gone; the events are still there after a restart.
func TestIntegrationSlicectlAsKubectl(t *testing.T) {
	e := newDaemonEnv(t, "")
	systemdtest.SandboxOnly(t, e.env, "slicectl's behaviours do not depend on the cgroup layout")
	slicectl := slicectlBinary(t)
	unit := "slicelet-slicectl-it.service"
	t.Cleanup(func() {
		_ = e.sd.Stop(context.Background(), unit)
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = e.sd.Stop(context.Background(), s)
		}
	})
	agentService(t, e.sd, unit, e.cfgPath)

	ctl := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), slicectl, append(args, "--socket", e.sock)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := ctl(stdin, args...)
		if err != nil {
			t.Fatalf("slicectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}

	// The watch, before the pod exists: one line per change of the phase.
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watch := exec.CommandContext(watchCtx, slicectl, "--socket", e.sock, "get", "pods", "-w",
		"-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase", "--no-headers")
	var watched, watchErr lockedBuffer
	watch.Stdout, watch.Stderr = &watched, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWatch(); _ = watch.Wait() })

	// An init container keeps the pod Pending for two seconds, longer than a watch round.
	// The app ignores SIGTERM: only delete's --grace-period keeps its deletion short.
	web := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 60\n" +
		"  initContainers:\n  - name: wait\n    command: [/bin/sleep, '2']\n" +
		"  containers:\n  - name: app\n    command: [/bin/sh, -c, 'trap \"\" TERM; echo one; echo two; while :; do sleep 1; done']\n"
	if out := must(web, "apply", "-f", "-"); out != "pod/web created\n" {
		t.Errorf("apply -f -: %q", out)
	}
	// phases are the watch's lines, blanks squeezed.
	phases := func() []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(watched.String()), "\n") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	waitFor(t, 60*time.Second, "get -w to show web Running", func() bool {
		return slices.Contains(phases(), "web Running")
	})
	if got := phases(); got[0] != "web Pending" {
		t.Errorf("get -w: %q, want web Pending first; stderr: %s", got, watchErr.String())
	}

	// Server dry run: checked, admitted, stored nothing.
	dry := strings.Replace(web, "name: web", "name: dry", 1)
	if out := must(dry, "apply", "-f", "-", "--dry-run=server"); out != "pod/dry created (server dry run)\n" {
		t.Errorf("server dry run: %q", out)
	}
	if _, errOut, err := ctl("", "get", "pod", "dry"); err == nil || !strings.Contains(errOut, "not found") {
		t.Errorf("the dry run stored the pod: %v %s", err, errOut)
	}

	// Logs.
	waitFor(t, 30*time.Second, "web's output", func() bool {
		out, _, _ := ctl("", "logs", "web")
		return out == "one\ntwo\n"
	})
	if out := must("", "logs", "web", "--tail", "1"); out != "two\n" {
		t.Errorf("logs --tail 1: %q", out)
	}
	if out := must("", "logs", "web", "--since", "1h", "--timestamps"); !strings.HasSuffix(strings.Split(out, "\n")[0], " one") ||
		!strings.HasPrefix(out, time.Now().UTC().Format("2006-")) {
		t.Errorf("logs --since 1h --timestamps: %q", out)
	}
	if out := must("", "logs", "web", "--since-time", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); out != "" {
		t.Errorf("logs --since-time in the future: %q", out)
	}
	if out := must("", "logs", "web", "--all-containers", "--prefix"); !strings.Contains(out, "[pod/web/app] one\n") {
		t.Errorf("logs --all-containers --prefix: %q", out)
	}

	// Completion of a pod name, as the shell scripts ask for it (the word completed comes last).
	if out, err := exec.CommandContext(t.Context(), slicectl, "__complete", "--socket", e.sock, "logs", "w").Output(); err != nil || string(out) != "web\n:4\n" {
		t.Errorf("completion of logs w: %q, %v", out, err)
	}

	// The pod's events: admission, then the worker's container events.
	out := must("", "events", "--for", "pod/web")
	var squeezed []string
	for _, l := range strings.Split(out, "\n") {
		squeezed = append(squeezed, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{"Normal Admitted pod/web Admitted from api", "Normal Started pod/web Container started"} {
		if !strings.Contains(strings.Join(squeezed, "\n"), want) {
			t.Errorf("events --for pod/web lacks %q:\n%s", want, out)
		}
	}
	if out := must("", "describe", "pod", "web"); !regexp.MustCompile(`Events:\n +Type +Reason`).MatchString(out) {
		t.Errorf("describe pod web has no events:\n%s", out)
	}

	// delete -f - waits until the pod is gone: 2 s for the app to stop, not the pod's 60.
	start := time.Now()
	if out := must(web, "delete", "-f", "-", "--grace-period", "2"); out != "pod \"web\" deleted\n" {
		t.Errorf("delete -f -: %q", out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("delete --grace-period 2 took %s: the pod's own 60 s applied", took)
	} else {
		t.Logf("delete --grace-period 2 --wait took %s", took.Round(time.Millisecond))
	}
	if out, errOut, _ := ctl("", "get", "pods", "-o", "name"); out != "" || !strings.Contains(errOut, "No resources found") {
		t.Errorf("after delete --wait: %q %q", out, errOut)
	}
	if list, err := e.sd.List(t.Context(), "kubepods-*-pod*.slice"); err != nil || len(list) != 0 {
		t.Errorf("pod slices after delete --wait: %+v, %v", list, err)
	}
	t.Logf("get -w printed:\n%s", watched.String())

	// The events outlive slicelet: a restarted daemon still shows them.
	stopWatch()
	if err := e.sd.Stop(t.Context(), unit); err != nil {
		t.Fatal(err)
	}
	agentService(t, e.sd, unit, e.cfgPath)
	if out := must("", "events", "--for", "pod/web"); !strings.Contains(out, "Container started") {
		t.Errorf("events after a restart:\n%s", out)
	}
}
