package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/sandbox"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// TestNetworkLive boots the control plane's sandbox and two node sandboxes, joins them as
// Start does, and pings the control plane and the other node from a node: the bridge, the
// veths and the addresses, all in the sandboxes' own network namespaces. Root.
func TestNetworkLive(t *testing.T) {
	if err := sandbox.Prerequisites(); err != nil || os.Geteuid() != 0 {
		if systemdtest.CI() {
			t.Fatalf("sandbox prerequisites: %v (root: %v)", err, os.Geteuid() == 0)
		}
		t.Skipf("SKIP: sandbox prerequisites: %v (root: %v)", err, os.Geteuid() == 0)
	}
	work := t.TempDir()
	boot := func(name string) *peerrun.Sandbox {
		sb, err := peerrun.BootSandbox(t.Context(), peerrun.SandboxOptions{Name: fmt.Sprintf("clusternet-%d-%s", os.Getpid(), name), WorkDir: work})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := sb.Stop(); err != nil {
				t.Error(err)
			}
		})
		return sb
	}
	c := &Cluster{cpBox: boot("cp")}
	if err := c.runNet(t.Context(), bridgeSteps(), nil); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for i, name := range []string{"a", "b"} {
		pids[name] = boot(name).Instance().InitPID()
		steps, err := nodeSteps(name, i, pids[name])
		if err != nil {
			t.Fatal(err)
		}
		if err := c.runNet(t.Context(), steps, pids); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := NodeIP(1)
	for _, dst := range []string{ControlPlaneIP, b} {
		out, err := exec.CommandContext(t.Context(), "nsenter", "--target", strconv.Itoa(pids["a"]), "--net", "--", critest.DefaultBusybox, "ping", "-c", "1", "-W", "5", dst).CombinedOutput()
		if err != nil {
			t.Errorf("node a: ping %s: %v: %s", dst, err, out)
		}
	}
	out, err := exec.CommandContext(t.Context(), "nsenter", "--target", strconv.Itoa(pids["b"]), "--net", "--", "cat", "/proc/sys/net/ipv4/ip_forward").CombinedOutput()
	if err != nil || string(out) != "1\n" {
		t.Errorf("node b: ip_forward %q, %v; want 1", out, err)
	}
}
