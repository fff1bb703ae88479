package peerrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// InsideEnv is set ("sandbox" or "vm") in the environment of a program started inside by
// [Sandbox.Command] or [RunVM]; [StartNode] refuses to run without it (containerd and the
// agents must never start on the machine itself).
const InsideEnv = systemdtest.InsideEnv

// TestImage is the image every container runs (busybox with its applets, default command
// sleep infinity), imported by [StartNode], never pulled.
const TestImage = "slicelet.test/busybox:1"

// NodeName is the kubelet's node name (--hostname-override): its static pods are named
// <manifest name>-<NodeName>.
const NodeName = "peer-node"

// NodeOptions configure [StartNode].
type NodeOptions struct {
	// Dir holds the agents' configuration, state and manifests; created when missing. It must
	// be writable inside (a bind in the sandbox, the shared directory in the VM).
	Dir string
	// Logf receives progress lines; discarded when nil.
	Logf func(format string, args ...any)
	// CNIBridge gives the pods that are not on the host's network addresses of their own on
	// containerd's CNI bridge (critest.Options.CNIBridge) instead of the no-op network.
	CNIBridge bool
	// CNIConfDir, when set, is containerd's CNI configuration directory, written by the
	// cluster's CNI agent (critest.Options.CNIConfDir), instead of the no-op network.
	CNIConfDir string
	// RegistryMirrors map registries to a registry serving their images, for containerd's
	// pulls (critest.Options.RegistryMirrors).
	RegistryMirrors map[string]string
}

// Node is a private containerd with the images and the CNI network the agents need, on the
// machine (sandbox or VM) this program runs in.
type Node struct {
	// Containerd is the private containerd both agents use.
	Containerd *critest.Containerd
	// Dir is NodeOptions.Dir.
	Dir string
	// CgroupV2 tells whether the node runs the unified hierarchy alone.
	CgroupV2 bool

	logf func(string, ...any)
	runs int
}

// StartNode starts containerd (internal/testharness/critest) and imports [TestImage]; only
// inside the sandbox or VM ([InsideEnv]).
func StartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	if !systemdtest.Inside() {
		return nil, fmt.Errorf("peerrun: the node only starts inside the sandbox or VM (%s unset)", InsideEnv)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("peerrun: node dir: %w", err)
	}
	// Loopback may be down in a fresh network namespace; both agents listen on 127.0.0.1.
	if out, err := exec.CommandContext(ctx, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		o.Logf("peerrun: ip link set lo up: %v: %s", err, out)
	}
	if err := raiseBusReplyLimit(ctx); err != nil {
		return nil, err
	}
	c, err := critest.StartContainerd(critest.Options{Logf: o.Logf, CNIBridge: o.CNIBridge, CNIConfDir: o.CNIConfDir,
		RegistryMirrors: o.RegistryMirrors})
	if err != nil {
		return nil, err
	}
	n := &Node{Containerd: c, Dir: o.Dir, logf: o.Logf}
	_, err = os.Stat("/sys/fs/cgroup/cgroup.controllers")
	n.CgroupV2 = err == nil
	if err := c.ImportImage(ctx, critest.Image{Name: TestImage, Cmd: []string{"/bin/sleep", "infinity"}}); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if !o.CNIBridge && o.CNIConfDir == "" {
		if err := writeCNI(c.Dir); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return n, nil
}

// busReplyLimit is the system bus's max_replies_per_connection on the node: dbus-daemon's
// default for the system bus is 128 (the session bus's configuration sets 50000).
const busReplyLimit = 50000

// busLimitsConf is the system bus configuration that raises the limit.
var busLimitsConf = fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <limit name="max_replies_per_connection">%d</limit>
</busconfig>
`, busReplyLimit)

// raiseBusReplyLimit raises the system bus's limit of method calls one connection may have
// waiting for a reply to busReplyLimit (a file in /etc/dbus-1/system.d, then ReloadConfig).
//
// Why: the kubelet's cgroup manager talks to systemd over one system-bus connection from
// every pod worker at once, and at a batch's start (30 static pods synced together, systemd
// slowed by a loaded machine or by emulation) more than 128 of its calls can wait for systemd.
// The bus then refuses the next call ("The maximum number of pending replies per connection
// has been reached"); the kubelet's Create of a pod cgroup only logs a failed Set
// (pkg/kubelet/cm/cgroup_manager_linux.go) and leaves that pod slice at systemd's defaults for
// good, so the node no longer shows the kubelet's rules. A node's load is not what peer-diff
// compares.
//
// Only on a root that is the node's own — the sandbox's overlay or the VM's tmpfs — never on
// the machine's /etc.
func raiseBusReplyLimit(ctx context.Context) error {
	var st unix.Statfs_t
	if err := unix.Statfs("/etc", &st); err != nil {
		return fmt.Errorf("peerrun: /etc: %w", err)
	}
	if st.Type != unix.OVERLAYFS_SUPER_MAGIC && st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("peerrun: /etc is not the sandbox's overlay or the VM's tmpfs (file system 0x%x): the system bus's limits are not raised there", st.Type)
	}
	dir := "/etc/dbus-1/system.d"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("peerrun: system bus config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "peer-node-limits.conf"), []byte(busLimitsConf), 0o644); err != nil {
		return fmt.Errorf("peerrun: system bus config: %w", err)
	}
	out, err := exec.CommandContext(ctx, "busctl", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ReloadConfig").CombinedOutput()
	if err != nil {
		return fmt.Errorf("peerrun: system bus ReloadConfig: %w: %s", err, out)
	}
	return nil
}

// Logf writes a progress line to NodeOptions.Logf.
func (n *Node) Logf(format string, args ...any) { n.logf(format, args...) }

// Close stops containerd and everything it runs.
func (n *Node) Close() error { return n.Containerd.Stop() }

// noopCNI is a CNI plugin that configures nothing and reports a made-up address: enough for
// containerd to call the pod network ready and run pods in their own (empty) network
// namespace. The same script serves as the loopback plugin containerd adds itself.
const noopCNI = `#!/bin/sh
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"version":"4","address":"127.1.0.2/32","interface":0}]}' ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
*) : ;;
esac
`

// writeCNI installs the no-op network in containerd's CNI directories.
func writeCNI(dir string) error {
	bin, conf := filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "conf")
	for _, name := range []string{"noop", "loopback"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(noopCNI), 0o755); err != nil {
			return fmt.Errorf("peerrun: cni plugin: %w", err)
		}
	}
	cfg := `{"cniVersion":"0.4.0","name":"peer","plugins":[{"type":"noop"}]}`
	if err := os.WriteFile(filepath.Join(conf, "10-peer.conflist"), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("peerrun: cni config: %w", err)
	}
	return nil
}

// cri opens a CRI client on the node's containerd.
func (n *Node) cri() (runtimeapi.RuntimeServiceClient, func(), error) {
	cc, err := grpc.NewClient(n.Containerd.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("peerrun: cri client: %w", err)
	}
	return runtimeapi.NewRuntimeServiceClient(cc), func() { cc.Close() }, nil
}

// MainPIDs maps the ID of every running container on the node's containerd to its main
// process's PID (crictl inspect's info.pid), as seen from the node.
func (n *Node) MainPIDs(ctx context.Context) (map[string]int, error) {
	rs, done, err := n.cri()
	if err != nil {
		return nil, err
	}
	defer done()
	ctrs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("peerrun: containers: %w", err)
	}
	out := map[string]int{}
	for _, c := range ctrs.Containers {
		st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: true})
		if err != nil {
			continue // ended meanwhile
		}
		var info struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
			return nil, fmt.Errorf("peerrun: container %s: verbose info: %w", c.Id, err)
		}
		out[c.Id] = info.PID
	}
	return out, nil
}

// RemovePods stops and removes every pod sandbox (with its containers) containerd runs, then
// stops kubepods.slice (with every QoS and pod slice below it) and waits until its cgroup is
// gone: the node as it was before either agent ran.
func (n *Node) RemovePods(ctx context.Context) error {
	rs, done, err := n.cri()
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("peerrun: list pod sandboxes: %w", err)
	}
	for _, sb := range list.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("peerrun: stop pod sandbox %s: %w", sb.Id, err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("peerrun: remove pod sandbox %s: %w", sb.Id, err))
		}
	}
	if out, err := exec.CommandContext(ctx, "systemctl", "stop", "kubepods.slice").CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("peerrun: systemctl stop kubepods.slice: %w: %s", err, out))
	}
	dir := "/sys/fs/cgroup/systemd/kubepods.slice"
	if n.CgroupV2 {
		dir = "/sys/fs/cgroup/kubepods.slice"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("peerrun: %s still there 2m after stopping kubepods.slice", dir))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = exec.CommandContext(ctx, "systemctl", "reset-failed").Run()
	return errors.Join(errs...)
}
