package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/api"
)

// bench is the inside half: one node, both agents in turn.
type bench struct {
	o         options
	node      *peerrun.Node
	rs        runtimeapi.RuntimeServiceClient
	is        runtimeapi.ImageServiceClient
	manifests string
	dropIn    string // -slicelet-dropin's text
	res       results
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerbench: "+format+"\n", args...)
}

// inside runs the rounds and writes the samples.
func inside(ctx context.Context, o options) error {
	node, err := peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: filepath.Join(o.work, "node"), Logf: logf})
	if err != nil {
		return err
	}
	defer node.Close()
	cc, err := grpc.NewClient(node.Containerd.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("cri client: %w", err)
	}
	defer cc.Close()
	b := &bench{o: o, node: node, rs: runtimeapi.NewRuntimeServiceClient(cc), is: runtimeapi.NewImageServiceClient(cc), manifests: filepath.Join(o.work, "node", "manifests"), res: results{Reps: o.reps}}
	if err := os.MkdirAll(b.manifests, 0o755); err != nil {
		return err
	}
	if o.dropIn != "" {
		d, err := os.ReadFile(o.dropIn)
		if err != nil {
			return err
		}
		b.dropIn = string(d)
	}
	for rep := range o.reps {
		if !o.latency {
			break
		}
		for _, k := range order(rep) {
			if err := b.latencyRound(ctx, k, rep); err != nil {
				b.fail(k, rep, "latency", err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for i := range 5 {
			if err := b.floorRound(ctx, rep*5+i); err != nil {
				b.fail(floor, rep, "CRI floor", err)
			}
		}
	}
	if o.idleOnly {
		b.idleRounds(ctx)
	}
	for rep := range o.reps {
		if !o.imageGC {
			break
		}
		for _, k := range order(rep) {
			if err := b.imageGCRound(ctx, k, rep); err != nil {
				b.fail(k, rep, "image GC", err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	if o.cluster {
		if err := b.clusterRounds(ctx); err != nil {
			b.res.Errors = append(b.res.Errors, "cluster: "+err.Error())
		}
	}
	if o.density {
		if err := b.densityRounds(ctx); err != nil {
			b.res.Errors = append(b.res.Errors, "density: "+err.Error())
		}
	}
	if o.eviction {
		if err := b.evictionRounds(ctx); err != nil {
			b.res.Errors = append(b.res.Errors, "eviction: "+err.Error())
		}
	}
	data, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.work, resultFile), data, 0o644)
}

func (b *bench) fail(k peerrun.Kind, rep int, what string, err error) {
	msg := fmt.Sprintf("%s round %d (%s): %v", k, rep, what, err)
	if len(msg) > 600 {
		msg = msg[:600] + "…"
	}
	logf("%s", msg)
	b.res.Errors = append(b.res.Errors, msg)
}

// order alternates which agent goes first.
func order(rep int) []peerrun.Kind {
	if rep%2 == 0 {
		return []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet}
	}
	return []peerrun.Kind{peerrun.Slicelet, peerrun.Kubelet}
}

func (b *bench) binary(k peerrun.Kind) string {
	if k == peerrun.Kubelet {
		return b.o.kubelet
	}
	return b.o.slicelet
}

// manifest is a BestEffort busybox pod sleeping.
func manifest(name string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: %s\n    command: [/bin/sleep, infinity]\n", name, peerrun.TestImage)
}

// drop writes the manifests of names as hidden files (both agents skip dotfiles) and renames
// them into place, and returns when the first rename was done.
func (b *bench) drop(names []string) (time.Time, error) {
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(b.manifests, "."+n+".yaml"), manifest(n), 0o644); err != nil {
			return time.Time{}, err
		}
	}
	var first time.Time
	for i, n := range names {
		if err := os.Rename(filepath.Join(b.manifests, "."+n+".yaml"), filepath.Join(b.manifests, n+".yaml")); err != nil {
			return time.Time{}, err
		}
		if i == 0 {
			first = time.Now()
		}
	}
	return first, nil
}

// clearManifests removes every manifest.
func (b *bench) clearManifests() error {
	entries, err := os.ReadDir(b.manifests)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(b.manifests, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// podName is the manifest's name of a pod sandbox: the kubelet names a static pod
// <name>-<node name>.
func podName(md *runtimeapi.PodSandboxMetadata) string {
	return strings.TrimSuffix(md.GetName(), "-"+peerrun.NodeName)
}

// waitRunning polls containerd until every pod of names has its container running and returns
// the latest StartedAt.
func (b *bench) waitRunning(ctx context.Context, names []string, limit time.Duration) (time.Time, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	started := map[string]time.Time{}
	deadline := time.Now().Add(limit)
	for {
		sbs, err := b.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
		if err != nil {
			return time.Time{}, err
		}
		byID := map[string]string{}
		for _, sb := range sbs.Items {
			if n := podName(sb.Metadata); want[n] {
				byID[sb.Id] = n
			}
		}
		cs, err := b.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err != nil {
			return time.Time{}, err
		}
		for _, c := range cs.Containers {
			n, ok := byID[c.PodSandboxId]
			if !ok || !started[n].IsZero() {
				continue
			}
			st, err := b.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
			if err != nil {
				return time.Time{}, err
			}
			started[n] = time.Unix(0, st.Status.StartedAt)
		}
		if len(started) == len(want) {
			var last time.Time
			for _, t := range started {
				if t.After(last) {
					last = t
				}
			}
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d pods running after %s", len(started), len(want), limit)
		}
		if err := sleep(ctx, 25*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// waitNoPods polls containerd until no pod sandbox is ready.
func (b *bench) waitNoPods(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		sbs, err := b.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
		if err != nil {
			return err
		}
		if len(sbs.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pod sandboxes still ready after %s", len(sbs.Items), limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// waitAgentReady waits until the agent serves: the kubelet's healthz, slicelet's API.
func waitAgentReady(ctx context.Context, a *peerrun.Agent) error {
	probe := func(ctx context.Context) (bool, error) {
		if ok, journal := a.Active(ctx); !ok {
			return false, fmt.Errorf("%s stopped: %s", a.Unit, journal)
		}
		if a.Kind == peerrun.Slicelet {
			return api.NewClient(filepath.Join(a.Dir, "api.sock")).Health(ctx) == nil, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10248/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, probe)
}

// latencyRound measures one agent: one pod and 30 pods into its idle manifest directory, then
// a fresh start on -pods manifests with its footprint once idle.
func (b *bench) latencyRound(ctx context.Context, k peerrun.Kind, rep int) error {
	if err := b.clearManifests(); err != nil {
		return err
	}
	a, err := b.node.StartAgent(ctx, b.agentOptions(k, b.binary(k)))
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = a.Stop(context.WithoutCancel(ctx))
		}
	}()
	if err := waitAgentReady(ctx, a); err != nil {
		return err
	}
	if err := sleep(ctx, 3*time.Second); err != nil { // let its start-up work finish
		return err
	}
	// Five single pods one after the other (one sample is at the mercy of a busy machine), then
	// 30 at once.
	for j, n := range []int{1, 1, 1, 1, 1, 30} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("r%d-s%d-p%02d", rep, j, i)
		}
		t0, err := b.drop(names)
		if err != nil {
			return err
		}
		last, err := b.waitRunning(ctx, names, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("%d pods: %w", n, err)
		}
		key := map[int]string{1: "one", 30: "thirty"}[n]
		b.res.add(key, k, ms(last.Sub(t0)))
		logf("%s round %d: %d pods Running %s after the manifest", k, rep, n, last.Sub(t0).Round(time.Millisecond))
		if err := b.clearManifests(); err != nil {
			return err
		}
		if err := b.waitNoPods(ctx, 3*time.Minute); err != nil {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	stopped = true
	if err := a.Stop(ctx); err != nil {
		return err
	}
	return b.startRound(ctx, k, b.binary(k), k, rep)
}

// agentOptions starts the agent of kind k from bin on the manifest directory, slicelet with
// -slicelet-dropin's drop-in.
func (b *bench) agentOptions(k peerrun.Kind, bin string) peerrun.AgentOptions {
	o := peerrun.AgentOptions{Kind: k, Binary: bin, ManifestDir: b.manifests}
	if k == peerrun.Slicelet {
		o.SliceletDropIn = b.dropIn
	}
	return o
}

// idleRounds are the idle scenario: -reps rounds of startRound for each agent, and for the
// -baseline binary after slicelet.
func (b *bench) idleRounds(ctx context.Context) {
	for rep := range b.o.reps {
		b.res.Load = append(b.res.Load, loadAvg())
		for _, k := range order(rep) {
			if k == peerrun.Kubelet && b.o.noKubelet {
				continue
			}
			if err := b.startRound(ctx, k, b.binary(k), k, rep); err != nil {
				b.fail(k, rep, "idle", err)
			}
			if k == peerrun.Slicelet && b.o.baseline != "" {
				if err := b.startRound(ctx, k, b.o.baseline, baselineKind, rep); err != nil {
					b.fail(baselineKind, rep, "idle", err)
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
	b.res.Load = append(b.res.Load, loadAvg())
}

// startRound starts the agent of kind k from bin on -pods manifests, times them to Running,
// then reads its RSS and its CPU time over the idle window; its samples are label's.
func (b *bench) startRound(ctx context.Context, k peerrun.Kind, bin string, label peerrun.Kind, rep int) error {
	names := make([]string, b.o.pods)
	for i := range names {
		names[i] = fmt.Sprintf("r%d-start-p%03d", rep, i)
		if err := os.WriteFile(filepath.Join(b.manifests, names[i]+".yaml"), manifest(names[i]), 0o644); err != nil {
			return err
		}
	}
	t0 := time.Now()
	a, err := b.node.StartAgent(ctx, b.agentOptions(k, bin))
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop(context.WithoutCancel(ctx)) }()
	last, err := b.waitRunning(ctx, names, 10*time.Minute)
	if err != nil {
		return fmt.Errorf("start with %d pods: %w", b.o.pods, err)
	}
	b.res.add("start", label, ms(last.Sub(t0)))
	logf("%s round %d: %d pods Running %s after the start", label, rep, b.o.pods, last.Sub(t0).Round(time.Millisecond))
	if err := sleep(ctx, 10*time.Second); err != nil { // the pods' status settles
		return err
	}
	fp, err := idleFootprint(ctx, a.Unit, b.o.idle)
	if err != nil {
		return err
	}
	b.res.add("rss", label, fp.rss)
	b.res.add("rss-anon", label, fp.anon)
	b.res.add("rss-file", label, fp.file)
	b.res.add("cpu", label, fp.cpu)
	logf("%s round %d: idle with %d pods: RSS %.1f MiB (anonymous %.1f, file %.1f), CPU %.2f%% of a core", label, rep, b.o.pods, fp.rss, fp.anon, fp.file, fp.cpu)
	return b.clearManifests()
}

// mainPID is the main process of a unit.
func mainPID(ctx context.Context, unit string) (int, error) {
	out, err := exec.CommandContext(ctx, "systemctl", "show", "--property=MainPID", "--value", unit).Output()
	if err != nil {
		return 0, fmt.Errorf("MainPID of %s: %w", unit, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("MainPID of %s: %q", unit, out)
	}
	return pid, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// workingSet is the node's memory working set as the kubelet's memory.available signal takes
// it (pkg/kubelet/eviction/helpers.go makeSignalObservations over cadvisor's root container):
// the root memory cgroup's usage less its inactive file pages.
func workingSet() (int64, error) {
	usageFile, statFile, inactiveKey := "/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		usageFile, statFile, inactiveKey = "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"
	}
	raw, err := os.ReadFile(usageFile)
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", usageFile, err)
	}
	raw, err = os.ReadFile(statFile)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, inactiveKey+" "); ok {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", statFile, inactiveKey, err)
			}
			return max(usage-inactive, 0), nil
		}
	}
	return 0, fmt.Errorf("%s: no %s", statFile, inactiveKey)
}

// capacity is the node's memory capacity (MemTotal).
func capacity() (int64, error) {
	mi, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	m, err := mi.Meminfo()
	if err != nil || m.MemTotal == nil {
		return 0, fmt.Errorf("MemTotal: %v", err)
	}
	return int64(*m.MemTotal) << 10, nil
}

// hogName is the eviction rounds' victim.
const hogName = "hog"

// hogScript grows an awk string by doubling until it holds 512 MiB (about 800 MiB at the last
// step) and keeps it. The shell, the container's PID 1, exits on SIGTERM (a PID 1 without a
// handler ignores it): the agents stop an evicted pod with a 1 s grace period (the kubelet's
// immediateEvictionGracePeriodSeconds), which would otherwise be part of every figure.
const hogScript = `trap 'exit 0' TERM; /bin/busybox awk 'BEGIN { s = "0123456789abcdef"; while (length(s) < 500000000) s = s s; system("sleep 3600") }' & wait`

// hogPod is the victim: BestEffort, never restarted.
func hogPod() *v1.Pod {
	no := false
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: hogName, Namespace: metav1.NamespaceDefault},
		Spec: v1.PodSpec{
			RestartPolicy:                v1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			Containers: []v1.Container{{
				Name: "main", Image: peerrun.TestImage,
				Command: []string{"/bin/sh", "-c", hogScript},
			}},
		},
	}
}

// evictionRounds runs the eviction scenario -reps times per agent, alternated, with the kubelet
// registered to a local control plane.
func (b *bench) evictionRounds(ctx context.Context) error {
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(b.o.work, "controlplane"), BinDir: b.o.bin, Nodes: []string{peerrun.NodeName}})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop(context.WithoutCancel(ctx)) }()
	admin, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	for rep := range b.o.reps {
		for _, k := range order(rep) {
			if err := b.evictionRound(ctx, k, rep, cp, admin); err != nil {
				b.fail(k, rep, "eviction", err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// evictionRound: the agent with a threshold 300 MiB below what is available now, the hog
// created (through the API server for the kubelet, the local API for slicelet), and the
// timeline read from containerd and the root memory cgroup.
func (b *bench) evictionRound(ctx context.Context, k peerrun.Kind, rep int, cp *controlplane.ControlPlane, admin kubernetes.Interface) error {
	if err := b.clearManifests(); err != nil {
		return err
	}
	capBytes, err := capacity()
	if err != nil {
		return err
	}
	ws, err := workingSet()
	if err != nil {
		return err
	}
	threshold := capBytes - ws - 300<<20
	cfg := peerrun.DefaultNodeConfig()
	cfg.EvictionHard["memory.available"] = fmt.Sprintf("%dMi", threshold>>20)
	threshold = threshold >> 20 << 20
	o := peerrun.AgentOptions{Kind: k, Binary: b.binary(k), ManifestDir: b.manifests, Config: cfg}
	if k == peerrun.Kubelet {
		o.ExtraArgs = []string{"--kubeconfig=" + cp.NodeKubeconfig(peerrun.NodeName)}
	}
	a, err := b.node.StartAgent(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if k == peerrun.Kubelet {
			zero := int64(0)
			_ = admin.CoreV1().Pods(metav1.NamespaceDefault).Delete(context.WithoutCancel(ctx), hogName, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		_ = a.Stop(context.WithoutCancel(ctx))
	}()
	if err := waitAgentReady(ctx, a); err != nil {
		return err
	}
	if k == peerrun.Kubelet {
		if err := waitNodeReady(ctx, admin); err != nil {
			return err
		}
		pod := hogPod()
		pod.Spec.NodeName = peerrun.NodeName
		if _, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("hog through the API server: %w", err)
		}
	} else {
		data, err := yaml.Marshal(hogPod())
		if err != nil {
			return err
		}
		if _, err := api.NewClient(filepath.Join(a.Dir, "api.sock")).ApplyPod(ctx, data); err != nil {
			return fmt.Errorf("hog through slicelet's API: %w", err)
		}
	}
	tl, err := b.evictionTimeline(ctx, capBytes-threshold)
	if err != nil {
		return fmt.Errorf("%w; %s journal: %s", err, a.Unit, a.Journal(context.WithoutCancel(ctx), 15))
	}
	b.res.add("evict-cross", k, ms(tl.crossed.Sub(tl.started)))
	b.res.add("evict-kill", k, ms(tl.killed.Sub(tl.crossed)))
	b.res.add("evict-gone", k, ms(tl.gone.Sub(tl.killed)))
	logf("%s eviction round %d: hog started → crossed %s → killed %s → gone %s", k, rep,
		tl.crossed.Sub(tl.started).Round(time.Millisecond), tl.killed.Sub(tl.crossed).Round(time.Millisecond), tl.gone.Sub(tl.killed).Round(time.Millisecond))
	return nil
}

// waitNodeReady waits until the kubelet registered its Node and reports it Ready.
func waitNodeReady(ctx context.Context, admin kubernetes.Interface) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, peerrun.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// timeline is one eviction's moments.
type timeline struct {
	started, crossed, killed, gone time.Time
	// exit is how the hog's container ended (reason, exit code, message).
	exit string
}

// evictionTimeline follows the hog: its StartedAt, the first working set read above limit
// (every 10 ms), its FinishedAt, and the first moment its sandbox is no longer ready.
func (b *bench) evictionTimeline(ctx context.Context, limit int64) (timeline, error) {
	var tl timeline
	var hogID, sandboxID string
	deadline := time.Now().Add(4 * time.Minute)
	lastCRI := time.Time{}
	for tl.gone.IsZero() {
		if time.Now().After(deadline) {
			return tl, fmt.Errorf("eviction not complete after 4m: %+v", tl)
		}
		if tl.crossed.IsZero() {
			ws, err := workingSet()
			if err != nil {
				return tl, err
			}
			if ws > limit {
				tl.crossed = time.Now()
			}
		}
		if time.Since(lastCRI) >= 50*time.Millisecond || !tl.crossed.IsZero() && tl.killed.IsZero() {
			lastCRI = time.Now()
			if err := b.observeHog(ctx, &tl, &hogID, &sandboxID); err != nil {
				return tl, err
			}
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return tl, err
		}
	}
	if tl.crossed.IsZero() || tl.started.IsZero() || tl.killed.IsZero() {
		return tl, fmt.Errorf("the hog's pod went away without the whole timeline (started %v, crossed %v, killed %v): %s",
			!tl.started.IsZero(), !tl.crossed.IsZero(), !tl.killed.IsZero(), tl.exit)
	}
	return tl, nil
}

// observeHog reads the hog's container and sandbox from containerd into tl.
func (b *bench) observeHog(ctx context.Context, tl *timeline, hogID, sandboxID *string) error {
	if *sandboxID == "" {
		sbs, err := b.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return err
		}
		for _, sb := range sbs.Items {
			if podName(sb.Metadata) == hogName && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				*sandboxID = sb.Id
			}
		}
		if *sandboxID == "" {
			return nil
		}
	}
	if *hogID == "" {
		cs, err := b.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: *sandboxID}})
		if err != nil {
			return err
		}
		if len(cs.Containers) == 0 {
			return nil
		}
		*hogID = cs.Containers[0].Id
	}
	if tl.killed.IsZero() {
		st, err := b.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: *hogID})
		if err != nil {
			return err
		}
		if st.Status.StartedAt > 0 {
			tl.started = time.Unix(0, st.Status.StartedAt)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			tl.killed = time.Unix(0, st.Status.FinishedAt)
			tl.exit = fmt.Sprintf("reason %q, exit code %d, message %q", st.Status.Reason, st.Status.ExitCode, st.Status.Message)
		}
		return nil
	}
	sb, err := b.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: *sandboxID})
	if err != nil || sb.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		tl.gone = time.Now()
	}
	return nil
}

// floor is the pseudo-agent of the CRI floor: the pod started by direct CRI calls.
const floor peerrun.Kind = "floor"

// floorRound starts one pod like the agents' pods through direct CRI calls, no agent running:
// RunPodSandbox (pod network namespace, the BestEffort QoS slice as cgroup parent),
// CreateContainer, StartContainer. From the first call to the container's StartedAt is what
// containerd itself takes, which neither agent can beat.
func (b *bench) floorRound(ctx context.Context, rep int) error {
	if err := b.waitNoPods(ctx, 3*time.Minute); err != nil {
		return err
	}
	uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", rep)
	logDir := filepath.Join(b.o.work, "node", "floor-logs", uid)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	meta := &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("floor-%d", rep), Namespace: "default", Uid: uid}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata: meta, Hostname: meta.Name, LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
			}},
		},
	}
	t0 := time.Now()
	sb, err := b.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return fmt.Errorf("RunPodSandbox: %w", err)
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		_, _ = b.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
		_, _ = b.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
	}()
	c, err := b.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, Image: &runtimeapi.ImageSpec{Image: peerrun.TestImage},
			Command: []string{"/bin/sleep", "infinity"}, LogPath: "main/0.log",
			Linux: &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000}},
		},
	})
	if err != nil {
		return fmt.Errorf("CreateContainer: %w", err)
	}
	if _, err := b.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return fmt.Errorf("StartContainer: %w", err)
	}
	st, err := b.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
	if err != nil {
		return fmt.Errorf("ContainerStatus: %w", err)
	}
	d := time.Unix(0, st.Status.StartedAt).Sub(t0)
	b.res.add("one", floor, ms(d))
	logf("CRI floor round %d: one pod started %s after RunPodSandbox", rep, d.Round(time.Millisecond))
	return nil
}
