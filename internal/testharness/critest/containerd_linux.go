package critest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// Binaries the harness needs (Debian: containerd, runc, busybox-static).
var (
	ContainerdBinary = "/usr/bin/containerd"
	CtrBinary        = "/usr/bin/ctr"
	RuncBinary       = "/usr/sbin/runc"
	// CNIPluginDir holds the CNI plugins of the CNIBridge option (Debian:
	// containernetworking-plugins).
	CNIPluginDir = "/usr/lib/cni"
	// UnshareBinary starts containerd in a mount namespace of its own with CNIBridge.
	UnshareBinary = "/usr/bin/unshare"
	// IptablesBinary is what the CNIBridge option's portmap plugin programs host ports with.
	IptablesBinary = "/usr/sbin/iptables"
)

// CNISubnet is the pod subnet of the CNIBridge option (containerd's own example's).
const CNISubnet = "10.88.0.0/16"

// CNIGateway is the bridge's address on CNISubnet, the node's address its pods' host ports are
// reached at.
const CNIGateway = "10.88.0.1"

// DefaultSandboxImage is the sandbox image Start imports and configures.
const DefaultSandboxImage = "slicelet.test/pause:1"

// Options configure Start.
type Options struct {
	// ImageFsSize, when > 0, mounts a tmpfs of that many bytes on containerd's root, so that
	// the image filesystem is small enough for GC thresholds to be crossed.
	ImageFsSize int64
	// SandboxImage is the name of the sandbox image (Cmd sleep infinity) imported at start;
	// DefaultSandboxImage when empty.
	SandboxImage string
	// Logf, when set, receives progress lines (t.Logf).
	Logf func(format string, args ...any)
	// CNIBridge gives sandboxes that are not on the host's network a network of their own: a
	// bridge with host-local IPAM on CNISubnet (state in the run directory) and the loopback,
	// plugins from CNIPluginDir. The bridge lives in the test's network namespace (the systemd
	// sandbox's, never the host's). Without it the CNI configuration directory is empty, so
	// only host-network sandboxes can run. RequireCNI first.
	CNIBridge bool
	// CNIConfDir, when set, is the directory containerd reads its CNI network configuration
	// from, with the plugins of CNIPluginDir: nothing is written there, a CNI agent writes it
	// (a DaemonSet of a multi-node cluster, through a hostPath), and until it does containerd
	// reports the network not ready, as on any node before its CNI agent runs. containerd's
	// CNI result cache (/var/lib/cni) must be writable: the sandbox's overlay root.
	CNIConfDir string
	// RegistryMirrors, when set, map registries, each by its host as image names spell it
	// ("registry.k8s.io", "docker.io"), to the base URL of a registry serving their repositories
	// ("http://10.250.0.1:5000"): containerd's CRI resolves and pulls their images there (its
	// registry config_path, one hosts.toml a registry), as a node behind a pull-through mirror.
	RegistryMirrors map[string]string
}

// Containerd is a running private containerd.
type Containerd struct {
	// Dir is the run directory.
	Dir string
	// Socket is the gRPC socket; Endpoint is "unix://" + Socket.
	Socket, Endpoint string
	// Root is containerd's root (the image filesystem lives under it).
	Root string
	// SandboxImage is the imported sandbox image's name.
	SandboxImage string

	opts    Options
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	mounted bool
}

// Require checks that containerd can be started here: inside the systemd sandbox, as root,
// with containerd, ctr, runc and a static busybox installed. Otherwise the test is skipped with
// the reason, or fails with CI=true.
func Require(t testing.TB) {
	t.Helper()
	systemdtest.Require(t)
	missing := missingFiles(ContainerdBinary, CtrBinary, RuncBinary, DefaultBusybox)
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	skipMissing(t, "containerd cannot run here", missing, "containerd runc busybox-static")
}

// missingFiles are those of paths that do not exist.
func missingFiles(paths ...string) []string {
	var missing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// skipMissing skips the test when something is missing, naming it and the Debian packages that
// provide it, or fails it with CI=true.
func skipMissing(t testing.TB, what string, missing []string, packages string) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("critest: %s, missing: %s (apt-get install %s)", what, strings.Join(missing, ", "), packages)
	if systemdtest.CI() {
		t.Fatalf("%s; CI=true makes this a failure", msg)
	}
	t.Skip("SKIP: " + msg)
}

// Start starts a private containerd (Require first) and imports the sandbox image; the test's
// cleanup stops it.
func Start(t testing.TB, opts Options) *Containerd {
	t.Helper()
	Require(t)
	c, err := StartContainerd(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("critest: %v", err)
		}
	})
	return c
}

// StartContainerd is Start without a testing.TB (for TestMain and benchmarks shared by a
// package); the caller must Stop it. It refuses to run outside the systemd sandbox.
func StartContainerd(opts Options) (*Containerd, error) {
	if !systemdtest.Inside() {
		return nil, errors.New("critest: containerd is only started inside the systemd sandbox (systemdtest.Main)")
	}
	if opts.SandboxImage == "" {
		opts.SandboxImage = DefaultSandboxImage
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	// Unix socket paths must stay under 108 bytes: a short directory under /tmp (the
	// sandbox's private tmpfs).
	dir, err := os.MkdirTemp("/tmp", "crt")
	if err != nil {
		return nil, fmt.Errorf("critest: run dir: %w", err)
	}
	c := &Containerd{
		Dir: dir, Socket: filepath.Join(dir, "c.sock"), Root: filepath.Join(dir, "root"),
		SandboxImage: opts.SandboxImage, opts: opts,
	}
	c.Endpoint = "unix://" + c.Socket
	for _, d := range []string{c.Root, filepath.Join(dir, "state"), filepath.Join(dir, "opt"), filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "conf")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("critest: %w", err)
		}
	}
	if opts.ImageFsSize > 0 {
		if err := unix.Mount("tmpfs", c.Root, "tmpfs", 0, "size="+strconv.FormatInt(opts.ImageFsSize, 10)+",mode=0711"); err != nil {
			return nil, fmt.Errorf("critest: image fs tmpfs of %d bytes on %s: %w", opts.ImageFsSize, c.Root, err)
		}
		c.mounted = true
	}
	if opts.CNIConfDir != "" {
		if err := os.MkdirAll(opts.CNIConfDir, 0o755); err != nil {
			return nil, fmt.Errorf("critest: %w", err)
		}
	}
	if opts.CNIBridge {
		if err := os.WriteFile(filepath.Join(dir, "cni", "conf", "10-bridge.conflist"), []byte(c.cniConfig()), 0o644); err != nil {
			return nil, fmt.Errorf("critest: %w", err)
		}
	}
	for host, mirror := range opts.RegistryMirrors {
		path, data, err := registryHostsFile(c.registryConfigPath(), host, mirror)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("critest: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(c.config()), 0o644); err != nil {
		return nil, fmt.Errorf("critest: %w", err)
	}
	if err := c.start(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if err := c.ImportImage(context.Background(), Image{Name: opts.SandboxImage, Cmd: []string{"/bin/sleep", "infinity"}}); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// RequireCNI is Require with the CNI plugins of the CNIBridge option installed.
func RequireCNI(t testing.TB) {
	t.Helper()
	Require(t)
	skipMissing(t, "no CNI bridge here", missingFiles(filepath.Join(CNIPluginDir, "bridge"), filepath.Join(CNIPluginDir, "host-local"),
		filepath.Join(CNIPluginDir, "loopback"), filepath.Join(CNIPluginDir, "portmap"), UnshareBinary, IptablesBinary), "containernetworking-plugins util-linux iptables")
}

// cniConfig is the CNIBridge network: a bridge that is the pods' gateway (no masquerading: the
// pods are reached from the namespace it lives in, nothing routes them further) with host-local
// IPAM keeping its leases in the run directory, chained with the portmap plugin for the
// sandboxes' port mappings (hostPort, as kubeadm's CNI configurations chain it). Its "snat"
// (masquerading traffic from the node's loopback to a host port) is off: it sets route_localnet
// on the bridge through /proc/sys, read-only in the systemd sandbox; a host port is reached at
// one of the node's other addresses (the bridge's, CNIGateway).
func (c *Containerd) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "slicelet-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "slt0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true},
      "snat": false
    }
  ]
}
`, CNISubnet, filepath.Join(c.Dir, "cni", "ipam"))
}

// config is containerd's configuration (version 2): everything in the run directory.
func (c *Containerd) config() string {
	d := c.Dir
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    stats_collect_period = 1
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[7]q
      conf_dir = %[8]q
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = %[9]q
          Root = %[10]q
          SystemdCgroup = true
`, c.Root, filepath.Join(d, "state"), c.Socket, c.Socket+".ttrpc", filepath.Join(d, "opt"), c.SandboxImage,
		c.cniBinDir(), c.cniConfDir(), RuncBinary, filepath.Join(d, "state", "runc")) + c.registryConfig()
}

// registryConfig is the CRI plugin's registry table with RegistryMirrors: their hosts.toml
// files' directory.
func (c *Containerd) registryConfig() string {
	if len(c.opts.RegistryMirrors) == 0 {
		return ""
	}
	return fmt.Sprintf("    [plugins.\"io.containerd.grpc.v1.cri\".registry]\n      config_path = %q\n", c.registryConfigPath())
}

// registryConfigPath is containerd's registry configuration directory (config_path): one
// directory a registry host holding its hosts.toml (RegistryMirrors), empty without mirrors.
func (c *Containerd) registryConfigPath() string { return filepath.Join(c.Dir, "certs.d") }

// registryHostsFile is the hosts.toml (containerd's docs/hosts.md) that makes containerd
// resolve and pull the images of registry host from mirror, a registry's base URL (http or
// https), and its path under dir, the registry config_path. The registry itself stays the
// fallback (its default server), as behind any mirror.
func registryHostsFile(dir, host, mirror string) (string, []byte, error) {
	if host == "" || strings.ContainsAny(host, "/\\") || host == "." || host == ".." {
		return "", nil, fmt.Errorf("registry mirror: registry host %q: want host[:port]", host)
	}
	u, err := url.Parse(mirror)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return "", nil, fmt.Errorf("registry mirror of %s: %q: want http(s)://host[:port]", host, mirror)
	}
	type hostConfig struct {
		Capabilities []string `toml:"capabilities"`
	}
	data, err := toml.Marshal(map[string]map[string]hostConfig{"host": {u.Scheme + "://" + u.Host: {Capabilities: []string{"pull", "resolve"}}}})
	if err != nil {
		return "", nil, fmt.Errorf("registry mirror of %s: %w", host, err)
	}
	return filepath.Join(dir, host, "hosts.toml"), data, nil
}

// cniBinDir is containerd's CNI plugin directory: the installed plugins with CNIBridge or
// CNIConfDir, else an empty one in the run directory.
func (c *Containerd) cniBinDir() string {
	if c.opts.CNIBridge || c.opts.CNIConfDir != "" {
		return CNIPluginDir
	}
	return filepath.Join(c.Dir, "cni", "bin")
}

// cniConfDir is containerd's CNI configuration directory: CNIConfDir, else one in the run
// directory.
func (c *Containerd) cniConfDir() string {
	if c.opts.CNIConfDir != "" {
		return c.opts.CNIConfDir
	}
	return filepath.Join(c.Dir, "cni", "conf")
}

// start runs containerd as a child process and waits until its CRI answers (10 s at most).
func (c *Containerd) start() error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("critest: %w", err)
	}
	cmd := exec.Command(ContainerdBinary, "--config", filepath.Join(c.Dir, "config.toml"))
	if c.opts.CNIBridge {
		// containerd 1.6's CNI library keeps its result cache in /var/lib/cni, which no setting
		// moves, and /var/lib is the host's, read-only inside the systemd sandbox: containerd
		// runs in a mount namespace of its own (unshare's private propagation, so nothing
		// reaches the test's) with a tmpfs on /var/lib. The bridge plugin, as the pods'
		// gateway, turns on IPv4 forwarding unless /proc/sys/net/ipv4/ip_forward already reads
		// 1; /proc/sys is read-only inside, so a file reading 1 covers it there. Forwarding
		// stays off: the node reaches its pods on the bridge's own subnet, routed nowhere else.
		fwd := filepath.Join(c.Dir, "ip_forward")
		if err := os.WriteFile(fwd, []byte("1\n"), 0o444); err != nil {
			logf.Close()
			return fmt.Errorf("critest: %w", err)
		}
		// Slave propagation: what the agents mount later (tmpfs volumes for Secrets and
		// projected tokens, under their root directories) still reaches containerd's view.
		cmd = exec.Command(UnshareBinary, "--mount", "--propagation", "slave", "--", "/bin/sh", "-c",
			`mount -t tmpfs -o mode=0755 tmpfs /var/lib && mount --bind "$0" /proc/sys/net/ipv4/ip_forward && exec "$@"`,
			fwd, ContainerdBinary, "--config", filepath.Join(c.Dir, "config.toml"))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a signal to the test does not reach it first; it still dies
	// with the sandbox's PID namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("critest: start containerd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("critest: containerd exited at start: %s", c.LogTail(20))
		default:
		}
		if last = c.version(); last == nil {
			c.opts.Logf("critest: containerd pid %d ready in %s (%s)", cmd.Process.Pid, time.Since(t0).Round(time.Millisecond), c.Dir)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("critest: containerd not ready in 10s: %v; log: %s", last, c.LogTail(20))
}

// version calls CRI Version once.
func (c *Containerd) version() error {
	if _, err := os.Stat(c.Socket); err != nil {
		return err
	}
	cc, err := grpc.NewClient("unix://"+c.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(cc).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// PID is containerd's process ID, 0 when it is not running.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Kill stops containerd (SIGTERM to its PID, SIGKILL after 10 s) and waits until the process
// is gone; containers keep running in their shims. It is what a containerd restart looks like
// to a client.
func (c *Containerd) Kill() error {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	return nil
}

// Restart starts containerd again on the same run directory after Kill.
func (c *Containerd) Restart() error {
	if c.PID() != 0 {
		return errors.New("critest: containerd is still running")
	}
	return c.start()
}

// Stop stops containerd and every container it runs (their shims), unmounts the image fs and
// removes the run directory.
func (c *Containerd) Stop() error {
	var errs []error
	if c.PID() != 0 {
		c.removeAll()
	}
	if err := c.Kill(); err != nil {
		errs = append(errs, err)
	}
	// Mounts the shims and snapshotter left (rootfs, shm) must go before the directory.
	for _, m := range MountsUnder(c.Dir) {
		if m != c.Root {
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	if c.mounted {
		if err := unix.Unmount(c.Root, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("critest: unmount %s: %w", c.Root, err))
		}
		c.mounted = false
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("critest: %w", err))
	}
	return errors.Join(errs...)
}

// removeAll stops and removes every pod sandbox (and so its containers), so that no shim
// outlives the test.
func (c *Containerd) removeAll() {
	cc, err := grpc.NewClient("unix://"+c.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, sb := range list.Items {
		_, _ = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
		_, _ = rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
	}
}

// Ctr runs `ctr --address <socket> -n k8s.io args...`.
func (c *Containerd) Ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, CtrBinary, append([]string{"--address", c.Socket, "-n", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// ImportImage writes img as an OCI layout and imports it (ctr images import, which also
// unpacks it for the overlayfs snapshotter).
func (c *Containerd) ImportImage(ctx context.Context, img Image) error {
	path := filepath.Join(c.Dir, "import.tar")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("critest: %w", err)
	}
	defer os.Remove(path)
	if _, err := WriteImage(f, img); err != nil {
		f.Close()
		return fmt.Errorf("critest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("critest: %w", err)
	}
	t0 := time.Now()
	if _, err := c.Ctr(ctx, "images", "import", path); err != nil {
		return fmt.Errorf("critest: import %s: %w", img.Name, err)
	}
	c.opts.Logf("critest: image %s imported in %s", img.Name, time.Since(t0).Round(time.Millisecond))
	return nil
}

// LogTail returns the last n lines of containerd's log.
func (c *Containerd) LogTail(n int) string {
	data, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// MountsUnder lists the mount points strictly below dir, deepest first (the order to unmount
// them in).
func MountsUnder(dir string) []string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range infos {
		if m.Mountpoint != dir {
			out = append(out, m.Mountpoint)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}
