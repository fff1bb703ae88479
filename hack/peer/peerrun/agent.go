package peerrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// Kind names an agent.
type Kind string

// The two agents.
const (
	Kubelet  Kind = "kubelet"
	Slicelet Kind = "slicelet"
)

// NodeConfig is the node's resource configuration, given to both agents in their own syntax.
type NodeConfig struct {
	// SystemReserved and KubeReserved map cpu and memory to quantities.
	SystemReserved, KubeReserved map[string]string
	// PodPidsLimit is podPidsLimit / cgroups.pod_pids_limit.
	PodPidsLimit int64
	// EvictionHard is evictionHard / eviction.hard.
	EvictionHard map[string]string
	// MaxPods is maxPods / node.max_pods.
	MaxPods int
	// ImageGC, when set, is the image GC policy of both agents; nil keeps image GC off on both
	// (thresholds 100/99: the test image is unused between batches and must stay).
	ImageGC *ImageGCPolicy
}

// ImageGCPolicy is image GC in both agents' terms.
type ImageGCPolicy struct {
	// HighThresholdPercent and LowThresholdPercent are imageGCHighThresholdPercent /
	// gc.images.high_threshold_percent and imageGCLowThresholdPercent /
	// gc.images.low_threshold_percent.
	HighThresholdPercent, LowThresholdPercent int
	// MinimumAge is imageMinimumGCAge / gc.images.minimum_age.
	MinimumAge time.Duration
	// SliceletPeriod is gc.images.period, how often slicelet's timer fires (its first run one
	// period after the start). The kubelet's period is fixed (pkg/kubelet/kubelet.go
	// ImageGCPeriod, 5 min, the first run at its start).
	SliceletPeriod time.Duration
}

// imageGC is c's image GC policy, the disabled one when unset.
func (c NodeConfig) imageGC() ImageGCPolicy {
	if c.ImageGC != nil {
		return *c.ImageGC
	}
	return ImageGCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 99, MinimumAge: 2 * time.Minute, SliceletPeriod: 5 * time.Minute}
}

// DefaultNodeConfig is a node with small reservations and a pids limit (so that every level
// has values to compare) and hard eviction thresholds low enough that neither agent evicts on
// a busy build machine.
func DefaultNodeConfig() NodeConfig {
	return NodeConfig{
		SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
		KubeReserved:   map[string]string{"cpu": "50m", "memory": "50Mi"},
		PodPidsLimit:   1024,
		EvictionHard:   map[string]string{"memory.available": "50Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		MaxPods:        110,
	}
}

// AgentOptions configure [Node.StartAgent].
type AgentOptions struct {
	// Kind is the agent.
	Kind Kind
	// Binary is the agent's executable (the kubelet, or slicelet's bin/slicelet).
	Binary string
	// ManifestDir is the static pod / manifest directory.
	ManifestDir string
	// Config is the node configuration; DefaultNodeConfig when zero.
	Config NodeConfig
	// SliceletTOML is appended to slicelet's configuration (e.g. a [cluster] table).
	SliceletTOML string
	// SliceletDropIn, when set, is written as slicelet's drop-in config.d/50-peerrun.toml:
	// keys of tables the main file has already ([eviction], [node], ...).
	SliceletDropIn string
	// ExtraArgs are appended to the agent's command line (e.g. the kubelet's --kubeconfig, to
	// register it with an API server: the peer benchmark's eviction scenario).
	ExtraArgs []string
	// NodeName is the kubelet's node name (--hostname-override), so that it can register as
	// the node a slicelet node of the same name was (its credentials are
	// system:node:<NodeName>); [NodeName] when empty. slicelet's is [cluster] node_name.
	NodeName string
}

// Agent is one running agent.
type Agent struct {
	// Kind is the agent.
	Kind Kind
	// Unit is its transient systemd service.
	Unit string
	// Dir holds its configuration and state.
	Dir  string
	node *Node
	// nodeName is the suffix of its static pods' names ("<name>-<node>"): the kubelet's node
	// name; slicelet's in cluster mode, "" stand-alone (where a static pod keeps its name).
	nodeName string
}

// StartAgent writes the agent's configuration under the node's directory and starts it as a
// transient service. Only one agent runs at a time: stop it before starting the other.
func (n *Node) StartAgent(ctx context.Context, o AgentOptions) (*Agent, error) {
	if o.Config.MaxPods == 0 {
		o.Config = DefaultNodeConfig()
	}
	n.runs++
	a := &Agent{Kind: o.Kind, Unit: fmt.Sprintf("peer-%s-%d.service", o.Kind, n.runs), Dir: filepath.Join(n.Dir, fmt.Sprintf("%s-%d", o.Kind, n.runs)), node: n,
		nodeName: cmp.Or(o.NodeName, NodeName)}
	if o.Kind == Slicelet {
		a.nodeName = sliceletClusterNode(o.SliceletTOML)
	}
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("peerrun: agent dir: %w", err)
	}
	var argv []string
	var text string
	cfgPath := filepath.Join(a.Dir, "config")
	switch o.Kind {
	case Kubelet:
		text = kubeletConfig(o.Config, o.ManifestDir, n.Containerd.Endpoint)
		cfgPath += ".yaml"
		argv = []string{o.Binary, "--config=" + cfgPath, "--root-dir=" + filepath.Join(a.Dir, "root"),
			"--cert-dir=" + filepath.Join(a.Dir, "pki"), "--hostname-override=" + a.nodeName,
			"--node-ip=127.0.0.1", "--v=2"}
		if gc := o.Config.ImageGC; gc != nil && gc.MinimumAge == 0 {
			// The kubelet's defaulting turns an imageMinimumGCAge of 0 in the file into 2m
			// (pkg/kubelet/apis/config/v1beta1/defaults.go); its (deprecated) flag, which wins
			// over the file, keeps 0. 1ns would not do: the first run at the start sees every
			// image first detected at that very moment (pkg/kubelet/images/image_gc_manager.go
			// freeSpace skips an image with freeTime - firstDetected < MinAge).
			argv = append(argv, "--minimum-image-ttl-duration=0s")
		}
	case Slicelet:
		text = sliceletConfig(o.Config, o.ManifestDir, n.Containerd.Endpoint, n.Containerd.SandboxImage, a.Dir) + o.SliceletTOML
		cfgPath += ".toml"
		if o.SliceletDropIn != "" {
			dropIns := filepath.Join(a.Dir, "config.d")
			if err := os.MkdirAll(dropIns, 0o755); err != nil {
				return nil, fmt.Errorf("peerrun: agent config: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dropIns, "50-peerrun.toml"), []byte(o.SliceletDropIn), 0o644); err != nil {
				return nil, fmt.Errorf("peerrun: agent config: %w", err)
			}
		}
		argv = []string{o.Binary, "run", "--config", cfgPath}
	default:
		return nil, fmt.Errorf("peerrun: agent kind %q: want kubelet or slicelet", o.Kind)
	}
	argv = append(argv, o.ExtraArgs...)
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("peerrun: agent config: %w", err)
	}
	args := append([]string{"--unit=" + a.Unit, "--quiet", "--collect", "-p", "Type=exec", "--"}, argv...)
	if out, err := exec.CommandContext(ctx, "systemd-run", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("peerrun: start %s: %w: %s", a.Unit, err, out)
	}
	n.logf("peerrun: %s started as %s", o.Kind, a.Unit)
	return a, nil
}

// yamlMap renders m as a YAML flow map with sorted keys.
func yamlMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%q: %q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// kubeletConfig is the standalone kubelet's KubeletConfiguration: the node settings of c and
// what running it beside slicelet in a sandbox needs (docs/peer.md), with c's image GC policy.
func kubeletConfig(c NodeConfig, manifests, endpoint string) string {
	gc := c.imageGC()
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %q
fileCheckFrequency: 1s
cgroupDriver: systemd
failCgroupV1: false
failSwapOn: false
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: %q
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
systemReserved: %s
kubeReserved: %s
enforceNodeAllocatable: [pods]
podPidsLimit: %d
evictionHard: %s
maxPods: %d
imageGCHighThresholdPercent: %d
imageGCLowThresholdPercent: %d
imageMinimumGCAge: %s
`, manifests, endpoint, yamlMap(c.SystemReserved), yamlMap(c.KubeReserved), c.PodPidsLimit, yamlMap(c.EvictionHard), c.MaxPods,
		gc.HighThresholdPercent, gc.LowThresholdPercent, gc.MinimumAge)
}

// tomlMap renders m as a TOML inline table with sorted, quoted keys.
func tomlMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%q = %q", k, m[k]))
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// sliceletConfig is slicelet's configuration with the same node settings as kubeletConfig.
func sliceletConfig(c NodeConfig, manifests, endpoint, sandboxImage, dir string) string {
	gc := c.imageGC()
	return fmt.Sprintf(`state_dir = %q
[node]
system_reserved = %s
kube_reserved = %s
enforce_node_allocatable = ["pods"]
max_pods = %d
[cgroups]
pod_pids_limit = %d
[eviction]
hard = %s
[gc.images]
high_threshold_percent = %d
low_threshold_percent = %d
minimum_age = %q
period = %q
[pods]
manifest_dir = %q
[api]
socket = %q
group = "root"
[metrics]
address = ""
[runtime]
type = "cri"
network = "cni"
endpoint = %q
sandbox_image = %q
`, filepath.Join(dir, "state"), tomlMap(c.SystemReserved), tomlMap(c.KubeReserved), c.MaxPods, c.PodPidsLimit,
		tomlMap(c.EvictionHard), gc.HighThresholdPercent, gc.LowThresholdPercent, gc.MinimumAge.String(), gc.SliceletPeriod.String(), manifests, filepath.Join(dir, "api.sock"), endpoint, sandboxImage)
}

// Active reports whether the agent's service is still running, with its journal's tail when it
// is not.
func (a *Agent) Active(ctx context.Context) (bool, string) {
	if exec.CommandContext(ctx, "systemctl", "is-active", "--quiet", a.Unit).Run() == nil {
		return true, ""
	}
	return false, a.Journal(ctx, 30)
}

// Journal returns the last n entries of the agent's journal: the kubelet's lines as it wrote
// them, slicelet's as JSON (its structured fields are journal fields).
func (a *Agent) Journal(ctx context.Context, n int) string {
	format := "cat"
	if a.Kind == Slicelet {
		format = "json"
	}
	out, _ := exec.CommandContext(ctx, "journalctl", "--no-pager", "-o", format, "-n", fmt.Sprint(n), "-u", a.Unit).CombinedOutput()
	return string(out)
}

// Stop stops the agent's service, then removes every pod it left ([Node.RemovePods]) and its
// directory (unmounting what the kubelet mounted for volumes there).
func (a *Agent) Stop(ctx context.Context) error {
	var errs []error
	if out, err := exec.CommandContext(ctx, "systemctl", "stop", a.Unit).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("peerrun: stop %s: %w: %s", a.Unit, err, out))
	}
	if err := a.node.RemovePods(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, m := range critest.MountsUnder(a.Dir) {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
	if err := os.RemoveAll(a.Dir); err != nil {
		errs = append(errs, fmt.Errorf("peerrun: %w", err))
	}
	// Both agents write container logs here; the next one starts without them.
	_ = os.RemoveAll("/var/log/pods")
	return errors.Join(errs...)
}

// Halt stops the agent's service and nothing else: its pods keep running in containerd, its
// cgroups, directory and logs stay, for the next agent to adopt (an agent swapped in place).
// Neither agent stops its pods when it is stopped.
func (a *Agent) Halt(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "systemctl", "stop", a.Unit).CombinedOutput(); err != nil {
		return fmt.Errorf("peerrun: stop %s: %w: %s", a.Unit, err, out)
	}
	return nil
}

// PodKey names a pod as its manifest does.
type PodKey struct{ Namespace, Name string }

// String is namespace/name.
func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// Compare orders keys by namespace, then name.
func (k PodKey) Compare(o PodKey) int { return strings.Compare(k.String(), o.String()) }

// WaitOptions configure [Agent.Wait].
type WaitOptions struct {
	// Want maps each pod expected to come up or be refused to its regular container names.
	Want map[PodKey][]string
	// Finish are the pods of Want expected to run to completion (restartPolicy Never or
	// OnFailure, every regular container running a command that may end): while a
	// container runs they are not settled, so that both agents are read with them finished
	// (or, OnFailure, between two failed runs).
	Finish map[PodKey]bool
	// Settle: a pod of Want the agent never lists (its manifest does not decode for it)
	// counts as decided once every pod it lists is settled and nothing changed for that
	// long. Limit bounds the wait.
	Settle, Limit time.Duration
	// Startup is how long after the agent first answers it may list none of Want's pods
	// before the pods it does not list count as never listed.
	Startup time.Duration
	// Poll is the time between two polls (half a second when zero). A poll lists
	// containerd's sandboxes and containers and asks the agent for its pods, which under
	// emulation costs the node's CPUs what the agents need.
	Poll time.Duration
}

// Wait polls the agent and containerd until every pod of o.Want is settled on both sides —
// the agent's status shows the state the pod keeps (PodStatus.Settled) and the node shows
// it: a terminal pod has no ready sandbox and no pod slice left (the agent released it), any
// other has its ready sandbox with every container the status shows running running in it —
// or o.Limit passed. o.Want holds only pods that can come up on the node: a pod waiting for a
// volume the node never gets would hold the wait until o.Limit. A pod the agent does not list (it did not decode) is waited for until
// every listed pod settled and nothing changed for o.Settle, and at least o.Startup after the
// agent first answered when it lists none. A pod of o.Want still unsettled (or not listed)
// when o.Limit passes is in the result's Unsettled: what the node shows of it is not what the
// agent makes of it, and comparing it would report the machine's slowness as a difference.
func (a *Agent) Wait(ctx context.Context, o WaitOptions) (WaitResult, error) {
	rs, done, err := a.node.cri()
	if err != nil {
		return WaitResult{}, err
	}
	defer done()
	h, err := newHierarchy("/sys/fs/cgroup", a.node.CgroupV2)
	if err != nil {
		return WaitResult{}, err
	}
	start := time.Now()
	lastChange, last := start, ""
	var statuses map[PodKey]PodStatus
	var answered time.Time
	// A progress line every progressEvery: a batch under emulation takes many minutes, and
	// a hung or slow one must show how far it got and how long one poll takes.
	nextProgress := start.Add(progressEvery)
	var nextActive time.Time
	for {
		pollStart := time.Now()
		nodeState, err := a.observe(ctx, rs, h)
		if err != nil {
			return WaitResult{Statuses: statuses}, err
		}
		// The agent may not be serving yet: then the statuses of the last poll stay.
		if st, err := a.Statuses(ctx); err == nil {
			statuses = st
		}
		if statuses != nil && answered.IsZero() {
			answered = time.Now()
		}
		state := nodeState.fingerprint
		for _, k := range slices.SortedFunc(maps.Keys(statuses), PodKey.Compare) {
			state += ";" + k.String() + "=" + string(statuses[k].Phase)
		}
		now := time.Now()
		if state != last {
			last, lastChange = state, now
		}
		quiet := now.Sub(lastChange) >= o.Settle
		var unsettled []string
		pending := map[PodKey]string{}
		unknown := 0
		for k := range o.Want {
			st, ok := statuses[k]
			switch {
			case !ok:
				unknown++
				// A pod the agent does not list once it has answered for o.Startup is one
				// it refused at decode: decided, whatever else the wait is held by.
				if answered.IsZero() || time.Since(answered) < o.Startup {
					pending[k] = "not listed by the agent"
				}
			case nodeState.settled(k, st) && (!o.Finish[k] || len(st.Running) == 0):
			case nodeState.settled(k, st):
				pending[k] = fmt.Sprintf("status %s, runs to completion and has not finished", st.Phase)
				unsettled = append(unsettled, fmt.Sprintf("%s (%s)", k, pending[k]))
			default:
				why := nodeState.unsettledWhy(k, st)
				pending[k] = why
				unsettled = append(unsettled, fmt.Sprintf("%s (%s)", k, why))
			}
		}
		listed := len(o.Want) - unknown
		if now.After(nextProgress) {
			nextProgress = now.Add(progressEvery)
			waiting := ""
			if len(unsettled) > 0 && len(unsettled) <= progressNames {
				// The last few, by name: which pod a slow batch waits on, and at what.
				slices.Sort(unsettled)
				waiting = "; waiting for " + strings.Join(unsettled, "; ")
			}
			a.node.logf("peerrun: %s: %s: %d of %d pods settled, %d not listed, %d sandboxes ready; last change %s ago; poll %s%s",
				a.Unit, now.Sub(start).Round(time.Second), listed-len(unsettled), len(o.Want), unknown, len(nodeState.ready),
				now.Sub(lastChange).Round(time.Second), now.Sub(pollStart).Round(time.Millisecond), waiting)
		}
		switch {
		case len(unsettled) == 0 && unknown == 0,
			len(unsettled) == 0 && quiet && (listed > 0 || !answered.IsZero() && now.Sub(answered) >= o.Startup):
			return WaitResult{Complete: nodeState.complete(o.Want), Statuses: statuses, Took: now.Sub(start)}, nil
		case now.Sub(start) >= o.Limit:
			slices.Sort(unsettled)
			a.node.logf("peerrun: %s: wait limit %s reached: %d pods not listed, %d not settled: %s; last change %s ago",
				a.Unit, o.Limit, unknown, len(unsettled), strings.Join(unsettled, "; "), now.Sub(lastChange).Round(time.Second))
			return WaitResult{Complete: nodeState.complete(o.Want), Statuses: statuses, Unsettled: pending, Took: now.Sub(start)}, nil
		}
		// Whether the agent still runs (a systemctl process) is asked every activeEvery.
		if now.After(nextActive) {
			nextActive = now.Add(activeEvery)
			if ok, journal := a.Active(ctx); !ok {
				return WaitResult{Complete: nodeState.complete(o.Want), Statuses: statuses, Unsettled: pending, Took: now.Sub(start)},
					fmt.Errorf("peerrun: %s stopped: %s", a.Unit, journal)
			}
		}
		select {
		case <-ctx.Done():
			return WaitResult{Complete: nodeState.complete(o.Want), Statuses: statuses, Unsettled: pending, Took: now.Sub(start)}, ctx.Err()
		case <-time.After(cmp.Or(o.Poll, 500*time.Millisecond)):
		}
	}
}

// WaitResult is what [Agent.Wait] saw last.
type WaitResult struct {
	// Complete are the pods of Want whose regular containers all run in their ready sandbox.
	Complete map[PodKey]bool
	// Statuses are the agent's last statuses.
	Statuses map[PodKey]PodStatus
	// Unsettled are the pods of Want that had not settled (or that the agent had not listed)
	// when the wait ended before they all did, each with what it was still waiting for.
	Unsettled map[PodKey]string
	// Took is how long the wait took.
	Took time.Duration
}

// progressEvery is how often [Agent.Wait] logs its progress (naming the unsettled pods when
// no more than progressNames are left), activeEvery how often it checks that the agent's
// service still runs.
const (
	progressNames = 5
	progressEvery = time.Minute
	activeEvery   = 5 * time.Second
)

// nodePods is what containerd and the cgroups show of the agent's pods at one poll.
type nodePods struct {
	// ready are the running containers of each pod's ready sandbox, by pod (a pod with a
	// ready sandbox has an entry, maybe empty).
	ready map[PodKey]map[string]bool
	// slices are the pods whose pod slice exists, found by the UIDs of their sandboxes.
	slices map[PodKey]bool
	// fingerprint names the sandboxes with their states and the containers by name, not
	// their states or attempts: a container in a crash loop must not keep a wait from
	// settling.
	fingerprint string
}

// settled reports whether the node shows pod k as its status st says it stays.
func (n nodePods) settled(k PodKey, st PodStatus) bool {
	if !st.Settled {
		return false
	}
	running, ready := n.ready[k]
	if st.Terminal() {
		return !ready && !n.slices[k]
	}
	if !ready {
		return false
	}
	for _, c := range st.Running {
		if !running[c] {
			return false
		}
	}
	return true
}

// unsettledWhy says what pod k, whose status st is not settled on the node, still waits for.
func (n nodePods) unsettledWhy(k PodKey, st PodStatus) string {
	running, ready := n.ready[k]
	switch {
	case !st.Settled:
		return fmt.Sprintf("status %s not settled, running %v", cmp.Or(string(st.Phase), "-"), st.Running)
	case st.Terminal() && (ready || n.slices[k]):
		return fmt.Sprintf("%s, but its sandbox ready %v and pod slice %v remain", st.Phase, ready, n.slices[k])
	case !st.Terminal() && !ready:
		return fmt.Sprintf("status %s, but no ready sandbox", st.Phase)
	}
	var missing []string
	for _, c := range st.Running {
		if !running[c] {
			missing = append(missing, c)
		}
	}
	return fmt.Sprintf("status %s, containers %v not running in its sandbox yet", st.Phase, missing)
}

// complete returns the pods of want whose regular containers all run in their ready sandbox.
func (n nodePods) complete(want map[PodKey][]string) map[PodKey]bool {
	out := map[PodKey]bool{}
	for k, names := range want {
		running, ok := n.ready[k]
		all := ok
		for _, c := range names {
			all = all && running[c]
		}
		if all {
			out[k] = true
		}
	}
	return out
}

// observe reads what containerd runs and which pod slices exist.
func (a *Agent) observe(ctx context.Context, rs runtimeapi.RuntimeServiceClient, h hierarchy) (nodePods, error) {
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nodePods{}, fmt.Errorf("peerrun: list pod sandboxes: %w", err)
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nodePods{}, fmt.Errorf("peerrun: list containers: %w", err)
	}
	n := nodePods{ready: map[PodKey]map[string]bool{}, slices: map[PodKey]bool{}}
	var fp []string
	readyKey := map[string]PodKey{}
	for _, sb := range sbs.Items {
		fp = append(fp, sb.Id+sb.State.String())
		k := a.key(sb.Metadata.Namespace, sb.Metadata.Name)
		if !n.slices[k] && h.podSlice(sb.Metadata.Uid) != "" {
			n.slices[k] = true
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			readyKey[sb.Id] = k
			if n.ready[k] == nil {
				n.ready[k] = map[string]bool{}
			}
		}
	}
	for _, c := range cs.Containers {
		fp = append(fp, c.PodSandboxId+"/"+c.Metadata.Name)
		if k, ok := readyKey[c.PodSandboxId]; ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			n.ready[k][c.Metadata.Name] = true
		}
	}
	slices.Sort(fp)
	n.fingerprint = strings.Join(slices.Compact(fp), ",")
	return n, nil
}

// key is the manifest's name of a pod: the kubelet, and slicelet in cluster mode, name a
// static pod <name>-<node name>.
func (a *Agent) key(namespace, name string) PodKey {
	if a.nodeName != "" {
		name = strings.TrimSuffix(name, "-"+a.nodeName)
	}
	return PodKey{Namespace: namespace, Name: name}
}

// sliceletClusterNode is the node name of slicelet's [cluster] table in toml when it enables
// cluster mode (node_name, else the host name lower-cased); "" when it does not.
func sliceletClusterNode(text string) string {
	var c struct {
		Cluster struct {
			Enabled  bool   `toml:"enabled"`
			NodeName string `toml:"node_name"`
		} `toml:"cluster"`
	}
	if _, err := toml.Decode(text, &c); err != nil || !c.Cluster.Enabled {
		return ""
	}
	if c.Cluster.NodeName != "" {
		return c.Cluster.NodeName
	}
	host, _ := os.Hostname()
	return strings.ToLower(host)
}
