package peerrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// The swap test's environment inside the sandbox: the kubelet's directory and slicelet's
// binary.
const (
	swapBinEnv      = "PEER_BIN_DIR"
	swapSliceletEnv = "SLICELET_BINARY"
)

// swapManifests are the static pods of the swap: one with an init container, a sidecar and a
// main container that run for good, and one crash-looping container, each of whose runs
// appends "run <lines it found>" to a file of its emptyDir volume as it ends.
var swapManifests = map[string]string{
	"swap.yaml": `apiVersion: v1
kind: Pod
metadata: {name: swap, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: init, image: ` + TestImage + `, imagePullPolicy: Never, command: [/bin/sh, -c, "echo init done"]}
  - {name: sidecar, image: ` + TestImage + `, imagePullPolicy: Never, restartPolicy: Always, command: [/bin/sh, -c, "while true; do echo side; sleep 5; done"]}
  containers:
  - {name: main, image: ` + TestImage + `, imagePullPolicy: Never, command: [/bin/sh, -c, "while true; do echo main; sleep 5; done"]}
`,
	"crash.yaml": `apiVersion: v1
kind: Pod
metadata: {name: crash, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: runs, emptyDir: {}}
  containers:
  - name: crash
    image: ` + TestImage + `
    imagePullPolicy: Never
    command: [/bin/sh, -c, "echo crashing; sleep 2; touch /runs/log; echo run $(wc -l < /runs/log) >> /runs/log; exit 1"]
    volumeMounts: [{name: runs, mountPath: /runs}]
`,
}

// TestSwapKubeletSlicelet: on one node (the same containerd, manifest directory and node
// name), the kubelet runs the static pods of swapManifests; it is stopped without stopping
// them and slicelet started in its place; then slicelet is stopped and the kubelet started
// again. Each agent adopts what the other ran: the long-running containers keep their IDs and
// main PIDs, no sandbox is created and the init container does not run again, and the
// crash-looping container's restart count carries on from the other agent's (its next run is
// the next attempt, not a first one). On the host it boots the sandbox (cgroup v1, hybrid) and
// runs itself inside, then, with SLICELET_VM=1, in the cgroup v2 VM. slicelet keeps the pods'
// volumes in the kubelet's layout ([pods] kubelet_root_dir): crash's emptyDir holds a line of
// every run, under either agent. slicelet takes the crash loop over with the kubelet's back-off:
// its first run of crash starts no sooner after the previous run ended than the kubelet would
// have started it (lifecycle.Backoff.Adopted).
func TestSwapKubeletSlicelet(t *testing.T) {
	if !systemdtest.Inside() {
		runSwapInSandbox(t)
		return
	}
	bin, slicelet := os.Getenv(swapBinEnv), os.Getenv(swapSliceletEnv)
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	stopCtx := context.WithoutCancel(ctx)
	node, err := StartNode(ctx, NodeOptions{Dir: "/var/lib/peer-swap", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.Close() }()
	defer func() { _ = node.RemovePods(stopCtx) }()
	manifests := filepath.Join(node.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range swapManifests {
		if err := os.WriteFile(filepath.Join(manifests, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The node's name is the host's, as slicelet takes it in stand-alone mode (a static pod's
	// UID hashes it); the kubelet's root directory is the same for both of its runs.
	host, _ := os.Hostname()
	nodeName := strings.ToLower(host)
	kubeletRoot := filepath.Join(node.Dir, "kubelet-root")
	startKubelet := func() *Agent {
		a, err := node.StartAgent(ctx, AgentOptions{Kind: Kubelet, Binary: filepath.Join(bin, "kubelet"), ManifestDir: manifests,
			NodeName: nodeName, ExtraArgs: []string{"--root-dir=" + kubeletRoot}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	journal := func(a *Agent) {
		if t.Failed() {
			t.Logf("%s's journal:\n%s", a.Kind, a.Journal(stopCtx, 120))
		}
	}

	kubelet := startKubelet()
	first := waitSwapPods(t, ctx, kubelet, nil)
	before := criSnapshot(t, ctx, node)
	t.Logf("under the kubelet: %s", before)
	if err := kubelet.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	journal(kubelet)

	sl, err := node.StartAgent(ctx, AgentOptions{Kind: Slicelet, Binary: slicelet, ManifestDir: manifests,
		SliceletDropIn: fmt.Sprintf("[pods]\nkubelet_root_dir = %q\n", kubeletRoot)})
	if err != nil {
		t.Fatal(err)
	}
	second := waitSwapPods(t, ctx, sl, first)
	afterSlicelet := criSnapshot(t, ctx, node)
	t.Logf("under slicelet: %s", afterSlicelet)
	checkAdopted(t, "kubelet → slicelet", before, afterSlicelet)
	checkAdoptedBackoff(t, before, afterSlicelet)
	checkRunsLogged(t, "under slicelet", kubeletRoot, afterSlicelet)
	journal(sl)
	if err := sl.Halt(ctx); err != nil {
		t.Fatal(err)
	}

	kubelet = startKubelet()
	waitSwapPods(t, ctx, kubelet, second)
	afterKubelet := criSnapshot(t, ctx, node)
	t.Logf("under the kubelet again: %s", afterKubelet)
	checkAdopted(t, "slicelet → kubelet", afterSlicelet, afterKubelet)
	checkRunsLogged(t, "under the kubelet again", kubeletRoot, afterKubelet)
	journal(kubelet)
	_ = kubelet.Halt(stopCtx)
}

// swapState is what an agent's status shows of the swap pods: the container IDs of swap's
// sidecar and main, and crash's restart count.
type swapState struct {
	ids     map[string]string
	crashes int32
}

// waitSwapPods waits until agent a shows pod swap running its sidecar and main containers
// and pod crash restarted at least once; with prev (the previous agent's state), until the
// containers are prev's (adopted: a new ID is a failure at once) and crash has restarted
// under a, its restart count past prev's.
func waitSwapPods(t *testing.T, ctx context.Context, a *Agent, prev *swapState) *swapState {
	t.Helper()
	var last string
	for {
		pods, err := a.Pods(ctx)
		st := &swapState{ids: map[string]string{}, crashes: -1}
		for _, p := range pods {
			switch a.key(p.Namespace, p.Name).Name {
			case "swap":
				for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
					if (cs.Name == "main" || cs.Name == "sidecar") && cs.State.Running != nil {
						st.ids[cs.Name] = cs.ContainerID
					}
				}
			case "crash":
				for _, cs := range p.Status.ContainerStatuses {
					st.crashes = cs.RestartCount
				}
			}
		}
		last = fmt.Sprintf("pods %v (error %v)", st, err)
		if prev != nil {
			for name, id := range st.ids {
				if id != prev.ids[name] {
					t.Fatalf("%s: container %s of pod swap is %s, was %s: not adopted", a.Kind, name, id, prev.ids[name])
				}
			}
		}
		done := len(st.ids) == 2 && st.crashes >= 1
		if prev != nil {
			done = done && st.crashes > prev.crashes
		}
		if done {
			t.Logf("%s: %+v", a.Kind, *st)
			return st
		}
		if active, journal := a.Active(ctx); !active {
			t.Fatalf("%s stopped: %s", a.Kind, journal)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: pods not as expected in time: %s", a.Kind, last)
		case <-time.After(time.Second):
		}
	}
}

// criContainer is one container as containerd shows it.
type criContainer struct {
	ID, UID, Pod, Name, Sandbox string
	Attempt                     uint32
	State                       runtimeapi.ContainerState
	PID                         int
	// StartedAt and FinishedAt are the run's (zero when it did not start or end).
	StartedAt, FinishedAt time.Time
}

// criState is every sandbox and container of the node.
type criState struct {
	sandboxes  []string
	containers []criContainer
}

func (s criState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sandboxes;", len(s.sandboxes))
	for _, c := range s.containers {
		fmt.Fprintf(&b, " %s/%s#%d %s pid %d %.12s;", c.Pod, c.Name, c.Attempt, strings.TrimPrefix(c.State.String(), "CONTAINER_"), c.PID, c.ID)
	}
	return b.String()
}

// criSnapshot reads every sandbox and container from containerd, with each running
// container's main PID (its verbose status).
func criSnapshot(t *testing.T, ctx context.Context, n *Node) criState {
	t.Helper()
	rs, done, err := n.cri()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var s criState
	for _, sb := range sbs.Items {
		s.sandboxes = append(s.sandboxes, sb.Id)
	}
	slices.Sort(s.sandboxes)
	ctrs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ctrs.Containers {
		cc := criContainer{ID: c.Id, UID: c.Labels[worker.LabelPodUID], Pod: c.Labels[worker.LabelPodName], Name: c.Labels[worker.LabelContainerName], Sandbox: c.PodSandboxId,
			Attempt: c.GetMetadata().GetAttempt(), State: c.State}
		running := c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: running})
		if err != nil {
			t.Fatal(err)
		}
		if at := st.GetStatus().GetStartedAt(); at > 0 {
			cc.StartedAt = time.Unix(0, at)
		}
		if at := st.GetStatus().GetFinishedAt(); at > 0 {
			cc.FinishedAt = time.Unix(0, at)
		}
		if running {
			var info struct {
				PID int `json:"pid"`
			}
			if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
				t.Fatalf("container %s: verbose info: %v", c.Id, err)
			}
			cc.PID = info.PID
		}
		s.containers = append(s.containers, cc)
	}
	slices.SortFunc(s.containers, func(a, b criContainer) int { return strings.Compare(a.ID, b.ID) })
	return s
}

// checkAdopted compares the node before and after a swap: the same sandboxes; every container
// that ran before and is not crash's still runs with its ID, attempt and PID; no new
// container but crash's next runs, each numbered past every run before it.
func checkAdopted(t *testing.T, swap string, before, after criState) {
	t.Helper()
	if !slices.Equal(before.sandboxes, after.sandboxes) {
		t.Errorf("%s: sandboxes %v, were %v", swap, after.sandboxes, before.sandboxes)
	}
	was := map[string]criContainer{}
	lastAttempt := map[string]uint32{}
	for _, c := range before.containers {
		was[c.ID] = c
		lastAttempt[c.UID+"/"+c.Name] = max(lastAttempt[c.UID+"/"+c.Name], c.Attempt)
	}
	now := map[string]criContainer{}
	for _, c := range after.containers {
		now[c.ID] = c
		if _, ok := was[c.ID]; ok {
			continue
		}
		crash := strings.HasPrefix(c.Pod, "crash")
		if last, ok := lastAttempt[c.UID+"/"+c.Name]; !crash || !ok || c.Attempt <= last {
			t.Errorf("%s: new container %s/%s attempt %d (runs before: up to attempt %d)", swap, c.Pod, c.Name, c.Attempt, last)
		}
	}
	for id, c := range was {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || strings.HasPrefix(c.Pod, "crash") {
			continue
		}
		n, ok := now[id]
		switch {
		case !ok:
			t.Errorf("%s: container %s/%s (%s) is gone", swap, c.Pod, c.Name, id)
		case n.State != runtimeapi.ContainerState_CONTAINER_RUNNING || n.PID != c.PID || n.Attempt != c.Attempt:
			t.Errorf("%s: container %s/%s (%s): %s pid %d attempt %d, was running pid %d attempt %d", swap, c.Pod, c.Name, id, n.State, n.PID, n.Attempt, c.PID, c.Attempt)
		}
	}
}

// checkAdoptedBackoff: slicelet's first run of the crash-looping container started no sooner
// after the run before it ended than the kubelet's back-off for that run: run n ≥ 1 was started
// under 10 s·2^(n-1) (at most 5 min), and the next waits that long after it ended. A new
// agent that started the crash loop over would restart it at once.
func checkAdoptedBackoff(t *testing.T, before, after criState) {
	t.Helper()
	known := map[string]bool{}
	for _, c := range before.containers {
		known[c.ID] = true
	}
	runs := map[uint32]criContainer{}
	var first *criContainer
	for _, c := range slices.Concat(before.containers, after.containers) {
		if !strings.HasPrefix(c.Pod, "crash") {
			continue
		}
		runs[c.Attempt] = c
		if !known[c.ID] && (first == nil || c.Attempt < first.Attempt) {
			cc := c
			first = &cc
		}
	}
	if first == nil {
		t.Errorf("kubelet → slicelet: no run of crash started under slicelet")
		return
	}
	prev, ok := runs[first.Attempt-1]
	if first.Attempt == 0 || !ok || prev.FinishedAt.IsZero() || first.StartedAt.IsZero() {
		t.Errorf("kubelet → slicelet: crash's first run under slicelet is attempt %d; the run before it not found ended (%+v)", first.Attempt, prev)
		return
	}
	want := time.Duration(0)
	if prev.Attempt > 0 {
		want = 10 * time.Second
		for i := uint32(1); i < prev.Attempt && want < 5*time.Minute; i++ {
			want *= 2
		}
		want = min(want, 5*time.Minute)
	}
	// The runtime's times are the container's own; one second for their resolution.
	gap := first.StartedAt.Sub(prev.FinishedAt)
	t.Logf("kubelet → slicelet: crash run %d ended, run %d started %s later (the kubelet's back-off: %s)", prev.Attempt, first.Attempt, gap.Round(time.Millisecond), want)
	if gap < want-time.Second {
		t.Errorf("kubelet → slicelet: crash run %d started %s after run %d ended, want the kubelet's back-off %s", first.Attempt, gap, prev.Attempt, want)
	}
}

// checkRunsLogged: crash's emptyDir, where the kubelet keeps it (<root>/pods/<uid>/volumes/
// kubernetes.io~empty-dir/runs), holds "run 0", "run 1", ... up to the last run that ended,
// whichever agent ran each: every run found the lines of the runs before it, so both agents
// mounted the same directory (a run in another directory would write "run 0" there, and leave
// a gap here).
func checkRunsLogged(t *testing.T, when, kubeletRoot string, s criState) {
	t.Helper()
	var uid string
	ended := -1
	for _, c := range s.containers {
		if strings.HasPrefix(c.Pod, "crash") {
			uid = c.UID
			if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				ended = max(ended, int(c.Attempt))
			}
		}
	}
	if uid == "" || ended < 0 {
		t.Errorf("%s: no ended run of crash: %s", when, s)
		return
	}
	log := filepath.Join(kubeletRoot, "pods", uid, "volumes", "kubernetes.io~empty-dir", "runs", "log")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Errorf("%s: crash's emptyDir in the kubelet's layout: %v", when, err)
		return
	}
	// A run writes just before it exits: one still running may have written too.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	t.Logf("%s: %s: %q; runs 0 to %d ended", when, log, lines, ended)
	for i := 0; i <= ended; i++ {
		if want := fmt.Sprintf("run %d", i); i >= len(lines) || lines[i] != want {
			t.Errorf("%s: %s: %q, want \"run 0\" to %q in order: a run wrote elsewhere", when, log, lines, fmt.Sprintf("run %d", ended))
			return
		}
	}
}

// runSwapInSandbox boots the peer sandbox with the kubelet's and slicelet's binaries and runs
// TestSwapKubeletSlicelet inside it (this test binary, copied into the work directory).
func runSwapInSandbox(t *testing.T) {
	bin := cmpEnv(swapBinEnv, filepath.Join("..", "..", "..", "build", "peer", "v1.37.2"))
	slicelet := cmpEnv(swapSliceletEnv, filepath.Join("..", "..", "..", "bin", "slicelet"))
	var missing []string
	for _, p := range []*string{&bin, &slicelet} {
		r, err := filepath.EvalSymlinks(*p)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		*p, _ = filepath.Abs(r)
	}
	if _, err := os.Stat(filepath.Join(bin, "kubelet")); err != nil && len(missing) == 0 {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		if systemdtest.CI() && os.Getenv("PEER_REQUIRED") == "1" {
			t.Fatalf("prerequisites missing (%v) with CI=true and PEER_REQUIRED=1: run make build peer-build", missing)
		}
		t.Skipf("SKIP (prerequisites missing: %v): run make build and make peer-build", missing)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	// PEERRUN_SANDBOX_PREFIX prefixes the sandbox's name (one per person sharing a machine).
	err := RunTest(ctx, SandboxOptions{Name: fmt.Sprintf("%sswaptest-%d", os.Getenv("PEERRUN_SANDBOX_PREFIX"), os.Getpid()), WorkDir: t.TempDir(),
		Binds: []string{bin, filepath.Dir(slicelet)}, Log: t.Output()},
		"^TestSwapKubeletSlicelet$", []string{swapBinEnv + "=" + bin, swapSliceletEnv + "=" + slicelet}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(systemdtest.VMEnv) != "1" {
		return
	}
	// cgroup v2: the same in the throwaway VM, the two binaries copied in.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunVM(ctx, VMOptions{Binary: self, Args: []string{"-test.run", "^TestSwapKubeletSlicelet$", "-test.v"},
		Env:   []string{swapBinEnv + "=/mnt/io", swapSliceletEnv + "=/mnt/io/slicelet"},
		Files: map[string]string{"kubelet": filepath.Join(bin, "kubelet"), "slicelet": slicelet},
		Dir:   t.TempDir(), MemMiB: 1024, Timeout: 14 * time.Minute})
	t.Logf("in the cgroup v2 VM:\n%s", res.Output)
	if err != nil {
		t.Fatalf("cgroup v2 VM: %v; console:\n%s", err, res.Console)
	}
	if res.ExitCode != 0 {
		t.Fatalf("cgroup v2 VM: exit %d", res.ExitCode)
	}
}

// cmpEnv is the environment variable name's value, or def when it is unset.
func cmpEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
