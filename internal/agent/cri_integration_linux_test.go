package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	stdslices "slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/crirt"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// criTestImage is the busybox image the daemon's CRI pods run (imported, never pulled).
const criTestImage = "slicelet.test/busybox:1"

// TestIntegrationDaemonCRI runs slicelet with runtime.type = "cri" as a Type=notify service
// against a private containerd (internal/testharness/critest):
//   - a manifest pod runs in a cri-containerd-<id>.scope under its pod slice, and its output
//     is readable through the API (slicectl logs);
//   - containerd going away makes the pod Unknown (RuntimeUnavailable) within seconds while
//     nothing is deleted and slicelet stays up; when containerd is back the pod is Running
//     again with the same container, not a second one;
//   - image GC (slicectl gc images --dry-run) works against CRI and keeps the sandbox image;
//   - an endpoint where nothing listens leaves slicelet up (READY=1), logging an error that
//     names the endpoint, with its pods Unknown;
//   - every manifest of testdata/corpus the cri runtime runs runs (with the local image).
func TestIntegrationDaemonCRI(t *testing.T) {
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "the daemon's CRI wiring does not depend on the cgroup layout; crirt's TestIntegrationScopeInPodSlice covers CRI on cgroup v2")
	critest.Require(t)
	writablePodLogRoot(t)
	ctrd := critest.Start(t, critest.Options{Logf: t.Logf})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ctrd.ImportImage(ctx, critest.Image{Name: criTestImage, Cmd: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	// Runs after the subtests' cleanups, before containerd stops: nothing of theirs is left.
	// (Only this test's units: other tests' leftovers are theirs to report.)
	t.Cleanup(func() {
		sd, err := units.Connect(context.Background(), units.Options{})
		if err != nil {
			t.Errorf("systemd: %v", err)
			return
		}
		defer sd.Close()
		list, err := sd.List(context.Background(), "cri-containerd-*.scope", "slicelet-cri-*.service")
		for _, u := range list {
			if u.ActiveState == "active" || u.ActiveState == "activating" {
				t.Errorf("left behind: %s %s", u.Name, u.ActiveState)
			}
		}
		if err != nil {
			t.Errorf("units left behind: %v", err)
		}
	})
	t.Run("containerd restart", func(t *testing.T) { testDaemonCRIRestart(t, ctrd) })
	t.Run("corpus", func(t *testing.T) {
		// Every manifest of testdata/corpus the cri runtime runs, with the local busybox image.
		d := startCRIDaemon(t, "slicelet-cri-corpus-it.service", ctrd.Endpoint, ctrd.SandboxImage)
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := run("journalctl", "--no-pager", "-u", "slicelet-cri-corpus-it.service", "-n", "40")
				t.Logf("slicelet's journal:\n%s\ncontainerd's log:\n%s", out, ctrd.LogTail(20))
			}
		})
		runCorpus(t, d.daemonEnv, "cri", func(p *v1.Pod) { runtimetest.ImageCommands(p, criTestImage) })
	})
	t.Run("unreachable endpoint", testDaemonCRIUnreachable)
}

// criPodManifest is a BestEffort pod of the busybox image that prints line and then waits.
func criPodManifest(name, line string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: [/bin/sh, -c, "echo %s; trap 'exit 0' TERM; while true; do sleep 0.1; done"]
`, name, criTestImage, line)
}

// criDaemon is one slicelet service with the CRI runtime and the pod it was given.
type criDaemon struct {
	*daemonEnv
	unit     string
	client   *api.Client
	manifest string
	pod      *v1.Pod // as the daemon derives it from the manifest (UID)
}

// startCRIDaemon writes the configuration for endpoint, starts slicelet as unit and registers
// the cleanup of everything it may leave: the unit, its GC timers, the pod's slice, the QoS
// slices and the pod's log directory.
func startCRIDaemon(t *testing.T, unit, endpoint, sandboxImage string) *criDaemon {
	t.Helper()
	e := newDaemonEnv(t, fmt.Sprintf("[runtime]\ntype = \"cri\"\nendpoint = %q\nsandbox_image = %q\n[eviction]\nmonitoring_interval = \"1s\"\n", endpoint, sandboxImage))
	d := &criDaemon{daemonEnv: e, unit: unit, client: api.NewClient(e.sock)}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, u := range []string{unit, "slicelet-gc-containers.timer", "slicelet-gc-images.timer", "slicelet-gc-containers.service", "slicelet-gc-images.service"} {
			_ = e.sd.Stop(ctx, u)
		}
		// Pods belong to systemd and outlive slicelet: stop this test's pod slice (and only
		// it) if the daemon did not delete it, then the QoS slices.
		if d.pod != nil {
			name, err := slices.PodSliceName(v1.PodQOSBestEffort, string(d.pod.UID))
			if err == nil {
				_ = e.sd.Stop(ctx, name)
				if list, err := e.sd.List(ctx, name); err != nil || len(list) != 0 && list[0].ActiveState == "active" {
					t.Errorf("pod slice %s left behind: %+v, %v", name, list, err)
				}
			}
			_ = os.RemoveAll(criPodLogDir(d.pod))
		}
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = e.sd.Stop(ctx, s)
		}
	})
	agentService(t, e.sd, unit, e.cfgPath, "PATH="+filepath.Dir(slicectlBinary(t))+":/usr/sbin:/usr/bin:/sbin:/bin")
	return d
}

// addPod drops the manifest into the daemon's manifest directory.
func (d *criDaemon) addPod(t *testing.T, name string, data []byte) {
	t.Helper()
	d.manifest = filepath.Join(d.podsDir, name+".yaml")
	if err := os.WriteFile(d.manifest+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(d.manifest+".tmp", d.manifest); err != nil {
		t.Fatal(err)
	}
	got, err := manifest.ReadFile(d.manifest)
	if err != nil {
		t.Fatal(err)
	}
	d.pod = got[0]
}

// waitPod waits until cond holds for the pod as the API shows it, logging each new state.
func (d *criDaemon) waitPod(t *testing.T, limit time.Duration, what string, cond func(v1.Pod) bool) v1.Pod {
	t.Helper()
	var p v1.Pod
	last := ""
	waitFor(t, limit, what, func() bool {
		var err error
		p, err = d.client.GetPod(t.Context(), d.pod.Namespace, d.pod.Name)
		state := fmt.Sprint(err)
		if err == nil {
			state = fmt.Sprintf("phase %s reason %q message %q %s", p.Status.Phase, p.Status.Reason, p.Status.Message, containerStates(p))
		}
		if state != last {
			t.Logf("%s: pod %s", what, state)
			last = state
		}
		return err == nil && cond(p)
	})
	return p
}

// active fails the test unless the daemon's unit is active with the main PID mainPID (0: any)
// and no restart, and returns its main PID.
func (d *criDaemon) active(t *testing.T, when string, mainPID uint32) uint32 {
	t.Helper()
	info, err := d.sd.Properties(t.Context(), d.unit)
	if err != nil || info.ActiveState != "active" || info.NRestarts != 0 || mainPID != 0 && info.MainPID != mainPID {
		out, _ := run("journalctl", "--no-pager", "-n", "40", "-u", d.unit)
		t.Fatalf("%s: %s is %s/%s, main pid %d (want %d), %d restarts (%v)\n%s", when, d.unit, info.ActiveState, info.SubState, info.MainPID, mainPID, info.NRestarts, err, out)
	}
	return info.MainPID
}

func containerStates(p v1.Pod) string {
	var parts []string
	for _, cs := range p.Status.ContainerStatuses {
		st := "waiting"
		switch {
		case cs.State.Running != nil:
			st = "running"
		case cs.State.Terminated != nil:
			st = "terminated"
		}
		parts = append(parts, fmt.Sprintf("[%s %s %s restarts %d]", cs.Name, st, cs.ContainerID, cs.RestartCount))
	}
	return strings.Join(parts, " ")
}

func podRunning(p v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
}

func podRuntimeUnknown(endpoint string) func(v1.Pod) bool {
	return func(p v1.Pod) bool {
		return p.Status.Phase == v1.PodUnknown && p.Status.Reason == pods.ReasonRuntimeUnavailable && strings.Contains(p.Status.Message, endpoint)
	}
}

// criPodLogDir is the pod's CRI log directory under the daemon's log root.
func criPodLogDir(p *v1.Pod) string {
	return filepath.Join(podLogRoot, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
}

// criClient is a CRI client of our own on the endpoint, to see what containerd holds.
func criClient(t *testing.T, endpoint string) *crirt.Runtime {
	t.Helper()
	dir := t.TempDir()
	rt, err := crirt.New(t.Context(), crirt.Options{Endpoint: endpoint, LogRoot: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := rt.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return rt
}

// podContainers lists the containers and sandboxes containerd holds for the pod.
func podContainers(t *testing.T, rt *crirt.Runtime, uid string) ([]worker.Container, []worker.Sandbox) {
	t.Helper()
	ctrs, err := rt.ListContainers(t.Context(), uid)
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := rt.ListPodSandbox(t.Context(), uid)
	if err != nil {
		t.Fatal(err)
	}
	return ctrs, sbs
}

func testDaemonCRIRestart(t *testing.T, ctrd *critest.Containerd) {
	d := startCRIDaemon(t, "slicelet-cri-it.service", ctrd.Endpoint, ctrd.SandboxImage)
	// A runtime with images gets both GC timers.
	if list, err := d.sd.List(t.Context(), "slicelet-gc-*.timer"); err != nil || len(list) != 2 {
		t.Errorf("GC timers with the CRI runtime: %+v, %v; want slicelet-gc-containers.timer and slicelet-gc-images.timer", list, err)
	}
	ctx := t.Context()
	mainPID := d.active(t, "started", 0)
	cri := criClient(t, ctrd.Endpoint)

	const line = "hello-from-slicelet-cri"
	t0 := time.Now()
	d.addPod(t, "cri-a", criPodManifest("cri-a", line))
	uid := string(d.pod.UID)
	p := d.waitPod(t, 30*time.Second, "pod running", podRunning)
	t.Logf("manifest to Running through containerd: %s", time.Since(t0).Round(time.Millisecond))
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if id == p.Status.ContainerStatuses[0].ContainerID || id == "" {
		t.Fatalf("container ID %q: want containerd://<id>", p.Status.ContainerStatuses[0].ContainerID)
	}

	// slicectl logs.
	var out strings.Builder
	waitFor(t, 10*time.Second, "the container's line in its logs", func() bool {
		out.Reset()
		err := d.client.Logs(ctx, "default", "cri-a", "main", pods.LogOptions{}, &out)
		return err == nil && out.String() == line+"\n"
	})
	if fi, err := os.Stat(filepath.Join(criPodLogDir(d.pod), "main")); err != nil || !fi.IsDir() {
		t.Errorf("CRI log directory of the container: %v", err)
	}

	// The container's cgroup: cri-containerd-<id>.scope in the pod slice.
	podSlice, err := slices.PodSliceName(v1.PodQOSBestEffort, uid)
	if err != nil {
		t.Fatal(err)
	}
	scope := "cri-containerd-" + id + ".scope"
	sliceInfo, err := d.sd.Properties(ctx, podSlice)
	if err != nil || sliceInfo.ActiveState != "active" {
		t.Fatalf("pod slice %s: %+v, %v", podSlice, sliceInfo, err)
	}
	scopeInfo, err := d.sd.Properties(ctx, scope)
	if err != nil || scopeInfo.ActiveState != "active" || scopeInfo.ControlGroup != sliceInfo.ControlGroup+"/"+scope {
		t.Fatalf("container scope %s: %+v, %v; want it active under %s", scope, scopeInfo, err, sliceInfo.ControlGroup)
	}
	if parent, err := d.sd.Property(ctx, scope, "org.freedesktop.systemd1.Scope", "Slice"); err != nil || parent != podSlice {
		t.Errorf("%s Slice = %v (%v), want %s", scope, parent, err, podSlice)
	}
	cg := hierarchy.NewCgroupFS(d.env.CgroupRoot)
	pids, err := cg.Pids(scopeInfo.ControlGroup)
	if err != nil || len(pids) == 0 {
		t.Fatalf("processes of %s: %v, %v", scopeInfo.ControlGroup, pids, err)
	}
	// The container's shell (its loop's sleeps come and go).
	shell := 0
	for _, pid := range pids {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && string(comm) == "sh\n" {
			shell = pid
		}
	}
	if shell == 0 {
		t.Fatalf("no shell among the processes %v of %s", pids, scopeInfo.ControlGroup)
	}
	if self, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", shell)); err != nil || !strings.Contains(string(self), scopeInfo.ControlGroup+"\n") {
		t.Errorf("/proc/%d/cgroup lacks %s: %s (%v)", shell, scopeInfo.ControlGroup, self, err)
	}
	// slicectl top's metrics: the scope is named by its container ID as the container main (and
	// the sandbox's scope as nothing), sampled every monitoring interval.
	waitFor(t, 30*time.Second, "metrics of the container main", func() bool {
		list, err := d.client.PodMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if m.Name == "cri-a" && len(m.Containers) == 1 && m.Containers[0].Name == "main" && m.Containers[0].Usage.Memory().Value() > 0 {
				return true
			}
		}
		return false
	})

	// containerd goes away: the pod is Unknown within seconds, nothing is deleted, slicelet
	// stays up.
	if err := ctrd.Kill(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	d.waitPod(t, 15*time.Second, "pod Unknown with containerd down", podRuntimeUnknown(ctrd.Endpoint))
	t.Logf("containerd stopped to pod Unknown: %s", time.Since(down).Round(time.Millisecond))
	if info, err := d.sd.Properties(ctx, podSlice); err != nil || info.ActiveState != "active" {
		t.Errorf("pod slice with containerd down: %+v, %v", info, err)
	}
	if info, err := d.sd.Properties(ctx, scope); err != nil || info.ActiveState != "active" {
		t.Errorf("container scope with containerd down: %+v, %v", info, err)
	}
	if err := syscall.Kill(shell, 0); err != nil {
		t.Errorf("container process %d with containerd down: %v", shell, err)
	}
	if err := d.client.Health(ctx); err != nil {
		t.Errorf("API health with containerd down: %v", err)
	}
	d.active(t, "containerd down", mainPID)
	if st, err := d.sd.Property(ctx, d.unit, "org.freedesktop.systemd1.Service", "StatusText"); err != nil || !strings.Contains(fmt.Sprint(st), "allocatable") {
		t.Errorf("STATUS= with containerd down: %v (%v)", st, err)
	}

	// containerd is back: the same container, running, resynced.
	if err := ctrd.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	p = d.waitPod(t, 30*time.Second, "pod Running after the containerd restart", podRunning)
	t.Logf("containerd restarted to pod Running: %s", time.Since(up).Round(time.Millisecond))
	if got := p.Status.ContainerStatuses[0]; got.ContainerID != "containerd://"+id || got.RestartCount != 0 {
		t.Errorf("after the containerd restart: container %s, %d restarts; want the same %s, none", got.ContainerID, got.RestartCount, id)
	}
	ctrs, sbs := podContainers(t, cri, uid)
	if len(ctrs) != 1 || ctrs[0].ID != id || ctrs[0].State != worker.StateRunning || len(sbs) != 1 || !sbs[0].Ready {
		t.Errorf("containerd holds for the pod: containers %+v, sandboxes %+v; want one running %s in one ready sandbox", ctrs, sbs, id)
	}
	if err := syscall.Kill(shell, 0); err != nil {
		t.Errorf("container process %d after the containerd restart: %v", shell, err)
	}
	d.active(t, "containerd restarted", mainPID)
	d.waitJournal(t, "cri runtime unavailable, retrying with back-off", "endpoint="+ctrd.Endpoint, "error=")
	d.waitJournal(t, "cri runtime connected", "endpoint="+ctrd.Endpoint)
	journal := d.journal(t)
	if n := strings.Count(journal, "pod sandbox started"); n != 1 {
		t.Errorf("the daemon started %d sandboxes, want 1:\n%s", n, journal)
	}

	// slicectl gc images --dry-run: planned against containerd, the sandbox image kept.
	imgs, err := cri.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, img := range imgs {
		for _, n := range img.Names {
			ids[n] = img.ID
		}
	}
	if ids[ctrd.SandboxImage] == "" || ids[criTestImage] == "" {
		t.Fatalf("containerd lists %+v; want %s and %s", imgs, ctrd.SandboxImage, criTestImage)
	}
	res, err := d.client.CollectImages(ctx, true)
	if err != nil {
		t.Fatalf("gc images --dry-run: %v", err)
	}
	t.Logf("gc images --dry-run: kept %+v, remove %+v, usage %d%%", res.Kept, res.Remove, res.UsagePercent)
	kept := map[string]gc.KeepReason{}
	for _, k := range res.Kept {
		kept[k.ID] = k.Reason
	}
	if r := kept[ids[ctrd.SandboxImage]]; r != gc.KeepSandboxImage && r != gc.KeepPinned {
		t.Errorf("gc images --dry-run keeps the sandbox image %s as %q, want %q or %q: %+v", ids[ctrd.SandboxImage], r, gc.KeepSandboxImage, gc.KeepPinned, res)
	}
	if r := kept[ids[criTestImage]]; r != gc.KeepInUse {
		t.Errorf("gc images --dry-run keeps the running pod's image as %q, want %q: %+v", r, gc.KeepInUse, res)
	}
	if !res.DryRun || res.ImageFs == nil || res.ImageFs.CapacityBytes <= 0 || len(res.Removed) != 0 || res.Error != nil || res.Skipped != "" {
		t.Errorf("gc images --dry-run = %+v", res)
	}
	if imgs2, err := cri.ListImages(ctx); err != nil || len(imgs2) != len(imgs) {
		t.Errorf("images after a dry run: %d, %v; want %d", len(imgs2), err, len(imgs))
	}

	// Removing the manifest deletes the pod: its container, sandbox, slice and log directory.
	if err := os.Remove(d.manifest); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "pod deleted", func() bool {
		_, err := d.client.GetPod(ctx, "default", "cri-a")
		list, _ := d.sd.List(ctx, podSlice)
		ctrs, sbs := podContainers(t, cri, uid)
		return err != nil && len(list) == 0 && len(ctrs) == 0 && len(sbs) == 0
	})
	if _, err := os.Stat(criPodLogDir(d.pod)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod log directory %s after the pod was deleted: %v", criPodLogDir(d.pod), err)
	}
	d.active(t, "pod deleted", mainPID)
}

func testDaemonCRIUnreachable(t *testing.T) {
	const endpoint = "unix:///nonexistent/x.sock"
	d := startCRIDaemon(t, "slicelet-cri-down-it.service", endpoint, critest.DefaultSandboxImage)
	ctx := t.Context()
	mainPID := d.active(t, "started with no runtime", 0)
	line := d.waitJournal(t, "cri runtime not reachable, retrying with back-off", "endpoint="+endpoint, "/nonexistent/x.sock: connect: no such file or directory")
	t.Logf("logged: %s", strings.TrimSpace(line))

	d.addPod(t, "cri-down", criPodManifest("cri-down", "never"))
	d.waitPod(t, 15*time.Second, "pod Unknown with no runtime", podRuntimeUnknown(endpoint))
	if err := d.client.Health(ctx); err != nil {
		t.Errorf("API health with no runtime: %v", err)
	}
	// A few more probes (back-off 0.5 s, 1 s, 2 s) later slicelet is still the same process.
	waitFor(t, 10*time.Second, "three seconds of retries", func() bool {
		d.active(t, "retrying", mainPID)
		return time.Since(d.startedAt(t)) > 3*time.Second
	})
	if p, err := d.client.GetPod(ctx, "default", "cri-down"); err != nil || !podRuntimeUnknown(endpoint)(p) {
		t.Errorf("pod after retries: %s %s (%v)", p.Status.Phase, p.Status.Reason, err)
	}
	if _, err := os.Stat(criPodLogDir(d.pod)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod log directory %s created with no runtime: %v", criPodLogDir(d.pod), err)
	}
}

// journal is what this run of the daemon logged (not earlier runs of the same unit name, as
// with go test -count).
func (d *criDaemon) journal(t *testing.T) string {
	t.Helper()
	info, err := d.sd.Properties(t.Context(), d.unit)
	if err != nil || info.InvocationID == "" {
		t.Fatalf("%s: invocation ID: %+v, %v", d.unit, info, err)
	}
	out, err := run("journalctl", "--no-pager", "-o", "cat", "_SYSTEMD_INVOCATION_ID="+info.InvocationID)
	if err != nil {
		t.Fatalf("journal of %s: %v\n%s", d.unit, err, out)
	}
	return out
}

// waitJournal waits until this run of the daemon logged a line holding every part, and returns
// that line.
func (d *criDaemon) waitJournal(t *testing.T, parts ...string) string {
	t.Helper()
	var found string
	waitFor(t, 10*time.Second, fmt.Sprintf("a journal line of %s with %q", d.unit, parts), func() bool {
		for l := range strings.Lines(d.journal(t)) {
			if !stdslices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// startedAt is when the daemon's main process started.
func (d *criDaemon) startedAt(t *testing.T) time.Time {
	t.Helper()
	info, err := d.sd.Properties(t.Context(), d.unit)
	if err != nil {
		t.Fatal(err)
	}
	return info.ExecMainStartTimestamp
}

// writablePodLogRoot makes podLogRoot (/var/log/pods, where the daemon's CRI runtime has
// containerd write container logs) writable for the test without touching the machine.
//
// In the systemd sandbox every host mount is read-only (internal/testharness/sandbox), /var/log included,
// and the sandbox's mount namespace is private: the test mounts a tmpfs on /var/log there —
// seen by the daemon's service and by containerd, which share that namespace — and binds the
// sandbox's own /var/log/journal tmpfs back into it so journald and journalctl go on working.
// Where /var/log is writable (the VM's throwaway root), a /var/log/pods the test creates is
// removed afterwards; one that existed is left alone apart from the test's pod directories.
func writablePodLogRoot(t *testing.T) {
	t.Helper()
	err := os.Mkdir(podLogRoot, 0o755)
	switch {
	case err == nil:
		t.Cleanup(func() { _ = os.RemoveAll(podLogRoot) })
		return
	case errors.Is(err, fs.ErrExist):
		return
	case !errors.Is(err, unix.EROFS):
		t.Fatalf("pod log root: %v", err)
	}
	const varLog, journal = "/var/log", "/var/log/journal"
	stage := filepath.Join(t.TempDir(), "journal")
	if err := os.Mkdir(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	_, jerr := os.Stat(journal)
	hasJournal := jerr == nil
	if hasJournal {
		if err := unix.Mount(journal, stage, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("bind %s: %v", journal, err)
		}
	}
	if err := unix.Mount("tmpfs", varLog, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		if hasJournal {
			_ = unix.Unmount(stage, unix.MNT_DETACH)
		}
		t.Fatalf("tmpfs on %s (the sandbox's is read-only): %v", varLog, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(varLog, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the test's %s: %v", varLog, err)
		}
	})
	if hasJournal {
		err := os.Mkdir(journal, 0o2755)
		if err == nil {
			err = unix.Mount(stage, journal, "", unix.MS_BIND|unix.MS_REC, "")
		}
		_ = unix.Unmount(stage, unix.MNT_DETACH)
		if err != nil {
			t.Fatalf("journal into the test's %s: %v", varLog, err)
		}
	}
	if err := os.Mkdir(podLogRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is read-only in the sandbox: a tmpfs on %s for the test", podLogRoot, varLog)
}
