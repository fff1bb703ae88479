package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/entrypoints"
)

// TestEntryPointsAgree: `slicectl explain pod -f` and `slicectl apply --dry-run=client -f`
// judge every manifest of testdata/entrypoints (a byte-order mark among them) as
// internal/manifest's Read, and so the manifest directory, does.
func TestEntryPointsAgree(t *testing.T) {
	cases := entrypoints.Load(t, filepath.Join("..", "..", "testdata", "entrypoints"))
	cfg := writeFile(t, t.TempDir(), "config.toml", "")
	sock := startDaemon(t, newFakeDaemon())
	for _, c := range cases {
		code, out, errOut := runCLI(t, "explain", "pod", "-f", c.Path, "--config", cfg, "--cgroup-mode", "v2", "--capacity", "cpu=4,memory=16Gi")
		var pods []string
		out = squeeze(out)
		for _, p := range c.Pods {
			if code == 0 && strings.Contains(out, "Pod: "+p+" (uid ") {
				pods = append(pods, p)
			}
		}
		c.Check(t, "slicectl explain", code == 0, pods, errOut)

		code, out, errOut = runCLI(t, "apply", "-f", c.Path, "--dry-run=client", "--socket", sock)
		pods = nil
		for _, p := range c.Pods {
			if code == 0 && strings.Contains(out, "pod/"+strings.SplitN(p, "/", 2)[1]+" ") {
				pods = append(pods, p)
			}
		}
		c.Check(t, "slicectl apply --dry-run=client", code == 0, pods, errOut)
	}
}
