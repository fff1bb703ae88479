//go:build !nocluster

package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/cluster"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/pods"
)

func TestKubeletVersion(t *testing.T) {
	// The test binary links k8s.io/api v0.X.Y: the Kubernetes version is v1.X.Y.
	semver := regexp.MustCompile(`^v1\.[0-9]+\.[0-9]+\+slicelet\.[0-9A-Za-z.-]+$`)
	tests := []struct{ name, in, wantSuffix string }{
		{name: "a release", in: "v0.4.0", wantSuffix: "+slicelet.v0.4.0"},
		{name: "git describe", in: "448b434-dirty", wantSuffix: "+slicelet.448b434-dirty"},
		{name: "odd characters become dashes", in: "v1/2 3", wantSuffix: "+slicelet.v1-2-3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := kubeletVersion(tc.in)
			if !semver.MatchString(got) || got[len(got)-len(tc.wantSuffix):] != tc.wantSuffix {
				t.Errorf("kubeletVersion(%q) = %q, want a semantic version ending %q", tc.in, got, tc.wantSuffix)
			}
		})
	}
}

func TestOSImage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, content, want string }{
		{name: "quoted", content: "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", want: "Debian GNU/Linux 12 (bookworm)"},
		{name: "bare", content: "PRETTY_NAME=Arch\n", want: "Arch"},
		{name: "none", content: "NAME=x\n", want: "Linux"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := osImage(p); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := osImage(filepath.Join(dir, "missing")); got != "Linux" {
		t.Errorf("missing file: %q", got)
	}
}

func TestWantSources(t *testing.T) {
	cfg := config.Default()
	if got := wantSources(cfg); len(got) != 2 {
		t.Errorf("stand-alone: %v, want the manifest directory and the local API", got)
	}
	cfg.Cluster.Enabled = true
	if got := wantSources(cfg); len(got) != 3 || got[2] != pods.SourceCluster {
		t.Errorf("cluster mode: %v, want the cluster source too", got)
	}
}

// TestClusterWarnableNotSentToTheAPI: the Node's conditions leave out the cluster warnable (its
// failures would otherwise reach the API server as Ready's message).
func TestClusterWarnableNotSentToTheAPI(t *testing.T) {
	tr := health.New(health.Options{})
	tr.Register(cluster.Warnable, gcTimersWarnable)
	tr.SetUnhealthy(cluster.Warnable, "lease: connection refused")
	tr.SetHealthy(gcTimersWarnable)
	st := withoutWarnable(tr.State(), cluster.Warnable)
	if _, ok := st.Get(cluster.Warnable); ok {
		t.Error("the cluster warnable is still there")
	}
	if _, ok := st.Get(gcTimersWarnable); !ok {
		t.Error("another warnable went too")
	}
	for _, c := range nodeConditions(st) {
		if c.Message != "slicelet is running" && c.Type == "Ready" {
			t.Errorf("Ready says %q", c.Message)
		}
	}
}

// TestNodeSystemInfoUserNamespace: nodeInfo says whether slicelet runs in a user namespace,
// as the kubelet's does (KubeletInUserNamespace, on by default): set either way, and true
// exactly when this process's uid_map is not the whole range mapped to itself.
func TestNodeSystemInfoUserNamespace(t *testing.T) {
	info := nodeSystemInfo()
	if info.RunningInUserNamespace == nil {
		t.Fatal("nodeInfo.runningInUserNamespace unset")
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		t.Skipf("no uid_map: %v", err)
	}
	whole := strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295"
	if *info.RunningInUserNamespace == whole {
		t.Errorf("runningInUserNamespace %v with uid_map %q", *info.RunningInUserNamespace, m)
	}
}
