package agent

import (
	"testing"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
)

// TestWorkerOptionsKeepExtra: every input the daemon hands the pod worker reaches it, the
// node's labels (a persistent volume's node affinity is checked against them at mount) and the
// CSI volumes among them: a field the wiring forgot to copy left local PVs waiting forever
// with "no matching NodeSelectorTerms".
func TestWorkerOptionsKeepExtra(t *testing.T) {
	labels := map[string]string{"kubernetes.io/hostname": "node-a"}
	extra := worker.Options{NodeName: "node-a", NodeLabels: func() map[string]string { return labels }, CSI: fakeCSI{}}
	cfg := &config.Config{StateDir: "/var/lib/slicelet"}
	cfg.Runtime.Network = config.NetworkCNI
	got := workerOptions(cfg, slices.Capacity{}, hierarchy.Config{}, nil, extra)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"node name", got.NodeName == "node-a"},
		{"node labels", got.NodeLabels != nil && got.NodeLabels()["kubernetes.io/hostname"] == "node-a"},
		{"CSI volumes", got.CSI != nil},
		{"pods on the CNI network", !got.HostNetwork},
		{"seccomp profiles under the state dir", got.SeccompProfileRoot == "/var/lib/slicelet/seccomp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Fatalf("worker options %+v", got)
			}
		})
	}
}

// fakeCSI stands for the CSI plugin manager.
type fakeCSI struct{ worker.CSIVolumes }
