package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// nodeDir is the agents' directory inside: on the sandbox's overlay root or the VM's own
// root, never on a shared directory (the kubelet mounts volumes below its root directory).
const nodeDir = "/var/lib/peer-node"

// quantity parses a quantity of c's maps: millicores when milli, else its value; 0 when empty.
func quantity(s string, milli bool) int64 {
	if s == "" {
		return 0
	}
	q := resource.MustParse(s)
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

// waits are the settle, limit and poll of a batch: the VM emulates its CPU, several times
// slower, and polls less often there to leave it to the agents.
// A batch waits for its pods to settle (peerrun.Agent.Wait), so the limit only bounds a batch
// whose pods do not: on a loaded machine an agent takes minutes to start 30 pods.
// A limit of zero is the version's default.
func waits(version string, limit time.Duration) peerrun.WaitOptions {
	w := peerrun.WaitOptions{Settle: 6 * time.Second, Startup: 5 * time.Second, Limit: 5 * time.Minute}
	if version == "v2" {
		w = peerrun.WaitOptions{Settle: 15 * time.Second, Startup: time.Minute, Limit: 15 * time.Minute, Poll: 2 * time.Second}
	}
	w.Limit = cmp.Or(limit, w.Limit)
	return w
}

// inside runs every batch under the kubelet, then slicelet, and writes what each left.
func inside(ctx context.Context, o options) error {
	data, err := os.ReadFile(filepath.Join(o.work, corpusFile))
	if err != nil {
		return err
	}
	var entries []entry
	if err := json.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("%s: %w", corpusFile, err)
	}
	// In the VM the lines also go to the serial console, which the host has whatever the
	// guest's shared directories do (the output file is on one of them): a run that hangs
	// shows there how far it got.
	var console io.Writer = io.Discard
	if o.inside == "v2" {
		if f, err := os.OpenFile("/dev/console", os.O_WRONLY|syscall.O_NOCTTY, 0); err == nil {
			defer f.Close()
			console = f
		}
	}
	logf := func(format string, args ...any) {
		line := fmt.Sprintf("%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
		// The console first: a write to the output file waits on 9p, for minutes when the
		// guest is busy.
		fmt.Fprint(console, "peerdiff: "+line)
		fmt.Fprint(os.Stderr, line)
	}
	mctx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	go monitor(mctx, logf)
	node, err := peerrun.StartNode(ctx, peerrun.NodeOptions{Dir: nodeDir, Logf: logf})
	if err != nil {
		return err
	}
	defer node.Close()
	cfg := peerrun.DefaultNodeConfig()
	cpus, mem := thisMachine()
	alloc := nodeAllocatable(cfg, cpus, mem)
	bs := batches(entries, alloc, o.batchPods)
	lo, hi := o.shard.batches(len(bs))
	logf("peerdiff %s: %d pods in %d batches (allocatable for batching: %dm cpu, %d MiB); shard %s: batches %d to %d",
		o.inside, len(entries), len(bs), alloc.CPUMilli, alloc.MemoryBytes>>20, o.shard, lo+1, hi)
	out := filepath.Join(o.work, o.inside, o.shard.resultFile())
	var results []batchResult
	binaries := map[peerrun.Kind]string{peerrun.Kubelet: o.kubelet, peerrun.Slicelet: o.slicelet}
	if o.inside == "v2" {
		// The VM's copies are on 9p without a cache (/mnt/io): an agent run from there is paged
		// in over 9p and, under emulation, stalls on its page faults. Run copies in the guest's
		// own memory.
		for kind, b := range binaries {
			if b == "" || !strings.Contains(o.agents, string(kind)) {
				continue
			}
			if binaries[kind], err = copyBinary(b, filepath.Join(nodeDir, "bin")); err != nil {
				return err
			}
		}
	}
	for i := lo; i < hi; i++ {
		b := bs[i]
		r := batchResult{Batch: i + 1, Batches: len(bs), Snapshot: map[peerrun.Kind]snapshot{}, Complete: map[peerrun.Kind][]string{},
			Took: map[peerrun.Kind]string{}, Errors: map[peerrun.Kind]string{}, Unsettled: map[peerrun.Kind]map[string]string{}}
		want, finish := map[peerrun.PodKey][]string{}, map[peerrun.PodKey]bool{}
		r.Misfits = b.misfits
		for _, e := range b.pods {
			r.Keys = append(r.Keys, e.Key)
			if startsHere(e) {
				want[e.Key] = e.Containers
				if runsToCompletion(e) {
					finish[e.Key] = true
				}
				r.Waited = append(r.Waited, e.Key)
			}
		}
		for _, kind := range []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet} {
			if !strings.Contains(o.agents, string(kind)) {
				continue
			}
			t0 := time.Now()
			snap, wr, cgroupErrors, err := runBatch(ctx, filepath.Join(o.work, o.inside), node, kind, binaries[kind], cfg, i, b.pods, want, finish, waits(o.inside, o.waitLimit))
			if err != nil {
				r.Errors[kind] = err.Error()
				logf("batch %d %s: %v", i+1, kind, err)
			}
			r.Snapshot[kind] = toJSON(snap)
			if kind == peerrun.Kubelet {
				r.KubeletCgroupErrors = cgroupErrors
			}
			for k := range wr.Complete {
				r.Complete[kind] = append(r.Complete[kind], k.String())
			}
			for k, why := range wr.Unsettled {
				if r.Unsettled[kind] == nil {
					r.Unsettled[kind] = map[string]string{}
				}
				r.Unsettled[kind][k.String()] = why
			}
			slices.Sort(r.Complete[kind])
			r.Took[kind] = time.Since(t0).Round(time.Millisecond).String()
			logf("batch %d/%d %s: %d pods, %d complete, %d sandboxes, %d not settled, %s", i+1, len(bs), kind, len(b.pods), len(wr.Complete), len(snap.Pods), len(wr.Unsettled), r.Took[kind])
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		results = append(results, r)
		data, err := json.MarshalIndent(results, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyBinary copies the executable at path into dir and returns the copy's path.
func copyBinary(path, dir string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	return dst, nil
}

// runBatch writes the batch's manifests, runs kind on them until its pods are up, reads the
// cgroups and stops the agent, leaving the node clean.
func runBatch(ctx context.Context, logDir string, node *peerrun.Node, kind peerrun.Kind, binary string, cfg peerrun.NodeConfig, n int, b []entry, want map[peerrun.PodKey][]string, finish map[peerrun.PodKey]bool, w peerrun.WaitOptions) (peerrun.Snapshot, peerrun.WaitResult, []string, error) {
	dir := filepath.Join(nodeDir, fmt.Sprintf("manifests-%d-%s", n, kind))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return peerrun.Snapshot{}, peerrun.WaitResult{}, nil, err
	}
	defer os.RemoveAll(dir)
	for i, e := range b {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.yaml", i)), e.YAML, 0o644); err != nil {
			return peerrun.Snapshot{}, peerrun.WaitResult{}, nil, err
		}
	}
	a, err := node.StartAgent(ctx, peerrun.AgentOptions{Kind: kind, Binary: binary, ManifestDir: dir, Config: cfg})
	if err != nil {
		return peerrun.Snapshot{}, peerrun.WaitResult{}, nil, err
	}
	w.Want, w.Finish = want, finish
	t0 := time.Now()
	wr, werr := a.Wait(ctx, w)
	t1 := time.Now()
	notBefore := time.Time{}
	if kind == peerrun.Kubelet && finishedAny(wr.Statuses) {
		// The kubelet lowers its QoS levels for a pod that ended at its next periodic QoS
		// update (pkg/kubelet/cm/qos_container_manager_linux.go, UpdateCgroups every
		// periodicQOSCgroupUpdateInterval, a minute), not when the pod ends: the levels are
		// read once one has passed since the pods settled, with a margin.
		notBefore = t1.Add(kubeletQOSUpdate)
	}
	snap, changing, rerr := readSettled(ctx, a, w.Settle, notBefore)
	snap.Statuses = wr.Statuses
	for _, k := range changing {
		if wr.Unsettled == nil {
			wr.Unsettled = map[peerrun.PodKey]string{}
		}
		if _, ok := wr.Unsettled[k]; !ok {
			wr.Unsettled[k] = fmt.Sprintf("its cgroups still changed between two readings %s after the wait", w.Settle)
		}
	}
	t2 := time.Now()
	journal := a.Journal(ctx, 5000)
	_ = os.WriteFile(filepath.Join(logDir, fmt.Sprintf("batch-%d-%s.log", n+1, kind)), []byte(journal), 0o644)
	var cgroupErrors []string
	if kind == peerrun.Kubelet {
		cgroupErrors = kubeletCgroupErrors(journal)
	}
	t3 := time.Now()
	serr := a.Stop(ctx)
	node.Logf("batch %d %s: wait %s, read %s, journal %s, stop %s", n+1, kind, t1.Sub(t0).Round(time.Second),
		t2.Sub(t1).Round(time.Second), t3.Sub(t2).Round(time.Second), time.Since(t3).Round(time.Second))
	return snap, wr, cgroupErrors, errors.Join(werr, rerr, serr)
}

// readSettled reads the agent's cgroups, from notBefore, until two readings half a second
// apart agree, at most for limit: values an agent writes just after its pods came up (the QoS levels, updated
// after a pod slice is made) are read once written. A crash loop's container scopes come and
// go; with one, the last reading is taken at limit, and the pods that changed between the
// last two readings (the node's levels as "-") are returned.
func readSettled(ctx context.Context, a *peerrun.Agent, limit time.Duration, notBefore time.Time) (peerrun.Snapshot, []peerrun.PodKey, error) {
	if d := time.Until(notBefore); d > 0 {
		select {
		case <-ctx.Done():
			return peerrun.Snapshot{}, nil, ctx.Err()
		case <-time.After(d):
		}
	}
	deadline := time.Now().Add(limit)
	prev, err := a.Read(ctx)
	var changing []peerrun.PodKey
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return prev, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		var cur peerrun.Snapshot
		if cur, err = a.Read(ctx); err != nil {
			break
		}
		if changing = changedCgroups(prev, cur); len(changing) == 0 {
			return cur, nil, nil
		}
		prev = cur
	}
	return prev, changing, err
}

// kubeletQOSUpdate is how long after its pods settled the kubelet's QoS levels are read when
// one of them ended: its periodic QoS update's interval (a minute) and a margin.
const kubeletQOSUpdate = 65 * time.Second

// finishedAny reports whether a pod of statuses ran and ended (Succeeded, or Failed without
// an admission reason: a refused pod never counted in the QoS levels).
func finishedAny(statuses map[peerrun.PodKey]peerrun.PodStatus) bool {
	for _, st := range statuses {
		if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed && st.Reason == "" {
			return true
		}
	}
	return false
}

// changedCgroups lists what differs between two readings as peer-diff compares them: the
// pods whose sandbox, QoS, pod slice, values or set of containers differ, or the values of a
// container running at both readings (a crash loop's container, running at one reading and
// not at the other, is compared only where both agents show it running); nodeLevels when the
// node's levels differ.
func changedCgroups(a, b peerrun.Snapshot) []peerrun.PodKey {
	var out []peerrun.PodKey
	if !reflect.DeepEqual(a.Node, b.Node) {
		out = append(out, nodeLevels)
	}
	keys := map[peerrun.PodKey]bool{}
	for k := range a.Pods {
		keys[k] = true
	}
	for k := range b.Pods {
		keys[k] = true
	}
	for k := range keys {
		pa, oka := a.Pods[k]
		pb, okb := b.Pods[k]
		if oka != okb || !samePod(pa, pb) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, peerrun.PodKey.Compare)
	return out
}

// samePod reports whether two readings of a pod agree (changedCgroups).
func samePod(a, b peerrun.Pod) bool {
	if a.UID != b.UID || a.Ready != b.Ready || a.QOS != b.QOS || a.Cgroup != b.Cgroup || !reflect.DeepEqual(a.Values, b.Values) ||
		len(a.Containers) != len(b.Containers) {
		return false
	}
	for n, ca := range a.Containers {
		cb, ok := b.Containers[n]
		if !ok {
			return false
		}
		if ca.Values != nil && cb.Values != nil && (!reflect.DeepEqual(ca.Values, cb.Values) || ca.OOMScoreAdj != cb.OOMScoreAdj) {
			return false
		}
	}
	return true
}

// nodeLevels is the key under which the node's levels (kubepods, QoS) are reported unsettled.
var nodeLevels = peerrun.PodKey{Name: "-"}

// startsHere reports whether an agent that admits e can start it on this node, so that a batch
// waits for it: it reads no ConfigMap or Secret (the corpus has none), every volume can be set
// up offline, and every hostPath volume can be mounted (hostPathMountable on this node's
// filesystem): the kubelet's volume manager retries a failed mount with no sandbox until it
// succeeds (FailedMount), and the pod waits in ContainerCreating for good.
func startsHere(e entry) bool {
	if e.Objects || e.NoVolume != "" {
		return false
	}
	var pod v1.Pod
	if yaml.Unmarshal(e.YAML, &pod) != nil {
		return true // refused by both: decided at once
	}
	for _, v := range pod.Spec.Volumes {
		if hp := v.HostPath; hp != nil && !hostPathMountable(hp, osPaths{}) {
			return false
		}
	}
	return true
}

// runsToCompletion reports whether e, as prepared, is a pod that ends by itself: its
// restartPolicy is Never or OnFailure and every regular container kept its own command (a
// program the test image has), none runs the `sleep infinity` that stands in for a program
// it has not.
func runsToCompletion(e entry) bool {
	var pod v1.Pod
	if yaml.Unmarshal(e.YAML, &pod) != nil || len(pod.Spec.Containers) == 0 {
		return false
	}
	if p := pod.Spec.RestartPolicy; p != v1.RestartPolicyNever && p != v1.RestartPolicyOnFailure {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if slices.Equal(c.Command, sleepForever) || loopsForever(slices.Concat(c.Command, c.Args)) {
			return false
		}
	}
	return true
}

// endlessLoop matches the head of a shell loop that never ends by its own test: `while true`,
// `while :`, `while [ 1 ]`, `until false`.
var endlessLoop = regexp.MustCompile(`(^|[;&|(\s])(while\s+(true|:|\[\s*1\s*\])|until\s+false)\s*;?\s*do\b`)

// loopLeave matches what may end such a loop, or the shell running it, from inside.
var loopLeave = regexp.MustCompile(`\b(break|exit|return|exec)\b`)

// loopsForever reports whether argv, a container's command and arguments, is a shell running a
// script whose loop never ends (`sh -c 'while true; do date; sleep 10; done'`): an endless loop
// that no break, exit, return or exec leaves. Such a container runs until it is stopped, with
// restartPolicy Never too: the pod is a running pod, compared as one, not waited for to end.
func loopsForever(argv []string) bool {
	if len(argv) < 3 {
		return false
	}
	switch path.Base(argv[0]) {
	case "sh", "bash", "ash", "dash":
	default:
		return false
	}
	i := slices.Index(argv, "-c")
	if i < 1 || i+1 >= len(argv) {
		return false
	}
	script := argv[i+1]
	return endlessLoop.MatchString(script) && !loopLeave.MatchString(script)
}

// paths is what hostPathMountable asks of the node's filesystem.
type paths interface {
	// exists reports whether path exists.
	exists(path string) bool
	// writable reports whether a file can be made in the existing directory dir (false on
	// a read-only mount, such as the VM's /usr, shared from the host).
	writable(dir string) bool
}

// osPaths is this node's filesystem.
type osPaths struct{}

func (osPaths) exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (osPaths) writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }

// hostPathMountable reports whether the kubelet's hostPath plugin can set hp up on the node
// (pkg/volume/hostpath/host_path.go, checkType): a type that asks for an existing path needs
// it; DirectoryOrCreate makes the missing directories (MkdirAll), so the nearest existing
// ancestor must be writable; FileOrCreate makes the file but not its parent, which must
// exist and be writable. No type, no check: the runtime's bind mount decides (a missing
// source fails the container, CreateContainerError, which settles).
func hostPathMountable(hp *v1.HostPathVolumeSource, fs paths) bool {
	if hp.Type == nil || fs.exists(hp.Path) {
		return true
	}
	switch *hp.Type {
	case v1.HostPathDirectoryOrCreate:
		dir := filepath.Clean(hp.Path)
		for dir != "/" && !fs.exists(dir) {
			dir = filepath.Dir(dir)
		}
		return fs.writable(dir)
	case v1.HostPathFileOrCreate:
		parent := filepath.Dir(filepath.Clean(hp.Path))
		return fs.exists(parent) && fs.writable(parent)
	case v1.HostPathUnset:
		return true
	}
	return false // Directory, File, Socket, CharDevice, BlockDevice: the path must exist
}
