package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// runInSandbox boots the sandbox with the control plane's binaries and slicelet's, and runs
// the test named by the pattern run inside it (this test binary, copied into the work
// directory), with the environment naming them.
func runInSandbox(t *testing.T, run string) {
	t.Helper()
	bin, slicelet := prerequisites(t)
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	sb, err := peerrun.BootSandbox(ctx, peerrun.SandboxOptions{Name: fmt.Sprintf("clustertest-%d", os.Getpid()), WorkDir: work,
		Binds: []string{bin, filepath.Dir(slicelet)}, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sb.Stop(); err != nil {
			t.Error(err)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(work, "clustertest.test")
	data, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(inner, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := sb.Command(ctx, "/", inner, "-test.run", run, "-test.v")
	cmd.Env = append(cmd.Env, workEnv+"="+work, binEnv+"="+bin, sliceletEnv+"="+slicelet)
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Run(); err != nil {
		t.Fatalf("inside the sandbox: %v", err)
	}
}
